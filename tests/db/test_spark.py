"""The Spark SQL backend: the SQLite answer, read-only, no leftovers, time limits.

One local Spark session (``local[2]``) serves every test (the ``spark_session``
fixture, tests/conftest.py); it skips with the reason when pyspark or Java is
missing, and fails instead under ``BLENDSQL_REQUIRE_SPARK=1`` (CI). The user's
tables must hold the same rows after any query (failed ones too), and no
engine view (``__bsql_...``) may stay in the session.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.db.backend import backend_kind
from blendsql.errors import (
    BlendSQLError,
    ExecutionError,
    QueryTimeoutError,
    UnsafeQueryError,
)
from blendsql.ingredients import MapIngredient, QAIngredient
from blendsql.models import FunctionModel

SPIDER = Path(__file__).resolve().parents[1] / "data" / "spider"
SINGERS = SPIDER / "concert_singer" / "concert_singer.sqlite"
QUERY = ("SELECT Name, Age FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
         "AND Age > 20 ORDER BY Age")
#: a statement that runs far past a 1 s limit (10^13 pairs), in Spark's SQL as BlendSQL reads it
ENDLESS = ("(SELECT count(*) FROM range(100000000) AS a CROSS JOIN range(100000) AS b "
           "WHERE (a.id + b.id) % 7 = 3)")
REFUSED = [
    ("DELETE FROM singer", "DELETE"),
    ("INSERT INTO singer SELECT * FROM singer", "INSERT"),
    ("CREATE TABLE x AS SELECT 1 AS a", "CREATE"),
    ("CREATE TEMP VIEW x AS SELECT 1 AS a", "CREATE"),
    ("DROP TABLE singer", "DROP"),
    ("BEGIN", "BEGIN"),
]


class StartsWith(MapIngredient):
    """True where str(value) starts with the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(v).startswith(str(question)) for v in values]


class Joined(MapIngredient):
    """Several value columns (a tuple per row) joined by the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(question).join(map(str, v)) if isinstance(v, tuple) else str(v)
                for v in values]


class Oldest(QAIngredient):
    """The largest option (a QA answer, bound as a parameter)."""

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        return max(options, key=int) if options else None


@pytest.fixture(scope="module")
def frames(spark_session: Any) -> dict[str, Any]:
    """concert_singer's tables as Spark DataFrames."""
    from spark_session import frames_from_sqlite

    return frames_from_sqlite(spark_session, SINGERS)


@pytest.fixture
def bsql(frames: dict[str, Any]) -> Iterator[BlendSQL]:
    """A BlendSQL over the DataFrames (temp views for this test, dropped at close)."""
    session = BlendSQL(frames, ingredients=[StartsWith, Joined, Oldest], cache=False)
    try:
        yield session
    finally:
        session.close()


def _want(query: str = QUERY) -> list[tuple[Any, ...]]:
    sqlite = BlendSQL(str(SINGERS), ingredients=[StartsWith, Joined, Oldest])
    return _rows(sqlite.execute(query).df)


def _rows(df: pd.DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.astype(object).itertuples(index=False, name=None)]


def _views(spark: Any) -> list[str]:
    """Temp views of the session (the engine's would start with ``__bsql``)."""
    return sorted(t.name for t in spark.catalog.listTables() if t.isTemporary)


def _engine_views(spark: Any) -> list[str]:
    return [v for v in _views(spark) if v.startswith("__bsql")]


