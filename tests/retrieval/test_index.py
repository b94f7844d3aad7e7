"""Dense and BM25 indexes: ordering, ties, scores."""

from __future__ import annotations

import numpy as np

from blendsql.retrieval.embeddings import HashingEmbedder
from blendsql.retrieval.index import BM25Index, DenseIndex, stemmed_words, top_k

DOCS = ["singer name", "singer age", "stadium capacity", "stadium name", "concert year"]


def test_top_k_orders_best_first_and_breaks_ties_by_position() -> None:
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.0])
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 10).tolist() == [1, 3, 2, 0, 4]
    assert top_k(scores, 0).tolist() == []


def test_bm25_prefers_rarer_matching_term() -> None:
    idx = BM25Index(DOCS)
    hits = idx.search("capacity of the stadium", k=2)
    assert hits[0].text == "stadium capacity"
    assert hits[1].text == "stadium name"
    assert idx.scores("nothing matches here").max() == 0.0


def test_bm25_light_stemming_matches_plurals() -> None:
    assert stemmed_words("Singers classes") == ["singer", "classe"]
    assert stemmed_words("class") == ["class"]
    idx = BM25Index(DOCS)
    assert idx.search("how many singers", k=1)[0].text.startswith("singer")


def test_bm25_length_normalisation() -> None:
    idx = BM25Index(["age", "age of the person in years since birth"])
    s = idx.scores("age")
    assert s[0] > s[1] > 0


def test_dense_index_search_and_similarities_shape(tmp_path) -> None:  # type: ignore[no-untyped-def]
    idx = DenseIndex(DOCS, HashingEmbedder(), cache_dir=tmp_path)
    assert len(idx) == 5
    sims = idx.similarities(["singer's age", "concerts by year"])
    assert sims.shape == (2, 5)
    assert idx.search("singer's age", k=1)[0].text == "singer age"
    assert idx.search("concerts by year", k=1)[0].index == 4
    assert list(tmp_path.glob("*.npy"))  # the document embeddings were cached
