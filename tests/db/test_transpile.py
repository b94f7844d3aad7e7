"""The SQLite-flavoured SQL -> backend SQL translation (no database needed)."""

from __future__ import annotations

import pytest

from blendsql.db.transpile import Transpiler, bind
from blendsql.errors import ExecutionError


def test_parameters_take_each_driver_style() -> None:
    sql = "SELECT a FROM t WHERE b = :p0 AND c = :__bsql_x"
    assert Transpiler("duckdb")(sql) == ("SELECT a FROM t WHERE b = $p0 AND c = $__bsql_x",
                                         ["p0", "__bsql_x"])
    text, names = Transpiler("postgres")("SELECT a FROM t WHERE b = ? AND c LIKE 'x%'")
    # ILIKE: SQLite's LIKE folds ASCII letters (tests/db/test_dialect_parity.py)
    assert text == "SELECT a FROM t WHERE b = %s AND CAST(c AS TEXT) ILIKE 'x%%'"
    assert names == [None]


def test_bind_checks_names_and_styles() -> None:
    assert bind(["a", "a", "b"], {"a": 1, "b": 2, "c": 3}) == {"a": 1, "b": 2}
    assert bind([None, None], [1, 2]) == [1, 2]
    with pytest.raises(ExecutionError, match="no value bound"):
        bind(["a"], {})


def test_temp_schema_and_json_text() -> None:
    text, _ = Transpiler("postgres")('SELECT json_array(a, b) FROM temp."__bsql_t"')
    assert text == 'SELECT CAST(JSON_BUILD_ARRAY(a, b) AS TEXT) FROM pg_temp."__bsql_t"'


def test_sqlite_reads_numbers_as_text_in_string_functions() -> None:
    text, _ = Transpiler("duckdb")("SELECT lower(trim(id)) FROM t")
    assert text == "SELECT LOWER(CAST(TRIM(CAST(id AS TEXT)) AS TEXT)) FROM t"


def test_bare_columns_of_a_grouped_select() -> None:
    t = Transpiler("duckdb")
    assert t("SELECT a AS n, COUNT(*) FROM t GROUP BY f(a)")[0] == (
        "SELECT MIN(a) AS n, COUNT(*) FROM t GROUP BY F(a)")
    assert t("SELECT length(r), COUNT(*) FROM c GROUP BY 1")[0] == (
        "SELECT LENGTH(CAST(r AS TEXT)), COUNT(*) FROM c GROUP BY 1")
    assert t("SELECT name, MAX(age) FROM t GROUP BY city")[0] == (
        "SELECT name, MAX(age) FROM t GROUP BY city")  # SQLite's min/max row: left alone


def test_select_alias_in_where_and_derived_table_alias_on_postgres() -> None:
    t = Transpiler("postgres", columns=lambda table: {"name", "district"})
    text, _ = t("SELECT name, district = 'N' AS f FROM (SELECT * FROM city) WHERE f")
    assert "WHERE (district = 'N')" in text and "AS __bsql_sq" in text


def test_match_without_full_text_is_a_clear_error() -> None:
    with pytest.raises(ExecutionError, match="not available"):
        Transpiler("duckdb")("SELECT * FROM docs WHERE docs MATCH 'x'")


def test_several_statements_are_refused() -> None:
    with pytest.raises(ExecutionError, match="one SQL statement"):
        Transpiler("duckdb")("SELECT 1; SELECT 2")


def test_rowid_is_ctid_on_postgres_where_the_table_has_no_such_column() -> None:
    columns = {"w": {"player", "pick"}, "r": {"rowid", "x"}}
    t = Transpiler("postgres", columns=lambda table: columns.get(table.lower()))
    text, _ = t("SELECT w.player FROM w WHERE w.rowid IN (SELECT w.rowid FROM w WHERE pick = 5)")
    assert text == ("SELECT w.player FROM w WHERE w.ctid IN "
                    "(SELECT w.ctid FROM w WHERE pick = 5)")
    assert t("SELECT oid, _ROWID_ FROM w AS v")[0] == "SELECT ctid, ctid FROM w AS v"
    assert t("SELECT r.rowid FROM r")[0] == "SELECT r.rowid FROM r"  # a real column
    assert t("SELECT rowid FROM nowhere")[0] == "SELECT rowid FROM nowhere"  # unknown table
    assert Transpiler("duckdb")("SELECT w.rowid FROM w")[0] == "SELECT w.rowid FROM w"


# -- SQLite's typing on Spark (blendsql.db.sqlite_compat), from the catalogue's types ----

_SPARK_TYPES = {"items": {"id": "bigint", "name": "string", "qty": "bigint", "price": "double"},
                "__bsql_m0": {"k": "string", "v": "boolean"}}


def _spark(sql: str, params: object = None) -> str:
    t = Transpiler("spark", types=lambda name: _SPARK_TYPES.get(name.lower()))
    return t(sql, params)[0]


