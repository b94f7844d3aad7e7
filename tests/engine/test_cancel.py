"""A query past its time limit, cancelled, or interrupted (Ctrl-C) stops its model work.

Issue 39: a timed-out map over 600 values answered "Timed out" at the deadline, but its
model calls went on in the background and held the session until they finished. Here
every backend that starts model requests (a ``FunctionModel``'s batch, the OpenAI
client's concurrent batch and its one-at-a-time path, a pool of endpoints) starts none
after the deadline, abandons those in flight, and the session serves the next query
at once. Bounds are generous (deadline + 1.5 s) for a loaded two-core machine.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.cancel import CancelToken, current, scope
from blendsql.errors import QueryCancelledError, QueryTimeoutError
from blendsql.ingredients import MapIngredient
from blendsql.models import FunctionModel
from blendsql.models.base import Request

N = 600
DELAY = 0.05  # seconds per model request
LIMIT = 1.0  # the query's time limit
SLACK = 1.5  # how late the error may come on a loaded machine
MAP = "SELECT x FROM w WHERE {{LLMMap('is it ok?', w.x)}} = TRUE"


def values(n: int = N) -> pd.DataFrame:
    return pd.DataFrame({"x": [f"value {i}" for i in range(n)]})


class Counting:
    """A slow scripted model: sleeps ``delay`` per request and counts them."""

    def __init__(self, delay: float = DELAY, hook: Callable[[int], None] | None = None) -> None:
        self.delay = delay
        self.hook = hook
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, req: Request) -> str:
        with self.lock:
            self.calls += 1
            n = self.calls
        if self.hook is not None:
            self.hook(n)
        time.sleep(self.delay)
        return "true"


def settled(count: Callable[[], int], wait: float = 0.5) -> tuple[int, int]:
    """``count()`` now and after ``wait`` seconds: equal when no work goes on."""
    before = count()
    time.sleep(wait)
    return before, count()


def timed_out(bsql: BlendSQL, query: str = MAP, limit: float = LIMIT) -> tuple[float, Any]:
    t0 = time.monotonic()
    with pytest.raises(QueryTimeoutError) as info:
        bsql.execute(query, timeout=limit)
    return time.monotonic() - t0, info.value


def assert_session_serves_at_once(bsql: BlendSQL) -> None:
    t0 = time.monotonic()
    assert len(bsql.execute("SELECT x FROM w").df) == N
    assert time.monotonic() - t0 < 1.0
    left = bsql.db.execute("SELECT name FROM sqlite_temp_master")[1]
    assert left == [], f"temp objects left behind: {left}"


def test_a_map_past_its_timeout_stops_its_requests_and_frees_the_session() -> None:
    fn = Counting()
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False)
    seconds, err = timed_out(bsql)
    assert seconds < LIMIT + SLACK
    before, after = settled(lambda: fn.calls)
    assert before < N // 3, f"{before} requests made of {N}"
    assert after <= before + 1  # nothing started after the error (one may have been in flight)
    step = err.trace[-1]
    assert step.kind == "cancelled" and step.details["reason"] == "timeout"
    assert step.details["requests_not_started"] >= N - before - 1
    assert step.details["requests_abandoned"] <= 1
    assert "not started" in err.message
    assert_session_serves_at_once(bsql)
    # the session's model works again for the next query (a small one, within the limit)
    small = BlendSQL({"w": values(3)}, model=FunctionModel(Counting(0.0)), cache=False)
    assert len(small.execute(MAP, timeout=LIMIT).df) == 3
    assert bsql.options.get("timeout") is None  # the per-query option did not stick


def test_the_session_option_is_the_query_time_limit_too() -> None:
    fn = Counting()
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False, timeout=LIMIT)
    t0 = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        bsql.execute(MAP)
    assert time.monotonic() - t0 < LIMIT + SLACK
    assert fn.calls < N // 3


def test_progress_chunks_stop_too() -> None:
    """With a progress callback the batch is sent in chunks; no chunk starts late."""
    fn = Counting()
    seen: list[int] = []
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False,
                    progress=lambda _label, done, _total: seen.append(done))
    seconds, _ = timed_out(bsql)
    assert seconds < LIMIT + SLACK
    before, after = settled(lambda: fn.calls)
    assert before < N // 3 and after <= before + 1


def test_no_time_limit_set_means_no_query_deadline() -> None:
    """Without ``timeout=`` only the per-statement and per-request limits apply."""
    bsql = BlendSQL({"w": values(20)}, model=FunctionModel(Counting()), cache=False)
    assert len(bsql.execute(MAP).df) == 20


def test_a_cancelled_enclosing_token_stops_the_query() -> None:
    """What the web page does when its client goes away: cancel from another thread."""
    fn = Counting()
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False)
    outer = CancelToken(None)
    threading.Timer(0.5, outer.cancel).start()
    t0 = time.monotonic()
    with scope(outer), pytest.raises(QueryCancelledError) as info:
        bsql.execute(MAP)
    assert time.monotonic() - t0 < 0.5 + SLACK
    assert info.value.trace[-1].details["reason"] == "cancelled"
    before, after = settled(lambda: fn.calls)
    assert before < N // 3 and after <= before + 1
    assert current() is None
    assert_session_serves_at_once(bsql)


# -- Ctrl-C ---------------------------------------------------------------------------


def test_ctrl_c_raised_by_the_model_stops_the_map_and_the_session_goes_on() -> None:
    def interrupt(n: int) -> None:
        if n == 5:
            raise KeyboardInterrupt

    fn = Counting(0.01, interrupt)
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False)
    with pytest.raises(KeyboardInterrupt):
        bsql.execute(MAP)
    before, after = settled(lambda: fn.calls)
    assert before == after == 5
    assert_session_serves_at_once(bsql)


def assert_interrupt_stops_the_map(interrupt: Callable[[int], None], most_calls: int) -> None:
    """A KeyboardInterrupt raised by ``interrupt`` at the fifth model call reaches the caller
    within moments, no call starts after it, and the session serves the next query."""
    fn = Counting(DELAY, interrupt)
    bsql = BlendSQL({"w": values()}, model=FunctionModel(fn), cache=False)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        bsql.execute(MAP)
    assert time.monotonic() - t0 < SLACK + 1
    before, after = settled(lambda: fn.calls)
    assert before < most_calls and after == before
    assert_session_serves_at_once(bsql)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals only")
def test_a_real_ctrl_c_during_a_map_stops_the_work() -> None:
    """SIGINT to the main thread while it waits for a batch (as a terminal's Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    main = threading.main_thread().ident
    assert main is not None

    def interrupt(n: int) -> None:
        if n == 5:
            signal.pthread_kill(main, signal.SIGINT)

    assert_interrupt_stops_the_map(interrupt, most_calls=10)


# -- OpenAI-compatible servers -------------------------------------------------------


@pytest.fixture()
def server() -> Iterator[Any]:
    pytest.importorskip("openai")
    from tests.fake_openai import FakeServer

    srv = FakeServer(delay=DELAY, slots=4)
    try:
        yield srv
    finally:
        srv.kill()


def _openai(url: str, concurrency: int) -> Any:
    from blendsql.models import OpenAI

    return OpenAI("m", base_url=url, api_key="x", max_concurrency=concurrency,
                  server_kind="openai", timeout=30)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_openai_batches_stop_at_the_deadline(server: Any, concurrency: int) -> None:
    bsql = BlendSQL({"w": values()}, model=_openai(server.url, concurrency), cache=False)
    seconds, err = timed_out(bsql)
    assert seconds < LIMIT + SLACK
    details = err.trace[-1].details
    before, after = settled(lambda: len(server.received))
    assert before < N // 3, f"{before} requests reached the server"
    # requests sent just before the deadline may reach a loaded server's count just after
    assert after <= before + details["requests_abandoned"], "requests sent after the deadline"
    assert settled(lambda: len(server.received))[1] == after  # and then nothing more
    assert details["requests_not_started"] + details["requests_abandoned"] > 0
    assert_session_serves_at_once(bsql)


@pytest.mark.parametrize("limit", [None, 30.0])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_openai_batches_within_their_limit_answer_every_value(server: Any, concurrency: int,
                                                               limit: float | None) -> None:
    bsql = BlendSQL({"w": values(20)}, model=_openai(server.url, concurrency), cache=False)
    options = {} if limit is None else {"timeout": limit}
    assert len(bsql.execute("SELECT x, {{LLMMap('q', w.x)}} AS a FROM w", **options).df) == 20
    assert len(server.received) == 20


def test_a_pool_stops_at_the_deadline() -> None:
    pytest.importorskip("openai")
    from blendsql.models.pool import Pool
    from tests.fake_openai import FakeServer

    servers = [FakeServer(delay=DELAY, slots=2), FakeServer(delay=DELAY, slots=2)]
    try:
        pool = Pool.from_urls("m", [s.url for s in servers], "x", max_concurrency=2,
                              server_kind="openai", timeout=30)
        bsql = BlendSQL({"w": values()}, model=pool, cache=False)
        seconds, err = timed_out(bsql)
        assert seconds < LIMIT + SLACK
        details = err.trace[-1].details
        before, after = settled(lambda: sum(len(s.received) for s in servers))
        assert before < N // 3 and after <= before + details["requests_abandoned"]
        assert settled(lambda: sum(len(s.received) for s in servers))[1] == after
        assert details["requests_not_started"] > 0
        assert_session_serves_at_once(bsql)
    finally:
        for s in servers:
            s.kill()


# -- the token itself -----------------------------------------------------------------


def test_token_deadline_bound_and_watchers() -> None:
    token = CancelToken(60)
    remaining = token.remaining()
    assert remaining is not None and 59 < remaining <= 60
    assert token.bound(5) == 5 and token.bound(None) == pytest.approx(60, abs=1)
    rang: list[str] = []
    with token.watch(lambda: rang.append("a")):
        token.cancel()
        token.cancel()  # once only
    assert rang == ["a"] and token.cancelled
    with token.watch(lambda: rang.append("late")):  # already cancelled: called at once
        pass
    assert rang == ["a", "late"]
    assert isinstance(token.error(), QueryCancelledError)
    child = CancelToken(None, parent=CancelToken(0.0))
    assert child.cancelled and isinstance(child.error(), QueryTimeoutError)
    assert CancelToken(None).remaining() is None


class Sleepy(MapIngredient):
    """A custom ingredient with no model whose own code is slow."""

    needs_model = False

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        time.sleep(5)  # bounded: without the deadline the test fails, it does not hang
        return [True for _ in values]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers only")
def test_a_custom_ingredient_s_code_stops_at_the_query_deadline() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("the ingredient's own code is stopped on the main thread only")
    bsql = BlendSQL({"w": values(3)}, ingredients=[Sleepy], cache=False)
    t0 = time.monotonic()
    with pytest.raises(QueryTimeoutError):
        bsql.execute("SELECT x FROM w WHERE {{Sleepy('q', w.x)}} = TRUE", timeout=0.5)
    assert time.monotonic() - t0 < 0.5 + SLACK
    assert len(bsql.execute("SELECT x FROM w").df) == 3


def test_interrupt_main_during_a_map_stops_the_work() -> None:
    """``_thread.interrupt_main()`` sends no signal: the main thread's waits are cut short
    (``blendsql.cancel.MAIN_THREAD_SLICE``) so it is raised within moments all the same."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("interrupt_main reaches the main thread only")
    import _thread

    def interrupt(n: int) -> None:
        if n == 5:
            _thread.interrupt_main()

    assert_interrupt_stops_the_map(interrupt, most_calls=30)


def test_a_join_stops_at_the_deadline() -> None:
    fn = Counting()
    bsql = BlendSQL({"l": pd.DataFrame({"a": [f"alpha {i}" for i in range(300)]}),
                     "r": pd.DataFrame({"b": [f"beta {i}" for i in range(300)]})},
                    model=FunctionModel(lambda req: (fn(req), "a0")[1]), cache=False)
    t0 = time.monotonic()
    with pytest.raises(QueryTimeoutError) as info:
        bsql.execute("SELECT l.a, r.b FROM l JOIN r ON {{LLMJoin(l.a, r.b)}}", timeout=LIMIT)
    assert time.monotonic() - t0 < LIMIT + SLACK
    before, after = settled(lambda: fn.calls)
    assert before < 100 and after <= before + 1
    assert info.value.trace[-1].details["requests_not_started"] > 0


def test_a_qa_request_in_flight_is_abandoned_at_the_deadline() -> None:
    release = threading.Event()

    def stuck(req: Request) -> str:
        release.wait(10)  # bounded: a hung model, released by the test
        return "x"

    bsql = BlendSQL({"w": values(3)}, model=FunctionModel(stuck), cache=False)
    try:
        t0 = time.monotonic()
        with pytest.raises(QueryTimeoutError) as info:
            bsql.execute("SELECT {{LLMQA('which?', (SELECT x FROM w))}} AS a", timeout=LIMIT)
        assert time.monotonic() - t0 < LIMIT + SLACK
        details = info.value.trace[-1].details
        assert (details["requests_abandoned"], details["requests_not_started"]) == (1, 0)
        assert_small_session_serves(bsql)
    finally:
        release.set()


def assert_small_session_serves(bsql: BlendSQL) -> None:
    t0 = time.monotonic()
    assert len(bsql.execute("SELECT x FROM w").df) == 3
    assert time.monotonic() - t0 < 1.0
