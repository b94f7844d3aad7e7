"""Running a planned query: the engine's runners for the interpreter's steps.

The steps (see docs/ARCHITECTURE.md, "Execution in layers"): ``prepare``
applies the tree rules (``blendsql.plan.rules``); each ``call`` step computes
the next ready call (inner scopes first) with a step runner
(``execute.steps``), which replaces the call in the AST by a lookup of its
outputs; when no call is left, ``final`` renders and runs the plain SQLite
query, and ``late_maps`` fills in projection-only map columns. Which step
comes next is decided by ``execute.interpreter.next_step``, shared with
``BlendSQL.plan()``.

Layers, each importing only those below it: ``session`` (database, trace,
temp objects) < ``evaluate`` (arguments, constraints, invocation) <
``steps`` (map / QA / join runners) < ``interpreter`` (step kinds, the loop)
< ``engine`` (:class:`Run`, :class:`Executor`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import pandas as pd
from sqlglot import exp

from blendsql.db.frames import rows_to_frame
from blendsql.errors import ExecutionError
from blendsql.execute.interpreter import ExecStep, Interpreter, WalkState, interpret
from blendsql.execute.planning import plan_tree
from blendsql.execute.project import LateMap, apply_late_maps, bind_late_maps
from blendsql.execute.session import _RUN_IDS
from blendsql.execute.steps import StepRunner
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.calls import find_calls
from blendsql.plan.project import LatePlan
from blendsql.plan.render import render
from blendsql.smoothie import Smoothie, TraceStep

Parser = Callable[[str, IngredientRegistry], exp.Expression]
__all__ = ["Executor", "Run", "bind_params", "execute_tree", "to_smoothie", "_RUN_IDS"]


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
    """Plan and run an AST: interpret its steps; the caller owns cleanup of ``run``'s temp tables.

    ``memo``: ``tree`` is a session-cached parse that nobody changes, so
    planning work may be memoised on it (``blendsql.plan.memo``).
    """
    executor = Executor(run, tree, parse_expr, memo)
    interpret(executor, WalkState(tree))
    return rows_to_frame(executor.columns, executor.rows)


class Executor(Interpreter):
    """The engine's step runners: each step does its work on the database and the model.

    Every step is traced before it runs (a ``plan`` step with
    ``details['step']``, its kind, and ``details['condition']``), so the
    trace reads as the list of steps, each followed by what it ran.
    """

    runners: ClassVar[dict[str, str]] = {
        "prepare": "run_prepare", "call": "run_call", "unordered": "run_unordered",
        "final": "run_final", "late_map": "run_late_maps"}

    def __init__(self, run: Run, given: exp.Expression,
                 parse_expr: Callable[[str], exp.Expression], memo: bool) -> None:
        super().__init__(run)
        self.engine = run
        self.given = given
        self.parse_expr = parse_expr
        self.memo = memo
        self.late: list[LateMap] = []
        self.late_plan: LatePlan | None = None
        self.columns: list[str] = []
        self.rows: list[tuple[Any, ...]] = []
        self.owned = False  # the walk's tree is this run's own copy (see run_prepare)

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        return self.engine.ordering_cost()

    def record(self, state: WalkState, step: ExecStep) -> None:
        details: dict[str, Any] = {"step": step.kind, "condition": step.condition}
        what = step.kind
        if step.call is not None:
            details["call"] = what = self.engine.call_text(step.call)
        self.engine.trace.append(TraceStep("plan", f"step {len(state.steps) + 1}: {what}",
                                           details=details))

    def run_prepare(self, state: WalkState, step: ExecStep) -> None:
        """The tree rules, then the late maps bound while their calls are in the tree."""
        run = self.engine
        t0 = time.perf_counter()
        run.note_rules_off()
        planned = plan_tree(run, self.given, self.parse_expr, self.memo)
        self.late, self.late_plan = bind_late_maps(run, planned)
        tree, calls = planned.tree, find_calls(planned.tree)
        # texts and keys read on the planned tree, whose nodes keep them (meta) for the
        # next run of a cached query; by call id for this run's copy
        texts = [run.call_text(c) for c in calls]
        for c in calls:
            run.call_key(c)
        if calls:  # the one copy of the query: every call step replaces its call in place
            tree = tree.copy()
            calls = find_calls(tree)
            self.owned = True
        state.replace_tree(tree)
        state.calls = calls
        state.prepared = True
        state.late_pending = bool(self.late)
        run.trace.append(TraceStep("plan", f"{len(calls)} ingredient call(s) to compute",
                                   seconds=time.perf_counter() - t0,
                                   details={"calls": texts}))

    def run_call(self, state: WalkState, step: ExecStep) -> None:
        """Compute one ready call; the tree holds a lookup of its outputs instead."""
        assert step.call is not None
        self.engine.trace_order(step.call)
        done: list[int] = self.engine.memo.setdefault("computed", [])
        before = len(done)
        tree = self.engine.compute(state.tree, step.call, step.ingredient)
        state.computed(tree, set(done[before:]))  # the call, and any computed first

    def run_unordered(self, state: WalkState, step: ExecStep) -> None:
        raise ExecutionError("could not order the ingredient calls of this query",
                             hint="an ingredient argument may refer to an outer query; "
                             "rewrite it without the correlation")

    def run_final(self, state: WalkState, step: ExecStep) -> None:
        """The plain SQLite query left once every call is computed."""
        tree, late_plan = state.tree, self.late_plan
        if late_plan is not None and tree is late_plan.projected:  # nothing else was computed
            late_plan.sql = late_plan.sql or render(tree)
            self.columns, self.rows = self.engine.sql(late_plan.sql, "final query")
        else:
            self.columns, self.rows = self.engine.sql(render(tree, copy=not self.owned),
                                                      "final query")
        state.final_done = True

    def run_late_maps(self, state: WalkState, step: ExecStep) -> None:
        """Fill in the projection-only map columns on the final rows."""
        self.rows = apply_late_maps(self.late, self.rows)
        state.late_pending = False


def to_smoothie(run: Run, df: pd.DataFrame, query: str, started: float) -> Smoothie:
    """Package the result with counters and trace."""
    run.meta.seconds = time.perf_counter() - started
    return Smoothie(df=df, meta=run.meta, trace=run.trace, query=query)
