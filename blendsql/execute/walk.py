"""The one walker: a query becomes a :class:`~blendsql.plan.steps.Plan`, each decision taken once.

Why one walker: ``BlendSQL.plan(q)`` and ``BlendSQL.execute(q)`` must be the
same program, so the plan is made here and ``execute`` runs it as it is
(``execute.engine.run_plan``). The walk applies the tree rules, then, until
no call is left, chooses the next ready call (inner scopes first, then the
``ORDER`` rule's cost), asks the ``STRATEGY`` rules how a map call gathers its
values (plain, lazily under LIMIT, pre-aggregated by its GROUP BY value), and
records a typed step. A marker (``__bsql_planned_<id>()``) stands for the
call's outputs while the walk goes on, as a lookup will when the plan runs;
the markers are taken out again at the end, so the plan's tree is the
prepared query the steps name by call id.

With ``estimate`` (``plan()``, or a budget to check) each step is also priced
by :class:`~blendsql.execute.estimate.Estimator`, which counts values with the
candidate queries and never calls a model; without it (a plain ``execute``) the
walk runs no statement of its own beyond the rules' probes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from blendsql.execute.estimate import MARKER, Estimator, summary
from blendsql.execute.planning import plan_tree
from blendsql.execute.run import Run
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient
from blendsql.plan.calls import find_calls, next_call
from blendsql.plan.memo import RegistryKey, TreeMemo
from blendsql.plan.rules import Hook, apply_hook
from blendsql.plan.state import TreeTexts
from blendsql.plan.steps import (
    CallStep,
    FinalQuery,
    JoinCall,
    LateMap,
    MapCall,
    MapDecision,
    Plan,
    QACall,
    Step,
    Strategy,
    Unordered,
)
from blendsql.smoothie import TraceStep


def plan_query(run: Run, given: exp.Expression,
               parse_expr: Callable[[str], exp.Expression], query: str, *,
               memo: bool = False, estimate: bool = True, prices: Any = None) -> Plan:
    """The plan of ``given`` (a parsed query): its typed steps, in the order they run.

    ``memo``: ``given`` is a session-cached parse nobody changes (planning work
    may be memoised on it); ``estimate``: price each step (see the module);
    ``prices``: the model's declared prices, for dollar estimates.
    """
    run.note_rules_off()
    planned = plan_tree(run, given, parse_expr, memo)
    tree = planned.tree
    late = planned.late if planned.deferred else None
    calls = calls_of(tree, run.registry.identity if planned.memo else None)
    # texts and keys read on the planned tree, whose nodes keep them (meta) for the
    # next run of a cached query; by call id for this run's copy
    texts = [run.call_text(c) for c in calls]
    keys = [run.call_key(c) for c in calls]
    base = tree
    if calls:  # the plan's own copy: markers stand in for calls while it walks
        tree = tree.copy()
        calls = find_calls(tree)
        # the copy's calls grouped by key, as identical-call sharing groups them (the
        # tree is the run's working tree when the plan is made for its run)
        groups: dict[str, list[IngredientCall]] = {}
        for c, k in zip(calls, keys, strict=True):
            groups.setdefault(k, []).append(c)
        run.sharing.call_groups = (tree, groups)
    plan = Plan(query, tree=tree, late=late, params=dict(run.params),
                options=dict(run.options), estimated=estimate)
    run.trace.append(TraceStep("plan", f"{len(calls)} ingredient call(s) to plan",
                               details={"calls": texts}))
    estimator = Estimator(run, plan, base, prices) if estimate else None
    _Walk(run, plan, estimator).walk(calls)
    return plan


@dataclass
class PlannedCalls(TreeMemo):
    """The calls of a session-cached planned tree, in text order (memoised on its meta)."""

    key: RegistryKey
    calls: list[IngredientCall]


CALLS_MEMO = "bsql_planned_calls"


def calls_of(tree: exp.Expression, key: RegistryKey | None) -> list[IngredientCall]:
    """:func:`find_calls` of ``tree``, memoised on it when ``key`` (the registry's identity)
    is given: the tree is a session-cached plan nobody changes."""
    if key is None:
        return find_calls(tree)
    known = tree.meta.get(CALLS_MEMO)
    if isinstance(known, PlannedCalls) and known.key == key:
        return known.calls
    calls = find_calls(tree)
    tree.meta[CALLS_MEMO] = PlannedCalls(key, calls)
    return calls


class _Walk:
    """One walk over a plan's tree: chooses, decides and records each step."""

    def __init__(self, run: Run, plan: Plan, estimator: Estimator | None) -> None:
        self.run = run
        self.plan = plan
        self.estimator = estimator
        self.marked: list[tuple[exp.Expression, IngredientCall]] = []
        self.ready: set[int] = set()
        self.order_keys: dict[int, tuple[IngredientCall, tuple[int, int, int]]] = {}

    def walk(self, calls: list[IngredientCall]) -> None:
        run, plan = self.run, self.plan
        tree = plan.tree
        cost = run.ordering_cost()
        try:
            while calls:
                call = next_call(tree, run.registry, run.readiness_candidate, cost=cost,
                                 known_ready=self.ready, calls=calls,
                                 order_keys=self.order_keys)
                if call is None:
                    plan.steps.append(Unordered(
                        f"{len(calls)} call(s) left, none ready: the remaining calls "
                        "cannot be ordered (a correlated argument?); the query fails here",
                        condition=f"{len(calls)} call(s) left, none ready"))
                    plan.notes.append("the remaining calls cannot be ordered (a correlated "
                                      "argument?); the query will fail when run")
                    break
                if len(calls) > 1:  # the ORDER rule compared ready calls: traced
                    run.trace_order(call)
                condition = (f"ready; {len(calls)} call(s) left"
                             + ("; cheapest ready call (cost_order)" if cost is not None else ""))
                done = self.step(tree, call, condition)
                calls = [c for c in calls if c.call_id != done.call_id]
            self.final()
        finally:
            self.unmark()
        if self.estimator is not None:
            self.estimator.finish()

    def step(self, tree: exp.Expression, call: IngredientCall, condition: str) -> IngredientCall:
        """Record the step of ``call`` (or of the call a rule computes first); return the
        call planned, now a marker in the tree."""
        text = self.run.call_text(call)
        ing = self.run.registry.get(call.key_name)
        step: CallStep
        if isinstance(ing, MapIngredient):
            # the STRATEGY rules' decision (none: PLAIN)
            decision = apply_hook(self.run, Hook.STRATEGY, tree, call)
            if not isinstance(decision, MapDecision):
                decision = MapDecision(Strategy.PLAIN)
            if decision.first is not None:  # e.g. a WHERE filter before a GROUP BY map
                return self.step(tree, decision.first, condition + "; computed first (the "
                                 "preaggregate rule waits for its scope's filters)")
            step = MapCall(call_id=call.call_id, call=text, strategy=decision.strategy,
                           sources=decision.sources, depends_on=decision.note)
        elif isinstance(ing, QAIngredient):
            step = QACall(call_id=call.call_id, call=text)
        elif isinstance(ing, JoinIngredient):
            step = JoinCall(call_id=call.call_id, call=text)
        else:  # the run reports the kind that cannot be computed
            step = CallStep(call_id=call.call_id, call=text)
        step.condition = condition
        step.node, step.ing = call, ing
        step.ingredient = call.name
        step.summary = summary(step, call.name)
        step.details.update(call=text, call_id=call.call_id)
        if self.estimator is not None:
            self.estimator.call(tree, step, call, ing)
        self.plan.steps.append(step)
        self.mark(call)
        return call

    def mark(self, call: IngredientCall) -> None:
        """A marker stands for ``call``'s outputs (the tree changed: candidates afresh)."""
        marker = exp.Anonymous(this=f"{MARKER}{call.call_id}", expressions=[])
        call.replace(marker)
        self.marked.append((marker, call))
        self.run.state.tree.now = TreeTexts()

    def unmark(self) -> None:
        """Every call back in its place: the plan's tree is the prepared query again."""
        for marker, call in reversed(self.marked):
            marker.replace(call)
        self.marked.clear()
        tree = self.run.state.tree
        tree.now = TreeTexts()
        tree.atom_texts = {}  # texts rendered with markers in them

    def final(self) -> None:
        plan = self.plan
        if plan.steps and isinstance(plan.steps[-1], Unordered):
            return
        step: Step = FinalQuery("final query", condition="no ingredient call left")
        if self.estimator is not None:
            self.estimator.final(plan.tree, step)
        plan.steps.append(step)
        late = plan.late
        for index, call in (late.deferred if late is not None else []):
            text = self.run.call_text(call)
            lstep = LateMap(call_id=call.call_id,
                            call=text, index=index, ingredient=call.name,
                            condition="projection-only maps deferred by late_maps",
                            details={"call": text, "call_id": call.call_id})
            lstep.summary = summary(lstep, call.name)
            if self.estimator is not None:
                self.estimator.late(lstep, call)
            plan.steps.append(lstep)
