"""Filling an engine temp table without INSERT: one ``CREATE TEMP TABLE .. AS SELECT``.

Why not ``executemany(INSERT ..)``: Python's sqlite3 module opens an
implicit transaction before every INSERT (unless ``isolation_level`` is
None), and that transaction holds a shared lock on the user's database
file until someone commits, so other processes could not write while the
session lived; INSERTs also raise the connection's ``total_changes``. A
``CREATE TABLE .. AS SELECT`` is DDL: no implicit transaction, no change
count, and it is also faster (100k rows: ~100 ms vs ~250 ms here).

The rows travel as one bound JSON text read by ``json_each``, which keeps
each value's storage class (JSON integers stay INTEGER, numbers with a
fraction or exponent REAL, strings TEXT; ``True`` becomes 1 as when bound)
and reads REALs back exactly. Values JSON cannot carry exactly (BLOBs,
integers beyond 64 bits, infinities, text with NUL characters) go as bound
parameters in ``VALUES`` rows of the same statement, split over several
statements only beyond SQLite's limit on parameters per statement.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

_JSON_TYPES = frozenset({str, int, float, bool, type(None)})
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
Statement = tuple[str, list[Any]]


def quote(name: str) -> str:
    """A double-quoted SQLite identifier."""
    return '"' + name.replace('"', '""') + '"'


def _json_ok(v: Any) -> bool:
    """True when ``v`` survives JSON -> ``json_each`` with its storage class and value."""
    t = type(v)
    if t is str:
        return "\x00" not in v and encodes_utf8(v)
    if t is int:
        return _INT64_MIN <= v <= _INT64_MAX
    if t is float:
        return math.isfinite(v)
    return t is bool or v is None


def encodes_utf8(text: str) -> bool:
    """False for text with a lone surrogate (binding it fails the same way)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _dumps(rows: list[Sequence[Any]], width: int) -> str | None:
    """The rows as JSON (flat for one column), or None when some value needs a parameter."""
    values = [r[0] for r in rows] if width == 1 else rows
    kinds = set(map(type, values)) if width == 1 else {type(v) for r in rows for v in r}
    if not kinds <= _JSON_TYPES:
        return None
    try:
        text = json.dumps(values, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):
        return None
    if "\\u0000" in text:
        return None
    if int in kinds:
        flat = values if width == 1 else (v for r in rows for v in r)
        if not all(_INT64_MIN <= v <= _INT64_MAX for v in flat if type(v) is int):
            return None
    return text if encodes_utf8(text) else None


def _json_select(columns: Sequence[str]) -> str:
    """``SELECT .. FROM json_each(?)`` naming the columns (no affinity: values kept)."""
    if len(columns) == 1:
        return f"SELECT value AS {quote(columns[0])} FROM json_each(?)"
    cols = ", ".join(f"json_extract(value, '$[{i}]') AS {quote(c)}"
                     for i, c in enumerate(columns))
    return f"SELECT {cols} FROM json_each(?)"


def _values_select(columns: Sequence[str], n_rows: int) -> str:
    """``SELECT .. FROM (VALUES (?, ..), ..)`` naming the columns."""
    row = "(" + ", ".join("?" for _ in columns) + ")"
    cols = ", ".join(f"column{i + 1} AS {quote(c)}" for i, c in enumerate(columns))
    return f"SELECT {cols} FROM (VALUES {', '.join([row] * n_rows)})"


def row_selects(columns: Sequence[str], rows: Iterable[Sequence[Any]],
                max_params: int) -> list[Statement]:
    """SELECT statements whose rows together are ``rows`` (the first names the columns).

    Each statement binds at most ``max_params`` parameters.
    """
    rows = list(rows)
    width = len(columns)
    text = _dumps(rows, width)
    if text is not None:
        return [(_json_select(columns), [text])]
    safe = [r for r in rows if all(_json_ok(v) for v in r)]
    unsafe = [r for r in rows if not all(_json_ok(v) for v in r)]
    out: list[Statement] = [(_json_select(columns), [_dumps(safe, width) or "[]"])]
    per = max(1, max_params // max(1, width) - 1)
    for i in range(0, len(unsafe), per):
        chunk = unsafe[i:i + per]
        out.append((_values_select(columns, len(chunk)), [v for r in chunk for v in r]))
    return out
