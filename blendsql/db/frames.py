"""Rows from SQLite as a pandas DataFrame: one helper for every result.

Why one helper: a query's result must have the same columns whether or not
it returned rows. ``SELECT x, x FROM t`` has two columns named ``x``; a
dict-based constructor keeps one of them, and only on the empty path, so
``df.shape`` would depend on the data. Columns are therefore always set by
position, duplicates and order kept as SQLite reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd


def rows_to_frame(cols: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """A DataFrame with exactly ``cols`` (duplicates and order kept) holding ``rows``.

    Values keep their SQLite storage class as Python objects where pandas
    would otherwise coerce mixed columns; an empty result has ``object``
    columns (nothing is known about their type).
    """
    names = list(cols)
    unique = len(set(names)) == len(names)
    if rows:
        if unique:  # the common case, one constructor call
            return pd.DataFrame.from_records(list(rows), columns=names)
        frame = pd.DataFrame.from_records(list(rows), columns=range(len(names)))
    elif unique:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in names}, columns=names)
    else:
        frame = pd.DataFrame({i: pd.Series([], dtype=object) for i in range(len(names))})
    frame.columns = pd.Index(names, dtype=object)  # by position: duplicates kept
    return frame
