"""Projection-only map calls: computed on the final query's rows, after SQL.

Why: a map call that is a whole output column of the outermost SELECT and
is used nowhere else (not in WHERE, GROUP BY, ORDER BY, HAVING, DISTINCT)
only decides what that column shows. The final query can then project the
call's value argument instead, and the engine maps the distinct values of
that column once the rows are known. That is one SQL statement instead of
a candidate query plus a final query with a per-row lookup, and the
ingredient sees exactly the values in the result (after every filter,
join and LIMIT), never more than the candidate query would give it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.calls import map_ingredient, map_value
from blendsql.plan.lookup import inside
from blendsql.plan.memo import RegistryKey, TreeMemo, registry_key


def name_call_columns(tree: exp.Expression, text_of: Callable[[exp.Expression], str],
                      ) -> exp.Expression:
    """Alias each unaliased result column that holds a call by its BlendSQL text.

    Why: the column of ``SELECT {{Len(t.x)}} FROM t`` would otherwise be
    named after whatever replaced the call (a lookup function with a run
    id in its name), so the same query would name its columns differently
    on every run. Returns ``tree`` itself when nothing needs a name.
    """
    select = _result_select(tree)
    if select is None or not any(_unnamed_call(e) for e in select.expressions):
        return tree
    out = tree.copy()
    select = _result_select(out)
    assert select is not None
    for e in list(select.expressions):
        if _unnamed_call(e):
            # the same call twice names two columns alike, as SQLite names `f(x), f(x)`
            # (left unnamed, the second was named after its replacement, e.g. `Name`)
            name = text_of(e)
            e.replace(exp.alias_(e.copy(), exp.to_identifier(name, quoted=True), copy=False))
    return out


def _unnamed_call(e: exp.Expression) -> bool:
    return not isinstance(e, exp.Alias) and e.find(IngredientCall) is not None


def _result_select(tree: exp.Expression) -> exp.Select | None:
    """The SELECT whose projections name the result columns (left end of a compound)."""
    while isinstance(tree, exp.SetOperation):
        tree = tree.this
    return tree if isinstance(tree, exp.Select) else None


def projection_calls(tree: exp.Expression, is_map: Callable[[IngredientCall], bool],
                     value_of: Callable[[IngredientCall], exp.Expression | None],
                     ) -> list[tuple[int, IngredientCall]]:
    """``(column index, call)`` for each map call safe to compute after the final query.

    Safe when the outermost statement is a single SELECT without DISTINCT
    (mapping could merge rows that DISTINCT kept apart), the call is a
    whole projection (optionally aliased) holding no other call outside its
    value argument, its alias is referenced nowhere else in the query, and
    neither ORDER BY nor GROUP BY names output columns by number.
    """
    if not isinstance(tree, exp.Select) or tree.args.get("distinct"):
        return []
    order = tree.args.get("order")
    if order is not None and any(isinstance(o.this, exp.Literal) for o in order.expressions):
        return []
    group = tree.args.get("group")
    if group is not None and any(isinstance(g, exp.Literal) for g in group.expressions):
        return []  # GROUP BY 1 groups by the output column
    out = []
    for i, proj in enumerate(tree.expressions):
        call = proj.this if isinstance(proj, exp.Alias) else proj
        if not isinstance(call, IngredientCall) or not is_map(call):
            continue
        value = value_of(call)
        if value is None or _other_calls(call, value):
            continue
        if isinstance(proj, exp.Alias) and _alias_used(tree, proj):
            continue
        out.append((i, call))
    return out


def _other_calls(call: IngredientCall, value: exp.Expression) -> bool:
    """True when the call holds a nested call outside its value argument.

    Why: its question and keyword arguments are evaluated before the
    final query runs; a nested call there would not be computed yet.
    """
    inside_value = {id(n) for n in value.find_all(IngredientCall)}
    return any(n is not call and id(n) not in inside_value
               for n in call.find_all(IngredientCall))


def _alias_used(tree: exp.Select, proj: exp.Alias) -> bool:
    """True when an unqualified column elsewhere in ``tree`` has the alias's name."""
    name = proj.alias.lower()
    for col in tree.find_all(exp.Column):
        if not col.table and col.name.lower() == name and not inside(col, proj):
            return True
    return False


def project_values(tree: exp.Select, deferred: list[tuple[int, IngredientCall]],
                   value_of: Callable[[IngredientCall], exp.Expression],
                   ) -> exp.Select:
    """Copy of ``tree`` projecting each deferred call's value argument in its place.

    The projection keeps its alias (or the one ``name_call_columns`` gave
    it), so the result's column names do not change.
    """
    out = tree.copy()
    for i, call in deferred:
        proj = out.expressions[i]
        value = value_of(call).copy()
        if isinstance(proj, exp.Alias):
            proj.set("this", value)
        else:
            proj.replace(value)
    return out


@dataclass
class LatePlan(TreeMemo):
    """The static part of the late-map rule for one tree: memoised on that tree's ``meta``.

    Why: naming columns and choosing the deferred calls depend only on the
    tree and the registry, and a parse-cached tree comes back on every run;
    redoing the copies and renders cost ~1 ms per query. ``sql`` caches the
    final statement's text when no other call is left to compute.
    """

    key: RegistryKey
    named: exp.Expression
    deferred: list[tuple[int, IngredientCall]]
    projected: exp.Expression
    sql: str | None = None


LATE_MEMO = "bsql_late_plan"


def late_plan(tree: exp.Expression, registry: IngredientRegistry, memo: bool = False,
              ) -> LatePlan:
    """Columns named and projection-only maps chosen for ``tree`` (memoised with ``memo``).

    ``memo``: ``tree`` is a session-cached parse nobody changes, so the
    result is kept in its ``meta`` for the next run of the same query.
    """
    key = registry_key(registry)
    plan = tree.meta.get(LATE_MEMO) if memo else None
    if isinstance(plan, LatePlan) and plan.key == key:
        return plan
    named = name_call_columns(tree, to_blendsql)

    def value_of(call: IngredientCall) -> exp.Expression | None:
        return map_value(call, registry)

    deferred = projection_calls(named, lambda c: map_ingredient(c, registry) is not None,
                                value_of)
    projected = named
    if deferred:
        assert isinstance(named, exp.Select)
        projected = project_values(named, deferred, value_of)  # type: ignore[arg-type]
    plan = LatePlan(key, named, deferred, projected)
    if memo:
        tree.meta[LATE_MEMO] = plan
    return plan
