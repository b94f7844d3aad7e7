"""A query's plan as data: an ordered list of typed steps, each with its SQL and estimate.

Why: the plan is the program. ``BlendSQL.plan(query)`` returns a :class:`Plan`
whose steps are the decisions the engine takes (which call next, and how:
plain, lazily under LIMIT, pre-aggregated by its GROUP BY value); ``execute``
runs exactly those steps (``execute.engine.run_plan``, one ``match`` on the
step type), so the plan a user reads, or a budget prices, is the plan that
runs. After a run each step also carries its :class:`Actual` figures
(``Smoothie.plan``: EXPLAIN ANALYZE).

Estimates are ``(low, high)`` bounds. They are equal (exact) when a step's
size is known from the database alone; a step whose size depends on earlier
results (a cascade sees only the rows an earlier ingredient passed, a scan
under LIMIT stops early, a call inside another's argument) has a lower bound
and an upper bound (``None`` when no bound is known), never a guess.

This module is data only: it imports neither the database nor the models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any

from sqlglot import exp

#: the name of the marker function a plan's walk puts where a planned call's outputs will
#: be (``__bsql_planned_<call id>()``): SQL holding one cannot run before the plan does
PLANNED_MARK = "__bsql_planned_"


def planned_in(node: exp.Expression) -> bool:
    """Whether an expression holds a planned call's marker."""
    return any(isinstance(n, exp.Anonymous) and str(n.this).lower().startswith(PLANNED_MARK)
               for n in node.walk())


#: step kinds (the display names of the step types), in the order a reader meets them
KINDS = ("call", "lazy_scan", "grouped_call", "unordered", "final", "late_map")


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


class Strategy(Enum):
    """How a map call gathers its values (decided once, by the rules, when planning)."""

    PLAIN = auto()  # every candidate value, one batch
    LAZY = auto()  # under LIMIT: batches in scan order until enough rows qualify
    GROUPED = auto()  # a GROUP BY key: the values of one partial-aggregate scan


@dataclass(frozen=True)
class MapDecision:
    """A ``STRATEGY`` rule's answer for one map call.

    ``first``: another call (a pending WHERE filter of the same scope) to
    compute before this one, which the rule will then decide on again;
    ``sources``: the statistic a GROUPED decision was taken on (the column
    names the scope's sources provide); ``note``: why a bound is a bound.
    """

    strategy: Strategy
    sources: frozenset[str] | None = None
    first: Any = None  # an IngredientCall
    note: str = ""


@dataclass
class Actual:
    """What one step did when it ran (EXPLAIN ANALYZE): values passed to its ingredient,
    model calls, prompt tokens, rows its statements returned, and seconds."""

    values: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    rows: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        return (f"values={self.values}, model_calls={self.model_calls}, "
                f"prompt_tokens={self.prompt_tokens}, rows={self.rows}, "
                f"seconds={self.seconds:.4f}")


@dataclass
class Step:
    """One step of a plan: what it does, its SQL, its estimate and (after a run) its actual.

    Subclasses are the step types; :attr:`kind` is the type's display name
    (one of :data:`KINDS`). ``ingredient`` / ``constraint`` are set for call
    steps; ``depends_on`` says why a size is a bound (empty when exact).
    """

    summary: str = ""
    sql: str | None = None
    estimate: Estimate = field(default_factory=Estimate)
    ingredient: str | None = None
    constraint: str | None = None
    depends_on: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    actual: Actual | None = None
    condition: str = ""  # why this step comes now (the walk's choice)

    @property
    def kind(self) -> str:
        raise NotImplementedError

    def line(self, index: int, estimated: bool = True) -> str:
        head = f"{index:>2}. [{self.kind}] {self.summary}"
        if self.ingredient is not None and estimated:
            head += f"\n      values={self.estimate.values}  model calls={self.estimate.model_calls}" \
                    f"  prompt tokens~{self.estimate.prompt_tokens}"
            if self.estimate.dollars is not None:
                head += f"  dollars~{self.estimate.dollars}"
        if self.actual is not None:
            a = self.actual
            head += (f"\n      actual: values={a.values}  model calls={a.model_calls}  "
                     f"prompt tokens={a.prompt_tokens}  rows={a.rows}  seconds={a.seconds:.4f}")
        if self.ingredient is not None and self.constraint:
            head += f"\n      constraint: {self.constraint}"
        if self.details.get("distributed"):
            head += f"\n      distributed: {self.details['distributed']}"
        if self.depends_on:
            head += f"\n      bound: {self.depends_on}"
        if self.sql:
            head += f"\n      sql: {_short(self.sql)}"
        return head


