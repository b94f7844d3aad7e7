"""Collecting a candidate query's distinct values without SQLite's DISTINCT.

Why: ``SELECT DISTINCT x FROM big`` makes SQLite sort the values into an
ephemeral B-tree; on 100k distinct strings that costs ~3x a plain scan
(measured: 270 ms vs 90 ms CPU, benchmarks/engine_overhead.py's table).
Handing each row's value to a Python dict (a registered function, called
by SQLite once per row in C) deduplicates by hashing, in first-seen order,
and costs about as much as DISTINCT when there are few distinct values.
The values are data read from SQLite, never SQL text.

Faster still for a plain column of one table: one ``json_group_array``
aggregate builds the whole list in C and Python's C JSON decoder turns it
into objects (100k values: ~20 ms instead of ~50 ms through the per-row
function). Text and integers survive JSON exactly (and stay apart: ``1``
and ``'1'``), a BLOB makes the aggregate fail, and a REAL may not survive
(``0.1 + 0.2`` becomes ``0.3``): a decoded float sends the query back to the
per-row collector, as the failure does. No probe of the column's type is
needed first. The one string holds every row's value, so it is used only on
tables of at most ``JSON_MAX_ROWS`` rows (tested in the same statement: the
object is a table, and its largest rowid; :func:`sized_json_text`).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
from typing import Any

from sqlglot import exp

from blendsql.plan.render import SQLITE

_NAMES = itertools.count()
_FREE: list[str] = []  # collector names no collector is using now
_FREE_LOCK = threading.Lock()


def collectable(cand: exp.Expression) -> bool:
    """True for ``SELECT DISTINCT <one expr> FROM ... [WHERE ...]`` without grouping,
    ordering, limits, aggregates or windows (the shape a per-row collector
    reproduces exactly)."""
    if not isinstance(cand, exp.Select) or not cand.args.get("distinct"):
        return False
    if len(cand.expressions) != 1 or cand.args.get("from_") is None:
        return False
    if any(cand.args.get(k) is not None for k in ("group", "having", "order", "limit",
                                                   "offset", "qualify", "windows")):
        return False
    value = cand.expressions[0]
    return not any(isinstance(n, (exp.AggFunc, exp.Window, exp.Star)) for n in value.walk())


class Collector:
    """A SQL function that records the values it is called with.

    Use as a context manager around one statement: the function is bound to
    the recording dict only while the statement runs. Names come from a
    process-wide free list and are reused, because Python cannot remove a
    registered function (registering ``None`` keeps the name in ``PRAGMA
    function_list``): a fresh name per statement made the list grow by one
    per query. A name is in use by one collector at a time, so nested or
    concurrent collectors never share one.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        with _FREE_LOCK:
            self.name = _FREE.pop() if _FREE else f"__bsql_collect{next(_NAMES)}"
        self.seen: dict[Any, None] = {}

    def rewrite(self, cand: exp.Select) -> exp.Select:
        """``SELECT COUNT(<name>(<expr>)) FROM ...``: same rows, one call per row.

        Mutates ``cand`` (a fresh candidate built for this run).
        """
        value = cand.expressions[0]
        if isinstance(value, exp.Alias):
            value = value.this
        cand.set("distinct", None)
        call = exp.Anonymous(this=self.name, expressions=[value])
        cand.set("expressions", [exp.Count(this=call)])
        return cand

    def values(self) -> list[Any]:
        """Distinct non-NULL values seen, in first-seen order."""
        return [v for v in self.seen if v is not None]

    def __enter__(self) -> Collector:
        self.conn.create_function(self.name, 1, self.seen.setdefault)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.conn.create_function(self.name, 1, None)  # drop the reference to `seen`
        except sqlite3.Error:
            pass
        with _FREE_LOCK:
            _FREE.append(self.name)


