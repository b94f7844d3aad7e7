"""The per-statement path decides what its full checks decide, with fewer steps.

The authorizer allows reads (and, in engine mode, the engine's own temp objects)
at once, a statement starting with SELECT / WITH skips the keyword scan, and a
use of the session sets and restores its tracer and executor mode: each shortcut
must give the same verdict as the check it skips.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql.db.database import Database
from blendsql.db.executors import current_mode
from blendsql.db.statements import TRANSACTION_KEYWORDS, leading_keyword
from blendsql.db.trace import StatementTrace
from blendsql.errors import UnsafeQueryError

ACTIONS = range(0, 40)
TABLES = (None, "t", "sqlite_master", "table_info", "optimize")


def _db(tmp_path: Path, allow_writes: bool) -> Database:
    path = tmp_path / "d.db"
    if not path.exists():
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (a)")
        con.commit()
        con.close()
    return Database(path, allow_writes=allow_writes)


@pytest.mark.parametrize("allow_writes", [False, True])
@pytest.mark.parametrize("engine", [False, True])
def test_the_authorizer_allows_at_once_only_what_its_checks_allow(
        tmp_path: Path, allow_writes: bool, engine: bool) -> None:
    db = _db(tmp_path, allow_writes)
    db._engine = engine
    try:
        for action in ACTIONS:
            for dbname in ("main", "temp", None):
                for arg1 in TABLES:
                    for arg2 in (None, "1"):
                        problem = db._problem(action, arg1, arg2, dbname)
                        want = sqlite3.SQLITE_DENY if problem else sqlite3.SQLITE_OK
                        got = db._authorize(action, arg1, arg2, dbname, None)
                        assert got == want, (action, arg1, arg2, dbname)
    finally:
        db._engine = False
        db.close()


STATEMENTS = [
    "SELECT 1", "select 1", "  SELECT 1", "-- c\nSELECT 1", "WITH x AS (SELECT 1) SELECT * FROM x",
    "with x as (select 1) select * from x", "SELECTED", "BEGIN", "begin", " COMMIT", "END",
    "ROLLBACK", "SAVEPOINT s", "RELEASE s", "VACUUM", "/* x */ BEGIN", "ATTACH 'x' AS y",
    "DETACH y", "EXPLAIN SELECT 1", "PRAGMA table_info(t)",
]


@pytest.mark.parametrize("sql", STATEMENTS)
def test_a_statement_is_refused_by_its_first_keyword_with_or_without_the_scan(
        tmp_path: Path, sql: str) -> None:
    db = _db(tmp_path, False)
    refused = leading_keyword(sql) in (*TRANSACTION_KEYWORDS, "VACUUM")
    try:
        db.execute(sql)
    except UnsafeQueryError as e:
        assert refused or "refused" in e.message, e.message
        if refused:
            assert leading_keyword(sql) in e.message
    except Exception:  # noqa: BLE001 - e.g. a syntax error: not a keyword refusal
        assert not refused
    else:
        assert not refused
    finally:
        db.close()


def test_a_use_sets_and_restores_its_tracer_and_executor_mode(tmp_path: Path) -> None:
    db = _db(tmp_path, False)
    outer: list[Any] = []
    steps: list[Any] = []
    trace = StatementTrace(steps)
    with db.tracing(lambda *a: outer.append(a)):
        with db.session(tracer=trace, executors="ON"):
            assert current_mode() == "on"
            trace.label = ("sql", "one")
            db.execute("SELECT a FROM t")
            with db.session():  # a nested use keeps both
                assert current_mode() == "on"
                db.execute("SELECT 2")
        assert current_mode() == "auto"
        db.execute("SELECT 3")
    db.close()
    assert [(s.kind, s.summary, s.sql, s.rows_out) for s in steps] == [
        ("sql", "one", "SELECT a FROM t", 0), ("sql", "one", "SELECT 2", 1)]
    assert [a[0] for a in outer] == ["SELECT 3"]


def test_the_cleanup_statements_go_to_the_last_step(tmp_path: Path) -> None:
    steps: list[Any] = []
    trace = StatementTrace(steps)
    trace("SELECT 1", 1, 0.0, False, None)
    trace.cleaning = True
    trace("DROP TABLE IF EXISTS temp.x", 0, 0.0, True, None)
    trace.cleaning = False
    trace('CREATE TEMP TABLE "x" AS SELECT 1', 0, 0.0, True, "boom")
    assert [(s.kind, s.summary) for s in steps] == [
        ("sql", "statement"), ("temp_table", 'CREATE TEMP TABLE "x" AS SELECT 1')]
    assert steps[0].details["cleanup"] == [
        {"sql": "DROP TABLE IF EXISTS temp.x", "rows": 0, "seconds": 0.0}]
    assert steps[1].details == {"error": "boom"}
