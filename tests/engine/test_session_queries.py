"""One query never changes what the next one sees; transaction control is refused;
engine names cannot collide with a user's; every statement has a time limit;
errors say who made a bad value; results keep duplicate columns."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.db import Database
from blendsql.db.database import QueryTimeoutError, TooManyRowsError
from blendsql.db.frames import rows_to_frame
from blendsql.errors import BlendSQLError, ExecutionError, UnsafeQueryError
from blendsql.execute import engine
from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient

from .conftest import CountCtx, Len, LowerJoin, StartsWith

INGREDIENTS = [StartsWith, Len, LowerJoin, CountCtx]

# -- transaction control --------------------------------------------------------------

TRANSACTION_STATEMENTS = [
    "COMMIT", "ROLLBACK", "BEGIN", "BEGIN IMMEDIATE", "END", "END TRANSACTION",
    "COMMIT TRANSACTION", "SAVEPOINT s", "RELEASE s", "RELEASE SAVEPOINT s", "ROLLBACK TO s",
    "  /* a comment */ commit", "-- a comment\nRollback",
]


@pytest.mark.parametrize("allow_writes", [False, True])
@pytest.mark.parametrize("sql", TRANSACTION_STATEMENTS)
def test_transaction_control_is_refused(world: Path, sql: str, allow_writes: bool) -> None:
    """execute("COMMIT") / execute("ROLLBACK") are refused: they would commit or
    discard the user's pending writes."""
    con = sqlite3.connect(world)
    con.execute("INSERT INTO city (Name, CountryCode, District, Population) "
                "VALUES ('Pending', 'NLD', 'x', 1)")
    b = BlendSQL(con, allow_writes=allow_writes)
    with pytest.raises(UnsafeQueryError) as info:
        b.execute(sql)
    assert info.value.hint and "commit" in info.value.hint.lower()
    assert con.in_transaction  # the user's transaction is still theirs ...
    assert con.execute("SELECT COUNT(*) FROM city WHERE Name = 'Pending'").fetchone() == (1,)
    con.rollback()  # ... and rolling it back removes the pending row: nothing was committed
    assert con.execute("SELECT COUNT(*) FROM city WHERE Name = 'Pending'").fetchone() == (0,)


# -- temp schema / connection state --------------------------------------------------

POISON = [
    "CREATE TEMP TABLE city AS SELECT 'POISON' AS Name",
    "CREATE TEMPORARY TABLE city (Name)",
    "CREATE TABLE temp.city (Name)",
    "CREATE TEMP VIEW city AS SELECT 'POISON' AS Name",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE TEMP TRIGGER t AFTER INSERT ON city BEGIN SELECT 1; END",
    "CREATE VIRTUAL TABLE temp.city USING fts5(Name)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA foreign_keys = ON",
    "PRAGMA case_sensitive_like = 1",
    "PRAGMA temp_store = 2",
    "PRAGMA query_only = 1",
    "PRAGMA optimize",
    "VACUUM",
]


@pytest.mark.parametrize("allow_writes", [False, True])
@pytest.mark.parametrize("sql", POISON)
def test_a_query_cannot_change_what_the_next_one_sees(world: Path, sql: str,
                                                       allow_writes: bool) -> None:
    """CREATE TEMP TABLE city AS SELECT 'POISON' ... is refused, so no later SELECT ...
    FROM city can return POISON."""
    b = BlendSQL(str(world), ingredients=INGREDIENTS, allow_writes=allow_writes)
    want = b.execute("SELECT Name FROM city ORDER BY ID LIMIT 3").df
    pragmas = b.db.conn.execute("PRAGMA foreign_keys").fetchone()
    with pytest.raises(UnsafeQueryError if ";" not in sql else BlendSQLError):
        b.execute(sql)
    with pytest.raises(UnsafeQueryError):  # the guard itself, below any parser check
        b.db.execute(sql)
    assert b.execute("SELECT Name FROM city ORDER BY ID LIMIT 3").df.equals(want)
    assert b.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)
    assert len(b.db.conn.execute("PRAGMA database_list").fetchall()) == 2  # main, temp
    assert b.db.conn.execute("PRAGMA foreign_keys").fetchone() == pragmas
    # the engine's own temp objects still work
    s = b.execute("SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE")
    assert len(s.df) > 0