@dataclass
class CallStep(Step):
    """Compute one ingredient call (``call_id`` in the planned tree); its outputs replace it."""

    call_id: int = -1
    call: str = ""  # the call's BlendSQL text
    #: the walk's references (the call node in ``Plan.tree``, its ingredient), so a run
    #: of the plan's own tree finds them without a search
    node: Any = field(default=None, repr=False, compare=False)
    ing: Any = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        return "call"


@dataclass
class MapCall(CallStep):
    """A map call, with the :class:`Strategy` the rules chose for it."""

    strategy: Strategy = Strategy.PLAIN
    #: GROUPED: the column names the scope's sources provide (the statistic the
    #: pre-aggregation plan was decided on)
    sources: frozenset[str] | None = None

    @property
    def kind(self) -> str:
        return _MAP_KINDS[self.strategy]


_MAP_KINDS = {Strategy.PLAIN: "call", Strategy.LAZY: "lazy_scan",
              Strategy.GROUPED: "grouped_call"}


@dataclass
class QACall(CallStep):
    """A QA call: evaluated once; its answer becomes a bound parameter or a set."""


@dataclass
class JoinCall(CallStep):
    """A join call: each side's distinct values -> a mapping table."""


@dataclass
class Unordered(Step):
    """The calls left cannot be ordered (a correlated argument): running fails here."""

    @property
    def kind(self) -> str:
        return "unordered"


@dataclass
class FinalQuery(Step):
    """The plain query left once every call is computed."""

    @property
    def kind(self) -> str:
        return "final"


@dataclass
class LateMap(Step):
    """A projection-only map computed on the final rows' distinct values."""

    call_id: int = -1
    call: str = ""
    index: int = 0  # its column in the final rows

    @property
    def kind(self) -> str:
        return "late_map"


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
    #: what running the plan needs: the prepared tree its call steps name by call id
    #: (never changed by a run), the late-map rule's plan, params and options
    tree: Any = field(default=None, repr=False, compare=False)
    late: Any = field(default=None, repr=False, compare=False)
    params: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    estimated: bool = True  # the steps carry estimates (execute without a budget skips them)

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

    @property
    def analyzed(self) -> bool:
        """Whether the plan ran: its steps carry their actual figures."""
        return any(s.actual is not None for s in self.steps)

    @property
    def actual(self) -> Actual:
        """The run's totals over every step that ran."""
        out = Actual()
        for s in self.steps:
            if s.actual is not None:
                a = s.actual
                out = Actual(out.values + a.values, out.model_calls + a.model_calls,
                             out.prompt_tokens + a.prompt_tokens, out.rows + a.rows,
                             out.seconds + a.seconds)
        return out

    def __str__(self) -> str:
        head = "plan (analyzed) for" if self.analyzed else "plan for"
        lines = [f"{head}: {_short(self.query, 200)}"]
        lines += [s.line(i + 1, self.estimated) for i, s in enumerate(self.steps)]
        lines.append(f"total: {self.total.describe()}" if self.estimated
                     else "total: not estimated")
        if self.analyzed:
            lines.append(f"actual: {self.actual.describe()}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Plan {len(self.steps)} step(s) | {self.total.describe()}>"

    def _repr_html_(self) -> str:
        from blendsql._display import plan_html

        return plan_html(self)
