"""Running a GROUPED plan step: one partial-aggregate scan, the map on its keys, the
outer query (see :mod:`blendsql.plan.preagg` for why this is exact).

Why here: the decision (``plan.preagg.preaggregate``) is taken once, when the
plan is made, on statistics the executor measured; the statements, the temp
table and the ingredient run are the executor's work.
"""

from __future__ import annotations

import time

from sqlglot import exp

from blendsql.errors import ExecutionError, QueryTimeoutError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.context import RunContext
from blendsql.plan.lookup import temp_table as temp_table_node
from blendsql.plan.preagg import KEY, PreaggPlan, plan_preagg, preagg_final
from blendsql.plan.render import render
from blendsql.plan.values import outputs_to_sqlite
from blendsql.smoothie import TraceStep


def apply_grouped(run: RunContext, tree: exp.Expression, ing: MapIngredient,
                  call: IngredientCall, value: exp.Expression, sources: frozenset[str],
                  ) -> exp.Expression | None:
    """Apply a GROUPED decision: the partial-aggregate scan, one map run on its keys and
    the outer query. None when it cannot be applied here, and the call is then computed
    from its candidate values (the same rows): the database refuses the partial scan
    (e.g. a correlated reference), or an earlier step's lookup took a shape the
    pre-aggregated query cannot hold (a borrowed connection gets no lookup functions, so
    a lookup in the SELECT list is a scalar subquery). Traced as
    ``preaggregate_not_applied``."""
    t0 = time.perf_counter()
    plan = plan_preagg(call, value, sources)
    if plan is None:
        run.decided(f"pre-aggregation of {call.name} not applied: an earlier step's lookup "
                    "is a subquery here; computed from its candidate values",
                    outcome="not_applied", call=run.call_text(call))
        return None
    return _apply(run, tree, ing, call, plan, time.perf_counter() - t0)


def _apply(run: RunContext, tree: exp.Expression, ing: MapIngredient, call: IngredientCall,
           plan: PreaggPlan, decided: float) -> exp.Expression | None:
    """Partial scan into a temp table -> one map run on its keys -> outer query.

    The partial rows go from the scan straight into the temp table
    (``CREATE TEMP TABLE x AS SELECT ..``): they stay data inside SQLite,
    never SQL text, and skip a round trip through Python. DDL rather than
    ``INSERT``: it opens no implicit transaction (which would lock other
    processes out of the file) and leaves ``total_changes`` alone. ``decided``: seconds
    spent deciding, the only time the trace's plan step reports (the
    statements and the ingredient have steps of their own).
    """
    run_values = run.map_runner(ing, call)[3]
    start = len(run.trace)
    table = _create(run, plan.columns, render(plan.inner, copy=False),
                    f"partial aggregates by the value of {call.name}")
    if table is None:
        return None  # e.g. a correlated reference: plan the call as usual
    created = run.trace[start] if len(run.trace) > start else None
    n_rows = run.sql(f"SELECT count(*) FROM {render(temp_table_node(table))}",
                     "rows in the partial table", kind="plan")[1][0][0]
    if created is not None:
        created.rows_out = n_rows
    key = exp.column(f"{KEY}0")
    values = run.candidate_values(
        exp.select(key.copy()).distinct(copy=False).from_(temp_table_node(table), copy=False)
        .where(key.copy().is_(exp.null()).not_(), copy=False),
        f"values of {call.name} in the partial rows")
    outputs = outputs_to_sqlite(run_values(values)) if values else []
    lookup = run.map_lookup_node(list(zip(values, outputs, strict=True)), key)
    run.trace.append(TraceStep(
        "plan", f"pre-aggregation: {call.name} is a GROUP BY key; one scan into "
        f"{n_rows} partial row(s), {len(values)} value(s) mapped",
        seconds=decided, rows_out=n_rows,
        details={"rule": run.state.rule_name, "call": run.call_text(call),
                 "partial_sql": render(plan.inner, copy=False)}))
    return preagg_final(tree, plan, table, lookup)


def _create(run: RunContext, columns: list[str], inner: str, summary: str) -> str | None:
    """A session temp table holding the partial rows of ``inner``; None if SQLite
    refuses the query (nothing was created then).

    Each column is selected as ``+col``: an expression without affinity, so
    the table's columns are untyped and keep each value's storage class, as
    the source rows had them. Dropped by the run's cleanup, which only ever
    sees names created here.
    """
    name = run.db.temp_name("p")
    cols = ", ".join(f'+"{c}" AS "{c}"' for c in columns)
    select = f"SELECT {cols} FROM ({inner})"
    try:
        with run.labelled("sql", summary):  # traced by the database's hook
            run.db.create_temp_table_as(name, select, run.bindings(select),
                                        origin=run.param_origin)
    except QueryTimeoutError:
        raise
    except ExecutionError:
        return None
    run.temp_tables.append(name)
    return name
