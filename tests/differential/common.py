"""Helpers shared by the differential tests: running twins, the engine, and
normalising result rows so that only real differences count."""

from __future__ import annotations

import math
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .ingredients import Recorder, fresh_ingredients

SPIDER_DIR = Path(__file__).resolve().parent.parent / "data" / "spider"

Row = tuple[Any, ...]


def db_path(db_id: str) -> Path:
    """Path of a fixture Spider database copied under tests/data/spider."""
    return SPIDER_DIR / db_id / f"{db_id}.sqlite"


def connect_readonly(db_id: str) -> sqlite3.Connection:
    """Open a fixture read-only, so no test can change the shared files."""
    return sqlite3.connect(f"file:{db_path(db_id)}?mode=ro", uri=True)


def normalise_cell(value: Any) -> Any:
    """One comparable Python value per SQL value.

    Why each rule: pandas turns NULL into NaN / NA / None depending on the
    dtype; an INTEGER column with NULLs comes back as float64; SQLite has no
    boolean type (True is 1); numpy scalars are not Python scalars. Strings are
    never converted to numbers, so ``'1'`` and ``1`` still differ, and
    non-integral floats keep 9 decimals (plain SQL arithmetic, no tolerance
    beyond representation noise).
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer():
            return int(value)
        return round(value, 9)
    return value


def normalise_rows(rows: Iterable[Sequence[Any]]) -> list[Row]:
    """Normalise every cell of every row, keeping the order."""
    return [tuple(normalise_cell(v) for v in row) for row in rows]


def df_rows(df: pd.DataFrame) -> list[Row]:
    """Rows of a result DataFrame as normalised tuples (index ignored)."""
    return normalise_rows(df.astype(object).itertuples(index=False, name=None))


#: pairs whose meaning is SQLite's own, which the translation gives Spark (no index to
#: keep) but not DuckDB / PostgreSQL (the reason is the skip message)
NOT_ON_DUCKDB_POSTGRES = {
    "where_upper_non_ascii": "the twin relies on SQLite's ASCII-only upper() (DuckDB's and "
    "PostgreSQL's upper() are kept: PostgreSQL's indexes on upper() / lower() serve them)",
    "qa_output_types_preserved": "typeof() names differ (SQLite 'integer' vs 'BIGINT')",
}


#: pairs whose meaning is SQLite's own, skipped on the typed backends (the reason is the
#: skip message). Each is a real difference, listed so it stays visible:
SQLITE_ONLY = {
    "preagg_after_where_ingredient": "exact values promise SQLite's pre-aggregation plan",
    "alias_inside_having_call": "a map over an ungrouped column in HAVING (SQLite's bare "
    "columns)",
    "preagg_distinct_over_call_expression": "a map over an ungrouped column outside the "
    "projection (SQLite's bare columns)",
    "preagg_expression_aggregates_and_key_arithmetic": "a map over an ungrouped column "
    "outside the projection (SQLite's bare columns)",
}


#: pairs whose twin needs SQLite's loose typing, which PostgreSQL refuses
NOT_ON_POSTGRES = {
    "map_output_types_preserved": "typeof() is SQLite's",
}


#: pairs whose twin needs SQLite's typing, which the translation gives DuckDB, PostgreSQL
#: and Spark from their column types (blendsql.db.sqlite_compat); skipped on backends
#: without it (the reason is the skip message)
NEEDS_SQLITE_COMPAT = {
    "arithmetic_inverts_and_of_predicates": "arithmetic on booleans is SQLite's",
    "preagg_avg_of_no_values_is_null": "the twin uses SQLite's total()",
    "preagg_avg_total_count_with_nulls_and_where": "the twin uses SQLite's total()",
    "having_count_over_predicate": "SUM over a boolean (SQLite's booleans are integers)",
    "group_sum_predicate_big_join": "SUM over a boolean (SQLite's booleans are integers)",
    "and_of_predicates_compared_with_zero": "boolean = integer (SQLite's booleans)",
}
_TYPED = ("sqlite", "duckdb", "postgres", "spark")


#: pairs Spark SQL cannot run as SQLite does (the reason is the skip message). Not a
#: typing difference: Spark runs a recursive CTE one level per step (a job each; 2,000
#: levels took a minute on a 2-core machine), and stops it with RECURSION_LEVEL_LIMIT_EXCEEDED
#: after 100 levels (spark.sql.cteRecursionLevelLimit) unless the CTE says ``MAX RECURSION
#: LEVEL n``, which is Spark's syntax, not SQLite's (a BlendSQL query is SQLite's)
_DEEP_RECURSION = ("a recursive CTE of 20,000 levels: Spark stops a recursive CTE after 100 "
                   "levels (RECURSION_LEVEL_LIMIT_EXCEEDED, spark.sql.cteRecursionLevelLimit) "
                   "and runs one job per level")
NOT_ON_SPARK = {
    "lazy_recursive_cte_pages": _DEEP_RECURSION,
    "lazy_negative_filter": _DEEP_RECURSION,
}


#: pairs with a LIMIT (and OFFSET) but no ORDER BY that expect SQLite's scan order: Spark
#: promises no row order there (any matching rows are right), so on Spark their rows are
#: checked as a sample (as many rows as the twin gives, each a row of the twin without
#: its LIMIT / OFFSET) instead of skipped
UNORDERED_ON_SPARK = frozenset({"lazy_limit_scan_order", "lazy_limit_offset_plain_first"})


def without_limit(sql: str) -> str:
    """``sql`` (SQLite's) without its outermost LIMIT / OFFSET."""
    import sqlglot

    tree = sqlglot.parse_one(sql, read="sqlite")
    tree.set("limit", None)
    tree.set("offset", None)
    return tree.sql(dialect="sqlite")


def skip_unless_portable(pair_id: str, backend: str) -> None:
    """Skip a SQLite-only pair on another backend, saying why."""
    import pytest

    if backend in ("duckdb", "postgres") and pair_id in NOT_ON_DUCKDB_POSTGRES:
        pytest.skip(f"{pair_id} on {backend}: {NOT_ON_DUCKDB_POSTGRES[pair_id]}")
    if backend != "sqlite" and pair_id in SQLITE_ONLY:
        pytest.skip(f"{pair_id} on {backend}: {SQLITE_ONLY[pair_id]}")
    if backend == "postgres" and pair_id in NOT_ON_POSTGRES:
        pytest.skip(f"{pair_id} on postgres: {NOT_ON_POSTGRES[pair_id]}")
    if backend not in _TYPED and pair_id in NEEDS_SQLITE_COMPAT:
        pytest.skip(f"{pair_id} on {backend}: {NEEDS_SQLITE_COMPAT[pair_id]}")
    if backend == "spark" and pair_id in NOT_ON_SPARK:
        pytest.skip(f"{pair_id} on spark: {NOT_ON_SPARK[pair_id]}")


#: the backends the engine checks run on (postgres: only where a server can start;
#: spark: only where pyspark and Java are installed)
BACKENDS = ("sqlite", "duckdb", "postgres", "spark")
_TARGETS: dict[tuple[str, str], Any] = {}
#: "dir": temp dir of DuckDB copies, "pg": the PgServer, "spark": the SparkSession
_COPIES: dict[str, Any] = {}


def use_postgres(server: Any) -> None:
    """The session's PostgreSQL server (see tests/pg_server.py), for the postgres backend."""
    _COPIES["pg"] = server


def use_spark(session: Any) -> None:
    """The session's local Spark session (see tests/spark_session.py), for spark."""
    _COPIES["spark"] = session


def target(db_id: str, backend: str) -> Any:
    """What ``BlendSQL(...)`` opens for a fixture on a backend (a copy of the same data)."""
    if backend == "sqlite":
        return str(db_path(db_id))
    key = (db_id, backend)
    if key not in _TARGETS:
        if backend == "duckdb":
            import tempfile

            from blendsql.db.transfer import sqlite_to_duckdb

            base = _COPIES.setdefault("dir", Path(tempfile.mkdtemp(prefix="bsql_duck_")))
            _TARGETS[key] = str(sqlite_to_duckdb(db_path(db_id), base / f"{db_id}.duckdb"))
        elif backend == "spark":
            # a dict of DataFrames: each BlendSQL registers them as temp views of the
            # shared session and drops them at close (the callers close every one)
            from spark_session import frames_from_sqlite

            _TARGETS[key] = frames_from_sqlite(_COPIES["spark"], db_path(db_id))
        else:
            from blendsql.db.transfer import sqlite_to_postgres

            url = _COPIES["pg"].create_db(db_id)
            sqlite_to_postgres(db_path(db_id), url)
            _TARGETS[key] = url
    return _TARGETS[key]


def run_sql(db_id: str, sql: str, params: Sequence[Any] = (),
            backend: str = "sqlite") -> tuple[list[Row], int]:
    """Run plain SQL on the fixture; returns normalised rows and the column count.

    On another backend the same SQL text goes through that backend's
    translation (the twin is the same text on every backend).
    """
    if backend != "sqlite":
        from blendsql.db.backend import open_database

        db = open_database(target(db_id, backend))
        try:
            cols, rows = db.execute(sql, list(params) if params else None)
        finally:
            db.close()
        return normalise_rows(rows), len(cols)
    con = connect_readonly(db_id)
    try:
        cur = con.execute(sql, tuple(params))
        rows = cur.fetchall()
        ncols = len(cur.description or ())
    finally:
        con.close()
    return normalise_rows(rows), ncols


def distinct_values(db_id: str, sql: str, backend: str = "sqlite") -> set[Any]:
    """First column of ``sql`` as a set of normalised values, NULLs dropped."""
    rows, _ = run_sql(db_id, sql, backend=backend)
    return {r[0] for r in rows if r[0] is not None}


def run_blend(
    db_id: str, query: str, params: Sequence[Any] = (), backend: str = "sqlite"
) -> tuple[Any, dict[str, Recorder]]:
    """Execute a BlendSQL query with fresh recording ingredients.

    Returns the Smoothie and the ingredient instances (to read what they got).
    """
    from blendsql import BlendSQL

    ingredients = fresh_ingredients()
    bsql = BlendSQL(target(db_id, backend), ingredients=list(ingredients.values()))
    try:
        smoothie = bsql.execute(query, params=list(params) if params else None)
    finally:
        if backend != "sqlite":
            bsql.close()
    return smoothie, ingredients


def multiset(rows: Iterable[Row]) -> Counter[Row]:
    """Rows as a multiset (order-insensitive, duplicates kept)."""
    return Counter(rows)


def assert_same_rows(got: list[Row], want: list[Row], ordered: bool, context: str) -> None:
    """Equal as lists (ordered) or as multisets; the message shows the difference."""
    if ordered:
        assert got == want, f"{context}\nengine: {got}\ntwin:   {want}"
        return
    g, w = multiset(got), multiset(want)
    assert g == w, (
        f"{context}\nonly in engine: {dict(g - w)}\nonly in twin:   {dict(w - g)}"
    )
