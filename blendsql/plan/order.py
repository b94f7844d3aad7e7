"""Ordering ingredient predicates by estimated cost.

Why: under AND, the engine already forms a cascade -- each ingredient
predicate's candidate query sees only rows that passed the predicates
computed before it (ARCHITECTURE.md §3), and plain predicates always run
inside every candidate query, so they come first. What is left to choose is
which ingredient runs first: the cheaper one, so the expensive one sees the
fewest rows. Cost = distinct values to pass x estimated prompt tokens per
value (BlendSQL §2.3; SUQL §3). Ingredients without a model cost ~nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.context import RunContext

CHARS_PER_TOKEN = 4.0
PROMPT_OVERHEAD_TOKENS = 40.0  # instructions and formatting around each value
MODEL_FREE_WEIGHT = 1e-6  # a model-free value, relative to one prompt token


@dataclass(frozen=True)
class CostEstimate:
    """What one map / join call would cost if computed now."""

    distinct_values: int
    tokens_per_value: float
    needs_model: bool = True

    @property
    def cost(self) -> float:
        """Distinct values x prompt tokens per value.

        A model-free ingredient costs its distinct count scaled far below any
        model call: it never outranks a model call, and among model-free calls
        the one with fewer values still runs first (fewer values passed).
        """
        if not self.needs_model:
            return self.distinct_values * MODEL_FREE_WEIGHT
        return self.distinct_values * self.tokens_per_value


def tokens_per_value(question_chars: int, avg_value_chars: float) -> float:
    """Rough prompt tokens for one value: overhead + question + value text."""
    return PROMPT_OVERHEAD_TOKENS + (question_chars + max(avg_value_chars, 0.0)) / CHARS_PER_TOKEN


def estimate(distinct_values: int, question_chars: int, avg_value_chars: float,
             needs_model: bool = True) -> CostEstimate:
    """A :class:`CostEstimate` from counts measured on the candidate query."""
    return CostEstimate(distinct_values, tokens_per_value(question_chars, avg_value_chars),
                        needs_model)


TRACED_COSTS = 10  # other calls' costs written in a cost_order decision's summary


class CallOrder:
    """How the next ready call is chosen: by :meth:`cost`, the choice traced by :meth:`chosen`.

    Each call's cost is estimated once per run (``run.call_cost``) and kept in
    the run's memo, as the cheapest ready call is chosen among all of them at
    every step.
    """

    def __init__(self, run: RunContext) -> None:
        self.run = run
        self.seen: dict[int, float] = run.memo.setdefault("costs_seen", {})
        self.known: dict[int, float] = run.memo.setdefault("cost_values", {})
        self.estimated: dict[int, Any] = run.memo.setdefault("cost", {})

    def cost(self, c: IngredientCall) -> float:
        cid = c.call_id
        value = self.known.get(cid)
        if value is None:
            value = self.run.call_cost(c)
            if cid in self.estimated:  # else not estimated (yet): asked again
                self.known[cid] = value
        self.seen[cid] = value
        return value

    def chosen(self, call: IngredientCall) -> None:
        """When ready calls were compared to pick ``call``: a decision step."""
        seen = self.seen
        if len(seen) < 2 or call.call_id not in seen:
            seen.clear()
            return
        others = {i: c for i, c in seen.items() if i != call.call_id}
        mine = seen[call.call_id]
        seen.clear()
        costs = list(others.values())
        listed = ", ".join(f"{c:.3g}" for c in costs[:TRACED_COSTS])
        if len(costs) > TRACED_COSTS:  # n filters: a summary of n costs at each of n steps
            listed += f", ... ({len(costs) - TRACED_COSTS} more in details['costs'])"
        self.run.decided(f"cost_order: {call.name} first (estimated cost {mine:.3g}; "
                         f"{len(others)} other ready call(s) cost {listed})",
                         call=self.run.call_text(call), costs=costs)


def cost_order(run: RunContext) -> CallOrder:
    """Among ready ingredient predicates of one scope, the cheapest runs first.

    Why: under AND each later predicate sees only the rows earlier ones
    passed, so the cheap filter (distinct values x prompt tokens, measured on
    the relaxed candidate rows) shrinks the expensive one's input.

    The estimate is :func:`estimate`'s, through ``run.call_cost``.
    """
    return CallOrder(run)


CostFn = Callable[[IngredientCall], float]
