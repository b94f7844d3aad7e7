"""Lazy evaluation under LIMIT: which rows, in which order, and how many must qualify.

Why: ``SELECT * FROM t WHERE {{M('q', t.x)}} = TRUE LIMIT 5`` only needs the
first five rows (in the order SQLite produces them) for which the predicate
holds. Computing the map for every distinct ``x`` wastes model calls; instead
the engine walks the candidate rows in their order, computes outputs for the
next batch of new values, and stops once ``LIMIT + OFFSET`` rows qualify.

The final SQL still runs in full over a lookup of the computed outputs. A
value that was never computed is simply absent from the lookup, so it fails
the (positive, set-membership) filter; every such value's rows come *after*
the first ``LIMIT + OFFSET`` qualifying rows in the scan order, so the final
rows equal the unoptimised plan's rows for the same scan order.

This module decides whether a call qualifies and builds the ordered row query
(pure; :func:`lazy_strategy` is the rule's function at the ``STRATEGY`` hook);
``execute.lazy_scan`` runs the loop when a plan's step says LAZY.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import (
    effective_scope,
    find_calls,
    map_value,
    scope_of,
    visible_ctes,
)
from blendsql.plan.candidates import (
    VALUE_ALIAS,
    _order_depends_on_calls,
    null_calls,
    outer_tables,
)
from blendsql.plan.context import RunContext
from blendsql.plan.lookup import (
    filter_atom,
    inside,
    null_passes_statically,
    null_test,
    with_call_as,
)
from blendsql.plan.relax import relax_scope
from blendsql.plan.steps import MapDecision, Strategy, planned_in


@dataclass(frozen=True)
class LazyPlan:
    """How to evaluate one filter call lazily.

    ``rows``: the call's scope with every other uncomputed predicate relaxed,
    projecting the call's value as the *last* column, one row per source row
    in the scope's order (ORDER BY kept; no DISTINCT, no LIMIT).
    ``needed``: ``LIMIT + OFFSET``, the number of qualifying rows that fix the
    answer.
    """

    rows: exp.Select
    needed: int
    limit: int
    offset: int


def _int_literal(node: Any) -> int | None:
    """The value of a non-negative integer literal (LIMIT / OFFSET), else None."""
    if node is None:
        return None
    expr = node.args.get("expression") if isinstance(node, (exp.Limit, exp.Offset)) else node
    if isinstance(expr, exp.Literal) and not expr.is_string:
        try:
            value = int(str(expr.this))
        except ValueError:
            return None
        return value if value >= 0 else None
    return None


def limit_of(scope: exp.Select) -> tuple[int, int] | None:
    """``(limit, offset)`` of a scope when both are plain non-negative integers."""
    limit = _int_literal(scope.args.get("limit"))
    if limit is None:
        return None
    offset_node = scope.args.get("offset")
    offset = 0 if offset_node is None else _int_literal(offset_node)
    if offset is None:
        return None
    return limit, offset


def is_top_conjunct(atom: exp.Expression, scope: exp.Select) -> bool:
    """True when ``atom`` is one of the AND-connected parts of the scope's WHERE.

    Why: then a row qualifies exactly when the plain part of WHERE holds and
    the atom holds for the row's value, so qualification can be counted per
    value. Under OR a row might qualify without the atom; the walk would
    still be sound but could not stop as early, so it is not attempted.
    """
    p: Any = atom.parent
    while isinstance(p, (exp.And, exp.Paren)):
        p = p.parent
    return isinstance(p, exp.Where) and p.parent is scope


def order_free_of_calls(scope: exp.Select) -> bool:
    """The scope's row order (ORDER BY) does not depend on any uncomputed call."""
    return not _order_depends_on_calls(scope)


def lazy_plan(call: IngredientCall, value: exp.Expression,
              atom: exp.Expression | None) -> LazyPlan | None:
    """A :class:`LazyPlan` when ``call`` is the only undecided filter of a LIMIT scope.

    Requirements (each keeps the answer identical to the full plan):
    the call is a positive WHERE filter in set-membership form (``atom``)
    and a top-level conjunct; the scope has an integer LIMIT (and OFFSET);
    no DISTINCT / GROUP BY / HAVING / aggregate / window (LIMIT would count
    groups, not rows); no other uncomputed call in WHERE, JOIN ON or ORDER
    BY; the value is not correlated with an outer query.
    """
    scope = scope_of(call)
    if atom is None or scope is None or effective_scope(call, value) is not scope:
        return None
    lo = limit_of(scope)
    if lo is None or not is_top_conjunct(atom, scope) or outer_tables(scope):
        return None
    if scope.args.get("distinct") or scope.args.get("group") or scope.args.get("having"):
        return None
    if any(_aggregates(p, scope) or p.find(exp.Window) for p in scope.expressions):
        return None
    where = scope.args.get("where")
    if where is None or [c.call_id for c in find_calls(where)] != [call.call_id]:
        return None
    if any(find_calls(j) for j in scope.args.get("joins") or []):
        return None
    if not order_free_of_calls(scope):
        return None
    rows = ordered_rows(scope, value)
    if rows is None:
        return None
    return LazyPlan(rows=rows, needed=lo[0] + lo[1], limit=lo[0], offset=lo[1])


def _aggregates(projection: exp.Expression, scope: exp.Select) -> bool:
    """True when the projection aggregates over the scope's rows (itself or inside)."""
    return any(isinstance(n, exp.AggFunc) and scope_of(cast(Any, n)) is scope
               for n in projection.walk())


