"""Running the pre-aggregation plan of :mod:`blendsql.plan.preagg`.

Why here: the rule needs the database twice before it can decide (which
names the scope's sources provide; whether any COLLATE could make
temp-table comparisons differ from the source's) and then runs one
partial-aggregate scan, stores its rows as a session temp table, runs the
map once on the distinct values of its key column, and hands back the
outer query. ``BlendSQL(..., preaggregate=False)`` turns the rule off.
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from blendsql.errors import ExecutionError
from blendsql.execute.values import outputs_to_sqlite
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.calls import map_value, next_call
from blendsql.plan.preagg import (
    KEY,
    PreaggPlan,
    calls_only_in_where,
    grouped_scope,
    other_calls,
    plan_preagg,
    preagg_final,
    source_query,
)
from blendsql.smoothie import TraceStep

if TYPE_CHECKING:
    from blendsql.execute.engine import Run

OPTION = "preaggregate"
_IDS = itertools.count()


def preaggregate(run: Run, tree: exp.Expression, ing: MapIngredient, call: IngredientCall,
                 ) -> exp.Expression | None:
    """The tree after computing ``call`` by pre-aggregation, or None to plan as usual.

    When the rule would apply but ingredient predicates of the same WHERE
    are still uncomputed, one of them is computed first (in the order the
    engine would pick among them) and that tree is returned; the loop then
    comes back to this call with a plain WHERE, whose rows the map sees.
    """
    if not run.options.get(OPTION, True):
        return None
    scope = grouped_scope(call)
    if scope is None:
        return None
    value = map_value(call, run.registry)
    if value is None:
        return None
    others = other_calls(scope, call)
    if others and not calls_only_in_where(scope, others):
        return None
    sources = _source_columns(run, scope)
    if sources is None or _collation_in_schema(run, tree):
        return None
    plan = plan_preagg(call, value, sources, pending_ok=bool(others))
    if plan is None:
        return None
    if others:
        return _compute_first(run, tree, call, others)
    return _apply(run, tree, ing, call, plan)


def _source_columns(run: Run, scope: exp.Select) -> frozenset[str] | None:
    """Lower-case column names the scope's FROM / JOINs provide (None: unknown)."""
    from blendsql.execute.engine import render

    try:
        cols, _ = run.db.execute(render(source_query(scope), copy=False))
    except (ExecutionError, AttributeError):
        return None
    return frozenset(c.lower() for c in cols)


def _collation_in_schema(run: Run, tree: exp.Expression) -> bool:
    """True when a table or view the query names declares a COLLATE (or we cannot tell).

    Why: grouping, MIN / MAX and the outer query's comparisons on the
    temp table's columns use BINARY; a NOCASE source column would make
    the two plans group differently.
    """
    names = sorted({t.name.lower() for t in tree.find_all(exp.Table) if t.name})
    if not names:
        return False
    marks = ", ".join(f":n{i}" for i in range(len(names)))
    binds = {f"n{i}": n for i, n in enumerate(names)}
    q = (f"SELECT sql FROM sqlite_master WHERE lower(name) IN ({marks}) UNION ALL "
         f"SELECT sql FROM sqlite_temp_master WHERE lower(name) IN ({marks})")
    try:
        _, rows = run.db.execute(q, binds)
    except (ExecutionError, AttributeError):
        return True
    return any(r[0] and "collate" in str(r[0]).lower() for r in rows)


def _compute_first(run: Run, tree: exp.Expression, call: IngredientCall,
                   others: list[IngredientCall]) -> exp.Expression | None:
    """Compute the WHERE call the engine would pick next were ``call`` not ready."""
    from blendsql.execute.optimise import call_cost

    def candidate(c: IngredientCall) -> exp.Expression | None:
        if c.call_id == call.call_id:
            return None  # not ready: wait for the filters
        return run.readiness_candidate(c)

    cost = (lambda c: call_cost(run, c)) if run.options.get("cost_order", True) else None
    nxt = next_call(tree, run.registry, candidate, cost=cost)
    if nxt is None or nxt.call_id not in {c.call_id for c in others}:
        return None
    return run.compute(tree, nxt)


def _apply(run: Run, tree: exp.Expression, ing: MapIngredient, call: IngredientCall,
           plan: PreaggPlan) -> exp.Expression | None:
    """Partial scan -> temp table -> one map run on its keys -> outer query."""
    from blendsql.execute.engine import render

    run_values = run.map_runner(ing, call)[3]
    inner_sql = render(plan.inner, copy=False)
    t0 = time.perf_counter()
    try:
        _, rows = run.sql(inner_sql, f"partial aggregates by the value of {call.name}")
    except ExecutionError:
        return None  # e.g. a correlated reference: plan the call as usual
    table = _store(run, plan.columns, rows)
    values = [v for v in dict.fromkeys(r[0] for r in rows) if v is not None]
    outputs = outputs_to_sqlite(run_values(values)) if values else []
    lookup = run.map_lookup_node(list(zip(values, outputs, strict=True)),
                                 exp.column(f"{KEY}0"))
    run.trace.append(TraceStep(
        "plan", f"pre-aggregation: {call.name} is a GROUP BY key; one scan into "
        f"{len(rows)} partial row(s), {len(values)} value(s) mapped",
        seconds=time.perf_counter() - t0, rows_out=len(rows),
        details={"rule": OPTION, "call": run.call_text(call), "partial_sql": inner_sql}))
    return preagg_final(tree, plan, table, lookup)


def _store(run: Run, columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    """The partial rows as a session temp table (bound rows; dropped by cleanup)."""
    name = f"__bsql_{run.run_id}_p{next(_IDS)}"
    run.temp_tables.append(name)
    seconds = run.db.create_temp_table(name, columns, rows)
    run.trace.append(TraceStep("temp_table", f"temp.{name}", rows_out=len(rows),
                               seconds=seconds))
    return name
