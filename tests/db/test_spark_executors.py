"""Ingredient calls on a Spark session's executors (``blendsql.db.spark_calls``).

The same rows as on the driver, answered on the executors: a deterministic map's
``run`` shipped as it is (``executors='on'``), a model's requests through its
client copy (``'on'``, and by default for a model-server client's big batches),
under the cache (a rerun is served without a job), with the executors' errors
raised as blendsql errors. The ``spark_session`` fixture (tests/conftest.py)
skips without pyspark or Java, and fails instead under ``BLENDSQL_REQUIRE_SPARK=1``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fake_openai import FakeServer

from blendsql import BlendSQL
from blendsql.db.spark_calls import MIN_BATCH
from blendsql.errors import BlendSQLError, IngredientError, OptionError
from blendsql.ingredients import MapIngredient
from blendsql.models import FunctionModel, OpenAI
from blendsql.models.pool import Pool

SINGERS = (Path(__file__).resolve().parents[1] / "data" / "spider" / "concert_singer"
           / "concert_singer.sqlite")
STARTS = ("SELECT Name, Age FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
          "AND Age > 20 ORDER BY Age")


class StartsWith(MapIngredient):
    """True where str(value) starts with the question (a warning for each empty value)."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        for v in values:
            if not str(v):
                kwargs["warnings"].append("an empty value")
        return [str(v).startswith(str(question)) for v in values]


class Exploding(MapIngredient):
    """Fails on any value containing 'Rose'."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        if any("Rose" in str(v) for v in values):
            raise RuntimeError("no roses here")
        return [True for _ in values]


def parity(prompt: str) -> str:
    """The fake servers' answer: yes when the number after the last 'Value: n' is even."""
    at = prompt.rfind("Value: ")
    digits = "".join(ch for ch in prompt[at + 7:].split("\n", 1)[0] if ch.isdigit())
    return "yes" if digits and int(digits) % 2 == 0 else "no"


def views(spark: Any) -> list[str]:
    return sorted(r.viewName for r in spark.sql("SHOW VIEWS").collect()
                  if r.viewName.startswith("__bsql"))


@pytest.fixture(scope="module")
def frames(spark_session: Any) -> dict[str, Any]:
    from spark_session import frames_from_sqlite

    return frames_from_sqlite(spark_session, SINGERS)


@pytest.fixture(scope="module")
def numbers(spark_session: Any) -> Iterator[dict[str, Any]]:
    """A table of 3 * MIN_BATCH rows over MIN_BATCH + 44 distinct numbers."""
    n = MIN_BATCH + 44
    frame = spark_session.createDataFrame(
        pd.DataFrame({"id": range(3 * MIN_BATCH), "v": [i % n for i in range(3 * MIN_BATCH)]}))
    yield {"nums": frame}


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    started = [FakeServer(delay=0.002, slots=8, answer=parity) for _ in range(2)]
    yield started
    for s in started:
        s.kill()


def test_a_deterministic_map_on_the_executors_gives_the_drivers_rows(
        frames: dict[str, Any], spark_session: Any) -> None:
    with BlendSQL(frames, ingredients=[StartsWith], cache=False) as bsql:
        driver = bsql.execute(STARTS, executors="off")
        shipped = bsql.execute(STARTS, executors="on")
        assert shipped.df.equals(driver.df) and len(driver.df) == 3
        jobs = [t for t in shipped.trace if t.kind == "executors"]
        assert len(jobs) == 1 and "value(s) for StartsWith ON 2 executor task(s)" in jobs[0].sql
        assert jobs[0].rows_out == shipped.meta.values_passed == driver.meta.values_passed
        assert not [t for t in driver.trace if t.kind == "executors"]
        plan = str(bsql.plan(STARTS, executors="on"))
        assert "distributed: run() on 2 executor task(s)" in plan
        assert "distributed" not in str(bsql.plan(STARTS))  # 'auto': run() stays on the driver
    assert views(spark_session) == []


def test_a_model_map_on_the_executors_answers_and_counts_as_on_the_driver(
        frames: dict[str, Any]) -> None:
    model = FunctionModel(lambda r: "yes" if "Joe" in r.prompt or "John" in r.prompt else "no")
    query = "SELECT Name, {{LLMMap('Is it J?', singer.Name)}} AS j FROM singer ORDER BY Name"
    with BlendSQL(frames, model=model, cache=False) as bsql:
        driver = bsql.execute(query, executors="off")
        shipped = bsql.execute(query, executors="on")
        auto = bsql.execute(query)  # a Python function is not sent unless asked: driver
    assert shipped.df.equals(driver.df) and (shipped.df["j"] == "yes").sum() == 2
    assert shipped.meta.model_calls == driver.meta.model_calls == 6
    assert [t.kind for t in shipped.trace].count("executors") == 1
    assert "executors" not in [t.kind for t in auto.trace]


