"""The interpreter: a query runs (or is planned) as a sequence of typed steps.

Why: the engine's loop and ``BlendSQL.plan()``'s dry run walk the query
through the same steps, so the plan cannot drift from what runs. One
function, :func:`next_step`, decides what happens next from the walk's
state (prepare the tree, compute the next ready call under cost order, the
final query, the late maps), and :func:`interpret` dispatches each step to
a runner by its kind. The engine (``execute.engine``) and the planner
(``execute.explain``) are two sets of runners over the same steps.

Adding a step kind: add it to :data:`STEP_KINDS`, make :func:`next_step`
yield it under its condition, and give each :class:`Interpreter` subclass a
runner for it in ``runners`` (kind -> method name); a kind without a
runner is an :class:`~blendsql.errors.ExecutionError`, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from sqlglot import exp

from blendsql.errors import ExecutionError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import Ingredient
from blendsql.plan.calls import find_calls, next_call
from blendsql.plan.context import RunContext

#: executable step kinds, in the order a query meets them
STEP_KINDS = ("prepare", "call", "unordered", "final", "late_map")


@dataclass(frozen=True)
class ExecStep:
    """One step to run: its kind, the call it computes and that call's ingredient
    (``call`` steps), and why now."""

    kind: str
    call: IngredientCall | None = None
    condition: str = ""
    ingredient: Ingredient | None = None


@dataclass
class WalkState:
    """Where a walk over a query stands; runners update it, :func:`next_step` reads it.

    ``calls``: the calls left in ``tree`` when a runner already found them
    (None: find them again); ``ready``: call ids found ready once (they stay
    ready, see ``next_call``); ``stuck``: the remaining calls cannot be ordered.
    """

    tree: exp.Expression
    prepared: bool = False
    calls: list[IngredientCall] | None = None
    ready: set[int] = field(default_factory=set)
    stuck: bool = False
    final_done: bool = False
    late_pending: bool = False
    steps: list[ExecStep] = field(default_factory=list)
    order_keys: dict[int, tuple[IngredientCall, tuple[int, int, int]]] = field(
        default_factory=dict)

    def replace_tree(self, tree: exp.Expression) -> None:
        """A runner changed the tree: the calls left are found again."""
        self.tree = tree
        self.calls = None

    def computed(self, tree: exp.Expression, call_ids: Collection[int]) -> None:
        """A runner replaced the calls ``call_ids`` by their lookups and returned ``tree``.

        The same root means each lookup replaced its call in place (and only
        the call: a ready call holds no other call, and its filter atom none
        either), so the calls left are the others; a new root (a rewrite that
        copied the tree) is walked again.
        """
        if tree is self.tree and self.calls is not None:
            self.calls = [c for c in self.calls if c.call_id not in call_ids]
        else:
            self.replace_tree(tree)


class Interpreter:
    """Runs steps by kind; subclasses bind each kind to a runner method.

    ``runners`` maps a step kind to the name of the method that runs it
    (``method(state, step) -> None``); it is the extension point for a new kind.
    """

    runners: ClassVar[dict[str, str]] = {}

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        """The cost the next ready call is chosen by (None: inner scopes first only)."""
        return None

    def readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        """The candidate query a call would run now (None: not ready)."""
        return self.run.readiness_candidate(call)

    def steps(self, state: WalkState) -> Iterator[ExecStep]:
        """The steps of a walk, each decided once the previous one has run."""
        while (step := next_step(state, self)) is not None:
            yield step

    def record(self, state: WalkState, step: ExecStep) -> None:
        """Note a step before it runs (the engine traces it; a dry run need not)."""

    def runner(self, kind: str) -> Callable[[WalkState, ExecStep], None]:
        """The method running steps of ``kind`` (an error when none is bound)."""
        name = self.runners.get(kind)
        method = getattr(self, name, None) if name is not None else None
        if method is None:
            raise ExecutionError(
                f"no runner for the plan step kind {kind!r} in {type(self).__name__}",
                hint=f"bind it in {type(self).__name__}.runners (known kinds: "
                f"{', '.join(sorted(self.runners))})")
        return method  # type: ignore[no-any-return]


def next_step(state: WalkState, it: Interpreter) -> ExecStep | None:
    """The step to run next, or None when the walk is done.

    The dynamic choice lives here: which call is ready next (inner scopes
    first, then the cheapest under ``cost_order``), recorded as the step's
    condition. Decisions that need data (a lazy LIMIT batch, a cascade, the
    pre-aggregation near-unique check) are taken by the ``call`` runner and
    traced there with ``details['rule']``.
    """
    if not state.prepared:
        return ExecStep("prepare", condition="every tree rule, in list order")
    if not state.stuck:
        calls = state.calls if state.calls is not None else find_calls(state.tree)
        state.calls = calls
        if calls:
            cost = it.ordering_cost()
            call = next_call(state.tree, it.run.registry, it.readiness_candidate, cost=cost,
                             known_ready=state.ready, calls=calls,
                             order_keys=state.order_keys)
            if call is None:
                return ExecStep("unordered", condition=f"{len(calls)} call(s) left, none ready")
            return ExecStep("call", call, condition=(
                f"ready; {len(calls)} call(s) left" + ("; cheapest ready call (cost_order)"
                                                       if cost is not None else "")),
                ingredient=it.run.registry.get(call.key_name))
    if not state.final_done:
        return ExecStep("final", condition="no ingredient call left" if not state.stuck
                        else "the remaining calls cannot be ordered")
    if state.late_pending:
        return ExecStep("late_map", condition="projection-only maps deferred by late_maps")
    return None


def interpret(it: Interpreter, state: WalkState) -> WalkState:
    """Run every step of the walk: decide it, record it, dispatch it by kind."""
    for step in it.steps(state):
        run_step = it.runner(step.kind)
        it.record(state, step)
        state.steps.append(step)
        run_step(state, step)
    return state
