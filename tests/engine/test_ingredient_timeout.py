"""An ingredient's run has a time limit (``ingredient_timeout``): user code cannot hang a query."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientTimeoutError, OptionError
from blendsql.ingredients.base import MapIngredient, QAIngredient

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers only")


class Slow(MapIngredient):
    needs_model = False

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        time.sleep(5)  # bounded: without a limit the test fails, it does not hang
        return [True for _ in values]


class Stubborn(QAIngredient):
    """Swallows every Exception it sees, as careless user code does."""

    needs_model = False

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: BLE001, S110 - the point of the test
                pass
        return "done"


def _session() -> BlendSQL:
    return BlendSQL({"w": pd.DataFrame({"x": ["a", "b"]})}, ingredients=[Slow, Stubborn], cache=False)


def test_a_slow_run_is_stopped_with_a_clear_error_and_the_session_goes_on():
    bsql = _session()
    with pytest.raises(IngredientTimeoutError) as info:
        bsql.execute("SELECT x FROM w WHERE {{Slow('q', w.x)}} = TRUE", ingredient_timeout=0.2)
    assert isinstance(info.value, TimeoutError)
    assert "Slow ran longer than 0.2 s" in info.value.message and "ingredient_timeout" in (info.value.hint or "")
    assert bsql.execute("SELECT count(*) AS n FROM w").df["n"].tolist() == [2]  # usable, nothing left over


def test_except_exception_in_user_code_cannot_swallow_the_limit():
    with pytest.raises(IngredientTimeoutError):
        _session().execute("SELECT {{Stubborn('q')}} AS a", ingredient_timeout=0.2)


def test_the_callers_signal_handler_is_restored():
    seen: list[int] = []

    def mine(signum: int, frame: Any) -> None:
        seen.append(signum)

    before = signal.signal(signal.SIGALRM, mine)
    try:
        with pytest.raises(IngredientTimeoutError):
            _session().execute("SELECT {{Stubborn('q')}} AS a", ingredient_timeout=0.2)
        assert signal.getsignal(signal.SIGALRM) is mine
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    finally:
        signal.signal(signal.SIGALRM, before)
    assert seen == []


def test_an_armed_timer_of_the_caller_is_left_alone_and_the_trace_says_so():
    fired: list[int] = []
    before = signal.signal(signal.SIGALRM, lambda s, f: fired.append(s))
    signal.setitimer(signal.ITIMER_REAL, 100)
    try:
        bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Quick], cache=False)
        sm = bsql.execute("SELECT {{Quick('q', w.x)}} AS a FROM w", ingredient_timeout=0.2)
        notes = [s.summary for s in sm.trace if s.kind == "warning"]
        assert any("not enforced (the caller's own real-time timer is armed)" in n for n in notes)
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0  # still theirs, still running
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert fired == []


class Quick(MapIngredient):
    needs_model = False

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [len(v) for v in values]


def test_off_the_main_thread_the_query_runs_and_the_trace_says_the_limit_is_not_armed():
    out: dict[str, Any] = {}

    def work() -> None:
        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE TABLE w (x TEXT)")
        conn.executemany("INSERT INTO w VALUES (?)", [("a",), ("bb",)])
        sm = BlendSQL(conn, ingredients=[Quick], cache=False).execute(
            "SELECT {{Quick('q', w.x)}} AS n FROM w ORDER BY n")
        out["rows"] = sm.df["n"].tolist()
        out["notes"] = [s.summary for s in sm.trace if s.kind == "warning"]

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert out["rows"] == [1, 2]
    assert sum("not enforced (the query runs off the main thread)" in n for n in out["notes"]) == 1


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_the_option_is_validated(bad):
    with pytest.raises(OptionError):
        _session().execute("SELECT 1", ingredient_timeout=bad)
