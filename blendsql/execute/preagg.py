"""Running the pre-aggregation plan of :mod:`blendsql.plan.preagg`.

Why here: the rule needs the database twice before it can decide (which
names the scope's sources provide; whether any COLLATE could make
temp-table comparisons differ from the source's) and then runs one
partial-aggregate scan, stores its rows as a session temp table, runs the
map once on the distinct values of its key column, and hands back the
outer query. ``BlendSQL(..., preaggregate=False)`` turns the rule off.
"""

from __future__ import annotations

import time

from sqlglot import exp

from blendsql.errors import ExecutionError, QueryTimeoutError
from blendsql.execute.context import RunContext
from blendsql.execute.optimise import call_cost
from blendsql.execute.render import render
from blendsql.execute.values import outputs_to_sqlite
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.calls import map_value, next_call
from blendsql.plan.lookup import temp_table as temp_table_node
from blendsql.plan.preagg import (
    KEY,
    SAMPLE_ROWS,
    PreaggPlan,
    calls_only_in_where,
    grouped_scope,
    other_calls,
    plan_preagg,
    preagg_final,
    sample_query,
    source_query,
)
from blendsql.plan.rules import rule_on
from blendsql.smoothie import TraceStep

OPTION = "preaggregate"


def preaggregate(run: RunContext, tree: exp.Expression, ing: MapIngredient, call: IngredientCall,
                 ) -> exp.Expression | None:
    """The tree after computing ``call`` by pre-aggregation, or None to plan as usual.

    When the rule would apply but ingredient predicates of the same WHERE
    are still uncomputed, one of them is computed first (in the order the
    engine would pick among them) and that tree is returned; the loop then
    comes back to this call with a plain WHERE, whose rows the map sees.
    """
    t0 = time.perf_counter()
    decided = decide(run, tree, call)
    if decided is None:
        return None
    plan, others = decided
    if others:
        return _compute_first(run, tree, call, others)
    if near_unique(run, plan, call):
        return None
    return _apply(run, tree, ing, call, plan, time.perf_counter() - t0)


def decide(run: RunContext, tree: exp.Expression, call: IngredientCall,
           ) -> tuple[PreaggPlan, list[IngredientCall]] | None:
    """(plan, ingredient calls of the WHERE still to compute first) when the rule
    applies to ``call``, else None. The near-unique sample (:func:`near_unique`)
    is the caller's last check; ``BlendSQL.plan`` asks the same questions."""
    if not rule_on(run.options, OPTION):
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
    return plan, others


def _source_columns(run: RunContext, scope: exp.Select) -> frozenset[str] | None:
    """Lower-case column names the scope's FROM / JOINs provide (None: unknown)."""
    try:
        cols, _ = run.sql(render(source_query(scope), copy=False), "columns of the sources",
                          kind="plan")
    except (ExecutionError, AttributeError):
        return None
    return frozenset(c.lower() for c in cols)


def _collation_in_schema(run: RunContext, tree: exp.Expression) -> bool:
    """True when a table or view the query names declares a COLLATE (or we cannot tell).

    Why: grouping, MIN / MAX and the outer query's comparisons on the
    temp table's columns use BINARY; a NOCASE source column would make
    the two plans group differently.
    """
    tables = list(tree.find_all(exp.Table))
    if any(t.db and t.db.lower() not in ("main", "temp") for t in tables):
        return True  # an attached database: its schema is not looked up here
    names = sorted({t.name.lower() for t in tables if t.name})
    if not names:
        return False
    if run.db.dialect != "sqlite":  # typed backends: the backend knows its collations
        return run.db.declares_collation(names)
    marks = ", ".join(f":n{i}" for i in range(len(names)))
    binds = {f"n{i}": n for i, n in enumerate(names)}
    q = (f"SELECT sql FROM sqlite_master WHERE lower(name) IN ({marks}) UNION ALL "
         f"SELECT sql FROM sqlite_temp_master WHERE lower(name) IN ({marks})")
    try:
        _, rows = run.sql(q, "declared collations", kind="plan", params=binds)
    except (ExecutionError, AttributeError):
        return True
    return any(r[0] and "collate" in str(r[0]).lower() for r in rows)


def near_unique(run: RunContext, plan: PreaggPlan, call: IngredientCall) -> bool:
    """True when a full sample of the scope's rows is nearly all distinct values.

    Measured on 100k rows (zero-cost map, ``GROUP BY`` the map of a unique
    text column): pre-aggregation ~2x slower than today's plan, since the
    partial scan sorts every row and the partial table is as large as the
    input; with 20k or 500 distinct values it is ~1.5-2x faster.
    """
    try:
        _, rows = run.sql(render(sample_query(plan), copy=False),
                          f"how distinct the values of {call.name} are (sample)", kind="plan")
    except ExecutionError:
        return True  # let the usual plan run (and report) it
    n, distinct = rows[0]
    if n >= SAMPLE_ROWS and distinct > 0.9 * n:
        run.trace.append(TraceStep(
            "plan", f"pre-aggregation skipped: {distinct} distinct value(s) of {call.name} "
            f"in the first {n} row(s)", details={
                "rule": OPTION + "_skipped", "call": run.call_text(call),
                "condition": f"{distinct} distinct of {n} sampled rows > 90%"}))
        return True
    return False


def _compute_first(run: RunContext, tree: exp.Expression, call: IngredientCall,
                   others: list[IngredientCall]) -> exp.Expression | None:
    """Compute the WHERE call the engine would pick next were ``call`` not ready."""
    def candidate(c: IngredientCall) -> exp.Expression | None:
        if c.call_id == call.call_id:
            return None  # not ready: wait for the filters
        return run.readiness_candidate(c)

    cost = (lambda c: call_cost(run, c)) if rule_on(run.options, "cost_order") else None
    nxt = next_call(tree, run.registry, candidate, cost=cost)
    if nxt is None or nxt.call_id not in {c.call_id for c in others}:
        return None
    return run.compute(tree, nxt)


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
        details={"rule": OPTION, "call": run.call_text(call),
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
