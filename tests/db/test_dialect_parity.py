"""Dialect parity: SQLite's GLOB and numeric results mean the same on every backend.

GLOB is SQLite's (PostgreSQL has none: the engine translates a literal
pattern to an anchored regular expression and refuses any other with an
error naming the backend); AVG / SUM of integers come back as floats, as
``pandas.read_sql`` users get them, not as ``Decimal`` objects.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.db.transpile import glob_regex
from blendsql.errors import ExecutionError

WORDS = ["Apple", "apple", "Banana", "cherry", "a.b", "a*b", "ab", "A1", "[x]", "x]y",
         "100%", "", "Zebra", "a?c", "abc", "two\nlines"]
PATTERNS = ["A*", "a*", "[A-C]*", "[^A-C]*", "?b", "a.b", "a[*]b", "*[0-9]", "[]x]*",
            "[[]x]", "*%", "", "a?c", "[a-c][a-c]*", "*", "[abc", "two?lines", "*s"]


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("parity") / "words.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE words (id INTEGER, w TEXT, n INTEGER)")
    con.executemany("INSERT INTO words VALUES (?, ?, ?)",
                    [(i, w, i % 4) for i, w in enumerate(WORDS)])
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def targets(sqlite_file: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    from blendsql.db.transfer import sqlite_to_duckdb, sqlite_to_postgres

    out: dict[str, Any] = {"sqlite": str(sqlite_file)}
    out["duckdb"] = str(sqlite_to_duckdb(sqlite_file, sqlite_file.with_suffix(".duckdb")))
    try:
        server = request.getfixturevalue("postgres_server")
    except pytest.skip.Exception:
        return out
    url = str(server.create_db("parity"))
    sqlite_to_postgres(sqlite_file, url)
    out["postgres"] = url
    return out


def _ids(bsql: BlendSQL, pattern: str) -> list[int]:
    lit = "'" + pattern.replace("'", "''") + "'"
    df = bsql.execute(f"SELECT id FROM words WHERE w GLOB {lit} ORDER BY id").df
    return [int(v) for v in df["id"]]


def test_glob_selects_the_same_rows_on_every_backend(targets: dict[str, Any]) -> None:
    sessions = {name: BlendSQL(src, cache=False) for name, src in targets.items()}
    for pattern in PATTERNS:
        expected = _ids(sessions["sqlite"], pattern)
        for name, bsql in sessions.items():
            assert _ids(bsql, pattern) == expected, (name, pattern)


def test_glob_over_a_number_reads_its_text(targets: dict[str, Any]) -> None:
    for src in targets.values():
        df = BlendSQL(src, cache=False).execute(
            "SELECT COUNT(*) AS c FROM words WHERE n GLOB '[12]'").df
        assert int(df["c"].iloc[0]) == sum(1 for i in range(len(WORDS)) if i % 4 in (1, 2))


def test_a_glob_pattern_that_is_not_a_literal_is_refused_naming_the_backend(
        targets: dict[str, Any]) -> None:
    names = {"duckdb": "DuckDB", "postgres": "PostgreSQL"}
    for backend in set(targets) & set(names):
        with pytest.raises(ExecutionError, match=names[backend]) as info:
            BlendSQL(targets[backend], cache=False).execute(
                "SELECT id FROM words WHERE w GLOB w || '*'")
        assert "literal" in (info.value.hint or "")
    assert BlendSQL(targets["sqlite"], cache=False).execute(
        "SELECT id FROM words WHERE w GLOB w || '*'").df["id"].tolist()


def test_glob_regex_reads_classes_and_escapes() -> None:
    assert glob_regex("[A-C]*") == "(?s)^[A-C].*$"
    assert glob_regex("[^0-9]?") == "(?s)^[^0-9].$"
    assert glob_regex("a.b") == "(?s)^a\\.b$"
    assert glob_regex("[]x]") == "(?s)^[\\]x]$"
    assert glob_regex("[abc") == "(?s)^\\[abc$"  # an unclosed class is a literal '['


def test_averages_and_sums_are_floats_not_decimals(targets: dict[str, Any]) -> None:
    for name, src in targets.items():
        df = BlendSQL(src, cache=False).execute(
            "SELECT AVG(n) AS a, SUM(n) * 1.0 / COUNT(*) AS r FROM words").df
        assert pd.api.types.is_float_dtype(df["a"]), (name, df.dtypes)
        assert df["a"].iloc[0] == pytest.approx(sum(i % 4 for i in range(len(WORDS))) / len(WORDS))
        assert not any(type(v).__name__ == "Decimal" for v in df.to_numpy().ravel()), name
