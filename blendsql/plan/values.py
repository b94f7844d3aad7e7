"""Turning argument nodes into Python values, and outputs into SQLite values.

Why: ingredients receive plain Python data (strings, numbers, lists,
DataFrames) and the engine stores their outputs as rows; both conversions
live here so every ingredient kind treats them alike.

Whatever an ingredient or a model returns, ``to_sqlite`` gives something
SQLite can store and never raises: integers beyond SQLite's 64-bit range
become REAL (as SQLite itself reads an over-long integer literal), NaN
becomes NULL (as SQLite stores a NaN), containers become JSON text, and
anything else its text. ``lossy_notes`` says, for the trace, where such a
conversion lost information.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TEXT_BYTES = 1_000_000_000  # SQLite's default SQLITE_MAX_LENGTH for one string / blob


def to_sqlite(v: Any) -> Any:
    """A value SQLite can store: scalars as is, containers as JSON text; never raises."""
    return _convert(v, None)


def _convert(v: Any, notes: list[str] | None) -> Any:
    """``to_sqlite``, appending a note for each conversion that loses information."""
    if v is None or isinstance(v, str):
        return _text(v, notes) if isinstance(v, str) else v
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return _integer(v, notes)
    if isinstance(v, float):
        if math.isnan(v):
            _note(notes, "NaN stored as NULL")
            return None
        return v  # +-inf is a REAL SQLite stores and compares
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v) if len(v) <= MAX_TEXT_BYTES else _text(bytes(v).hex(), notes)
    if isinstance(v, decimal.Decimal):
        return _decimal(v, notes)
    if v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, pd.DataFrame):
        return _text(v.to_json(orient="records", default_handler=str), notes)
    if isinstance(v, (list, tuple, dict, set, frozenset)):
        return _text(json.dumps(_jsonable(v, notes), allow_nan=False), notes)
    if _is_array(v):  # a numpy array / pandas Series: its items as a JSON list
        return _convert(list(v.tolist()), notes)
    unwrapped = _numpy_item(v)
    if unwrapped is not v:
        return _convert(unwrapped, notes)
    if isinstance(v, _dt.datetime | _dt.date | _dt.time):
        return v.isoformat(sep=" ") if isinstance(v, _dt.datetime) else v.isoformat()
    if isinstance(v, complex):
        _note(notes, f"complex number {v!r} stored as text")
    return _text(_safe_str(v), notes)


def _integer(v: int, notes: list[str] | None) -> int | float:
    """Within int64 as is; beyond, the nearest REAL (SQLite's reading of such a literal)."""
    if INT64_MIN <= v <= INT64_MAX:
        return v
    try:
        f = float(v)
    except OverflowError:
        f = math.inf if v > 0 else -math.inf
    _note(notes, f"integer with {len(_digits(v))} digits exceeds SQLite's 64-bit INTEGER; "
          f"stored as REAL {f!r}")
    return f


def _digits(v: int) -> str:
    """Decimal digits of ``abs(v)`` (rough for huge ints: str() refuses > 4300 digits)."""
    try:
        return str(abs(v))
    except ValueError:
        return "9" * int(abs(v).bit_length() * math.log10(2))


def _decimal(v: decimal.Decimal, notes: list[str] | None) -> Any:
    """A Decimal as INTEGER when whole, else REAL (noted when the REAL is not exact)."""
    if v.is_nan():
        _note(notes, "Decimal NaN stored as NULL")
        return None
    if v.is_infinite():
        return float(v)
    if v == v.to_integral_value():
        return _integer(int(v), notes)
    f = float(v)
    if decimal.Decimal(repr(f)) != v:
        _note(notes, f"Decimal {v} stored as the REAL {f!r}")
    return f


def _text(s: str, notes: list[str] | None) -> str:
    """Text within SQLite's string length limit (cut, with a note, beyond it)."""
    if len(s) > MAX_TEXT_BYTES // 4 and len(s.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        _note(notes, f"text of {len(s)} characters cut to SQLite's {MAX_TEXT_BYTES} byte limit")
        return s.encode("utf-8", "surrogatepass")[:MAX_TEXT_BYTES].decode("utf-8", "ignore")
    return s


def _numpy_item(v: Any) -> Any:
    """A numpy / pandas scalar's Python value (``v`` itself when there is none)."""
    item = getattr(v, "item", None)
    if item is None or not callable(item):
        return v
    try:
        out = item()
    except (TypeError, ValueError):
        return v
    return v if type(out) is type(v) else out  # e.g. longdouble.item() is itself


def _is_array(v: Any) -> bool:
    """A numpy array of any shape or a pandas Series / Index (not a numpy scalar)."""
    return isinstance(v, (pd.Series, pd.Index)) or (
        type(v).__name__ == "ndarray" and callable(getattr(v, "tolist", None)))


def _safe_str(v: Any) -> str:
    try:
        return str(v)
    except Exception:  # noqa: BLE001 - a user object's broken __str__ must not fail the query
        return repr(type(v))


def _jsonable(v: Any, notes: list[str] | None) -> Any:
    """A container as JSON-ready data: sets sorted, keys as text, NaN / inf as null."""
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, int):
        return v  # JSON text holds any integer exactly
    if isinstance(v, float):
        if not math.isfinite(v):
            _note(notes, f"{v!r} inside a list / dict stored as JSON null")
            return None
        return v
    if isinstance(v, dict):
        return {_key(k): _jsonable(x, notes) for k, x in v.items()}
    if isinstance(v, (set, frozenset)):
        return [_jsonable(x, notes) for x in sorted(v, key=_sort_key)]
    if isinstance(v, (list, tuple)):
        return [_jsonable(x, notes) for x in v]
    if _is_array(v):
        return [_jsonable(x, notes) for x in v.tolist()]
    if isinstance(v, decimal.Decimal):
        return _jsonable(_decimal(v, notes), notes)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    unwrapped = _numpy_item(v)
    if unwrapped is not v:
        return _jsonable(unwrapped, notes)
    if isinstance(v, pd.DataFrame):
        return json.loads(v.to_json(orient="records", default_handler=str))
    if isinstance(v, _dt.datetime | _dt.date | _dt.time):
        return v.isoformat()
    return _safe_str(v)


