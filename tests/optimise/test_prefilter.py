"""Retrieval-prefiltered free-text filters (opt-in, only under LIMIT)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from blendsql.retrieval.embeddings import HashingEmbedder
from blendsql.retrieval.prefilter import EmbeddingMemo, method_of, rank_values

from .helpers import MARK, plain, rows, session

ROMANTIC = "SELECT id FROM restaurants WHERE ANSWER(reviews, 'is it a romantic dinner?') = 'yes'"


def _retrieval(smoothie: object) -> list[object]:
    return [t for t in smoothie.trace if t.kind == "retrieval"]


def test_rank_values_puts_matching_text_first() -> None:
    vals = ["noisy room", "cheap eats", f"a {MARK} dinner", "parking is hard"]
    order = rank_values(f"{MARK} dinner", vals, "dense", embedder=HashingEmbedder())
    assert order[0] == 2
    assert rank_values(f"{MARK} dinner", vals, "bm25")[0] == 2
    assert rank_values(f"{MARK} dinner", vals, "hybrid", embedder=HashingEmbedder())[0] == 2
    assert sorted(order) == [0, 1, 2, 3]


def test_method_setting() -> None:
    assert method_of(True) == "dense" and method_of(False) is None and method_of(None) is None
    assert method_of("bm25") == "bm25"


def test_prefilter_verifies_fewer_and_rows_qualify(rdb: Path) -> None:
    q = ROMANTIC + " LIMIT 5"
    with session(rdb, prefilter="hashing-free") as s:  # unknown methods are reported
        try:
            s.execute(q)
            raised = False
        except Exception as e:  # noqa: BLE001
            raised = "prefilter" in str(e)
        assert raised
    with session(rdb, prefilter="bm25") as s:
        pre = s.execute(q)
    with session(rdb) as s:
        lazy = s.execute(q)
    good = {r[0] for r in plain(rdb, f"SELECT id FROM restaurants WHERE "
                                     f"instr(reviews, '{MARK}') > 0")}
    got = [r[0] for r in rows(pre.df)]
    assert len(got) == 5 and set(got) <= good
    assert pre.meta.values_passed < lazy.meta.values_passed
    step = _retrieval(pre)
    assert len(step) == 1
    assert step[0].details["ranked"] == 1000
    assert step[0].details["verified"] == pre.meta.values_passed
    assert "ranked 1000 value(s) by bm25" in step[0].summary


def test_per_call_kwarg_and_dense(rdb: Path) -> None:
    q = ("SELECT id FROM restaurants WHERE "
         "{{ANSWER(reviews, 'is it a romantic dinner?', prefilter=True)}} = 'yes' LIMIT 3")
    with session(rdb, prefilter_embedder="hashing") as s:
        out = s.execute(q)
    assert len(out.df) == 3
    assert _retrieval(out) and _retrieval(out)[0].details["method"] == "dense"
    assert _retrieval(out)[0].details["embedder"].startswith("hashing")


def test_off_by_default_and_not_without_limit(rdb: Path) -> None:
    with session(rdb) as s:
        assert not _retrieval(s.execute(ROMANTIC + " LIMIT 2"))
    with session(rdb, prefilter=True) as s:
        out = s.execute(ROMANTIC + " AND id < 200")
        assert not _retrieval(out)
        assert sorted(r[0] for r in rows(out.df)) == [i for i in range(37, 200, 37)]


def test_memo_reuses_vectors() -> None:
    """Second embedding of the same texts is served from memory (and is faster)."""
    texts = [f"review number {i} with some words" for i in range(1000)]
    memo, emb = EmbeddingMemo(), HashingEmbedder()
    t0 = time.perf_counter()
    a = memo.embed(emb, texts)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = memo.embed(emb, texts)
    second = time.perf_counter() - t0
    assert np.array_equal(a, b)
    assert memo.misses == 1000 and memo.hits == 1000
    assert second < first


def test_disk_store_serves_a_new_session(tmp_path: Path) -> None:
    from blendsql.retrieval.prefilter import DiskStore

    texts = [f"text {i}" for i in range(50)]
    emb = HashingEmbedder()
    first = EmbeddingMemo(disk=DiskStore(tmp_path / "v.sqlite"))
    a = first.embed(emb, texts)
    second = EmbeddingMemo(disk=DiskStore(tmp_path / "v.sqlite"))
    b = second.embed(emb, texts[10:20])
    assert second.disk_hits == 10 and second.misses == 0
    assert np.allclose(a[10:20], b)
