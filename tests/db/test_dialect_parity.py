"""Dialect parity: SQLite's GLOB and numeric results mean the same on every backend.

GLOB is SQLite's (PostgreSQL has none: the engine translates a literal
pattern to an anchored regular expression and refuses any other with an
error naming the backend); AVG / SUM of integers come back as floats, as
``pandas.read_sql`` users get them, not as ``Decimal`` objects.

SQLite's loose typing (``blendsql.db.sqlite_compat``), each class on DuckDB
and PostgreSQL copies of one small SQLite file, against SQLite's own answer:
double-quoted strings, text / number comparisons (type affinity), ``avg`` /
``sum`` / ``total`` / arithmetic over text, integer division, booleans as
integers, LIKE's ASCII case folding,
``SELECT DISTINCT .. ORDER BY`` a column not selected, and the copies keeping
SQLite's values (``blendsql.db.transfer``).
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


# -- SQLite's typing ---------------------------------------------------------------------

ITEMS = [  # id, name, code (TEXT: digits and not), qty (INTEGER), price (REAL),
    # amount (DECIMAL: integers and reals), tag (no declared type)
    (1, "Lamp", "150", 3, 9.5, 10, "a"),
    (2, "lamp shade", "98", 2, 4.0, 2.5, 7),
    (3, "Desk", "1000", 7, 120.25, 300, "b"),
    (4, "chair", "n/a", None, 35.0, None, None),
    (5, "Étagère", "007", 1, 60.0, 12, "c"),
    (6, "Shelf", None, 3, 48.5, 3.25, "d"),
    (7, "back\\slash", "12abc", 4, 1.0, 1, "e"),
]


@pytest.fixture(scope="module")
def typed_targets(tmp_path_factory: pytest.TempPathFactory,
                  request: pytest.FixtureRequest) -> dict[str, Any]:
    from blendsql.db.transfer import sqlite_to_duckdb, sqlite_to_postgres

    path = tmp_path_factory.mktemp("typing") / "shop.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE items (id INTEGER, name TEXT, code VARCHAR(10), qty INT, "
                "price REAL, amount DECIMAL(10,2), tag)")
    con.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?)", ITEMS)
    con.execute("CREATE TABLE codes (code TEXT, label TEXT)")
    con.executemany("INSERT INTO codes VALUES (?, ?)",
                    [("3", "three"), ("7", "seven"), ("x", "ex"), ("1.0", "one")])
    con.commit()
    con.close()
    out: dict[str, Any] = {"sqlite": str(path)}
    out["duckdb"] = str(sqlite_to_duckdb(path, path.with_suffix(".duckdb")))
    _add_spark(out, path, request)
    try:
        server = request.getfixturevalue("postgres_server")
    except pytest.skip.Exception:
        return out
    url = str(server.create_db("parity_typing"))
    sqlite_to_postgres(path, url)
    out["postgres"] = url
    return out


def _add_spark(out: dict[str, Any], path: Path, request: pytest.FixtureRequest) -> None:
    """The same tables as DataFrames of the local Spark session, where one can start
    (each BlendSQL registers them as its temporary views and drops them at close)."""
    try:
        spark = request.getfixturevalue("spark_session")
    except pytest.skip.Exception:
        return
    from spark_session import frames_from_sqlite

    out["spark"] = frames_from_sqlite(spark, path)


def _rows(src: Any, sql: str) -> list[tuple[Any, ...]]:
    bsql = BlendSQL(src, cache=False)
    try:
        df = bsql.execute(sql).df
    finally:
        bsql.close()
    out = []
    for row in df.astype(object).itertuples(index=False, name=None):
        cells = []
        for v in row:
            if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
                cells.append(None)
            elif hasattr(v, "item") and not isinstance(v, str):
                cells.append(v.item())
            elif isinstance(v, float):
                cells.append(round(v, 9))
            else:
                cells.append(v)
        out.append(tuple(cells))
    return out


def _same_everywhere(targets: dict[str, Any], sql: str, ordered: bool = False,
                     ) -> list[tuple[Any, ...]]:
    """The rows SQLite gives, checked equal on every other backend (value and type kind)."""
    expected = _rows(targets["sqlite"], sql)
    for name, src in targets.items():
        got = _rows(src, sql)
        if not ordered:
            got, exp_ = sorted(got, key=repr), sorted(expected, key=repr)
        else:
            exp_ = expected
        assert got == exp_, (name, sql, got, exp_)
        kinds = [[type(v).__name__ for v in r] for r in got]
        assert kinds == [[type(v).__name__ for v in r] for r in exp_], (name, sql, kinds)
    return expected


def test_double_quoted_strings_are_strings_where_no_column_has_the_name(
        typed_targets: dict[str, Any]) -> None:
    for sql in [
        'SELECT id FROM items WHERE name = "Lamp"',
        'SELECT id FROM items WHERE name LIKE "%shade%" OR name = "Desk"',
        'SELECT id FROM items AS i WHERE i.name IN ("Lamp", "Shelf")',
        'SELECT id FROM items WHERE qty > (SELECT qty FROM items WHERE name = "Desk") - 5',
        'SELECT "name" FROM items WHERE "qty" > 2',          # columns stay columns
        'SELECT qty AS "n" FROM items WHERE qty IS NOT NULL ORDER BY "n", id',  # an alias
        'SELECT name, "label" FROM items JOIN codes ON codes.label = "three" WHERE id = 1',
    ]:
        rows = _same_everywhere(typed_targets, sql, ordered="ORDER BY" in sql)
        assert rows, sql


def test_double_quoted_names_are_left_alone_when_columns_are_unknown() -> None:
    from blendsql.db.transpile import Transpiler

    known = {"items": {"id": "BIGINT", "name": "VARCHAR"}}
    t = Transpiler("duckdb", types=lambda name: known.get(name.lower()))
    assert t('SELECT id FROM items WHERE name = "Lamp"')[0] == (
        "SELECT id FROM items WHERE name = 'Lamp'")
    # another table of unknown columns: "Lamp" may be one of its columns
    assert '"Lamp"' in t('SELECT id FROM items JOIN other WHERE name = "Lamp"')[0]
    assert Transpiler("duckdb")('SELECT id FROM items WHERE name = "Lamp"')[0] == (
        'SELECT id FROM items WHERE name = "Lamp"')


def test_text_and_numbers_compare_as_sqlite_compares_them(
        typed_targets: dict[str, Any]) -> None:
    for sql in [
        "SELECT id FROM items WHERE code > 150",          # TEXT column: compared as text
        "SELECT id FROM items WHERE code = 98 OR code < 1000.0",
        "SELECT id FROM items WHERE code IN (150, 7, 1000)",
        "SELECT id FROM items WHERE code BETWEEN 100 AND 200",
        "SELECT id FROM items WHERE qty = '3'",            # numeric column: as numbers
        "SELECT id FROM items WHERE qty = ' 3.0 ' OR price > '100'",
        "SELECT id FROM items WHERE qty IN ('1', 'x', 4)",
        "SELECT id FROM items WHERE qty < 'abc'",          # a number sorts before any text
        "SELECT id FROM items WHERE qty <> 'abc'",
        "SELECT id FROM items WHERE qty BETWEEN '2' AND '4'",
        "SELECT i.id, c.label FROM items AS i JOIN codes AS c ON i.qty = c.code",
        "SELECT id FROM items WHERE code < (SELECT AVG(qty) FROM items)",
        "SELECT id FROM items WHERE qty IN (SELECT code FROM codes)",
        "SELECT id FROM items WHERE code IN (SELECT qty FROM items)",
        "SELECT qty, COUNT(*) FROM items GROUP BY qty HAVING COUNT(*) = '2'",
    ]:
        _same_everywhere(typed_targets, sql)
    # as text, '98' and 'n/a' sort after '150', '1000' before it
    assert _rows(typed_targets["sqlite"], "SELECT id FROM items WHERE code > 150 "
                 "ORDER BY id") == [(2,), (4,)]


def test_avg_sum_and_arithmetic_read_numbers_in_text(typed_targets: dict[str, Any]) -> None:
    for sql in [
        "SELECT AVG(code), SUM(code) * 1.0 FROM items",  # '12abc' is 12, 'n/a' is 0
        "SELECT id, code + 1, code * qty FROM items",
        "SELECT name FROM items WHERE code + 0 > 100",
    ]:
        _same_everywhere(typed_targets, sql)


def test_integer_division_stays_integer(typed_targets: dict[str, Any]) -> None:
    rows = _same_everywhere(typed_targets, "SELECT 7 / 2, -7 / 2, 7 / 0, 7.0 / 2, 7 / 2.0")
    assert rows == [(3, -3, None, 3.5, 3.5)]
    for sql in [
        # not amount / 4: SQLite divides its integer cells as integers, a copy holds the
        # column (integers and reals) as DOUBLE (see blendsql.db.transfer.column_kind)
        "SELECT id, qty / 2, price / 2, qty / price, amount * 2 FROM items",
        "SELECT SUM(qty) / COUNT(*), COUNT(*) * 100 / 7, SUM(qty) / 2.0 FROM items",
        "SELECT id FROM items WHERE qty / 2 = 1",
    ]:
        _same_everywhere(typed_targets, sql)


def test_like_folds_ascii_letters_only(typed_targets: dict[str, Any]) -> None:
    for sql in [
        "SELECT id FROM items WHERE name LIKE 'lamp%'",
        "SELECT id FROM items WHERE name NOT LIKE '%A%'",
        "SELECT id FROM items WHERE name LIKE 'é%'",   # no fold: 'Étagère' does not match
        "SELECT id FROM items WHERE name LIKE '%\\%'",  # a backslash is no escape
        "SELECT id FROM items WHERE name LIKE 'L' || '%'",
        "SELECT id FROM items WHERE name LIKE 'c!%%' ESCAPE '!'",
    ]:
        _same_everywhere(typed_targets, sql)
    assert _rows(typed_targets["sqlite"], "SELECT id FROM items WHERE name LIKE 'lamp%' "
                 "ORDER BY id") == [(1,), (2,)]


def test_total_and_booleans_as_integers(typed_targets: dict[str, Any]) -> None:
    for sql in [
        "SELECT TOTAL(qty), TOTAL(tag), TOTAL(price) FROM items",
        "SELECT TOTAL(qty) FROM items WHERE id > 100",      # 0.0 over no rows
        "SELECT SUM(qty > 2), AVG(price > 10) FROM items",
        "SELECT id FROM items WHERE (qty > 2) = 1",
        "SELECT id FROM items WHERE 1 - (qty > 2)",
        "SELECT id, (qty > 2) + (price > 10) FROM items",
    ]:
        _same_everywhere(typed_targets, sql)


def test_distinct_ordered_by_a_column_not_selected(typed_targets: dict[str, Any]) -> None:
    rows = _same_everywhere(typed_targets,
                            "SELECT DISTINCT qty FROM items WHERE qty IS NOT NULL "
                            "ORDER BY price DESC LIMIT 3", ordered=True)
    assert rows == [(7,), (1,), (3,)]


def test_copies_keep_sqlite_values(typed_targets: dict[str, Any]) -> None:
    """A TEXT column of digits stays text ('007'), a DECIMAL column of integers and
    reals holds numbers, a column without a declared type keeps its values."""
    rows = _same_everywhere(typed_targets,
                            "SELECT id, code, qty, price, amount FROM items ORDER BY id",
                            ordered=True)
    assert rows[4][1] == "007" and rows[0][1] == "150"
    tags = {name: _rows(src, "SELECT tag FROM items ORDER BY id")
            for name, src in typed_targets.items()}
    # SQLite keeps 7 (an integer) among texts; a typed copy holds it as its text
    assert tags["sqlite"][1] == (7,)
    assert all(t[1] == ("7",) for name, t in tags.items() if name != "sqlite")


def test_column_kind_follows_sqlite_affinity() -> None:
    from blendsql.db.transfer import column_kind

    assert column_kind("TEXT", ["1", "2"]) == "TEXT"
    assert column_kind("VARCHAR(10)", ["007"]) == "TEXT"
    assert column_kind("INT", [1, None]) == "BIGINT"
    assert column_kind("INTEGER", [1, 2.5]) == "DOUBLE"       # 2.5 stays REAL in SQLite
    assert column_kind("DECIMAL(10,2)", [1, 2]) == "BIGINT"   # NUMERIC affinity
    assert column_kind("DECIMAL(10,2)", [1, 2.5]) == "DOUBLE"
    assert column_kind("DECIMAL(10,2)", []) == "DOUBLE"
    assert column_kind("DATETIME", ["2020-01-01 10:00"]) == "TEXT"
    assert column_kind("FLOATING POINT", [1]) == "BIGINT"     # "INT" comes first (§3.1)
    assert column_kind("", [1, 2]) == "BIGINT"
    assert column_kind("", ["a", 1]) == "TEXT"
    assert column_kind("REAL", [1]) == "DOUBLE"


def test_a_changed_table_is_read_again(tmp_path: Path) -> None:
    """With allow_writes, a table made or altered by the user is typed by its new columns."""
    import duckdb

    path = tmp_path / "w.duckdb"
    duckdb.connect(str(path)).close()
    bsql = BlendSQL(str(path), cache=False, allow_writes=True)
    bsql.execute("CREATE TABLE t (a VARCHAR)")
    bsql.execute("INSERT INTO t VALUES ('x'), ('b')")
    sql = 'SELECT a FROM t WHERE a = "b"'
    assert bsql.execute(sql).df["a"].tolist() == ["b"]
    bsql.execute("ALTER TABLE t ADD COLUMN b VARCHAR")
    bsql.execute("UPDATE t SET b = a")
    assert sorted(bsql.execute(sql).df["a"].tolist()) == ["b", "x"]  # now the column b


def test_spark_gives_sqlites_answers(typed_targets: dict[str, Any]) -> None:
    """What Spark reads its own way (its ANSI mode's errors, booleans, escapes, typeof,
    Unicode case), answered as SQLite answers (SQLite and Spark here: DuckDB names its
    own types and keeps Unicode upper(); PostgreSQL raises on a division by zero)."""
    if "spark" not in typed_targets:
        pytest.skip("no Spark session here (pyspark or Java missing)")
    targets = {name: typed_targets[name] for name in ("sqlite", "spark")}
    for sql in [
        "SELECT 7 / 0, 7.5 / 0, 7 % 0, -7 / 2, 7 / 2.0",  # NULL, not Spark's error
        "SELECT id, qty / 0, price / qty, qty % 2 FROM items",
        "SELECT id, qty > 2, (qty > 2) || '', (qty > 2) * 10 FROM items",
        "SELECT typeof(id), typeof(name), typeof(price), typeof(qty > 2), typeof(NULL), "
        "typeof(code) FROM items",
        "SELECT id FROM items WHERE name LIKE 'back\\%'",  # a backslash is no escape
        "SELECT id FROM items WHERE name LIKE 'b!ack%' ESCAPE '!'",  # '!b' is 'b'
        "SELECT id FROM items WHERE name LIKE 'l_mp%' OR name LIKE '%!_%' ESCAPE '!'",
        "SELECT id, upper(name), lower(name) FROM items",  # ASCII letters only
        "SELECT id, substr(name, 0, 3), substr(name, 3, -2), substr(name, -3, 2), "
        "instr(name, 'a'), round(price / 4, 1), round(-2.5), id || NULL FROM items",
        "SELECT length(group_concat(name, '|')), ifnull(NULL, 2) FROM items",
        "SELECT id, CAST(code AS INTEGER), CAST(code AS REAL), CAST(price AS INTEGER), "
        "CAST('12abc' AS INTEGER), max(qty, id), min(qty, price, 2) FROM items",
        "SELECT SUM(qty > 2), TOTAL(qty > 2), AVG(price) FROM items WHERE id > 100",
    ]:
        _same_everywhere(targets, sql)
    assert _rows(typed_targets["sqlite"], "SELECT upper(name) FROM items WHERE id = 5") == [
        ("ÉTAGèRE",)]
