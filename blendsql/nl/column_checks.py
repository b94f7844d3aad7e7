"""A check of column references that SQL accepts but a model did not mean.

In ``SELECT * FROM w WHERE w.school IN (SELECT school FROM programs)`` where
``programs`` has no ``school`` column, SQLite resolves ``school`` to the
outer query's ``w.school``: the subquery becomes correlated, the condition
holds for every row with a school, and the program runs without an error.
A model writes this when it guesses a column name; the fix it needs is the
inner table's real columns, which the retry prompt then names.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from blendsql.db.backend import Backend
from blendsql.errors import BlendSQLError
from blendsql.nl.source import as_backend


def outer_column_in_subquery(query: exp.Expression, db: object) -> str | None:
    """The first unqualified column of a subquery that is no column of the subquery's own
    tables but one of an enclosing query's, worded for the retry prompt; else None.

    Only subqueries whose sources are all database tables are checked (a derived
    table's or a CTE's columns are not looked up), and only unqualified names:
    ``outer_alias.col`` is a deliberate correlation.
    """
    try:
        scopes = traverse_scope(query)
    except Exception:  # noqa: BLE001 - sqlglot cannot scope it: no finding, SQLite decides
        return None
    cache: dict[tuple[str, str], set[str] | None] = {}
    conn = as_backend(db)
    for scope in scopes:
        if scope.parent is None or not scope.is_subquery:
            continue
        own = _source_columns(scope, conn, cache)
        if own is None:
            continue
        outer = _enclosing_columns(scope.parent, conn, cache)
        selects = scope.expression.selects if isinstance(scope.expression, exp.Query) else []
        aliases = {s.alias.lower() for s in selects if isinstance(s, exp.Alias)}
        for col in scope.columns:
            name = col.name.lower()
            if col.table or name in own or name in aliases or name not in outer:
                continue
            tables = ", ".join(sorted(_table_names(scope)))
            listing = ", ".join(sorted(own)[:12])
            return (f"in the subquery on {tables}, column {col.name} is not a column of {tables}; "
                    f"{conn.name} reads it as the outer query's {col.name} (the subquery then runs once "
                    f"per outer row with that row's value). Use a column of {tables} ({listing}), "
                    f"or qualify the outer column if that is meant")
    return None


def _table_names(scope: Scope) -> list[str]:
    return [s.name for s in scope.sources.values() if isinstance(s, exp.Table)]


def _source_columns(scope: Scope, conn: Backend,
                    cache: dict[tuple[str, str], set[str] | None]) -> set[str] | None:
    """Lower-case column names of the scope's tables; None if a source is not a table
    or its columns cannot be read."""
    cols: set[str] = set()
    for source in scope.sources.values():
        if not isinstance(source, exp.Table):
            return None
        found = _columns(source.db, source.name, conn, cache)
        if found is None:
            return None
        cols |= found
    return cols


def _enclosing_columns(scope: Scope | None, conn: Backend,
                       cache: dict[tuple[str, str], set[str] | None]) -> set[str]:
    cols: set[str] = set()
    while scope is not None:
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                cols |= _columns(source.db, source.name, conn, cache) or set()
        scope = scope.parent
    return cols


def _columns(schema: str, table: str, conn: Backend,
             cache: dict[tuple[str, str], set[str] | None]) -> set[str] | None:
    """Every name the database resolves as a column of ``schema.table``: its columns
    and, for a full-text table, its ``rank``, ``rowid`` and the column named after the
    table; None when the table is not found (or lives in another schema than the
    default one: then the database decides)."""
    key = (schema.lower(), table.lower())
    if key not in cache:
        names: set[str] = set()
        if not schema or schema.lower() == "main":
            try:
                names = {c.lower() for c, _ in conn.table_columns(table)}
                if names and table.lower() in {d.lower() for d in conn.fts_tables()}:
                    names |= {"rank", table.lower(), "rowid"}
            except BlendSQLError:
                names = set()
        cache[key] = names or None
    return cache[key]
