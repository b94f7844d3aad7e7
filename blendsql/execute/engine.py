"""Running a planned query: the rules, then the loop over calls, then the final SQL.

The loop (see docs/ARCHITECTURE.md, "How execution keeps that meaning"):
apply the tree rules (``blendsql.plan.rules``), pick the next ready call
(inner scopes first), compute it with a step runner (``execute.steps``),
which replaces the call in the AST by a lookup of its outputs. When no call
is left the AST is plain SQLite: render it, run it, return a Smoothie.

Layers, each importing only those below it: ``session`` (database, trace,
temp objects) < ``evaluate`` (arguments, constraints, invocation) <
``steps`` (map / QA / join runners) < ``engine`` (:class:`Run`, the loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.db.frames import rows_to_frame
from blendsql.errors import ExecutionError
from blendsql.execute.planning import plan_tree
from blendsql.execute.project import apply_late_maps, bind_late_maps
from blendsql.execute.render import render
from blendsql.execute.session import _RUN_IDS
from blendsql.execute.steps import StepRunner
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.calls import find_calls, next_call
from blendsql.smoothie import Smoothie, TraceStep

Parser = Callable[[str, IngredientRegistry], exp.Expression]
__all__ = ["Run", "bind_params", "execute_tree", "to_smoothie", "_RUN_IDS"]


class Run(StepRunner):
    """One ``execute`` call: a session, its evaluator and step runners (see the layers above)."""


def bind_params(params: Sequence[Any] | Mapping[str, Any] | None) -> dict[str, Any]:
    """User params as named bindings: a list binds ``?`` as ``p0, p1, ...``."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return {str(k).lstrip(":"): v for k, v in params.items()}
    if isinstance(params, (str, bytes)):
        raise ExecutionError("params must be a list/tuple or a dict, not a string",
                             hint="write params=[value] for one '?'")
    return {f"p{i}": v for i, v in enumerate(params)}


def execute_tree(run: Run, tree: exp.Expression, parse_expr: Callable[[str], exp.Expression],
                 memo: bool = False) -> pd.DataFrame:
    """Plan and run an AST; the caller owns cleanup of ``run``'s temp tables.

    ``memo``: ``tree`` is a session-cached parse that nobody changes, so
    planning work may be memoised on it (``blendsql.plan.memo``).
    """
    t0 = time.perf_counter()
    given = tree
    run.note_rules_off()
    state = plan_tree(run, tree, parse_expr, memo)
    tree = state.tree
    late, late_plan = bind_late_maps(run, state)
    calls = find_calls(tree)
    run.trace.append(TraceStep("plan", f"{len(calls)} ingredient call(s) to compute",
                               seconds=time.perf_counter() - t0,
                               details={"calls": [run.call_text(c) for c in calls]}))
    ready: set[int] = set()  # calls found ready once stay ready (see next_call)
    while calls:
        call = next_call(tree, run.registry, run.readiness_candidate,
                         cost=run.ordering_cost(), known_ready=ready)
        if call is None:
            raise ExecutionError("could not order the ingredient calls of this query",
                                 hint="an ingredient argument may refer to an outer query; "
                                 "rewrite it without the correlation")
        run.trace_order(call)
        tree = run.compute(tree, call)
        calls = find_calls(tree)
    if late_plan is not None and tree is late_plan.projected:  # nothing else was computed
        late_plan.sql = late_plan.sql or render(tree)
        cols, rows = run.sql(late_plan.sql, "final query")
    else:
        cols, rows = run.sql(render(tree, copy=tree is given), "final query")
    rows = apply_late_maps(late, rows)
    return rows_to_frame(cols, rows)


def to_smoothie(run: Run, df: pd.DataFrame, query: str, started: float) -> Smoothie:
    """Package the result with counters and trace."""
    run.meta.seconds = time.perf_counter() - started
    return Smoothie(df=df, meta=run.meta, trace=run.trace, query=query)
