"""Turning argument nodes into Python values, and outputs into SQLite values.

Why: ingredients receive plain Python data (strings, numbers, lists,
DataFrames) and the engine stores their outputs as rows; both conversions
live here so every ingredient kind treats them alike.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd


def to_sqlite(v: Any) -> Any:
    """A value SQLite can store: scalars as is, containers as JSON text."""
    if v is None or isinstance(v, (str, int, float, bytes)):
        if isinstance(v, float) and math.isnan(v):
            return None
        return v
    if hasattr(v, "item") and not isinstance(v, (list, tuple, dict)):
        try:
            return to_sqlite(v.item())
        except (TypeError, ValueError):
            pass
    if v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, pd.DataFrame):
        return v.to_json(orient="records")
    if isinstance(v, (list, tuple, dict, set)):
        return json.dumps(list(v) if isinstance(v, (tuple, set)) else v, default=str)
    return str(v)


def first_column(rows: list[tuple[Any, ...]]) -> list[Any]:
    """Non-NULL values of the first column (NULLs are never passed to ingredients)."""
    return [r[0] for r in rows if r[0] is not None]


_PLAIN = (str, int, float, type(None))
_PLAIN_TYPES = frozenset({*_PLAIN, bool})


def outputs_to_sqlite(outputs: list[Any]) -> list[Any]:
    """``to_sqlite`` over a list, skipping the per-item work when all are plain.

    Why: a zero-cost ingredient over 100k values should not pay 100k Python
    calls just to be stored (bool is an int subclass: stored as 0 / 1).
    """
    kinds = set(map(type, outputs))  # one C-level pass instead of a generator per item
    if kinds <= _PLAIN_TYPES:
        if float not in kinds or not any(o != o for o in outputs if type(o) is float):
            return outputs
    return [to_sqlite(o) for o in outputs]
