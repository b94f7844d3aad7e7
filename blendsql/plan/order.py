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

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.context import RunContext
from blendsql.plan.cost import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from blendsql.plan.cost import MODEL_FREE_WEIGHT as MODEL_FREE_WEIGHT
from blendsql.plan.cost import PROMPT_OVERHEAD_TOKENS as PROMPT_OVERHEAD_TOKENS
from blendsql.plan.cost import CostEstimate as CostEstimate
from blendsql.plan.cost import estimate as estimate
from blendsql.plan.cost import tokens_per_value as tokens_per_value

TRACED_COSTS = 10  # other calls' costs written in a cost_order decision's summary


class CallOrder:
    """How the next ready call is chosen: by :meth:`cost`, the choice traced by :meth:`chosen`.

    Each call's cost is estimated once per run (``run.call_cost``) and kept in
    the run's state (``plan.state.CostState``), as the cheapest ready call is chosen among all of them at
    every step.
    """

    def __init__(self, run: RunContext) -> None:
        self.run = run
        costs = run.state.costs
        self.seen = costs.seen
        self.known = costs.values
        self.estimated = costs.estimates

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