def ordered_rows(scope: exp.Select, value: exp.Expression) -> exp.Select | None:
    """``SELECT [projections,] <value> FROM ... WHERE <relaxed> [ORDER BY ...]``.

    The projections are kept (uncomputed calls as NULL) only when ORDER BY
    exists, since it may name their aliases. Returns None when relaxation
    had to drop WHERE (outer-join sides) or a call is left.
    """
    relaxed, outer_join_relaxed = relax_scope(scope, None)
    if outer_join_relaxed:
        return None
    q = exp.Select()
    for key in ("from_", "joins", "where"):
        if relaxed.args.get(key) is not None:
            q.set(key, relaxed.args[key])
    order = scope.args.get("order")
    projections: list[exp.Expression] = []
    if order is not None:
        projections = [null_calls(p) for p in scope.expressions]
        q.set("order", order.copy())
    q.set("expressions", projections + [exp.alias_(value.copy(), VALUE_ALIAS)])
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        recursive = any(bool(c.parent and c.parent.args.get("recursive"))
                        for c in visible_ctes(scope))
        q.set("with_", exp.With(expressions=ctes, recursive=recursive))
    if q.find(IngredientCall) is not None:
        return None
    return q


def conjunct_atom(call: IngredientCall) -> exp.Expression | None:
    """The top-level WHERE conjunct holding ``call`` when it depends on nothing else.

    Why: a negative filter (``WHERE NOT {{M(x)}}``, ``NOT ({{M(x)}} = TRUE)``)
    is no set-membership test (``blendsql.plan.lookup.filter_atom``), but it
    can still be evaluated lazily: its lookup gives NULL for a value never
    computed, and when a NULL output fails the conjunct (the caller checks),
    such rows fail just as a set-membership test would make them fail.
    """
    stops = (exp.And, exp.Where, exp.Select, exp.Subquery, exp.Or)
    node: Any = call
    while node.parent is not None and not isinstance(node.parent, stops):
        node = node.parent
    if not isinstance(node.parent, (exp.And, exp.Where)):
        return None
    scope = scope_of(call)
    if scope is None or not is_top_conjunct(node, scope):
        return None
    for n in node.walk():
        if n is call or inside(n, call):
            continue
        if isinstance(n, (IngredientCall, exp.Column, exp.Select, exp.AggFunc, exp.Window)):
            return None
    return cast(exp.Expression, node)


def atom_condition(atom: exp.Expression, call: IngredientCall) -> exp.Expression:
    """The atom with the call replaced by column ``v``: evaluated over ``(k, v)`` rows."""
    return with_call_as(atom, call, exp.column("v"))


# -- running the rule ------------------------------------------------------------
# The lazy-evaluation loop and its prefiltered variant. When :func:`lazy_pairs`
# returns None the executor's ordinary "all candidate values at once" path runs.

PREFILTER_OPTION = "prefilter"
ENGINE_KWARGS = ("prefilter",)  # per-call kwargs the engine consumes (never passed to run())


def null_passes(run: RunContext, atom: exp.Expression, call: IngredientCall) -> bool:
    """Whether a NULL output satisfies the atom (statically, else a statistic the run
    measures: ``run.statistics.null_passes``)."""
    static = null_passes_statically(atom, call)
    if static is not None:
        return static
    return run.statistics.null_passes(null_test(atom, call), call.name)


def lazy_atom(call: IngredientCall) -> exp.Expression | None:
    """The condition a lazy scan tests each row's output with: the call's filter atom,
    else its top-level conjunct (``WHERE NOT {{M(x)}}``)."""
    return filter_atom(call) or conjunct_atom(call)


def lazy_strategy(run: RunContext, tree: exp.Expression, call: IngredientCall,
                  ) -> MapDecision | None:
    """Under LIMIT a filter is evaluated in batches, stopping once enough rows qualify.

    Why: LIMIT 5 over 10,000 candidates needs the model for a handful of
    values, not all of them; batch sizes and the stop are decided from the
    rows seen so far and traced.

    The decision (taken when the plan is made): LAZY when :func:`lazy_plan`
    applies and, for a conjunct that is not a set-membership filter
    (``WHERE NOT {{M(x)}}``), a NULL output fails the condition (else every
    row may qualify). ``execute.lazy_scan.lazy_pairs`` applies it.
    """
    scope = scope_of(call)
    if scope is None or limit_of(scope) is None:  # the cheap test first: no LIMIT, no scan
        return None
    value = map_value(call, run.registry)
    if value is None:
        return None
    atom = filter_atom(call)
    conjunct = atom is None
    if atom is None:  # e.g. WHERE NOT {{M(x)}}: lazy when a NULL output fails it
        atom = conjunct_atom(call)
    if atom is None or lazy_plan(call, value, atom) is None:
        return None
    if planned_in(atom):  # the condition holds an earlier step's output: its shape (and so
        return None  # whether a scan can test it) is known only once that step has run
    if conjunct:
        if null_passes(run, atom, call):
            run.decided(f"lazy {call.name} skipped: a NULL output "
                        "passes its condition, so every row may qualify",
                        outcome="skipped", call=run.call_text(call))
            return None
    return MapDecision(Strategy.LAZY, note="stops once LIMIT rows qualify (upper bound: "
                       "every candidate)")


def next_batch_size(previous: int, computed: int, qualified: int, needed: int) -> int:
    """How many new values to compute next.

    Why adaptive: a fixed doubling overshoots by up to 2x. Once some rows
    qualified, the observed values-per-qualifying-row rate predicts how many
    more values the remaining rows need (plus 10 %, at least 1); before any
    row qualified, the batch doubles so that rare matches need few rounds.
    """
    if qualified <= 0:
        return max(1, previous * 2)
    per_row = computed / qualified
    return max(1, int(per_row * (needed - qualified) * 1.1 + 0.999))