def _contents(spark: Any, tables: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    return {t: sorted(map(tuple, spark.table(t).collect()), key=repr) for t in tables}


def _spy_on_temp_tables(session: BlendSQL, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the engine's temp views, recorded once created."""
    created: list[str] = []
    create: Callable[..., float] = session.db.create_temp_table

    def spy(name: str, *args: Any, **kwargs: Any) -> float:
        seconds = create(name, *args, **kwargs)
        created.append(name)
        return seconds

    monkeypatch.setattr(session.db, "create_temp_table", spy)
    return created


# ----------------------------------------------------------------- sources


def test_sources_pick_the_spark_backend(spark_session: Any, frames: dict[str, Any]) -> None:
    assert backend_kind(spark_session) == "spark"
    assert backend_kind(frames) == "spark"
    assert backend_kind({"t": pd.DataFrame({"a": [1]})}) == "sqlite"  # pandas stays SQLite's


def test_blendsql_imports_without_pyspark() -> None:
    """pyspark is imported only when a Spark source is opened."""
    code = ("import sys; import blendsql; from blendsql.db import backend; "
            "backend.backend_kind({'t': 1}); assert 'pyspark' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_dataframes_same_answer_as_sqlite_and_views_dropped_at_close(
        spark_session: Any, frames: dict[str, Any]) -> None:
    """A dict of DataFrames: the SQLite answer; its views exist while the BlendSQL lives,
    only they are dropped at close, and no engine view is ever left."""
    before = _views(spark_session)
    session = BlendSQL(frames, ingredients=[StartsWith])
    assert type(session.db).__name__ == "SparkBackend"
    assert set(_views(spark_session)) - set(before) == set(frames)
    assert _rows(session.execute(QUERY).df) == _want()
    assert _engine_views(spark_session) == []
    session.close()
    assert _views(spark_session) == before


def test_a_taken_name_is_refused_and_nothing_registered(
        spark_session: Any, frames: dict[str, Any]) -> None:
    """Registering never replaces a view of the user's (nor a second BlendSQL's)."""
    before = _views(spark_session)
    first = BlendSQL(frames)
    try:
        with pytest.raises(ExecutionError, match="already has a table or view named"):
            BlendSQL({"aaa_first": frames["singer"], **frames})
        assert set(_views(spark_session)) == set(before) | set(frames)
    finally:
        first.close()
    assert _views(spark_session) == before


def test_session_source_reads_catalog_tables_and_temp_views(
        spark_session: Any, frames: dict[str, Any]) -> None:
    """``BlendSQL(spark)``: the session's catalog tables and temp views, the SQLite answer,
    the tables unchanged, and the user's views left as they were."""
    frames["singer"].write.saveAsTable("singer_saved")
    frames["concert"].createTempView("concert_view")
    try:
        session = BlendSQL(spark_session, ingredients=[StartsWith])
        assert {"singer_saved", "concert_view"} <= set(session.db.tables())
        before = _contents(spark_session, ["singer_saved", "concert_view"])
        got = session.execute(QUERY.replace("singer", "singer_saved")).df
        assert _rows(got) == _want()
        assert session.execute("SELECT COUNT(*) AS n FROM concert_view").df.iloc[0, 0] == 6
        session.close()
        assert _contents(spark_session, ["singer_saved", "concert_view"]) == before
        assert "concert_view" in _views(spark_session)  # the user's view is not ours to drop
        assert _engine_views(spark_session) == []
    finally:
        spark_session.catalog.dropTempView("concert_view")
        spark_session.sql("DROP TABLE IF EXISTS singer_saved")


def test_spark_connect_sessions_are_refused_clearly(spark_session: Any) -> None:
    from blendsql.db.spark import SparkBackend

    class SparkSession:  # a Connect session has no JVM session behind it
        pass

    with pytest.raises(ExecutionError, match="Spark Connect"):
        SparkBackend(SparkSession())


# ----------------------------------------------------------------- answers


def test_params_qa_answers_and_null_answers(bsql: BlendSQL) -> None:
    """``?`` / ``:name`` parameters, a QA answer bound as a parameter, and a map whose
    answers are all NULL (Spark's NULL type, comparable with text) give SQLite's rows."""
    q = "SELECT Name FROM singer WHERE Age > ? AND {{StartsWith('J', singer.Name)}} = TRUE"
    assert sorted(_rows(bsql.execute(q, [30]).df)) == sorted(
        _rows(BlendSQL(str(SINGERS), ingredients=[StartsWith]).execute(q, [30]).df))
    named = "SELECT Name FROM singer WHERE Country = :c ORDER BY Name"
    assert _rows(bsql.execute(named, {"c": "France"}).df) == _rows(
        BlendSQL(str(SINGERS)).execute(named, {"c": "France"}).df)
    qa = "SELECT Name FROM singer WHERE Age = {{Oldest('oldest?', options='singer::Age')}}"
    assert _rows(bsql.execute(qa).df) == _want(qa)
    nulls = BlendSQL(bsql.db, model=FunctionModel(lambda req: None), cache=False)
    none = nulls.execute("SELECT Name FROM singer WHERE {{LLMMap('is it?', singer.Name)}} "
                         "= 'yes'")
    assert none.df.empty


def test_sqlite_meanings_kept(bsql: BlendSQL) -> None:
    """What Spark reads differently from SQLite, translated: LIKE ignores ASCII case, a
    SELECT alias in WHERE, a map's lookup in ORDER BY and GROUP BY (a correlated
    subquery there is not Spark's), several-column values (JSON text)."""
    for q in ["SELECT Name FROM singer WHERE Name LIKE 'j%' ORDER BY Name",
              "SELECT Name, Age > 40 AS old FROM singer WHERE old = TRUE ORDER BY Name",
              "SELECT Name FROM singer ORDER BY {{StartsWith('J', singer.Name)}} DESC, Name",
              "SELECT {{StartsWith('J', singer.Name)}} AS j, COUNT(*) AS n FROM singer "
              "GROUP BY j ORDER BY j",
              "SELECT Name, {{Joined('|', singer.Name, singer.Age)}} AS j FROM singer "
              "WHERE Age > 40 ORDER BY Name"]:
        assert _rows(bsql.execute(q).df) == _want(q), q


def test_catalog_reads_for_the_plain_language_layer(bsql: BlendSQL) -> None:
    db = bsql.db
    assert db.tables() == ["concert", "singer", "singer_in_concert", "stadium"]
    assert db.fts_tables() == []
    cols = dict(db.table_columns("singer"))
    assert cols["Name"] == "string" and cols["Age"] == "bigint"
    assert db.columns("singer")[:2] == ["Singer_ID", "Name"]
    schema = {t.name: t for t in db.schema()}
    assert set(schema) == set(db.tables())
    assert 'CREATE TABLE "singer" ("Singer_ID" bigint, "Name" string' in schema["singer"].ddl
    assert db.row_count("singer") == 6
    cols_, rows = db.sample_rows("singer", 2)
    assert cols_[:2] == ["Singer_ID", "Name"] and len(rows) == 2
    assert sorted(db.distinct_values("singer", "Country", 10)) == [
        "France", "Netherlands", "United States"]
    assert db.distinct_values("singer", "Country", 10, equal_to="FRANCE", nocase=True) == [
        "France"]
    assert db.distinct_values("singer", "Country", 10, text_lengths=(6, 6)) == ["France"]
    assert db.distinct_values("singer", "Age", 10, text_lengths=(1, 3)) == []  # not text
    db.dry_run("SELECT Name FROM singer WHERE Age > ?")
    with pytest.raises(ExecutionError, match="nope"):
        db.dry_run("SELECT nope FROM singer")
    with pytest.raises(ExecutionError, match="check the table and column names"):
        bsql.execute("SELECT nope FROM singer")
    assert db.run_native("SHOW TABLES")[0] == ["namespace", "tableName", "isTemporary"]


# ----------------------------------------------------------------- read-only, leftovers


@pytest.mark.parametrize(("sql", "word"), REFUSED, ids=[w for _, w in REFUSED])
def test_writes_ddl_and_transactions_are_refused(bsql: BlendSQL, spark_session: Any,
                                                 sql: str, word: str) -> None:
    before = _contents(spark_session, ["singer"])
    with pytest.raises(UnsafeQueryError, match=word):
        bsql.execute(sql)
    assert _contents(spark_session, ["singer"]) == before
    assert "x" not in _views(spark_session)


def test_native_commands_and_java_calls_are_refused(bsql: BlendSQL) -> None:
    """Spark's own statements through run_native: SET / USE / CACHE are commands;
    ``reflect()`` calls any Java method."""
    for sql, word in [("SET spark.sql.ansi.enabled = false", "SET"), ("USE other", "USE"),
                      ("CACHE TABLE singer", "CACHE"), ("EXPLAIN INSERT INTO singer "
                                                        "SELECT * FROM singer", "INSERT")]:
        with pytest.raises(UnsafeQueryError, match=word):
            bsql.db.run_native(sql)
    with pytest.raises(UnsafeQueryError, match="reflect"):
        bsql.execute("SELECT reflect('java.lang.System', 'getProperty', 'user.dir') AS p")


def test_match_is_refused_saying_spark_has_no_full_text_search(bsql: BlendSQL) -> None:
    with pytest.raises(ExecutionError, match="Spark SQL has no full-text search"):
        bsql.execute("SELECT Name FROM singer WHERE singer MATCH 'John'")


def test_no_view_left_and_tables_unchanged_after_success_and_failure(
        bsql: BlendSQL, spark_session: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The map's temp view exists when the final statement fails; afterwards no engine
    view is left and the user's tables hold the same rows."""
    tables = ["singer", "concert", "singer_in_concert", "stadium"]
    before = _contents(spark_session, tables)
    created = _spy_on_temp_tables(bsql, monkeypatch)
    # the (value, output) table, not bound passing values
    assert _rows(bsql.execute(QUERY, rules_off={"static_filter"}).df) == _want()
    assert created and _engine_views(spark_session) == []
    created.clear()
    failing = ("SELECT Name, raise_error('boom') AS e FROM singer "
               "WHERE {{StartsWith('J', singer.Name)}} = TRUE")
    with pytest.raises(BlendSQLError, match="boom"):
        bsql.execute(failing, rules_off={"static_filter"})
    assert created and all(n.startswith("__bsql") for n in created), created
    assert _engine_views(spark_session) == []
    assert _contents(spark_session, tables) == before


# ----------------------------------------------------------------- time limits


@pytest.mark.parametrize("answer", ["true", None], ids=["answers", "null-answers"])
def test_a_time_out_cancels_the_jobs_and_leaves_no_view(
        frames: dict[str, Any], spark_session: Any, answer: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The final statement (a huge cross join) hits ``timeout=1``: its job group is
    cancelled (it ends long before it would finish), the query raises
    ``QueryTimeoutError``, the map's view is dropped, the thread's job group is as
    before, and the session answers the next query."""
    sc = spark_session.sparkContext
    sc.setJobGroup("the-users-group", "kept", interruptOnCancel=False)
    session = BlendSQL(frames, model=FunctionModel(lambda req: answer), cache=False)
    try:
        created = _spy_on_temp_tables(session, monkeypatch)
        query = ("SELECT Name FROM singer WHERE {{LLMMap('is it?', singer.Name)}} = TRUE "
                 "UNION ALL SELECT CAST(" + ENDLESS + " AS STRING)")
        t0 = time.perf_counter()
        with pytest.raises(QueryTimeoutError):
            session.execute(query, timeout=1, rules_off={"static_filter"})
        assert time.perf_counter() - t0 < 60
        assert created and _engine_views(spark_session) == []
        assert sc.getLocalProperty("spark.jobGroup.id") == "the-users-group"
        assert sc.getLocalProperty("spark.job.interruptOnCancel") == "false"
        t0 = time.perf_counter()
        assert session.execute("SELECT COUNT(*) AS n FROM singer").df.iloc[0, 0] == 6
        assert time.perf_counter() - t0 < 30  # the cancelled tasks no longer hold the cores
    finally:
        session.close()
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)


def test_drop_runs_after_a_time_out_in_the_same_use(bsql: BlendSQL,
                                                    spark_session: Any) -> None:
    """Inside one use, after a statement hit the time limit: a user statement is refused,
    the engine's DROP of its own view is not."""
    db = bsql.db
    names = [db.temp_name("m"), db.temp_name("m")]
    with db.session(timeout=1):
        db.create_temp_table(names[0], ["k", "v"], [(1, None), (2, None)])
        db.create_temp_table(names[1], ["k", "v"], [(1, "a"), (2, 2.5)], primary_key="k")
        assert set(names) <= set(_views(spark_session))
        with pytest.raises(QueryTimeoutError):
            db.execute("SELECT " + ENDLESS + " AS n")
        with pytest.raises(QueryTimeoutError):
            db.execute("SELECT 1")
        for name in names:
            db.drop_temp_table(name)
        assert _engine_views(spark_session) == []
    assert db.execute("SELECT 1 AS one")[1] == [(1,)]
