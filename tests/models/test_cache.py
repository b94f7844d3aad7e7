"""The persistent cache: hits and misses, what is stored, concurrency, kill-safety."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from blendsql.models.base import FunctionModel, Request, Response, Usage
from blendsql.models.cache import CachedModel, cache_key, file_sha256, with_cache
from blendsql.models.constraints import Bool, Choice, Int, ListOf, Text

REPO = Path(__file__).resolve().parents[2]


class Counting(FunctionModel):
    """A FunctionModel that records every request it really answers."""

    def __init__(self, fn, name="counting"):
        super().__init__(fn, name=name)
        self.seen: list[Request] = []

    def generate(self, requests):
        self.seen.extend(requests)
        return super().generate(requests)


def answer(req: Request):
    """Deterministic typed answers that depend on the prompt."""
    if isinstance(req.constraint, Int):
        return str(len(req.prompt))
    if isinstance(req.constraint, Bool):
        return "true" if len(req.prompt) % 2 else "false"
    if isinstance(req.constraint, ListOf):
        return json.dumps(req.prompt.split())
    return req.prompt.upper()


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BLENDSQL_CACHE_DIR", str(tmp_path / "cache-dir"))


def test_miss_then_hit_returns_the_same_typed_values(tmp_path):
    inner = Counting(answer)
    m = CachedModel(inner, tmp_path / "c.sqlite")
    reqs = [Request("abc", constraint=Int()), Request("abcd", constraint=Bool()),
            Request("x y z", constraint=ListOf(Text())), Request("hello")]
    first = m.generate(reqs)
    assert len(inner.seen) == 4 and not any(r.cached for r in first)
    second = CachedModel(Counting(answer), tmp_path / "c.sqlite")  # a new process would do this
    again = second.generate(reqs)
    assert [r.value for r in again] == [3, False, ["x", "y", "z"], "HELLO"]
    assert [r.value for r in again] == [r.value for r in first]
    assert [r.text for r in again] == [r.text for r in first]
    assert all(r.cached for r in again) and second.hits == 4 and second.misses == 0
    assert not second.inner.seen  # type: ignore[attr-defined]
    for a, b in zip(first, again, strict=True):
        assert b.usage.prompt_tokens == a.usage.prompt_tokens
        assert b.usage.completion_tokens == a.usage.completion_tokens
        assert b.usage.cached_tokens == a.usage.prompt_tokens


def test_partial_hits_call_the_model_only_for_misses_in_order(tmp_path):
    inner = Counting(answer)
    m = CachedModel(inner, tmp_path / "c.sqlite")
    m.generate([Request("b"), Request("d")])
    out = m.generate([Request("a"), Request("b"), Request("c"), Request("d")])
    assert [r.value for r in out] == ["A", "B", "C", "D"]
    assert [r.cached for r in out] == [False, True, False, True]
    assert [r.prompt for r in inner.seen] == ["b", "d", "a", "c"]


def test_key_covers_identity_prompt_constraint_and_params(tmp_path):
    path = tmp_path / "c.sqlite"
    a = CachedModel(Counting(answer, name="a"), path)
    b = CachedModel(Counting(answer, name="b"), path)
    a.generate([Request("q")])
    b.generate([Request("q")])
    assert len(b.inner.seen) == 1  # type: ignore[attr-defined]  # other model: a miss
    variants = [Request("q", constraint=Choice(("Q", "R"))), Request("q", max_tokens=5),
                Request("q", temperature=0.5), Request("q", stop=("\n",)),
                Request(messages=(("user", "q"),))]
    keys = {cache_key(a.identity(), r) for r in [Request("q"), *variants]}
    assert len(keys) == len(variants) + 1


def test_errors_are_not_cached(tmp_path):
    calls = []

    def flaky(req):
        calls.append(req)
        return "not a number" if len(calls) == 1 else "7"

    m = CachedModel(FunctionModel(flaky), tmp_path / "c.sqlite")
    bad = m.generate([Request("n?", constraint=Int())])[0]
    assert bad.value is None and bad.error
    good = m.generate([Request("n?", constraint=Int())])[0]
    assert good.value == 7 and not good.cached
    assert m.generate([Request("n?", constraint=Int())])[0].cached


def test_unserialisable_values_are_skipped_not_fatal(tmp_path):
    class SetModel(FunctionModel):  # a custom backend: its value is not checked here
        def generate(self, requests):
            return [Response("{1, 2}", {1, 2}) for _ in requests]

    m = CachedModel(SetModel(lambda r: None), tmp_path / "c.sqlite")
    assert m.generate([Request("s")])[0].value == {1, 2}
    assert len(m) == 0


def test_wrong_response_count_is_a_model_error(tmp_path):
    from blendsql.errors import ModelError

    class Broken(FunctionModel):
        def generate(self, requests):
            return []

    with pytest.raises(ModelError):
        CachedModel(Broken(answer), tmp_path / "c.sqlite").generate([Request("x")])


def test_with_cache(tmp_path):
    inner = FunctionModel(answer)
    assert with_cache(inner, False) is inner
    wrapped = with_cache(inner, tmp_path / "x.sqlite")
    assert isinstance(wrapped, CachedModel) and wrapped.path == tmp_path / "x.sqlite"
    assert with_cache(wrapped, True) is wrapped
    assert with_cache(wrapped, str(tmp_path / "x.sqlite")) is wrapped
    moved = with_cache(wrapped, tmp_path / "y.sqlite")
    assert isinstance(moved, CachedModel) and moved.inner is inner
    assert with_cache(inner, True) is inner  # functions are not cached by default
    default = with_cache(FunctionModel(answer, name="answer-v1", cacheable=True), True)
    assert isinstance(default, CachedModel)
    assert default.path == Path(os.environ["BLENDSQL_CACHE_DIR"]) / "cache.sqlite"
    default.generate([Request("z")])
    assert default.path.exists()


def test_clear(tmp_path):
    m = CachedModel(FunctionModel(answer), tmp_path / "c.sqlite")
    m.generate([Request("a"), Request("b")])
    assert len(m) == 2
    m.clear()
    assert len(m) == 0


def test_threads_share_one_cache(tmp_path):
    inner = Counting(answer)
    m = CachedModel(inner, tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(40):
                reqs = [Request(f"p{(i + t) % 25}"), Request(f"p{i}", constraint=Int())]
                out = m.generate(reqs)
                assert out[0].value == f"P{(i + t) % 25}" and out[1].value == len(f"p{i}")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert len(m) == 25 + 40


def _process_worker(path: str, worker: int, n: int) -> None:
    m = CachedModel(FunctionModel(answer), path)
    for i in range(n):
        out = m.generate([Request(f"w{worker}-{i}"), Request(f"shared-{i % 10}")])
        assert out[0].value == f"W{worker}-{i}"
        assert out[1].value == f"SHARED-{i % 10}"


def test_processes_share_one_cache(tmp_path):
    path = str(tmp_path / "c.sqlite")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_process_worker, args=(path, w, 60)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM responses").fetchone()[0] == 4 * 60 + 10
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def rep(req: Request) -> str:
    return req.prompt * 50


def test_a_process_killed_mid_write_leaves_a_readable_cache(tmp_path):
    path = tmp_path / "c.sqlite"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from blendsql.models.base import FunctionModel, Request
        from blendsql.models.cache import CachedModel
        def rep(r):
            return r.prompt * 50
        m = CachedModel(FunctionModel(rep), {str(path)!r})
        i = 0
        while True:  # write batches until killed
            m.generate([Request(f"k{{i}}-{{j}}") for j in range(50)])
            i += 1
            if i == 3:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(0.3)  # let it get into the middle of more writes
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = conn.execute("SELECT count(*) FROM responses").fetchone()[0]
    assert n >= 150 and n % 50 == 0  # whole batches only: each batch is one transaction
    for text, value in conn.execute("SELECT text, value FROM responses"):
        assert json.loads(value)["v"] == text.strip()
    conn.close()
    m = CachedModel(FunctionModel(rep), path)  # same identity as the killed writer
    out = m.generate([Request("k0-0"), Request("new")])
    assert out[0].cached and not out[1].cached and len(m) == n + 1


def test_file_sha256_is_memoised_by_path_size_and_mtime(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x" * 3_000_000)
    expected = hashlib.sha256(f.read_bytes()).hexdigest()
    side = tmp_path / "side"
    assert file_sha256(f, side) == expected
    memo_file = side / "file-sha256.json"
    memo = json.loads(memo_file.read_text())
    assert list(memo.values()) == [expected]
    # prove the memo is what answers: plant a marker under the same key
    memo_file.write_text(json.dumps({k: "planted" for k in memo}))
    assert file_sha256(f, side) == "planted"
    # a changed file (size/mtime) is hashed again
    f.write_bytes(b"y" * 10)
    assert file_sha256(f, side) == hashlib.sha256(b"y" * 10).hexdigest()
    # a corrupt sidecar is ignored, not fatal
    memo_file.write_text("{not json")
    assert file_sha256(f, side) == hashlib.sha256(b"y" * 10).hexdigest()


def test_hit_seconds_are_lookup_time_not_original_time(tmp_path):
    def slow_fn(req: Request) -> str:
        time.sleep(0.05)
        return "v"

    slow = FunctionModel(slow_fn)
    m = CachedModel(slow, tmp_path / "c.sqlite")
    assert m.generate([Request("a")])[0].seconds >= 0.05
    assert m.generate([Request("a")])[0].seconds < 0.05


def test_usage_of_a_hit_is_the_original_usage(tmp_path):
    class Fixed(FunctionModel):
        def generate(self, requests):
            return [Response("ok", "ok", Usage(11, 3, 5)) for _ in requests]

    m = CachedModel(Fixed(answer), tmp_path / "c.sqlite")
    m.generate([Request("a")])
    hit = m.generate([Request("a")])[0]
    assert (hit.usage.prompt_tokens, hit.usage.completion_tokens, hit.usage.cached_tokens) == (11, 3, 11)


def test_a_request_repeated_in_one_batch_is_asked_once(tmp_path):
    inner = Counting(answer)
    m = CachedModel(inner, tmp_path / "c.sqlite")
    out = m.generate([Request("a"), Request("b"), Request("a"), Request("a")])
    assert [r.value for r in out] == ["A", "B", "A", "A"]
    assert [r.prompt for r in inner.seen] == ["a", "b"]
    assert out[0] is not out[2]  # separate objects: callers may annotate them
