"""A table's primary and foreign keys for the plain-language layer.

As the backend's catalogue declares them (``Backend.keys``), else as the table's
stored CREATE statement does (SQLite keeps the statement and declares no keys
through the backend), else none. The dialogue state names a referent by its
primary key; value grounding follows foreign keys to the column that holds a value.
"""

from __future__ import annotations

import sqlglot
import sqlglot.errors
from sqlglot import exp

from blendsql.db.backend import Backend
from blendsql.errors import BlendSQLError
from blendsql.nl.serialize import TableInfo

#: (columns, referenced table, referenced columns)
ForeignKey = tuple[tuple[str, ...], str, tuple[str, ...]]


def _create(t: TableInfo) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(t.create_sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return None


def _own(t: TableInfo, names: list[str]) -> tuple[str, ...]:
    return tuple(c for n in names for c in t.columns if c.lower() == n.lower())


def primary_key(db: Backend, t: TableInfo) -> tuple[str, ...]:
    """``t``'s primary key columns (empty: none declared)."""
    try:
        pk = db.keys(t.name).primary
    except BlendSQLError:
        pk = ()
    if pk:
        return tuple(pk)
    create = _create(t)
    if create is None:
        return ()
    for key in create.find_all(exp.PrimaryKey):
        return _own(t, [e.name for e in key.expressions])
    for coldef in create.find_all(exp.ColumnDef):
        if coldef.find(exp.PrimaryKeyColumnConstraint) is not None:
            return _own(t, [coldef.name])
    return ()


def foreign_keys(db: Backend, t: TableInfo) -> list[ForeignKey]:
    """``t``'s foreign keys: (its columns, the table referenced, that table's columns)."""
    try:
        declared = list(db.keys(t.name).foreign)
    except BlendSQLError:
        declared = []
    if declared:
        return [(tuple(c), ref, tuple(rc)) for c, ref, rc in declared]
    create = _create(t)
    if create is None:
        return []
    out: list[ForeignKey] = []
    for fk in create.find_all(exp.ForeignKey):
        ref = fk.args.get("reference")
        target = ref.this if isinstance(ref, exp.Reference) else None
        if not isinstance(target, exp.Schema) or not isinstance(target.this, exp.Table):
            continue
        cols = _own(t, [e.name for e in fk.expressions])
        if cols:
            out.append((cols, target.this.name, tuple(e.name for e in target.expressions)))
    return out
