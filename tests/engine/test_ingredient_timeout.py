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
            "SELECT {{Quick('q', w.x)}} AS n FROM w ORDER BY n", ingredient_timeout=5)
        out["rows"] = sm.df["n"].tolist()
        out["notes"] = [s.summary for s in sm.trace if s.kind == "warning"]

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert out["rows"] == [1, 2]
    assert sum("not enforced (the query runs off the main thread)" in n for n in out["notes"]) == 1


def test_without_a_limit_set_off_the_main_thread_nothing_is_noted():
    out: dict[str, Any] = {}

    def work() -> None:
        sm = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Quick], cache=False).execute(
            "SELECT {{Quick('q', w.x)}} AS n FROM w")
        out["notes"] = [s.summary for s in sm.trace if s.kind == "warning"]

    t = threading.Thread(target=work)
    t.start()
    t.join(60)
    assert out["notes"] == []


class Nested(QAIngredient):
    """Runs another session's query whose ingredient never returns, and swallows what it can."""

    needs_model = False

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        inner = BlendSQL({"v": pd.DataFrame({"y": ["z"]})}, ingredients=[Stubborn], cache=False)
        try:
            inner.execute("SELECT {{Stubborn('q')}} AS a")
        except Exception:  # noqa: BLE001, S110 - careless user code
            pass
        return "outer done"


def test_a_nested_query_runs_under_the_enclosing_limit_which_reports_itself():
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Nested], cache=False)
    with pytest.raises(IngredientTimeoutError) as info:
        bsql.execute("SELECT {{Nested('q')}} AS a", ingredient_timeout=0.3)
    assert "Nested ran longer than 0.3 s" in info.value.message
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert signal.getsignal(signal.SIGALRM) is signal.default_int_handler or \
        signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN)


def test_a_huge_limit_is_no_limit_and_leaves_the_handler_alone():
    before = signal.getsignal(signal.SIGALRM)
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a", "bb"]})}, ingredients=[Quick], cache=False)
    sm = bsql.execute("SELECT {{Quick('q', w.x)}} AS n FROM w ORDER BY n", ingredient_timeout=1e12)
    assert sm.df["n"].tolist() == [1, 2]
    assert signal.getsignal(signal.SIGALRM) is before


class SlowModelUser(MapIngredient):
    """Needs a model: its requests have model_timeout; its run is not cut short."""

    needs_model = True

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        time.sleep(0.5)
        return [True for _ in values]


def test_an_ingredient_that_needs_a_model_is_not_cut_short():
    from blendsql.models.base import FunctionModel

    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[SlowModelUser],
                    model=FunctionModel(lambda req: "true"), cache=False)
    sm = bsql.execute("SELECT x FROM w WHERE {{SlowModelUser('q', w.x)}} = TRUE", ingredient_timeout=0.1)
    assert sm.df["x"].tolist() == ["a"]


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "5", True])
def test_the_option_is_validated(bad):
    with pytest.raises(OptionError):
        _session().execute("SELECT 1", ingredient_timeout=bad)


class Busy(QAIngredient):
    """Spends its time inside blendsql's own database code (the ``db`` it is given)."""

    needs_model = False

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        db = kwargs["db"]
        end = time.monotonic() + 5
        while time.monotonic() < end:
            db.execute("SELECT count(*) FROM w")
        return "done"


def test_a_stop_while_in_our_database_code_leaves_the_session_usable_from_another_thread():
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a", "b"]})}, ingredients=[Busy], cache=False)
    with pytest.raises(IngredientTimeoutError):
        bsql.execute("SELECT {{Busy('q')}} AS a", ingredient_timeout=0.2)
    out: dict[str, Any] = {}

    def other() -> None:
        out["n"] = bsql.execute("SELECT count(*) AS n FROM w").df["n"].tolist()

    t = threading.Thread(target=other)
    t.start()
    t.join(30)
    assert out["n"] == [2]


class SwallowsOnce(QAIngredient):
    """Loses the first stop, as a ``__del__`` or a finalizer the signal lands in would."""

    needs_model = False

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        try:
            time.sleep(5)
        except BaseException:  # noqa: BLE001, S110 - the point of the test
            pass
        time.sleep(5)  # bounded: without a second stop the test fails, it does not hang
        return "done"


def test_a_stop_that_was_swallowed_comes_again():
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[SwallowsOnce], cache=False)
    t0 = time.monotonic()
    with pytest.raises(IngredientTimeoutError):
        bsql.execute("SELECT {{SwallowsOnce('q')}} AS a", ingredient_timeout=0.2)
    assert time.monotonic() - t0 < 3
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    assert bsql.execute("SELECT count(*) AS n FROM w").df["n"].tolist() == [1]


def test_a_helper_called_by_our_code_counts_as_our_code():
    """The signal can land in a standard-library helper or a garbage-collector
    callback that blendsql's code called: the frames out to where our code
    handed over to the ingredient are looked at, not only the innermost one."""
    import sys
    from pathlib import Path

    from blendsql.execute import limits

    library_file = str(Path(limits.__file__).parent / "evaluate.py")
    ns: dict[str, Any] = {}
    exec(compile("def call(cb):\n    return cb()\n", library_file, "exec"), ns)  # noqa: S102
    seen: dict[str, Any] = {}

    def user_code() -> None:
        seen["helper"] = ns["call"](lambda: sys._getframe(0))  # user -> ours -> helper
        seen["user"] = (lambda: sys._getframe(0))()  # user -> user helper
        seen["entry"] = sys._getframe(0)

    anchor = sys._getframe(0)
    limits.call_user(user_code)
    assert not limits.in_library(seen["helper"])
    assert limits.inside_library(seen["helper"], anchor)
    assert not limits.inside_library(seen["user"], anchor)
    assert not limits.inside_library(seen["entry"], anchor)
    assert limits.inside_library(anchor, anchor)  # no hand-over in between: our wrappers


def _logged(fn: Any) -> Any:
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


class Decorated(MapIngredient):
    """A run wrapped by a decorator: the limit does not depend on the function's name."""

    needs_model = False

    @_logged
    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        end = time.monotonic() + 5
        while time.monotonic() < end:  # pure Python: the handler runs between bytecodes
            pass
        return [True for _ in values]


def test_a_decorated_run_is_stopped_too():
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Decorated], cache=False)
    t0 = time.monotonic()
    with pytest.raises(IngredientTimeoutError):
        bsql.execute("SELECT x FROM w WHERE {{Decorated('q', w.x)}} = TRUE", ingredient_timeout=0.2)
    assert time.monotonic() - t0 < 3


class CleansUp(QAIngredient):
    """Its ``finally`` takes a while: the stop must let it finish."""

    needs_model = False
    cleaned: list[bool] = []

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        try:
            time.sleep(5)
        finally:
            end = time.monotonic() + 0.4
            while time.monotonic() < end:  # pure Python: a signal could land here
                pass
            CleansUp.cleaned.append(True)
        return "done"


def test_the_ingredients_own_cleanup_runs_to_its_end():
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[CleansUp], cache=False)
    with pytest.raises(IngredientTimeoutError):
        bsql.execute("SELECT {{CleansUp('q')}} AS a", ingredient_timeout=0.2)
    assert CleansUp.cleaned == [True]
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