@pytest.mark.parametrize("allow_writes", [False, True])
@pytest.mark.parametrize("sql", [
    "INSERT INTO temp.scratch VALUES (2)",
    "INSERT INTO scratch VALUES (2)",
    "UPDATE scratch SET a = 5",
    "DELETE FROM temp.scratch",
    "DROP TABLE temp.scratch",
    "ALTER TABLE scratch ADD COLUMN b",
    "CREATE INDEX temp.i ON scratch (a)",
    "CREATE TEMP VIEW v AS SELECT * FROM scratch",
    "DETACH DATABASE temp",
])
def test_a_users_own_temp_objects_are_not_changed_either(world: Path, sql: str,
                                                         allow_writes: bool) -> None:
    con = sqlite3.connect(world)
    con.execute("CREATE TEMP TABLE scratch (a)")
    con.execute("INSERT INTO scratch VALUES (1)")
    con.commit()
    schema = con.execute("SELECT * FROM sqlite_temp_master").fetchall()
    b = BlendSQL(con, allow_writes=allow_writes)
    with pytest.raises(UnsafeQueryError):
        b.execute(sql)
    assert con.execute("SELECT * FROM sqlite_temp_master").fetchall() == schema
    assert con.execute("SELECT * FROM scratch").fetchall() == [(1,)]
    assert not con.in_transaction


def test_temp_writes_refused_also_through_ingredient_queries(world: Path) -> None:
    b = BlendSQL(str(world), ingredients=INGREDIENTS)
    with pytest.raises(UnsafeQueryError):
        b.execute("CREATE TEMP TABLE city AS SELECT Name FROM city "
                  "WHERE {{StartsWith('Am', city.Name)}} = TRUE")
    assert b.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)


def test_allow_writes_changes_the_users_tables_and_commits(world: Path) -> None:
    """allow_writes=True: DML / DDL on the user's own tables, committed at once."""
    b = BlendSQL(str(world), allow_writes=True)
    b.execute("DELETE FROM city WHERE ID = 1")
    b.execute("CREATE TABLE notes (a)")
    assert not b.db.conn.in_transaction
    con = sqlite3.connect(world)
    assert con.execute("SELECT COUNT(*) FROM city WHERE ID = 1").fetchone() == (0,)
    assert con.execute("SELECT COUNT(*) FROM notes").fetchone() == (0,)


def test_allow_writes_on_a_handed_in_connection_commits_only_what_it_began(world: Path,
                                                                            ) -> None:
    con = sqlite3.connect(world)
    b = BlendSQL(con, allow_writes=True)
    b.execute("DELETE FROM city WHERE ID = 1")
    assert not con.in_transaction  # the statement's own transaction was committed
    con.execute("DELETE FROM city WHERE ID = 2")  # the user's own transaction ...
    b.execute("DELETE FROM city WHERE ID = 3")  # ... is joined, not committed
    assert con.in_transaction
    con.rollback()
    ids = {r[0] for r in con.execute("SELECT ID FROM city WHERE ID <= 3")}
    assert ids == {2, 3}


# -- engine names --------------------------------------------------------------------

def test_user_temp_tables_with_engine_like_names_survive(world: Path) -> None:
    """User temp tables named like guessable engine names (__bsql_<run>_m0) neither make a
    query fail nor get dropped by its cleanup."""
    con = sqlite3.connect(world)
    # guesses of the form __bsql_<run counter>_<kind><n>, the counter read from its repr
    counter = re.search(r"\d+", repr(getattr(engine, "_RUN_IDS", "count(0)")))
    start = int(counter.group(0)) if counter else 0
    runs = dict.fromkeys([*range(3), *range(start, start + 4)])
    guesses = [f"__bsql_{r}_{k}{n}" for r in runs for k in "mjqlp" for n in range(4)]
    for g in guesses:
        con.execute(f'CREATE TEMP TABLE "{g}" (k, v)')
        con.execute(f'INSERT INTO temp."{g}" VALUES (1, 2)')
    con.commit()
    b = BlendSQL(con, ingredients=INGREDIENTS)
    for q in ["SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE",
              "SELECT c.Name FROM city c JOIN country k ON {{LowerJoin(c.Name, k.Name)}}",
              "SELECT {{Len('n', city.District)}} AS n, COUNT(*) FROM city GROUP BY n"]:
        assert len(b.execute(q).df) > 0
    for g in guesses:
        assert con.execute(f'SELECT * FROM temp."{g}"').fetchall() == [(1, 2)]