def _key(k: Any) -> str:
    """A dict key as JSON needs it: text."""
    return k if isinstance(k, str) else json.dumps(_jsonable(k, None), default=str)


def _sort_key(x: Any) -> tuple[str, str]:
    """A total order over mixed set items, so a set's JSON is the same every run."""
    return (type(x).__name__, repr(x))


def _note(notes: list[str] | None, text: str) -> None:
    if notes is not None:
        notes.append(text)


def lossy_notes(outputs: Iterable[Any], limit: int = 5) -> list[str]:
    """Trace warnings for the outputs whose storage in SQLite loses information.

    Why separate from ``to_sqlite``: the engine stores outputs in several
    places (map tables, QA parameters, join pairs); checking them once where
    the ingredient returns keeps the conversion itself a plain function. Only
    the first ``limit`` distinct problems are listed, with a count of the rest.
    """
    items = outputs if isinstance(outputs, list) else list(outputs)
    if set(map(type, items)) <= _SAFE_TYPES:  # the common case: nothing to check
        return []
    notes: list[str] = []
    for v in items:
        if isinstance(v, dict):
            for k, x in v.items():
                _convert(k, notes)
                _convert(x, notes)
        elif not isinstance(v, _PLAIN_TYPES_TUPLE) or (isinstance(v, float) and v != v) or (
                type(v) is int and not INT64_MIN <= v <= INT64_MAX):
            _convert(v, notes)
    unique = list(dict.fromkeys(notes))
    shown = unique[:limit]
    if len(unique) > limit:
        shown.append(f"... and {len(unique) - limit} more value conversion(s)")
    return shown


def first_column(rows: list[tuple[Any, ...]]) -> list[Any]:
    """Non-NULL values of the first column (NULLs are never passed to ingredients)."""
    return [r[0] for r in rows if r[0] is not None]


_PLAIN = (str, int, float, type(None))
_PLAIN_TYPES = frozenset({*_PLAIN, bool})
_PLAIN_TYPES_TUPLE = (str, int, float, bool, type(None))
_SAFE_TYPES = frozenset({str, bool, type(None)})


def outputs_to_sqlite(outputs: list[Any]) -> list[Any]:
    """``to_sqlite`` over a list, skipping the per-item work when all are plain.

    Why: a zero-cost ingredient over 100k values should not pay 100k Python
    calls just to be stored (bool is an int subclass: stored as 0 / 1).
    """
    kinds = set(map(type, outputs))  # one C-level pass instead of a generator per item
    if kinds <= _PLAIN_TYPES:
        fine = float not in kinds or not any(o != o for o in outputs if type(o) is float)
        if fine and int in kinds:
            fine = all(INT64_MIN <= o <= INT64_MAX for o in outputs if type(o) is int)
        if fine:
            return outputs
    return [to_sqlite(o) for o in outputs]
