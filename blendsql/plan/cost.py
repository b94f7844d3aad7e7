"""What one ingredient call costs: distinct values x estimated prompt tokens per value.

Why its own module: the numbers are pure arithmetic on measured counts; the
``order`` rule (``plan.order``), the executor's estimate (``execute.optimise``)
and the run's typed state (``plan.state``) all use them, and none of those
should import the others to get them.
"""

from __future__ import annotations

from dataclasses import dataclass

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
