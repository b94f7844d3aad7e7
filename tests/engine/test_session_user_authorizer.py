"""A user's authorizer on a handed-in connection guards the user's data, not the
engine's own temp objects: a policy that refuses deletes or DDL must neither make
blendsql's queries fail nor leave an engine temp table behind (its cleanup refused)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError

from .conftest import CountCtx, Len, LowerJoin, StartsWith
from .test_session_connection import INGREDIENT_QUERIES

INGREDIENTS = [StartsWith, Len, LowerJoin, CountCtx]
STRICT = {sqlite3.SQLITE_DELETE, sqlite3.SQLITE_DROP_TEMP_TABLE, sqlite3.SQLITE_DROP_TABLE,
          sqlite3.SQLITE_CREATE_TEMP_TABLE, sqlite3.SQLITE_INSERT}


def _temp_names(con: sqlite3.Connection) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM temp.sqlite_master")]


@pytest.mark.parametrize("query", INGREDIENT_QUERIES)
def test_user_authorizer_refusing_writes_leaves_no_engine_table(world: Path, query: str) -> None:
    """The user's authorizer does not get to refuse the DROP of the engine's temp
    table: no table of ours stays on the user's connection."""
    plain = BlendSQL(str(world), ingredients=INGREDIENTS)
    con = sqlite3.connect(world)
    seen: list[int] = []

    def no_writes(action: int, *args: Any) -> int:
        if action in STRICT:
            seen.append(action)
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    con.set_authorizer(no_writes)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    assert b.execute(query).df.values.tolist() == plain.execute(query).df.values.tolist()
    b.close()
    assert _temp_names(con) == []
    assert not con.in_transaction
    with pytest.raises(sqlite3.DatabaseError):  # the user's policy is back in force
        con.execute("DELETE FROM city")
    assert seen  # and it was consulted by the user's own statement


def test_user_authorizer_still_guards_reads_in_engine_queries(world: Path) -> None:
    """The user's authorizer keeps its say over reads of the user's tables."""
    con = sqlite3.connect(world)

    def no_country(action: int, arg1: Any, *args: Any) -> int:
        if action == sqlite3.SQLITE_READ and arg1 == "country":
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    con.set_authorizer(no_country)
    b = BlendSQL(con, ingredients=INGREDIENTS)
    with pytest.raises(BlendSQLError):
        b.execute("SELECT Name FROM country WHERE {{StartsWith('A', country.Name)}} = TRUE")
    assert _temp_names(con) == []