def test_a_server_clients_big_batch_goes_to_the_executors_and_a_rerun_to_the_cache(
        numbers: dict[str, Any], servers: list[FakeServer], tmp_path: Path) -> None:
    pool = Pool([OpenAI("m", s.url, max_concurrency=8, timeout=10, server_kind="generic")
                 for s in servers])
    query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
    want = sum(1 for i in range(3 * MIN_BATCH) if (i % (MIN_BATCH + 44)) % 2 == 0)
    with BlendSQL(numbers, model=pool, cache=str(tmp_path / "c.sqlite")) as bsql:
        assert "distributed: model requests on 2 executor task(s)" in str(bsql.plan(query))
        first = bsql.execute(query)
        assert first.df["n"].tolist() == [want]
        assert [t.kind for t in first.trace].count("executors") == 1
        assert first.meta.model_calls == MIN_BATCH + 44
        answered = [p for s in servers for p in s.answered]
        assert len(answered) == len(set(answered)) == MIN_BATCH + 44  # each once, both used
        assert all(s.answered for s in servers)
        again = bsql.execute(query)
    assert again.df.equals(first.df) and again.meta.model_calls == 0
    assert "executors" not in [t.kind for t in again.trace]
    assert len([p for s in servers for p in s.answered]) == MIN_BATCH + 44


def test_a_small_batch_stays_on_the_driver_in_auto(
        frames: dict[str, Any], servers: list[FakeServer]) -> None:
    model = OpenAI("m", servers[0].url, timeout=10, server_kind="generic")
    with BlendSQL(frames, model=model, cache=False) as bsql:
        s = bsql.execute("SELECT Name FROM singer WHERE {{LLMMap('Even?', singer.Age)}} = TRUE")
    assert "executors" not in [t.kind for t in s.trace] and s.meta.model_calls == 6


def test_an_error_on_an_executor_is_a_blendsql_error_and_nothing_is_left(
        frames: dict[str, Any], spark_session: Any) -> None:
    with BlendSQL(frames, ingredients=[Exploding], cache=False) as bsql:
        with pytest.raises(IngredientError, match="no roses here"):
            bsql.execute("SELECT Name FROM singer WHERE {{Exploding('x', singer.Name)}} = TRUE",
                         executors="on")
        assert len(bsql.execute(STARTS.replace("StartsWith", "Exploding").replace(
            "singer.Name)", "singer.Country)"), executors="on").df) > 0
    assert views(spark_session) == []


def test_a_model_that_cannot_travel_is_refused_with_a_hint(frames: dict[str, Any]) -> None:
    lock = threading.Lock()  # a lock does not pickle

    def answer(_r: Any) -> str:
        with lock:
            return "yes"

    with BlendSQL(frames, model=FunctionModel(answer), cache=False) as bsql:
        with pytest.raises(BlendSQLError, match="cannot be sent to Spark's executors") as e:
            bsql.execute("SELECT {{LLMMap('q', singer.Name)}} FROM singer", executors="on")
        assert "executors='off'" in (e.value.hint or "")
        assert len(bsql.execute("SELECT {{LLMMap('q', singer.Name)}} AS a FROM singer",
                                executors="off").df) == 6


def test_the_executors_option_is_checked() -> None:
    with pytest.raises(OptionError, match="executors"):
        BlendSQL({"t": pd.DataFrame({"a": [1]})}, executors="sometimes")
    with pytest.raises(OptionError, match="executors"):
        BlendSQL({"t": pd.DataFrame({"a": [1]})}, executors=True)


def test_other_backends_ignore_the_option(tmp_path: Path) -> None:
    with BlendSQL(str(SINGERS), ingredients=[StartsWith]) as bsql:
        s = bsql.execute(STARTS, executors="on")
    assert len(s.df) == 3 and "executors" not in [t.kind for t in s.trace]



def test_a_batch_goes_out_in_growing_rounds_that_cover_it_once() -> None:
    from blendsql.db.spark_calls import FIRST_ROUND, MAX_ROUND, rounds

    for n in (0, 1, FIRST_ROUND, FIRST_ROUND + 1, 100_000, 10 * MAX_ROUND + 7):
        spans = rounds(n)
        assert [i for a, b in spans for i in range(a, b)] == list(range(n))
        sizes = [b - a for a, b in spans]
        assert all(s <= MAX_ROUND for s in sizes) and (not sizes or sizes[0] <= FIRST_ROUND)
    assert [b - a for a, b in rounds(100_000)] == [4096, 8192, 16384, 32768, 32768, 5792]


