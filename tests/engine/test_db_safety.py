"""The user's database is never changed, and engine temp tables never outlive a query."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.db import Database
from blendsql.errors import ExecutionError, IngredientError, UnsafeQueryError

from .conftest import Boom, LowerJoin, StartsWith


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _temp_tables(b: BlendSQL) -> list[str]:
    return [r[0] for r in b.db.conn.execute("SELECT name FROM sqlite_temp_master")]


@pytest.mark.parametrize("sql", [
    "INSERT INTO city (Name) VALUES ('x')",
    "UPDATE city SET Name = 'x'",
    "DELETE FROM city",
    "DROP TABLE city",
    "ALTER TABLE city ADD COLUMN z",
    "CREATE TABLE main.z (a)",
    "CREATE INDEX i ON city(Name)",
    "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA journal_mode = WAL",
    "PRAGMA user_version = 3",
])
def test_writes_are_refused_with_a_hint(world: Path, sql: str) -> None:
    before = _digest(world)
    b = BlendSQL(world, ingredients=[StartsWith])
    with pytest.raises(UnsafeQueryError) as info:
        b.execute(sql)
    assert info.value.hint and "allow_writes" in info.value.hint
    b.close()
    assert _digest(world) == before


def test_refused_even_on_a_writable_connection(world: Path) -> None:
    con = sqlite3.connect(world)
    b = BlendSQL(con)
    with pytest.raises(UnsafeQueryError):
        b.execute("DELETE FROM city")
    assert con.execute("SELECT COUNT(*) FROM city").fetchone()[0] > 0


def test_reading_pragmas_are_allowed(world: Path) -> None:
    b = BlendSQL(world)
    assert len(b.execute("PRAGMA table_info(city)").df) == 5


def test_allow_writes_permits_writes(world: Path) -> None:
    b = BlendSQL(world, allow_writes=True)
    b.execute("DELETE FROM city WHERE ID = 1")
    b.db.conn.commit()
    b.close()
    con = sqlite3.connect(world)
    assert con.execute("SELECT COUNT(*) FROM city WHERE ID = 1").fetchone()[0] == 0


def test_file_is_byte_identical_after_ingredient_queries(world: Path) -> None:
    before = _digest(world)
    b = BlendSQL(world, ingredients=[StartsWith, LowerJoin])
    b.execute("SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE")
    b.execute("SELECT c.Name FROM city c JOIN country k ON {{LowerJoin(c.Name, k.Name)}}")
    b.close()
    assert _digest(world) == before


def test_temp_tables_dropped_after_success(world: Path) -> None:
    b = BlendSQL(world, ingredients=[StartsWith])
    # more passing values than static_filter binds as parameters: a temp table
    s = b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE")
    assert any(t.kind == "temp_table" for t in s.trace)
    assert _temp_tables(b) == []


def test_temp_tables_dropped_when_an_ingredient_raises(world: Path) -> None:
    b = BlendSQL(world, ingredients=[StartsWith, Boom])
    with pytest.raises(IngredientError) as info:
        b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE "
                  "AND {{Boom('x', city.Name)}} = TRUE")
    assert "Boom" in str(info.value) and info.value.hint
    assert _temp_tables(b) == []


def test_dataframe_source_and_connection_source() -> None:
    b = BlendSQL({"t": pd.DataFrame({"a": ["apple", "banana", None], "n": [1, 2, 3]})},
                 ingredients=[StartsWith])
    s = b.execute("SELECT n FROM t WHERE {{StartsWith('b', t.a)}} = TRUE")
    assert s.df["n"].tolist() == [2]
    with pytest.raises(UnsafeQueryError):
        b.execute("DELETE FROM t")


def test_missing_file_is_an_execution_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError):
        Database(tmp_path / "nope.sqlite")


def test_temp_schema_is_writable_for_the_engine(world: Path) -> None:
    db = Database(world)
    db.create_temp_table("__bsql_test", ["k", "v"], [(1, "a"), (2, "b")], primary_key="k")
    assert db.execute('SELECT v FROM temp."__bsql_test" WHERE k = 2')[1] == [("b",)]
    db.drop_temp_table("__bsql_test")
    assert db.execute("SELECT COUNT(*) FROM sqlite_temp_master")[1] == [(0,)]
