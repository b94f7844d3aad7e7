"""Budgets: limits on what one query may spend on the model.

Why: a query over a large table can pass thousands of values to a model;
a user should be able to say "at most N calls / tokens / dollars" and get a
clear error instead of a bill, and never a silently partial result.

``Budget(model_calls=, prompt_tokens=, dollars=)`` is the ``budget`` option
(``BlendSQL(db, budget=...)`` for the session, ``execute(q, budget=...)``
per query). It is enforced in two places:

- before the first model call, against the plan's estimate
  (:meth:`Budget.check_estimate`, see :mod:`blendsql.plan.steps`);
- before each model request batch, against the counters so far plus the
  batch (:meth:`Budget.check_batch`, called by
  :class:`blendsql.execute.metering.MeteredModel`), and again after it with
  what the batch really used (tokens are only known afterwards).

Dollars need prices: a model declares them as a ``prices`` attribute, a
:class:`Prices` (dollars per prompt token and per completion token). A
dollar limit on a model without prices is an error (it could not be kept).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from blendsql.errors import BudgetExceededError


@dataclass(frozen=True)
class Prices:
    """Dollars per token of a model (set as ``model.prices``)."""

    prompt: float
    completion: float = 0.0

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        """Dollars for that many tokens."""
        return prompt_tokens * self.prompt + completion_tokens * self.completion


def prices_of(model: Any) -> Prices | None:
    """The model's declared :class:`Prices`, looked up through wrappers (the
    metering proxy's ``_inner``, the cache's ``inner``), or None."""
    for _ in range(8):
        if model is None:
            return None
        attrs = getattr(model, "__dict__", {})
        found = attrs.get("prices", getattr(type(model), "prices", None))
        if isinstance(found, Prices):
            return found
        model = attrs.get("_inner") or attrs.get("inner")
    return None


def _limit(name: str, value: Any, integer: bool) -> None:
    if value is None:
        return
    ok_type = (isinstance(value, int) if integer else isinstance(value, (int, float)))
    if isinstance(value, bool) or not ok_type or not math.isfinite(value) or value < 0:
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"Budget {name}= must be {kind} >= 0 or None, not {value!r}")


@dataclass(frozen=True)
class Budget:
    """Most a query may spend: model calls, prompt tokens, dollars (None: no limit)."""

    model_calls: int | None = None
    prompt_tokens: int | None = None
    dollars: float | None = None

    def __post_init__(self) -> None:
        _limit("model_calls", self.model_calls, True)
        _limit("prompt_tokens", self.prompt_tokens, True)
        _limit("dollars", self.dollars, False)

    def describe(self) -> str:
        """``model_calls<=10, dollars<=0.5`` (only the limits that are set)."""
        parts = [f"{k}<={v:g}" for k, v in (("model_calls", self.model_calls),
                                             ("prompt_tokens", self.prompt_tokens),
                                             ("dollars", self.dollars)) if v is not None]
        return ", ".join(parts) or "no limit"

    # -- checks ---------------------------------------------------------------------------

    def _over(self, calls: float, tokens: float, dollars: float | None,
              ) -> tuple[str, float, float] | None:
        """The first limit the amounts exceed: (name, limit, amount), or None."""
        if self.model_calls is not None and calls > self.model_calls:
            return "model_calls", self.model_calls, calls
        if self.prompt_tokens is not None and tokens > self.prompt_tokens:
            return "prompt_tokens", self.prompt_tokens, tokens
        if self.dollars is not None and dollars is not None and dollars > self.dollars + 1e-12:
            return "dollars", self.dollars, dollars
        return None

    def need_prices(self, prices: Prices | None) -> None:
        """A dollar limit on a model that declares no prices cannot be kept: say so."""
        if self.dollars is not None and prices is None:
            raise BudgetExceededError(
                f"a budget of dollars<={self.dollars:g} was given but the model declares "
                "no prices, so its spending cannot be counted",
                hint="set model.prices = blendsql.budget.Prices(prompt=<$ per token>, "
                "completion=<$ per token>), or limit model_calls / prompt_tokens instead",
                limit="dollars", allowed=self.dollars, amount=math.nan)

    def check_batch(self, used_calls: int, used_prompt: int, used_completion: int,
                    batch_calls: int, batch_prompt: int, batch_completion_max: int,
                    prices: Prices | None) -> None:
        """Before a request batch: refuse it when spent-so-far plus the batch exceeds a limit.

        The batch's completion tokens are bounded by its requests' ``max_tokens``,
        so a dollar check is an upper bound (never a bill past the limit).
        """
        self.need_prices(prices)
        calls = used_calls + batch_calls
        tokens = used_prompt + batch_prompt
        dollars = (prices.cost(tokens, used_completion + batch_completion_max)
                   if prices is not None else None)
        over = self._over(calls, tokens, dollars)
        if over is not None:
            name, allowed, amount = over
            raise BudgetExceededError(
                f"budget exceeded before a model request batch: {name} would reach "
                f"{_fmt(amount)} (limit {_fmt(allowed)}; spent so far: {used_calls} call(s), "
                f"{used_prompt} prompt token(s); this batch: {batch_calls} request(s), "
                f"~{batch_prompt} prompt token(s))",
                hint="raise the limit (Budget(...)), narrow the query (WHERE / LIMIT), or "
                "look at BlendSQL.plan(query) for where the calls go",
                limit=name, allowed=allowed, amount=amount)

    def check_used(self, calls: int, prompt: int, completion: int,
                   prices: Prices | None) -> None:
        """After a batch: what was really used must be within the limits."""
        dollars = prices.cost(prompt, completion) if prices is not None else None
        over = self._over(calls, prompt, dollars)
        if over is not None:
            name, allowed, amount = over
            raise BudgetExceededError(
                f"budget exceeded: {name} reached {_fmt(amount)} (limit {_fmt(allowed)}); "
                "the query was stopped, no partial result is returned",
                hint="raise the limit (Budget(...)) or narrow the query", limit=name,
                allowed=allowed, amount=amount)

    def check_estimate(self, calls: int, prompt_tokens: int, dollars: float | None,
                       plan_text: str) -> None:
        """Before the first model call: refuse a plan whose certain model calls exceed
        the limit. Prompt tokens and dollars of a plan are rough figures, shown in the
        message but enforced exactly before each request batch instead."""
        over = self._over(calls, 0, None)
        if over is not None:
            name, allowed, amount = over
            raise BudgetExceededError(
                f"the query's estimate exceeds the budget: {name} ~{_fmt(amount)} (limit "
                f"{_fmt(allowed)}); estimate: {calls} model call(s), ~{prompt_tokens} prompt "
                f"token(s)" + (f", ${dollars:.4g}" if dollars is not None else "")
                + f"\n{plan_text}",
                hint="nothing was sent to the model; raise the limit or narrow the query",
                limit=name, allowed=allowed, amount=amount)


def _fmt(x: float) -> str:
    return f"{x:.4g}" if isinstance(x, float) and not float(x).is_integer() else f"{x:g}"


def batch_size(requests: Sequence[Any], count_tokens: Any) -> tuple[int, int, int]:
    """(requests, prompt tokens, most completion tokens) of one request batch."""
    prompt = 0
    completion = 0
    for r in requests:
        text = r.prompt or str(r.messages)  # as FunctionModel counts them
        prompt += int(count_tokens(text))
        completion += int(getattr(r, "max_tokens", 0) or 0)
    return len(requests), prompt, completion
