"""Sessions leave no trace: no open transaction, and a handed-in connection comes back
exactly as it came (authorizer, transaction state, total_changes, functions, temp tables),
after success and after every kind of failure."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.db.database import QueryTimeoutError
from blendsql.errors import BlendSQLError, IngredientError, UnsafeQueryError

from .conftest import Boom, CountCtx, Len, LowerJoin, StartsWith

# queries that make the engine create temp tables / lookups of every kind
INGREDIENT_QUERIES = [
    # map in a WHERE filter: a set-membership temp table
    "SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE",
    # map in the SELECT list: a lookup (function or keyed temp table)
    "SELECT Name, {{Len('n', city.Name)}} AS n FROM city WHERE CountryCode = 'NLD'",
    # join: a keyed mapping table
    "SELECT c.Name FROM city c JOIN country k ON {{LowerJoin(c.Name, k.Name)}}",
    # map as a GROUP BY key: pre-aggregation's partial table
    "SELECT {{Len('n', city.District)}} AS n, COUNT(*) FROM city GROUP BY n",
    # under LIMIT: the lazy scan's tables
    "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE LIMIT 2",
    # QA with a context subquery: a bound parameter
    "SELECT {{CountCtx('how many?', (SELECT Name FROM city WHERE CountryCode = 'NLD'))}} AS n",
]
INGREDIENTS = [StartsWith, Len, LowerJoin, CountCtx, Boom]
RECURSIVE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"


def _other_process_can_write(path: Path) -> None:
    """What another process does: write and commit without waiting for locks."""
    other = sqlite3.connect(path, timeout=0)
    try:
        other.execute("UPDATE city SET Population = Population WHERE ID = 1")
        other.commit()
    finally:
        other.close()


@pytest.mark.parametrize("query", INGREDIENT_QUERIES)
def test_no_transaction_left_open_on_an_opened_file(world: Path, query: str) -> None:
    """Temp tables are filled without opening Python's implicit transaction, whose
    shared lock would make every other writer fail with 'database is locked'."""
    b = BlendSQL(str(world), ingredients=INGREDIENTS)
    b.execute(query)
    assert not b.db.conn.in_transaction
    _other_process_can_write(world)
    b.close()


@pytest.mark.parametrize("query", INGREDIENT_QUERIES)
def test_no_transaction_left_open_on_a_handed_in_connection(world: Path, query: str) -> None:
    con = sqlite3.connect(world)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    changes = con.total_changes
    b.execute(query)
    assert not con.in_transaction
    assert con.total_changes == changes
    _other_process_can_write(world)


def _snapshot(con: sqlite3.Connection) -> dict[str, Any]:
    """Everything a user could observe about their connection."""
    return {
        "in_transaction": con.in_transaction,
        "total_changes": con.total_changes,
        "functions": sorted(con.execute("SELECT name, narg FROM pragma_function_list")),
        "temp": sorted(con.execute("SELECT type, name, sql FROM sqlite_temp_master")),
        "scratch": con.execute("SELECT * FROM temp.scratch").fetchall(),
        "pending": con.execute("SELECT COUNT(*) FROM city WHERE Name = 'Pending'").fetchone(),
    }


class Recorder:
    """A user's own authorizer: denies reading ``country.Code2`` and counts calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.steps = 0

    def progress(self) -> int:
        """The user's progress handler: counts, never interrupts."""
        self.steps += 1
        return 0

    def __call__(self, action: int, arg1: Any, arg2: Any, dbname: Any, source: Any) -> int:
        self.calls += 1
        if action == sqlite3.SQLITE_READ and arg1 == "country" and arg2 == "Code2":
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK


def _user_connection(world: Path, pending: bool) -> tuple[sqlite3.Connection, Recorder]:
    con = sqlite3.connect(world)
    con.execute("CREATE TEMP TABLE scratch (a)")
    con.execute("INSERT INTO temp.scratch VALUES (1)")
    con.commit()
    con.create_function("user_fn", 1, lambda x: x)
    if pending:  # the user has an open transaction with an uncommitted write
        con.execute("INSERT INTO city (Name, CountryCode, District, Population) "
                    "VALUES ('Pending', 'NLD', 'x', 1)")
    rec = Recorder()
    con.set_authorizer(rec)
    con.set_progress_handler(rec.progress, 50)
    return con, rec


FAILURES: dict[str, tuple[str, dict[str, Any], type[BlendSQLError]]] = {
    "ingredient raises": ("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE "
                          "AND {{Boom('x', city.Name)}} = TRUE", {}, IngredientError),
    "sql error": ("SELECT nope FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE", {},
                  BlendSQLError),
    "refused write": ("DELETE FROM city", {}, UnsafeQueryError),
    "timeout": (RECURSIVE, {"timeout": 0.2}, QueryTimeoutError),
    "timeout with ingredient": (
        RECURSIVE.replace("SELECT x FROM c", "SELECT x FROM c WHERE x > "
                          "(SELECT COUNT(*) FROM city WHERE {{StartsWith('A', city.Name)}} = 1)"),
        {"timeout": 0.2}, QueryTimeoutError),
}


