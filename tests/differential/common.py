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


def run_sql(db_id: str, sql: str, params: Sequence[Any] = ()) -> tuple[list[Row], int]:
    """Run plain SQL on the fixture; returns normalised rows and the column count."""
    con = connect_readonly(db_id)
    try:
        cur = con.execute(sql, tuple(params))
        rows = cur.fetchall()
        ncols = len(cur.description or ())
    finally:
        con.close()
    return normalise_rows(rows), ncols


def distinct_values(db_id: str, sql: str) -> set[Any]:
    """First column of ``sql`` as a set of normalised values, NULLs dropped."""
    rows, _ = run_sql(db_id, sql)
    return {r[0] for r in rows if r[0] is not None}


def run_blend(
    db_id: str, query: str, params: Sequence[Any] = ()
) -> tuple[Any, dict[str, Recorder]]:
    """Execute a BlendSQL query with fresh recording ingredients.

    Returns the Smoothie and the ingredient instances (to read what they got).
    """
    from blendsql import BlendSQL

    ingredients = fresh_ingredients()
    bsql = BlendSQL(str(db_path(db_id)), ingredients=list(ingredients.values()))
    smoothie = bsql.execute(query, params=list(params) if params else None)
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
