"""The same pairs through the other database inputs: an open sqlite3 connection
and a dict of DataFrames. The meaning must not depend on how the data arrived.

Only databases whose columns survive a pandas round trip unchanged are used
(no INTEGER column with NULLs, which pandas would turn into REAL).
"""

from __future__ import annotations

import sqlite3
from collections import Counter

import pandas as pd
import pytest

from .common import assert_same_rows, connect_readonly, db_path, df_rows, run_sql
from .ingredients import fresh_ingredients
from .pairs import PAIRS, Pair

ROUND_TRIP_DBS = ("concert_singer", "employee_hire_evaluation", "pets_1")
PARAMS = [pytest.param(p, id=p.id) for p in PAIRS if p.db in ROUND_TRIP_DBS]


def _frames(db_id: str) -> dict[str, pd.DataFrame]:
    """Every table of a fixture database as a DataFrame."""
    con = connect_readonly(db_id)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: pd.read_sql_query(f'SELECT * FROM "{n}"', con) for n in names}
    finally:
        con.close()


def _check(pair: Pair, got_df: pd.DataFrame) -> None:
    """Rows equal to the twin's, by the pair's order mode."""
    twin, _ = run_sql(pair.db, pair.twin, pair.params)
    got = df_rows(got_df)
    if pair.order == "sample":
        assert pair.sample_of is not None
        full, _ = run_sql(pair.db, pair.sample_of, pair.params)
        assert len(got) == len(twin)
        assert not Counter(got) - Counter(full)
        return
    assert_same_rows(got, twin, pair.order == "exact", pair.id)


def test_round_trip_dbs_have_no_nullable_integers() -> None:
    """Guard for the choice above: a NULL in an INTEGER column would change types."""
    for db in ROUND_TRIP_DBS:
        for name, df in _frames(db).items():
            for col in df.columns:
                assert not (df[col].isna().any() and df[col].dtype.kind == "f"), (db, name, col)


@pytest.mark.parametrize("pair", PARAMS)
def test_dataframe_input_matches_twin(pair: Pair) -> None:
    """``BlendSQL({name: DataFrame})`` gives the twin's rows."""
    from blendsql import BlendSQL

    bsql = BlendSQL(_frames(pair.db), ingredients=list(fresh_ingredients().values()))
    smoothie = bsql.execute(pair.query, params=list(pair.params) if pair.params else None)
    _check(pair, smoothie.df)


@pytest.mark.parametrize("pair", PARAMS)
def test_connection_input_matches_twin_and_leaves_no_temp_tables(pair: Pair) -> None:
    """An open connection works too, and the session's temp tables are dropped."""
    from blendsql import BlendSQL

    con = sqlite3.connect(f"file:{db_path(pair.db)}?mode=ro", uri=True)
    try:
        bsql = BlendSQL(con, ingredients=list(fresh_ingredients().values()))
        smoothie = bsql.execute(pair.query, params=list(pair.params) if pair.params else None)
        _check(pair, smoothie.df)
        leftovers = con.execute("SELECT name FROM temp.sqlite_master").fetchall()
        assert leftovers == [], leftovers
    finally:
        con.close()


@pytest.mark.parametrize("pair", PARAMS)
def test_duckdb_connection_input_matches_twin_and_leaves_no_temp_objects(pair: Pair) -> None:
    """A handed-in DuckDB connection: the twin's rows (on DuckDB), no engine object left."""
    duckdb = pytest.importorskip("duckdb")
    from blendsql import BlendSQL

    from .common import skip_unless_portable, target

    skip_unless_portable(pair.id, "duckdb")
    con = duckdb.connect(target(pair.db, "duckdb"), read_only=True)
    try:
        bsql = BlendSQL(con, ingredients=list(fresh_ingredients().values()))
        smoothie = bsql.execute(pair.query, params=list(pair.params) if pair.params else None)
        twin, _ = run_sql(pair.db, pair.twin, pair.params, "duckdb")
        got = df_rows(smoothie.df)
        if pair.order == "sample":
            assert len(got) == len(twin)
        else:
            assert_same_rows(got, twin, pair.order == "exact", pair.id)
        left = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()
        views = con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT "
                            "internal").fetchone()
        assert left == (0,) and views == (0,)
    finally:
        con.close()