def test_spark_divides_integers_as_integers_and_by_zero_as_null() -> None:
    assert _spark("SELECT 7 / 2, qty / 0, price / 2, qty % id FROM items") == (
        "SELECT 7 DIV 2, qty DIV NULLIF(0, 0), TRY_DIVIDE(price, 2), qty % NULLIF(id, 0) "
        "FROM items")
    # a parameter is typed by the value it is bound to (Spark binds a literal)
    assert _spark("SELECT :n / 4", {"n": 6}) == "SELECT :n DIV 4"
    assert _spark("SELECT :n / 4", {"n": 6.5}) == "SELECT TRY_DIVIDE(:n, 4)"
    assert _spark("SELECT :n / 4") == "SELECT TRY_DIVIDE(:n, 4)"  # unknown: left to Spark
    # '?' stays untyped: a rewrite that repeats an operand would shift the later ones
    sql = "WITH t AS (SELECT * FROM items WHERE qty > ?) SELECT name FROM t WHERE name <> ?"
    assert _spark(sql, [2, "Lamp"]).count("?") == 2


def test_spark_truth_values_are_integers() -> None:
    assert _spark("SELECT qty > 2, (qty > 2) + 1 AS s, SUM(price > 1) FROM items") == (
        "SELECT CAST(qty > 2 AS INT) AS `qty > 2`, CAST((qty > 2) AS INT) + 1 AS s, "
        "SUM(CAST(price > 1 AS INT)) FROM items")
    assert _spark("SELECT id FROM items WHERE 1 - (qty > 2)") == (
        "SELECT id FROM items WHERE (1 - CAST((qty > 2) AS INT) <> 0)")
    # an ingredient's BOOLEAN output, looked up: summed as 1 / 0, kept in a projection
    sql = _spark("SELECT name, SUM((SELECT v FROM temp.__bsql_m0 WHERE k = name)) FROM items "
                 "GROUP BY name")
    assert "SUM(CAST(TRY_ELEMENT_AT(" in sql and "temp" not in sql
    assert _spark("SELECT TOTAL(qty) FROM items") == (
        "SELECT COALESCE(CAST(SUM(qty) AS DOUBLE), 0.0) FROM items")


def test_spark_like_has_sqlite_escapes_and_ascii_case() -> None:
    # SQLite's LIKE has no escape character: Spark's default one (a backslash) is escaped
    assert _spark("SELECT id FROM items WHERE name LIKE '%\\%'") == (
        "SELECT id FROM items WHERE CAST(name AS STRING) LIKE '%\\\\\\\\%'")
    # ESCAPE before an ordinary character: that character (Spark refuses it)
    assert _spark("SELECT id FROM items WHERE name LIKE 'c!%!a' ESCAPE '!'") == (
        "SELECT id FROM items WHERE CAST(name AS STRING) ILIKE 'c!%a' ESCAPE '!'")
    assert "REPLACE(" in _spark("SELECT a.id FROM items a, items b WHERE a.name LIKE b.name")


def test_spark_string_functions_mean_sqlites() -> None:
    assert _spark("SELECT upper(name), lower(name) FROM items") == (
        "SELECT TRANSLATE(CAST(name AS STRING), 'abcdefghijklmnopqrstuvwxyz', "
        "'ABCDEFGHIJKLMNOPQRSTUVWXYZ'), TRANSLATE(CAST(name AS STRING), "
        "'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') FROM items")
    assert _spark("SELECT typeof(qty), typeof(price > 1) FROM items") == (
        "SELECT CASE WHEN qty IS NULL THEN 'null' ELSE 'integer' END, "
        "CASE WHEN (price > 1) IS NULL THEN 'null' ELSE 'integer' END FROM items")
    assert _spark("SELECT (qty > 1) || '' FROM items") == (
        "SELECT CAST((qty > 1) AS INT) || '' FROM items")


def test_spark_substr_counts_as_sqlite() -> None:
    # start 0 stands before the first character; a negative length takes what precedes
    assert _spark("SELECT substr(name, 0, 3), substr(name, 0), substr(name, 4, -2), "
                  "substr(name, 2, 3) FROM items") == (
        "SELECT SUBSTRING(CAST(name AS STRING), 1, 2), SUBSTRING(CAST(name AS STRING), 1), "
        "SUBSTRING(CAST(name AS STRING), 2, 2), SUBSTRING(CAST(name AS STRING), 2, 3) "
        "FROM items")


def test_spark_casts_and_scalar_max_as_sqlite() -> None:
    assert _spark("SELECT CAST('12abc' AS REAL), CAST(price AS INTEGER), "
                  "CAST(price AS NUMERIC) FROM items") == (
        "SELECT CAST(12 AS DOUBLE), CAST(price AS BIGINT), CAST(price AS DOUBLE) FROM items")
    assert "REGEXP_EXTRACT(name" in _spark("SELECT CAST(name AS INTEGER) FROM items")
    assert _spark("SELECT max(qty, price) FROM items") == (
        "SELECT (CASE WHEN (qty) IS NULL OR (price) IS NULL THEN NULL ELSE "
        "GREATEST(qty, price) END) FROM items")
    # never repeated: typeof(?) / max(?, x) are left to Spark
    assert _spark("SELECT typeof(?), max(?, qty) FROM items", [1, 2]).count("?") == 2
