"""Embedders: unit norms, determinism, similarity that means something, disk cache."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from blendsql.errors import BlendSQLError
from blendsql.retrieval.embeddings import (
    HashingEmbedder,
    SentenceTransformerEmbedder,
    cached_embed,
    content_key,
    find_minilm_path,
    words,
)


def test_words_split_snake_and_camel_case() -> None:
    assert words("home_town") == ["home", "town"]
    assert words("HomeTown") == ["home", "town"]
    assert words("stadium.Song_release_year2") == ["stadium", "song", "release", "year", "2"]


def test_hashing_rows_are_unit_norm_and_deterministic() -> None:
    e = HashingEmbedder(dim=512)
    a = e.embed(["singer.name", "stadium capacity", ""])
    b = HashingEmbedder(dim=512).embed(["singer.name", "stadium capacity", ""])
    assert a.shape == (3, 512)
    assert np.allclose(np.linalg.norm(a[:2], axis=1), 1.0)
    assert np.linalg.norm(a[2]) == 0.0  # nothing to hash: zero row, not NaN
    assert np.array_equal(a, b)


def test_hashing_similarity_prefers_shared_words_and_morphology() -> None:
    e = HashingEmbedder()
    q, near, far = e.embed(["names of singers", "singer . name", "stadium . capacity"])
    assert q @ near > q @ far + 0.1


def test_idf_fit_downweights_ubiquitous_tokens() -> None:
    corpus = [f"table{i} id" for i in range(50)] + ["pets weight"]
    plain = HashingEmbedder(dim=1024)
    fitted = plain.fit(corpus)
    assert fitted.identity() != plain.identity()
    q = "id weight"
    sim_plain = plain.embed([q]) @ plain.embed(["pets weight", "table3 id"]).T
    sim_fit = fitted.embed([q]) @ fitted.embed(["pets weight", "table3 id"]).T
    # after IDF the rare shared word (weight) counts more than the common one (id)
    assert sim_fit[0, 0] - sim_fit[0, 1] > sim_plain[0, 0] - sim_plain[0, 1]


def test_bad_dim_raises_blendsql_error() -> None:
    with pytest.raises(BlendSQLError):
        HashingEmbedder(dim=0)


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=64)
        self.calls = 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().embed(texts)


def test_cached_embed_hits_disk_on_second_call(tmp_path) -> None:  # type: ignore[no-untyped-def]
    e = CountingEmbedder()
    texts = ["a.b", "c.d", "e.f"]
    first = cached_embed(e, texts, tmp_path)
    second = cached_embed(e, texts, tmp_path)
    assert e.calls == 1
    assert np.array_equal(first, second)
    assert (tmp_path / f"{content_key(e, texts)}.npy").exists()
    cached_embed(e, texts[::-1], tmp_path)  # order is part of the key
    assert e.calls == 2


def test_cached_embed_recovers_from_corrupt_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    e = CountingEmbedder()
    texts = ["x.y"]
    (tmp_path / f"{content_key(e, texts)}.npy").write_bytes(b"not an array")
    out = cached_embed(e, texts, tmp_path)
    assert out.shape == (1, 64) and e.calls == 1


def test_sentence_transformer_without_weights_raises_with_hint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    if find_minilm_path() is not None:
        pytest.skip("weights installed; the missing-weights path is not reachable")
    with pytest.raises(BlendSQLError) as info:
        SentenceTransformerEmbedder()
    assert "HashingEmbedder" in (info.value.hint or "")


@pytest.mark.skipif(
    find_minilm_path() is None or importlib.util.find_spec("sentence_transformers") is None,
    reason="optional extra 'embeddings' not installed",
)
def test_minilm_embeds_offline_and_ranks_paraphrase_first() -> None:
    e = SentenceTransformerEmbedder()
    v = e.embed(["name of the vocalist", "singer . name", "stadium . capacity"])
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]