def test_engine_never_drops_a_table_it_did_not_create(world: Path) -> None:
    """Even if a name collided, the failed CREATE is not followed by a DROP of it."""
    con = sqlite3.connect(world)
    con.execute('CREATE TEMP TABLE "mine" (k, v)')
    con.execute('INSERT INTO temp."mine" VALUES (1, 2)')
    con.commit()
    b = BlendSQL(con, ingredients=INGREDIENTS)
    b.db.temp_name = lambda kind: "mine"  # type: ignore[method-assign]
    with pytest.raises(BlendSQLError):
        b.execute("SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE",
                  rules_off={"static_filter"})  # every (value, output) pair: a temp table
    assert con.execute('SELECT * FROM temp."mine"').fetchall() == [(1, 2)]


def test_engine_names_differ_per_session(world: Path) -> None:
    a, b = Database(str(world)), Database(str(world))
    assert a.temp_name("m") != b.temp_name("m")
    assert len(a.token) >= 12 and a.token not in ("0" * 12,)


# -- time limits ---------------------------------------------------------------------

RECURSIVE = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"


@pytest.mark.parametrize("where", ["session", "execute"])
@pytest.mark.parametrize("query", [
    RECURSIVE,
    RECURSIVE + " WHERE x % 1000000 = 1 AND x > 1",  # returns nothing, runs forever
    "SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE AND ID < "
    "(SELECT MAX(x) FROM (" + RECURSIVE + "))",
])
def test_a_query_that_never_ends_stops_at_the_time_limit(world: Path, query: str,
                                                          where: str) -> None:
    """Such a query would run forever without a time limit."""
    opts: dict[str, Any] = {"timeout": 0.3}
    b = BlendSQL(str(world), ingredients=INGREDIENTS, **(opts if where == "session" else {}))
    with pytest.raises(QueryTimeoutError) as info:
        b.execute(query, **(opts if where == "execute" else {}))
    assert "time limit" in str(info.value) and info.value.hint and "timeout" in info.value.hint
    assert isinstance(info.value, ExecutionError) and isinstance(info.value, TimeoutError)
    # the session is fine afterwards
    assert len(b.execute("SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE")
               .df) > 0
    assert b.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)


def test_the_default_time_limit_is_finite(world: Path) -> None:
    b = BlendSQL(str(world))
    assert b.db.timeout is not None and 0 < b.db.timeout < float("inf")


def test_too_many_rows_is_a_clear_error(world: Path) -> None:
    b = BlendSQL(str(world))
    b.db.max_rows = 200_000
    with pytest.raises(TooManyRowsError):
        b.execute(RECURSIVE)
    assert b.execute("SELECT COUNT(*) AS n FROM city").df["n"].tolist() == [4079]


# -- error wording -------------------------------------------------------------------

class BadAnswer(QAIngredient):
    """Answers with text SQLite cannot store (a lone surrogate)."""

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        return "bad \ud800 text"


