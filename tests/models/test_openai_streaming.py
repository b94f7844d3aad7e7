"""Answers of concurrent requests reach the progress callback as they arrive.

The scripted server holds the request for value 0 until the progress callback
has seen another answer: if progress were only reported once the batch (or a
chunk of it) is done, value 0 would wait for its safety timeout and the first
report would be the whole batch. Events only, no timing assertions.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.execute.metering import MeteredModel
from blendsql.models import OpenAI
from blendsql.models.base import FunctionModel, Request, Response
from blendsql.models.cache import CachedModel
from blendsql.models.guard import guarded
from tests.models.test_openai import Reply, Scripted, completion, scripted  # noqa: F401 - the fixture

SAFETY = 20.0  # seconds the held request waits at most (a failing run ends, not hangs)


def holding_first(released: threading.Event) -> Callable[[int, dict[str, Any]], Reply]:
    """Echo the last word of the prompt; the prompt ending in ' 0' waits for ``released``."""

    def script(_n: int, body: dict[str, Any]) -> Reply:
        word = body["messages"][-1]["content"].split()[-1]
        if word == "0":
            released.wait(SAFETY)
        return completion(word)

    return script


def recorder(released: threading.Event, calls: list[tuple[str, int, int]]) -> Callable[[str, int, int], None]:
    def progress(label: str, done: int, total: int) -> None:
        calls.append((label, done, total))
        if done >= 1:
            released.set()

    return progress


def test_metered_openai_reports_each_answer_as_it_arrives(
        scripted: Callable[..., Scripted]) -> None:  # noqa: F811
    released = threading.Event()
    srv = scripted(holding_first(released))
    model = OpenAI("m", srv.base_url, api_key="k", server_kind="generic", max_concurrency=3, timeout=30)
    calls: list[tuple[str, int, int]] = []
    metered = MeteredModel(lambda: guarded(model), progress=recorder(released, calls))
    out = metered.generate([Request(f"echo {i}") for i in range(3)])
    assert [r.value for r in out] == ["0", "1", "2"]  # input order kept
    assert [(d, t) for _, d, t in calls] == [(1, 3), (2, 3), (3, 3)]
    assert released.is_set()


def test_cached_session_streams_fresh_answers_and_reports_hits(
        scripted: Callable[..., Scripted], tmp_path: Path) -> None:  # noqa: F811
    released = threading.Event()
    srv = scripted(holding_first(released))
    model = OpenAI("m", srv.base_url, api_key="k", server_kind="generic", max_concurrency=4, timeout=30)
    cached = CachedModel(model, tmp_path / "cache.sqlite")
    cached.generate([Request("echo 3")])  # a hit for the batch below
    calls: list[tuple[str, int, int]] = []
    metered = MeteredModel(lambda: guarded(cached), progress=recorder(released, calls))
    reqs = [Request(f"echo {i}") for i in (0, 1, 3, 1)]  # a hit and a repeat
    out = metered.generate(reqs)
    assert [r.value for r in out] == ["0", "1", "3", "1"]
    assert [d for _, d, _ in calls] == [1, 2, 3, 4]
    assert all(t == 4 for _, _, t in calls)
    assert released.is_set()
    assert [b["messages"][-1]["content"] for b in srv.bodies[1:]] in (
        ["echo 0", "echo 1"], ["echo 1", "echo 0"])  # only the fresh prompts, each once


def test_engine_progress_moves_per_answer(
        scripted: Callable[..., Scripted], tmp_path: Path) -> None:  # noqa: F811
    released = threading.Event()
    srv = scripted(holding_first(released))
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (v TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [(str(i),) for i in range(12)])
    calls: list[tuple[str, int, int]] = []
    model = OpenAI("m", srv.base_url, api_key="k", server_kind="generic", max_concurrency=4, timeout=30)
    bsql = BlendSQL(str(db), model=model, cache=False, progress=recorder(released, calls))
    res = bsql.execute("SELECT v, {{LLMMap('Repeat the number', 't::v')}} AS a FROM t ORDER BY CAST(v AS INT)")
    assert released.is_set()
    dones = [d for _, d, _ in calls]
    assert dones == list(range(1, 13))  # one report per answer, not one per chunk of 8
    assert len(res.df) == 12


def test_non_streaming_backend_keeps_chunked_progress() -> None:
    model = FunctionModel(lambda r: "x", name="f")
    assert model.streams_results is False
    calls: list[tuple[str, int, int]] = []
    metered = MeteredModel(lambda: model, progress=lambda lab, d, t: calls.append((lab, d, t)), chunk=8)
    metered.generate([Request(f"q {i}") for i in range(20)])
    assert [d for _, d, _ in calls] == [8, 16, 20]


def test_default_generate_each_reports_after_batch() -> None:
    seen: list[tuple[int, Response]] = []
    model = FunctionModel(lambda r: r.prompt[-1], name="f")
    out = model.generate_each([Request("a"), Request("b")], lambda i, r: seen.append((i, r)))
    assert [i for i, _ in seen] == [0, 1]
    assert [r.text for _, r in seen] == [r.text for r in out] == ["a", "b"]
