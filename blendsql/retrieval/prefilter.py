"""Retrieval-prefiltered free-text filters (SUQL §5.1): rank values before verifying.

Why: for ``WHERE ANSWER(reviews, 'is it romantic?') = 'yes' LIMIT 3`` over a
large table, the rows that qualify are usually the ones whose text is about
the question. Ranking the candidate values by similarity to the question and
asking the model about the best ones first lets the engine stop after a few
calls. It changes *which* qualifying rows are returned (the best-ranked ones,
not the first in scan order), so it is opt-in (``prefilter=True``) and only
used under LIMIT; the trace says what was ranked and how many were verified.

Embeddings are memoised in memory per database session, keyed by the
embedder's identity and the exact text: a later query over the same column
(with a different question or filter) embeds nothing again. Measured on this
machine (see ``tests/optimise/test_prefilter.py::test_memo_reuses_vectors``
and the report): re-embedding 1000 short texts with ``HashingEmbedder`` takes
tens of milliseconds, a memo hit is a dict look-up; an on-disk cache keyed by
the whole value list would miss whenever the candidate set changes, which is
the common case for filters.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from blendsql.retrieval.embeddings import Embedder, HashingEmbedder, default_embedder

METHODS = ("dense", "bm25", "hybrid")
RRF_K = 60  # reciprocal-rank fusion constant (the usual value)


class EmbeddingMemo:
    """Per-session memo: (embedder identity, text hash) -> unit vector."""

    def __init__(self, max_items: int = 200_000) -> None:
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self.max_items = max_items
        self.hits = 0
        self.misses = 0

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``; only texts never seen with this embedder are embedded."""
        ident = embedder.identity()
        keys = [(ident, hashlib.sha1(t.encode()).hexdigest()) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._vectors]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            fresh = embedder.embed([texts[i] for i in missing])
            if len(self._vectors) + len(missing) > self.max_items:
                self._vectors.clear()
            for i, vec in zip(missing, fresh, strict=True):
                self._vectors[keys[i]] = vec
        if not keys:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys])


_MEMOS: weakref.WeakKeyDictionary[Any, EmbeddingMemo] = weakref.WeakKeyDictionary()
_EMBEDDERS: dict[str, Embedder] = {}


def memo_for(owner: Any) -> EmbeddingMemo:
    """The memo of one session (keyed weakly by its database object)."""
    memo = _MEMOS.get(owner)
    if memo is None:
        memo = _MEMOS[owner] = EmbeddingMemo()
    return memo


def session_embedder(kind: str = "default") -> Embedder:
    """One embedder per process (loading MiniLM once); ``hashing`` forces the fallback."""
    emb = _EMBEDDERS.get(kind)
    if emb is None:
        emb = _EMBEDDERS[kind] = HashingEmbedder() if kind == "hashing" else default_embedder()
    return emb


def value_text(value: Any) -> str:
    """The text a value stands for (a JSON array of strings becomes its items)."""
    from blendsql.ingredients import _llm

    items = _llm.text_items(value)
    return "\n".join(str(i) for i in items) if items else ("" if value is None else str(value))


def dense_scores(question: str, texts: Sequence[str], embedder: Embedder,
                 memo: EmbeddingMemo | None = None) -> np.ndarray:
    """Cosine similarity of each text to the question."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    mat = memo.embed(embedder, texts) if memo is not None else embedder.embed(texts)
    q = embedder.embed([question])[0]
    return np.asarray(mat @ q, dtype=np.float32)


def bm25_scores(question: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 of each text for the question (the repository's in-memory index)."""
    from blendsql.retrieval.index import BM25Index

    if not texts:
        return np.zeros(0, dtype=np.float32)
    return np.asarray(BM25Index(list(texts)).scores(question), dtype=np.float32)


def _ranks(scores: np.ndarray) -> np.ndarray:
    """0-based rank of each item (best first; ties by original position)."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.int64)
    ranks[order] = np.arange(len(scores))
    return ranks


def rank_values(question: str, values: Sequence[Any], method: str = "dense",
                embedder: Embedder | None = None, memo: EmbeddingMemo | None = None,
                ) -> list[int]:
    """Indices of ``values`` best first for ``question`` (stable on ties).

    ``dense``: embedding cosine; ``bm25``: lexical BM25; ``hybrid``:
    reciprocal-rank fusion of both.
    """
    if method not in METHODS:
        from blendsql.errors import ExecutionError

        raise ExecutionError(f"unknown prefilter method {method!r}",
                             hint=f"use prefilter=True or one of {', '.join(METHODS)}")
    texts = [value_text(v) for v in values]
    if not texts:
        return []
    emb = embedder or session_embedder()
    if method == "dense":
        scores = dense_scores(question, texts, emb, memo)
    elif method == "bm25":
        scores = bm25_scores(question, texts)
    else:
        fused = 1.0 / (RRF_K + _ranks(dense_scores(question, texts, emb, memo))) + 1.0 / (
            RRF_K + _ranks(bm25_scores(question, texts)))
        scores = fused.astype(np.float32)
    return [int(i) for i in np.argsort(-scores, kind="stable")]


def method_of(setting: Any) -> str | None:
    """``prefilter=`` setting -> method name (None = off)."""
    if setting is None or setting is False:
        return None
    if setting is True:
        return "dense"
    text = str(setting).lower()
    if text in ("0", "false", "no", "off", ""):
        return None
    return "dense" if text in ("1", "true", "yes", "on") else text
