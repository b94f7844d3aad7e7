"""Resolving result-column aliases used in WHERE / GROUP BY / HAVING / ORDER BY.

Why: SQLite lets a query name a SELECT expression by its alias elsewhere in
the same SELECT (``SELECT {{M(x)}} AS f FROM t WHERE f = TRUE``). The engine
plans each clause on its own (a candidate query is the scope's FROM / WHERE
projecting a call's argument, without the SELECT list), so an alias that
stands for an ingredient call, or an alias inside a call's arguments, would
name nothing there. Replacing such a reference by a copy of the aliased
expression, exactly where SQLite would resolve it to the alias, keeps the
meaning; the copy is an identical call, so it shares the original's
evaluation (``blendsql.execute.engine.Run.shared``).

SQLite's rules (``resolve.c``): a bare name as a whole ORDER BY term is the
alias first; anywhere else (WHERE, GROUP BY, HAVING, inside an ORDER BY
expression) a column of the FROM sources wins and the alias is the fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import find_calls, number_calls, scope_of

# (scope, source node) -> lower-case column names of that source, or None if unknown
ColumnsOf = Callable[[exp.Select, exp.Expression], "set[str] | None"]
_CLAUSES = ("where", "group", "having", "order")


def resolve_aliases(tree: exp.Expression, columns_of: ColumnsOf) -> exp.Expression:
    """Copy of ``tree`` with alias references to ingredient expressions inlined.

    A reference is inlined when the alias's expression holds an ingredient
    call, or when the reference stands inside a call's arguments (where the
    engine evaluates it outside the SELECT list). Returns ``tree`` itself
    when nothing changes.
    """
    if not any(_candidates(s) for s in tree.find_all(exp.Select)):
        return tree
    out = tree.copy()
    changed = False
    for scope in list(out.find_all(exp.Select)):
        for col, target in _candidates(scope):
            if _resolves_to_alias(col, scope, columns_of):
                col.replace(_inlined(target))
                changed = True
    return number_calls(out) if changed else tree


def _aliases(scope: exp.Select) -> dict[str, exp.Expression]:
    """Alias (lower case) -> aliased expression, for the scope's SELECT list (first wins)."""
    out: dict[str, exp.Expression] = {}
    for p in scope.expressions:
        if isinstance(p, exp.Alias) and p.alias:
            out.setdefault(p.alias.lower(), p.this)
    return out


def _candidates(scope: exp.Select) -> list[tuple[exp.Column, exp.Expression]]:
    """(reference, aliased expression) pairs that may need inlining in ``scope``."""
    aliases = _aliases(scope)
    if not aliases:
        return []
    out = []
    for key in _CLAUSES:
        clause = scope.args.get(key)
        if clause is None:
            continue
        for col in list(clause.find_all(exp.Column)):
            if col.table or scope_of(col) is not scope:
                continue
            target = aliases.get(col.name.lower())
            if target is None or target.find(exp.Window) is not None:
                continue
            in_call = col.find_ancestor(IngredientCall) is not None
            # a bare alias in GROUP BY / HAVING / ORDER BY is planned as is (pre-aggregation,
            # the ORDER BY rules read select aliases); the final SQL resolves it
            if in_call or (find_calls(target) and key == "where"):
                out.append((col, target))
    return out


def _resolves_to_alias(col: exp.Column, scope: exp.Select, columns_of: ColumnsOf) -> bool:
    """Whether SQLite would read ``col`` as the result-column alias."""
    if isinstance(col.parent, exp.Ordered) and col.parent.parent is scope.args.get("order"):
        return True  # a whole ORDER BY term: the alias first
    name = col.name.lower()
    for src in _sources(scope):
        cols = columns_of(scope, src)
        if cols is None or name in cols:
            return False  # a real column (or one we cannot rule out) wins
    return True


def _sources(scope: exp.Select) -> list[exp.Expression]:
    f = scope.args.get("from_")
    out = [f.this] if f is not None else []
    return out + [j.this for j in scope.args.get("joins") or []]


def _inlined(target: exp.Expression) -> exp.Expression:
    """A copy of the aliased expression, parenthesised unless it is atomic."""
    copy = target.copy()
    if isinstance(copy, (exp.Column, exp.Literal, IngredientCall, exp.Paren)):
        return copy
    return exp.Paren(this=copy)


def projection_names(select: Any) -> set[str] | None:
    """Output column names of a SELECT / compound (its left end), None when a ``*`` hides them."""
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return None
    names: set[str] = set()
    for p in select.expressions:
        if isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star)):
            return None
        names.add(p.alias_or_name.lower())
    return names