def without_distinct(cand: exp.Select) -> exp.Select:
    """A collectable candidate's rows with duplicates (a copy, DISTINCT dropped).

    For connections where no collector function may be registered (a
    connection the user handed in): SQLite's DISTINCT would merge values
    that its collation calls equal (``'AB'`` and ``'ab'`` under NOCASE),
    which the collector never does.
    """
    out = cand.copy()
    out.set("distinct", None)
    return out


def distinct_values(rows: list[tuple[Any, ...]]) -> list[Any]:
    """Distinct non-NULL values of the first column, in first-seen order (by hash,
    as the collector deduplicates)."""
    seen = dict.fromkeys(r[0] for r in rows)
    seen.pop(None, None)
    return list(seen)


JSON_MAX_ROWS = 2_000_000


def json_candidate(cand: exp.Select) -> str | None:
    """``SELECT json_group_array(<column>) FROM <one table> [WHERE ...]`` as text, or None.

    None unless ``cand`` is collectable, selects a plain column and reads
    one table without joins or CTEs. Does not mutate ``cand``: its parts are
    rendered as they are (no copy of the candidate is made for this).
    """
    return json_text(cand) if json_shaped(cand) else None


def json_text(cand: exp.Select) -> str:
    """:func:`json_candidate`'s text for a candidate known to be :func:`json_shaped`."""
    value = cand.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    parts = [f"SELECT JSON_GROUP_ARRAY({_text(value)})", _text(cand.args["from_"])]
    if cand.args.get("where") is not None:
        parts.append(_text(cand.args["where"]))
    return " ".join(parts)


def json_shaped(cand: exp.Expression) -> bool:
    """True when ``cand`` is ``SELECT DISTINCT <column> FROM <one table> [WHERE ...]``:
    collectable, no joins or CTEs (the shape :func:`json_candidate` writes)."""
    return collectable(cand) and isinstance(cand, exp.Select) and one_table_column(cand)


def one_table_column(cand: exp.Select) -> bool:
    """For a :func:`collectable` candidate: True when it selects a plain column of one
    table, without joins or CTEs (what makes it :func:`json_shaped`)."""
    if cand.args.get("joins") or cand.args.get("with_"):
        return False
    value = cand.expressions[0]
    value = value.this if isinstance(value, exp.Alias) else value
    return isinstance(value, exp.Column) and isinstance(cand.args["from_"].this, exp.Table)


def sized_json_text(cand: exp.Select, as_json: str) -> str:
    """One statement: ``as_json`` (:func:`json_text`) when the source is a rowid table of
    at most ``JSON_MAX_ROWS`` rows, else NULL (a view: its size is unknown without
    running it; a temp or CTE name: not in ``sqlite_master``).

    The size test is part of the statement (the object's kind, then, for a table
    only, its largest rowid), so the values come back without a probe statement
    before them. A WITHOUT ROWID table makes the statement fail, as a BLOB in the
    column does: the caller collects row by row then.
    """
    src = cand.args["from_"].this
    schema = f"{_text(exp.to_identifier(src.db))}." if src.db else ""
    name = _text(exp.to_identifier(src.name))
    lit = _text(exp.Literal.string(src.name))
    kind = f"(SELECT type FROM {schema}sqlite_master WHERE name = {lit} COLLATE NOCASE)"
    return (f"SELECT CASE WHEN {kind} = 'table' AND coalesce((SELECT MAX(rowid) FROM "
            f"{schema}{name}), 0) <= {JSON_MAX_ROWS} THEN ({as_json}) END")


def _text(node: exp.Expression) -> str:
    """SQLite text of a candidate's part, rendered without copying it."""
    return str(SQLITE.generate(node, copy=False))


def json_values(text: str | None) -> list[Any] | None:
    """Distinct non-NULL values of ``json_candidate``'s array, in first-seen order.

    None when JSON may have changed a value (a REAL: a float came back): the
    caller collects them row by row instead.
    """
    seen = dict.fromkeys(json.loads(text or "[]"))
    seen.pop(None, None)  # one O(1) removal instead of a filtering pass over all values
    if float in set(map(type, seen)):
        return None
    return list(seen)