@pytest.mark.parametrize("pending", [False, True], ids=["idle", "open transaction"])
@pytest.mark.parametrize("outcome", ["success", *FAILURES])
def test_handed_in_connection_comes_back_as_it_came(world: Path, pending: bool,
                                                    outcome: str) -> None:
    """After close(), on success and after any failure: no authorizer of ours is left
    installed (the user can still write), theirs is back, no transaction is open,
    total_changes has not moved and no lookup function is registered."""
    con, rec = _user_connection(world, pending)
    before = _snapshot(con)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    if outcome == "success":
        for q in INGREDIENT_QUERIES:
            b.execute(q)
    else:
        query, options, error = FAILURES[outcome]
        with pytest.raises(error):
            b.execute(query, **options)
    calls_during = rec.calls
    b.close()
    assert calls_during > 0  # the user's authorizer was still consulted
    assert _snapshot(con) == before
    # the user's authorizer is back: it still denies what it denied ...
    with pytest.raises(sqlite3.DatabaseError, match="prohibited|not authorized"):
        con.execute("SELECT Code2 FROM country")
    # ... and ours is gone: the user can write on their own connection again
    con.execute("UPDATE city SET Population = Population + 1 WHERE ID = 1")
    con.rollback()
    # their function and progress handler are still theirs
    assert con.execute("SELECT user_fn(41) + 1").fetchone() == (42,)
    steps = rec.steps
    con.execute("SELECT COUNT(*) FROM city WHERE Name LIKE '%a%'").fetchone()
    assert rec.steps > steps


def test_user_authorizer_applies_to_blendsql_queries(world: Path) -> None:
    con, _ = _user_connection(world, pending=False)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    with pytest.raises(BlendSQLError, match="prohibited|not authorized"):
        b.execute("SELECT Code2 FROM country WHERE {{StartsWith('A', country.Name)}} = TRUE")


@pytest.mark.parametrize("factories", [
    (sqlite3.Row, str),
    (None, bytes),
    (lambda cur, row: dict(zip([d[0] for d in cur.description], row, strict=True)), str),
], ids=["Row", "bytes text", "dict rows"])
def test_users_row_and_text_factories_neither_break_queries_nor_get_lost(
        world: Path, factories: tuple[Any, Any]) -> None:
    """A bytes text_factory gives the right results and a dict row_factory no KeyError;
    both are the user's again afterwards."""
    plain = BlendSQL(str(world), ingredients=INGREDIENTS)
    con = sqlite3.connect(world)
    con.row_factory, con.text_factory = factories
    b = BlendSQL(con, ingredients=INGREDIENTS)
    for q in INGREDIENT_QUERIES:
        assert b.execute(q).df.values.tolist() == plain.execute(q).df.values.tolist()
    assert (con.row_factory, con.text_factory) == factories


def test_connection_without_authorizer_gets_none_back(world: Path) -> None:
    con = sqlite3.connect(world)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    b.execute(INGREDIENT_QUERIES[0])
    con.execute("DELETE FROM city WHERE ID = 1")  # not refused: no guard left behind
    assert con.in_transaction
    con.rollback()


@pytest.mark.parametrize("make", [
    lambda w: BlendSQL(str(w), ingredients=INGREDIENTS),
    lambda w: BlendSQL(sqlite3.connect(w), ingredients=INGREDIENTS),
], ids=["opened", "handed in"])
def test_function_registrations_stay_constant(world: Path,
                                              make: Callable[[Path], BlendSQL]) -> None:
    """Registered functions do not pile up with queries: the count stays what the first
    queries left (nothing at all on a handed-in connection)."""
    b = make(world)
    con = b.db.conn

    def count() -> int:
        return int(con.execute("SELECT COUNT(*) FROM pragma_function_list").fetchone()[0])

    start = count()
    for q in INGREDIENT_QUERIES:
        b.execute(q)
    warm = count()
    for _ in range(10):
        for q in INGREDIENT_QUERIES:
            b.execute(q)
    assert count() == warm
    if b.db.borrowed:
        assert warm == start  # nothing at all remains on a handed-in connection
    else:
        assert warm - start <= 4


def test_opened_file_other_writer_after_failures(world: Path) -> None:
    b = BlendSQL(str(world), ingredients=INGREDIENTS)
    for query, options, error in FAILURES.values():
        with pytest.raises(error):
            b.execute(query, **options)
        assert not b.db.conn.in_transaction
        _other_process_can_write(world)
    assert b.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)


def test_a_closed_handed_in_connection_is_a_clear_error(world: Path) -> None:
    con = sqlite3.connect(world)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    con.close()
    with pytest.raises(BlendSQLError) as info:
        b.execute(INGREDIENT_QUERIES[0])
    assert info.value.hint
