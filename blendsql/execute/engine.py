"""Running a plan: one ``match`` on the type of each step the walk decided.

The steps (see docs/ARCHITECTURE.md, "Execution in layers") come from
``execute.walk.plan_query``: each call step computes one ingredient call
with a step runner (``execute.steps``), as its strategy says, and the call
in the AST becomes a lookup of its outputs; ``FinalQuery`` renders and runs
the plain query left; ``LateMap`` fills in projection-only map columns on
the final rows. Nothing here chooses a call or a strategy: :func:`run_plan`
runs the steps in the plan's order and measures each one (its
:class:`~blendsql.plan.steps.Actual`, the plan's EXPLAIN ANALYZE).

Layers, each importing only those below it: ``session`` (database, trace,
temp objects; the rule being applied) < ``evaluate`` (arguments, constraints,
invocation; identical-call sharing) < ``steps`` (the call order; map / QA /
join runners) < ``run`` (:class:`Run`, composed of those parts) < ``estimate``
< ``walk`` (the plan) < ``engine`` (:func:`run_plan`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.db.frames import rows_to_frame
from blendsql.errors import ExecutionError
from blendsql.execute.project import apply_late_maps, bind_late_maps
from blendsql.execute.run import Run
from blendsql.execute.session import _RUN_IDS
from blendsql.execute.walk import plan_query
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.calls import find_calls
from blendsql.plan.render import render
from blendsql.plan.steps import (
    Actual,
    CallStep,
    FinalQuery,
    LateMap,
    MapCall,
    Plan,
    Step,
    Unordered,
)
from blendsql.smoothie import Smoothie, TraceStep

Parser = Callable[[str, IngredientRegistry], exp.Expression]
__all__ = ["Run", "bind_params", "plan_query", "run_plan", "to_smoothie", "_RUN_IDS"]


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


def run_plan(run: Run, plan: Plan, owned: bool = False) -> pd.DataFrame:
    """Run ``plan``'s steps in order, each as it says; every step is measured.

    ``owned``: the plan was made for this run only (``execute``), so its tree is the
    run's working copy; otherwise the tree is copied and the plan can run again.
    Every step is traced before it runs (a ``plan`` step with ``details['step']``,
    its kind, and ``details['condition']``), so the trace reads as the list of
    steps, each followed by what it ran.
    """
    if not owned:  # else the walk that made the plan for this run noted them
        run.note_rules_off()
    tree = plan.tree
    if tree is None:
        raise ExecutionError("this plan has run already and cannot run again",
                             hint="make a new one with BlendSQL.plan(query)")
    late, late_plan = bind_late_maps(run, plan.late)
    calls: dict[int, IngredientCall] | None = None  # a copy's calls (owned: the steps')
    if any(isinstance(s, CallStep) for s in plan.steps):
        if owned:  # the lookups replace its calls: it cannot run again
            plan.tree = None
        else:
            tree = tree.copy()
            calls = {c.call_id: c for c in find_calls(tree)}
    columns: list[str] = []
    rows: list[tuple[Any, ...]] = []
    for number, step in enumerate(plan.steps, 1):
        _record(run, step, number)
        before = _Meter(run)
        match step:
            case CallStep():
                call = step.node if calls is None else calls[step.call_id]
                tree = run.compute(tree, call, step)
            case Unordered():
                raise ExecutionError("could not order the ingredient calls of this query",
                                     hint="an ingredient argument may refer to an outer "
                                     "query; rewrite it without the correlation")
            case FinalQuery():
                if late_plan is not None and tree is late_plan.projected:  # nothing computed
                    late_plan.sql = late_plan.sql or render(tree)
                    columns, rows = run.sql(late_plan.sql, "final query")
                else:
                    columns, rows = run.sql(tree, "final query", copy=not owned)
            case LateMap():
                one = next(m for m in late if m.call.call_id == step.call_id)
                rows = apply_late_maps([one], rows)
            case _:
                raise ExecutionError(f"no runner for the plan step {type(step).__name__}",
                                     hint="a step type the engine does not know; plan the "
                                     "query with this version of blendsql")
        step.actual = before.actual(run, step, rows)
    return rows_to_frame(columns, rows)


_TRACED = {FinalQuery: "final", LateMap: "late_map", Unordered: "unordered"}


def _record(run: Run, step: Step, number: int) -> None:
    """The trace step announcing ``step`` (``details['step']``: ``call`` for every call)."""
    if isinstance(step, CallStep):
        what = step.call
        details: dict[str, Any] = {"step": "call", "condition": step.condition, "call": what}
        if isinstance(step, MapCall):
            details["strategy"] = step.strategy.name.lower()
    else:
        what = _TRACED.get(type(step)) or step.kind
        details = {"step": what, "condition": step.condition}
        if isinstance(step, LateMap):
            details["call"] = what = step.call
    run.trace.append(TraceStep("plan", f"step {number}: {what}", details=details))


class _Meter:
    """The run's counters when a step starts; :meth:`actual` is the step's share."""

    def __init__(self, run: Run) -> None:
        m = run.meta
        self.values, self.calls, self.tokens = m.values_passed, m.model_calls, m.prompt_tokens
        self.trace = len(run.trace)
        self.t0 = time.perf_counter()

    def actual(self, run: Run, step: Step, rows: list[tuple[Any, ...]]) -> Actual:
        m = run.meta
        if isinstance(step, (FinalQuery, LateMap)):
            n_rows = len(rows)
        else:  # the rows the step's statements returned
            n_rows = sum(t.rows_out or 0 for t in run.trace[self.trace:]
                         if t.kind in ("sql", "temp_table"))
        return Actual(m.values_passed - self.values, m.model_calls - self.calls,
                      m.prompt_tokens - self.tokens, n_rows, time.perf_counter() - self.t0)


def to_smoothie(run: Run, df: pd.DataFrame, query: str, started: float,
                plan: Plan | None = None) -> Smoothie:
    """Package the result with counters, trace and the plan that ran."""
    run.meta.seconds = time.perf_counter() - started
    return Smoothie(df=df, meta=run.meta, trace=run.trace, query=query, plan=plan)
