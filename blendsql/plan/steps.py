"""A query's plan as data: an ordered list of typed steps, each with its SQL and estimate.

Why: a user should see what a query will cost before paying for it.
:func:`blendsql.execute.explain.build_plan` produces a :class:`Plan` by
following the engine's own rules and order (the same candidate queries, the
same choice of the next call) without calling any ingredient or model; this
module only holds the result and prints it.

Estimates are ``(low, high)`` bounds. They are equal (exact) when a step's
size is known from the database alone; a step whose size depends on earlier
results (a cascade sees only the rows an earlier ingredient passed, a scan
under LIMIT stops early, a call inside another's argument) has a lower bound
and an upper bound (``None`` when no bound is known), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: step kinds, in the order a reader meets them in a plan
KINDS = ("materialise", "collect", "call", "lazy_scan", "grouped_call", "final", "late_map")


@dataclass(frozen=True)
class Bound:
    """A count known exactly (``low == high``) or bounded (``high`` None: unbounded)."""

    low: float
    high: float | None

    @classmethod
    def exact(cls, n: float) -> Bound:
        return cls(n, n)

    @property
    def is_exact(self) -> bool:
        return self.high is not None and self.high == self.low

    def __add__(self, other: Bound) -> Bound:
        high = None if self.high is None or other.high is None else self.high + other.high
        return Bound(self.low + other.low, high)

    def contains(self, n: float) -> bool:
        return self.low <= n and (self.high is None or n <= self.high)

    def __str__(self) -> str:
        fmt = _num
        if self.is_exact:
            return fmt(self.low)
        return f"{fmt(self.low)}..{'?' if self.high is None else fmt(self.high)}"


ZERO = Bound(0, 0)


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.4g}"


@dataclass
class Estimate:
    """What one step (or the whole plan) is expected to pass and cost."""

    values: Bound = ZERO
    model_calls: Bound = ZERO
    prompt_tokens: Bound = ZERO
    dollars: Bound | None = None  # only when the model declares prices

    def __add__(self, other: Estimate) -> Estimate:
        dollars = (None if self.dollars is None and other.dollars is None
                   else (self.dollars or ZERO) + (other.dollars or ZERO))
        return Estimate(self.values + other.values, self.model_calls + other.model_calls,
                        self.prompt_tokens + other.prompt_tokens, dollars)

    def describe(self) -> str:
        parts = [f"values={self.values}", f"model_calls={self.model_calls}",
                 f"prompt_tokens~{self.prompt_tokens}"]
        if self.dollars is not None:
            parts.append(f"dollars~{self.dollars}")
        return ", ".join(parts)


@dataclass
class Step:
    """One step of a plan: its kind, what it does, its SQL and estimate.

    ``kind`` is one of :data:`KINDS`; ``ingredient`` / ``constraint`` are set
    for ``call`` / ``lazy_scan`` / ``preaggregate`` / ``late_map`` steps;
    ``depends_on`` says why a size is a bound (empty when exact).
    """

    kind: str
    summary: str
    sql: str | None = None
    estimate: Estimate = field(default_factory=Estimate)
    ingredient: str | None = None
    constraint: str | None = None
    depends_on: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def line(self, index: int) -> str:
        head = f"{index:>2}. [{self.kind}] {self.summary}"
        if self.ingredient is not None:
            head += f"\n      values={self.estimate.values}  model calls={self.estimate.model_calls}" \
                    f"  prompt tokens~{self.estimate.prompt_tokens}"
            if self.estimate.dollars is not None:
                head += f"  dollars~{self.estimate.dollars}"
            if self.constraint:
                head += f"\n      constraint: {self.constraint}"
        if self.details.get("distributed"):
            head += f"\n      distributed: {self.details['distributed']}"
        if self.depends_on:
            head += f"\n      bound: {self.depends_on}"
        if self.sql:
            head += f"\n      sql: {_short(self.sql)}"
        return head


def _short(sql: str, limit: int = 400) -> str:
    one = " ".join(sql.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@dataclass
class Plan:
    """The ordered steps of one query and their total estimate."""

    query: str
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    trace: list[Any] = field(default_factory=list)  # the statements planning ran (TraceSteps)

    @property
    def total(self) -> Estimate:
        out = Estimate()
        for s in self.steps:
            out = out + s.estimate
        return out

    @property
    def model_calls(self) -> Bound:
        return self.total.model_calls

    def kinds(self) -> list[str]:
        return [s.kind for s in self.steps]

    def __str__(self) -> str:
        lines = [f"plan for: {_short(self.query, 200)}"]
        lines += [s.line(i + 1) for i, s in enumerate(self.steps)]
        lines.append(f"total: {self.total.describe()}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Plan {len(self.steps)} step(s) | {self.total.describe()}>"

    def _repr_html_(self) -> str:
        from blendsql._display import plan_html

        return plan_html(self)
