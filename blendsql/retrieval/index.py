"""Small in-memory retrieval indexes: dense (cosine) and BM25.

Both take a fixed list of texts and answer ``search(query, k)`` with ``Hit``s
(position, text, score) best first; ``scores(query)`` gives the full score
vector so callers (schema selection, context retrieval) can combine them.
Sizes in this project are at most tens of thousands of short texts, so a flat
matrix product and a postings dict are fast enough and need no extra service.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from blendsql.retrieval.embeddings import Embedder, cached_embed, words


def stemmed_words(text: str) -> list[str]:
    """``words`` with a light plural strip (``singers`` -> ``singer``, not ``class``).

    BM25 matches whole tokens, so without it "singers" never meets ``singer``.
    """
    return [w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words(text)]


@dataclass(frozen=True)
class Hit:
    """One retrieved text: its position in the index, the text, its score."""

    index: int
    text: str
    score: float


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest scores, best first (ties by position)."""
    k = max(0, min(k, scores.shape[0]))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    return part[np.lexsort((part, -scores[part]))]


def _hits(texts: Sequence[str], scores: np.ndarray, k: int) -> list[Hit]:
    return [Hit(int(i), texts[int(i)], float(scores[int(i)])) for i in top_k(scores, k)]


class DenseIndex:
    """Cosine similarity over embeddings of ``texts``.

    With ``cache_dir`` (or ``cache=True`` for the default directory) the text
    embeddings are memoised on disk, keyed by content hash.
    """

    def __init__(self, texts: Sequence[str], embedder: Embedder,
                 cache_dir: str | Path | None = None, cache: bool = False) -> None:
        self.texts = list(texts)
        self.embedder = embedder
        if cache or cache_dir is not None:
            self.vectors = cached_embed(embedder, self.texts, cache_dir)
        else:
            self.vectors = embedder.embed(self.texts)

    def __len__(self) -> int:
        return len(self.texts)

    def similarities(self, queries: Sequence[str]) -> np.ndarray:
        """``(len(queries), len(texts))`` cosine similarities."""
        if not queries or not self.texts:
            return np.zeros((len(queries), len(self.texts)), dtype=np.float32)
        q = self.embedder.embed(list(queries))
        return np.asarray(q @ self.vectors.T, dtype=np.float32)

    def scores(self, query: str) -> np.ndarray:
        return self.similarities([query])[0]

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return _hits(self.texts, self.scores(query), k)


class BM25Index:
    """Okapi BM25 over (lightly stemmed) word tokens (``k1``, ``b`` as in Robertson et al.).

    Uses the non-negative IDF variant ``log(1 + (N - df + 0.5) / (df + 0.5))``
    so very common terms never subtract from a score.
    """

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75,
                 tokenize: Callable[[str], list[str]] = stemmed_words) -> None:
        self.texts = list(texts)
        self.k1 = k1
        self.b = b
        self.tokenize = tokenize
        docs = [Counter(tokenize(t)) for t in self.texts]
        self.lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
        self.avg_len = float(self.lengths.mean()) if len(docs) else 0.0
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for i, d in enumerate(docs):
            for term, tf in d.items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(i)
                tfs.append(float(tf))
        n = len(docs)
        self.postings = {t: (np.array(ids), np.array(tfs)) for t, (ids, tfs) in postings.items()}
        self.idf = {t: math.log(1.0 + (n - len(ids) + 0.5) / (len(ids) + 0.5))
                    for t, (ids, _) in self.postings.items()}

    def __len__(self) -> int:
        return len(self.texts)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every text for ``query`` (0 for texts sharing no term)."""
        out = np.zeros(len(self.texts), dtype=np.float64)
        if not self.texts:
            return out
        norm = self.k1 * (1.0 - self.b + self.b * self.lengths / max(self.avg_len, 1e-9))
        for term in set(self.tokenize(query)):
            if term not in self.postings:
                continue
            ids, tfs = self.postings[term]
            out[ids] += self.idf[term] * tfs * (self.k1 + 1.0) / (tfs + norm[ids])
        return out

    def search(self, query: str, k: int = 10) -> list[Hit]:
        return _hits(self.texts, self.scores(query), k)