@pytest.mark.parametrize("where", ["driver", "executors"])
def test_a_server_killed_mid_query_loses_and_duplicates_no_value(
        numbers: dict[str, Any], where: str) -> None:
    servers = [FakeServer(delay=0.005, slots=4, answer=parity) for _ in range(3)]
    try:
        servers[1].kill_at = 60  # dies while serving its 60th request
        pool = Pool([OpenAI("m", s.url, max_concurrency=4, timeout=10, max_retries=1,
                            backoff=0.01, server_kind="generic") for s in servers],
                    probe_backoff=30.0)
        query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
        n = MIN_BATCH + 44
        want = sum(1 for i in range(3 * MIN_BATCH) if (i % n) % 2 == 0)
        with BlendSQL(numbers, model=pool, cache=False) as bsql:
            s = bsql.execute(query, executors="on" if where == "executors" else "off")
        assert s.df["n"].tolist() == [want] and s.meta.model_calls == n
        assert ("executors" in [t.kind for t in s.trace]) == (where == "executors")
        answered = [p for srv in servers for p in srv.answered]
        assert len(answered) == len(set(answered)) == n  # every value once, none twice
        lost = set(servers[1].received) - set(servers[1].answered)
        assert lost and lost <= set(servers[0].answered) | set(servers[2].answered)
    finally:
        for srv in servers:
            srv.kill()


# -- review fixes: wrappers, threads, concurrency, time limits, what travels by value --


class Threaded(MapIngredient):
    """Asks the model from a worker thread of its own (as a user's ingredient may)."""

    needs_model = True

    def run(self, question: Any, values: list, model: Any = None, **kwargs: Any) -> list:
        from concurrent.futures import ThreadPoolExecutor

        from blendsql.models.base import Request

        requests = [Request(prompt=f"{question}\nValue: {v}") for v in values]
        with ThreadPoolExecutor(1) as pool:
            answers = pool.submit(model.generate, requests).result()
        return [a.text == "yes" for a in answers]


class LocalBase:
    """A base class in this (test) module: an executor cannot import it."""

    def flag(self, v: Any) -> bool:
        return str(v).startswith("J")


def test_what_travels_by_value_is_the_users_code_not_the_standard_library() -> None:
    import functools
    import json
    import operator

    from blendsql.db.spark_calls import local_modules, ship

    class Holder:
        def __init__(self) -> None:
            self.f = functools.partial(int, base=2)
            self.g = json.dumps
            self.h = operator.itemgetter(0)

    # a notebook's class (``__main__``: cloudpickle sends it) whose base class is in a
    # module beside the driver: that module travels by value too
    child = type("Child", (LocalBase,), {"__module__": "__main__"})

    assert local_modules([Holder()]) == [sys.modules[__name__]]  # Holder's own module only
    assert local_modules([child()]) == [sys.modules[__name__]]
    assert "functools" not in {m.__name__ for m in local_modules([Holder()])}
    ship(Holder(), "a holder", [Holder()])  # pickles (functools was sent by value before)


def test_a_model_in_the_users_own_cache_is_answered_on_the_executors_under_it(
        numbers: dict[str, Any], servers: list[FakeServer], tmp_path: Path) -> None:
    from blendsql.models.cache import with_cache

    query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
    for i, cache in enumerate((False, True)):
        model = with_cache(OpenAI("m", servers[0].url, max_concurrency=8, timeout=10,
                                  server_kind="generic"), tmp_path / f"user{i}.sqlite")
        with BlendSQL(numbers, model=model, cache=cache) as bsql:
            first = bsql.execute(query)
            again = bsql.execute(query)
        assert [t.kind for t in first.trace].count("executors") == 1
        assert first.meta.model_calls == len(model) == MIN_BATCH + 44  # kept in the user's file
        assert again.meta.model_calls == 0 and again.df.equals(first.df)


