"""A query stopped at its time limit leaves no engine temp object on the user's connection.

The engine stores a map's answers in a temp table (``__bsql_<token>_m0``) before the
final statement runs. When that statement hits the ``timeout``, every further
statement of the query is refused (``QueryTimeoutError``), but the cleanup's DROP must
still run: it used to go through that guard on DuckDB and PostgreSQL, was refused, the
error swallowed, and the table stayed on the user's connection. The cleanup is itself
bounded in time (``cleanup_timeout``), whatever the session's limit.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import QueryTimeoutError
from blendsql.models import FunctionModel

duckdb = pytest.importorskip("duckdb")

ROWS = [(1, "a"), (2, "b"), (3, "c")]
#: a scalar subquery that runs far past the time limit, in each backend's terms
ENDLESS = {
    "duckdb": "(SELECT count(*) FROM range(100000000000) AS r, range(1000) AS s "
              "WHERE r.range * s.range % 7 = 3)",
    "postgres": "(SELECT count(*) FROM pg_sleep(600))",
    "sqlite": "(WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) "
              "SELECT count(*) FROM c)",
}
#: the engine's objects left on the connection (temp tables and views), by name
LEFT = {
    "duckdb": "SELECT table_name FROM duckdb_tables() WHERE starts_with(table_name, '__bsql') "
              "UNION ALL SELECT view_name FROM duckdb_views() "
              "WHERE starts_with(view_name, '__bsql')",
    "postgres": "SELECT relname FROM pg_class WHERE starts_with(relname, '__bsql')",
    "sqlite": "SELECT name FROM sqlite_temp_master WHERE substr(name, 1, 6) = '__bsql'",
}


@pytest.fixture(scope="module")
def pg_url(postgres_server: Any) -> str:
    return str(postgres_server.create_db("timeout_cleanup_tests"))


@pytest.fixture
def user_conn(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """(backend, the user's own connection holding table ``w``), closed afterwards."""
    kind = request.param
    if kind == "duckdb":
        con: Any = duckdb.connect(":memory:")
        con.execute("CREATE TABLE w (x INTEGER, s VARCHAR)")
        con.executemany("INSERT INTO w VALUES (?, ?)", ROWS)
    elif kind == "postgres":
        import psycopg

        url = request.getfixturevalue("pg_url")
        with psycopg.connect(url, autocommit=True) as setup:
            setup.execute("DROP TABLE IF EXISTS w")
            setup.execute("CREATE TABLE w (x INTEGER, s TEXT)")
            with setup.cursor() as cur:
                cur.executemany("INSERT INTO w VALUES (%s, %s)", ROWS)
        con = psycopg.connect(url, autocommit=True)
    else:
        # a handed-in SQLite connection: no SQL functions registered on it, so the
        # engine's lookups are temp tables there too
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE w (x INTEGER, s TEXT)")
        con.executemany("INSERT INTO w VALUES (?, ?)", ROWS)
        con.commit()
    try:
        yield kind, con
    finally:
        con.close()


def _left(kind: str, con: Any) -> list[str]:
    return [str(r[0]) for r in con.execute(LEFT[kind]).fetchall()]


def _spy_on_temp_tables(bsql: BlendSQL, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the temp tables the engine creates (recorded once created)."""
    created: list[str] = []
    create: Callable[..., float] = bsql.db.create_temp_table

    def spy(name: str, *args: Any, **kwargs: Any) -> float:
        seconds = create(name, *args, **kwargs)
        created.append(name)
        return seconds

    monkeypatch.setattr(bsql.db, "create_temp_table", spy)
    return created


# "true": a table of answers; None (no answer): a column of NULLs only, which DuckDB
# keeps as a view over a table (both must go)
@pytest.mark.parametrize("answer", ["true", None], ids=["answers", "null-answers"])
@pytest.mark.parametrize("user_conn", ["duckdb", "postgres", "sqlite"], indirect=True)
def test_a_timed_out_query_leaves_no_temp_table_on_the_users_connection(
        user_conn: tuple[str, Any], answer: str | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The map's temp table exists when the final statement hits the time limit; after
    the QueryTimeoutError no ``__bsql`` object is on the user's connection, and the
    connection (and the session) still answer."""
    kind, con = user_conn
    bsql = BlendSQL(con, model=FunctionModel(lambda req: answer), cache=False, timeout=0.5)
    created = _spy_on_temp_tables(bsql, monkeypatch)
    # the endless branch runs in the final statement whatever rows the map keeps
    query = ("SELECT x FROM w WHERE {{LLMMap('is it?', w.s)}} = TRUE "
             "UNION ALL SELECT " + ENDLESS[kind])
    with pytest.raises(QueryTimeoutError):
        bsql.execute(query, rules_off={"static_filter"})  # the (value, output) table, not bound passing values
    assert created and all(n.startswith("__bsql") for n in created), created
    assert _left(kind, con) == []
    assert con.execute("SELECT count(*) FROM w").fetchall() == [(3,)]
    assert bsql.execute("SELECT sum(x) AS t FROM w").df.iloc[0, 0] == 6
    if kind == "postgres":
        import psycopg

        assert con.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert con.autocommit is True
    bsql.close()


@pytest.mark.parametrize("user_conn", ["duckdb", "postgres", "sqlite"], indirect=True)
def test_drop_temp_table_runs_after_a_time_out_in_the_same_use(
        user_conn: tuple[str, Any]) -> None:
    """Inside one use, after a statement hit the time limit: a user statement is refused,
    the engine's DROP of its own temp table is not."""
    kind, con = user_conn
    bsql = BlendSQL(con, cache=False)
    db = bsql.db
    names = [db.temp_name("m"), db.temp_name("m")]
    with db.session(timeout=0.5):
        # a column of NULLs only (DuckDB: a view over a table), and one with an index
        db.create_temp_table(names[0], ["k", "v"], [(1, None), (2, None)])
        db.create_temp_table(names[1], ["k", "v"], [(1, "a")], primary_key="k")
        assert set(names) <= set(_left(kind, con))
        with pytest.raises(QueryTimeoutError):
            db.execute("SELECT " + ENDLESS[kind] + " AS n")
        with pytest.raises(QueryTimeoutError):
            db.execute("SELECT 1")
        for name in names:
            db.drop_temp_table(name)
        assert _left(kind, con) == []
    assert db.execute("SELECT 1")[1] == [(1,)]
    bsql.close()


@pytest.mark.parametrize("user_conn", ["duckdb", "postgres", "sqlite"], indirect=True)
def test_a_temp_table_whose_last_step_fails_is_not_left_half_made(
        user_conn: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The statement after the CREATE (an index; DuckDB: the view over a column of NULLs)
    hits the time limit: ``create_temp_table`` raises and leaves nothing (the engine
    drops only the tables it created successfully)."""
    kind, con = user_conn
    bsql = BlendSQL(con, cache=False)
    db = bsql.db
    run = db._run

    def stopped_after_create(sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql.startswith(("CREATE INDEX", "CREATE TEMP VIEW")):
            raise QueryTimeoutError("a SQL statement ran longer than the time limit")
        return run(sql, *args, **kwargs)

    monkeypatch.setattr(db, "_run", stopped_after_create)
    with pytest.raises(QueryTimeoutError):
        db.create_temp_table(db.temp_name("m"), ["k", "v"], [(1, None), (2, None)],
                             primary_key="k")
    assert _left(kind, con) == []
    bsql.close()


def test_a_blocked_drop_is_bounded_by_cleanup_timeout(pg_url: str) -> None:
    """PostgreSQL: another session holding a lock on the engine's temp table blocks its
    DROP; the cleanup gives up after ``cleanup_timeout`` (no limit on the session) instead
    of hanging, raises nothing, and the session still answers."""
    import threading

    import psycopg

    from blendsql.db.postgres import PostgresDatabase

    db = PostgresDatabase(pg_url)
    other = psycopg.connect(pg_url, autocommit=True)
    release = threading.Timer(60, other.close)  # a hung DROP ends with the test's lock
    try:
        db.timeout = None
        db.cleanup_timeout = 0.5
        name = db.temp_name("m")
        db.create_temp_table(name, ["k", "v"], [(1, "a")])
        schema = db.conn.execute("SELECT nspname FROM pg_namespace "
                                 "WHERE oid = pg_my_temp_schema()").fetchone()[0]
        other.execute("BEGIN")
        other.execute(f'LOCK TABLE {schema}."{name}" IN ACCESS SHARE MODE')
        release.start()
        t0 = time.perf_counter()
        db.drop_temp_table(name)
        assert time.perf_counter() - t0 < 10
        assert db.execute("SELECT 1")[1] == [(1,)]  # a timed-out cleanup refuses nothing
        other.execute("ROLLBACK")
        db.drop_temp_table(name)
        assert db.conn.execute("SELECT count(*) FROM pg_class WHERE relname = %s",
                               [name]).fetchone() == (0,)
    finally:
        release.cancel()
        other.close()
        db.close()