class BadMap(MapIngredient):
    """Maps every value to text SQLite cannot store."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return ["bad \ud800" for _ in values]


class BadJoin(JoinIngredient):
    """Joins every left value to text SQLite cannot store."""

    def run(self, left_values: list, right_values: list, **kwargs: Any) -> dict:
        return {v: "bad \ud800" for v in left_values}


@pytest.mark.parametrize("handed_in", [False, True])
@pytest.mark.parametrize("query", [
    "SELECT Name FROM city WHERE Name = {{BadAnswer('q')}}",
    "SELECT Name FROM city WHERE CountryCode = 'NLD' ORDER BY {{BadMap('q', city.Name)}}",
    "SELECT {{BadMap('q', city.Name)}} AS m, COUNT(*) FROM city GROUP BY m",
    "SELECT c.Name FROM city c JOIN country k ON {{BadJoin(c.Name, k.Name)}}",
])
def test_engine_made_values_are_not_blamed_on_params(world: Path, query: str,
                                                     handed_in: bool) -> None:
    """A value the engine made is not blamed on params ('could not bind parameters ...
    Hint: check params') for a user who passed none."""
    db: Any = sqlite3.connect(world) if handed_in else str(world)
    b = BlendSQL(db, ingredients=[BadAnswer, BadMap, BadJoin])
    with pytest.raises(BlendSQLError) as info:
        b.execute(query)
    text = str(info.value)
    assert "check params" not in text and "you passed" not in text
    assert "ingredient" in text


@pytest.mark.parametrize("params", [[2**70], {"v": 2**70}, ["bad \ud800"]])
def test_user_values_are_named_as_the_users(world: Path, params: Any) -> None:
    b = BlendSQL(str(world), ingredients=INGREDIENTS)
    mark = ":v" if isinstance(params, dict) else "?"
    for q in [f"SELECT Name FROM city WHERE Name = {mark}",
              f"SELECT Name FROM city WHERE {{{{StartsWith('A', city.Name)}}}} = TRUE "
              f"AND Name = {mark}"]:
        with pytest.raises(ExecutionError) as info:
            b.execute(q, params)
        assert "you passed" in str(info.value)


# -- result shape --------------------------------------------------------------------

@pytest.mark.parametrize("handed_in", [False, True])
@pytest.mark.parametrize(("query", "columns"), [
    ("SELECT Name, Name FROM city WHERE CountryCode = {cc}", ["Name", "Name"]),
    ("SELECT Name AS a, ID, Name AS a FROM city WHERE CountryCode = {cc}", ["a", "ID", "a"]),
    ("SELECT Name, Name FROM city WHERE CountryCode = {cc} "
     "AND {{{{StartsWith('', city.Name)}}}} = TRUE", ["Name", "Name"]),
    ("SELECT Name, {{{{Len('n', city.Name)}}}} AS n, Name FROM city WHERE CountryCode = {cc}",
     ["Name", "n", "Name"]),
    ("SELECT Name, Name FROM city WHERE CountryCode = {cc} "
     "ORDER BY {{{{Len('n', city.Name)}}}}", ["Name", "Name"]),
])
def test_duplicate_columns_kept_whether_or_not_rows_come_back(
        world: Path, query: str, columns: list[str], handed_in: bool) -> None:
    """SELECT x, x returns two columns, empty or not."""
    db: Any = sqlite3.connect(world) if handed_in else str(world)
    b = BlendSQL(db, ingredients=INGREDIENTS)
    full = b.execute(query.format(cc="'NLD'")).df
    empty = b.execute(query.format(cc="'none'")).df
    assert len(full) > 0 and len(empty) == 0
    assert list(full.columns) == list(empty.columns) == columns


def test_qa_context_with_duplicate_columns(world: Path) -> None:
    ing = CountCtx()
    b = BlendSQL(str(world), ingredients=[ing])
    for cc in ("'NLD'", "'none'"):
        b.execute(f"SELECT {{{{CountCtx('q', (SELECT Name, Name FROM city "
                  f"WHERE CountryCode = {cc}))}}}} AS n")
    shapes = [list(s["context"].columns) for s in ing.seen]
    assert shapes == [["Name", "Name"], ["Name", "Name"]]


def test_rows_to_frame_keeps_names_order_and_values() -> None:
    cols = ["a", "b", "a"]
    full = rows_to_frame(cols, [(1, "x", 2.5), (None, b"\x00", 3)])
    empty = rows_to_frame(cols, [])
    assert list(full.columns) == list(empty.columns) == cols
    assert full.iloc[1, 1] == b"\x00" and full.shape == (2, 3) and empty.shape == (0, 3)
    assert rows_to_frame([], []).shape == (0, 0)
    db = Database({"t": pd.DataFrame({"x": [1, 2]})})
    assert list(db.query_df("SELECT x, x FROM t WHERE x > 5").columns) == ["x", "x"]