def test_a_batch_from_an_ingredients_own_thread_is_answered_on_the_driver(
        numbers: dict[str, Any], servers: list[FakeServer]) -> None:
    model = OpenAI("m", servers[0].url, max_concurrency=8, timeout=10, server_kind="generic")
    query = "SELECT COUNT(*) AS n FROM nums WHERE {{Threaded('Even?', nums.v)}} = TRUE"
    want = sum(1 for i in range(3 * MIN_BATCH) if (i % (MIN_BATCH + 44)) % 2 == 0)
    with BlendSQL(numbers, model=model, ingredients=[Threaded], cache=False) as bsql:
        bsql.db.lock_timeout = 5.0  # a job from that thread waited for it, then failed
        s = bsql.execute(query, executors="on")
    assert s.df["n"].tolist() == [want] and "executors" not in [t.kind for t in s.trace]


def test_the_tasks_keep_no_more_requests_in_flight_than_the_endpoints_allow(
        numbers: dict[str, Any]) -> None:
    servers = [FakeServer(delay=0.002, slots=16, answer=parity) for _ in range(2)]
    try:
        pool = Pool([OpenAI("m", s.url, max_concurrency=1, timeout=10, server_kind="generic")
                     for s in servers])
        query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
        with BlendSQL(numbers, model=pool, cache=False) as bsql:
            s = bsql.execute(query)
        jobs = [t for t in s.trace if t.kind == "executors"]
        assert len(jobs) == 1 and "ON 1 executor task(s)" in jobs[0].sql
        assert all(srv.max_in_flight == 1 for srv in servers)
    finally:
        for srv in servers:
            srv.kill()


def test_a_job_past_its_limit_is_cancelled_and_leaves_the_session_as_it_was(
        numbers: dict[str, Any], spark_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from blendsql.db.spark_calls import ExecutorModel
    from blendsql.errors import QueryTimeoutError

    slow = FakeServer(delay=3.0, slots=64, answer=parity)
    try:
        monkeypatch.setattr(ExecutorModel, "_job_limit", lambda self, r, p: 2.0)
        model = OpenAI("m", slow.url, max_concurrency=8, timeout=30, server_kind="generic")
        sc = spark_session.sparkContext
        sc.setJobGroup("mine", "the user's group")
        query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
        with BlendSQL(numbers, model=model, cache=False) as bsql:
            with pytest.raises(QueryTimeoutError, match="Spark job answering calls") as e:
                bsql.execute(query)
            assert "executors='off'" in (e.value.hint or "")
            assert len(bsql.execute("SELECT COUNT(*) AS n FROM nums").df) == 1
        assert sc.getLocalProperty("spark.jobGroup.id") == "mine"
        assert views(spark_session) == []
    finally:
        spark_session.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark_session.sparkContext.setLocalProperty("spark.job.description", None)
        spark_session.sparkContext.setLocalProperty("spark.job.interruptOnCancel", None)
        slow.kill()


def test_a_plan_does_not_fail_on_a_model_it_cannot_load(frames: dict[str, Any]) -> None:
    with BlendSQL(frames, model=str(Path("/nonexistent/model.gguf"))) as bsql:
        plan = str(bsql.plan("SELECT {{LLMMap('q', singer.Name)}} AS a FROM singer"))
    assert "LLMMap" in plan and "distributed" not in plan


def test_a_pools_job_limit_covers_its_endpoints_timeouts_retries_and_failover() -> None:
    from blendsql.db.spark_calls import ExecutorModel
    from blendsql.models.base import Request

    pool = Pool([OpenAI("m", f"http://127.0.0.1:{p}/v1", timeout=300, max_retries=2,
                        max_backoff=10, server_kind="generic") for p in (1, 2)])
    limit = ExecutorModel(pool, None)._job_limit([Request("x")] * 10, 2)  # type: ignore[arg-type]
    assert limit >= 3 * (300 * 3 + 2 * 10)  # 3 attempts (2 endpoints + 1), each with retries
    timed = ExecutorModel(pool, None)._job_limit(  # type: ignore[arg-type]
        [Request("x", timeout=5.0)] * 10, 2)
    assert timed < limit


class Exiting(MapIngredient):
    """Ends its Python worker (a BaseException: the task itself fails, not the batch)."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        raise SystemExit("bye")


def test_a_failed_executor_task_says_where_to_look(
        frames: dict[str, Any], spark_session: Any) -> None:
    with BlendSQL(frames, ingredients=[Exiting], cache=False) as bsql:
        with pytest.raises(BlendSQLError) as e:
            bsql.execute("SELECT Name FROM singer WHERE {{Exiting('x', singer.Name)}} = TRUE",
                         executors="on")
        assert "executors' logs" in str(e.value) and "check the SQL" not in str(e.value)
        assert "SystemExit: bye" in str(e.value)  # the error itself, not only where it began
        assert len(bsql.execute("SELECT Name FROM singer").df) == 6  # the session still runs
    assert views(spark_session) == []
