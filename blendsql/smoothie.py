"""The result of a query: a DataFrame, summary counters and the full trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from blendsql._display import NotebookProgress, meta_html, smoothie_html, wrap

if TYPE_CHECKING:
    from blendsql.plan.steps import Plan

HTML_MAX_ROWS = 20  # rows in the Jupyter table (the counters give the full count)
TEXT_MAX_ROWS = 30  # rows in str(smoothie)


@dataclass
class Meta:
    """Counters over one execute() call."""

    values_passed: int = 0  # values handed to ingredients (map values, join pairs' sides, QA calls)
    model_calls: int = 0  # requests that reached a model (cache hits excluded)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    ingredient_calls: int = 0
    planner_misses: int = 0  # values computed on demand because the plan had not prefetched them

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        """The counters as chips in Jupyter (as in the Smoothie's view)."""
        return wrap(meta_html(self))


@dataclass
class TraceStep:
    """One thing the engine did, in order.

    ``kind`` is one of: ``parse``, ``plan``, ``sql``, ``temp_table``,
    ``ingredient``, ``retrieval``, ``executors`` (a batch of calls answered on a
    Spark session's executors: one job), ``executors_check`` (the one job that checks
    the executors' Python can run blendsql before the first batch is shipped; its
    ``details["error"]`` says why not, and the calls then run on the driver),
    ``warning``, ``cancelled`` (the work a time-out or a cancellation stopped: requests
    not started, abandoned in flight), ``error`` (the failure that ended a run; found in
    ``BlendSQLError.trace``).
    """

    kind: str
    summary: str
    sql: str | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    seconds: float = 0.0
    ingredient: str | None = None
    inputs: list[Any] | None = None
    outputs: list[Any] | None = None
    prompts: list[str] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    model_calls: int = 0
    cache_hits: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        bits = [f"[{self.kind}] {self.summary}"]
        if self.rows_out is not None:
            bits.append(f"rows={self.rows_out}")
        if self.model_calls:
            bits.append(f"calls={self.model_calls}")
        if self.prompt_tokens or self.completion_tokens:
            bits.append(f"tokens={self.prompt_tokens}+{self.completion_tokens}")
        stages = self.details.get("stages")
        if stages:
            bits.append("decided by " + ", ".join(f"{k}={v}" for k, v in stages.items()))
        bits.append(f"{self.seconds * 1000:.1f} ms")
        return "  ".join(bits)


@dataclass
class Smoothie:
    """``df`` (the rows), ``meta`` (counters), ``trace`` (ordered steps) and ``plan``.

    ``plan``: the :class:`~blendsql.plan.steps.Plan` that ran, each step with its
    estimate (when the run priced it: ``BlendSQL.run(BlendSQL.plan(q))`` or a budget)
    and its actual values, model calls, prompt tokens, rows and seconds, as
    PostgreSQL's ``EXPLAIN ANALYZE`` shows them (None for a query without ingredients).
    """

    df: pd.DataFrame
    meta: Meta
    trace: list[TraceStep] = field(default_factory=list)
    query: str = ""
    plan: Plan | None = None

    def confidence(self, ingredient: str | None = None) -> pd.DataFrame:
        """One row per value an ingredient decided from the model's probabilities.

        Columns: ``ingredient``, ``value`` (the input), ``answer``, ``probability``
        (the chosen answer's, calibrated), ``margin`` (to the runner-up),
        ``stage`` (the model that decided), ``scored`` (False: a greedy answer,
        ``note`` says why), ``threshold`` (a yes/no map's P(TRUE) threshold, or a
        cascade's) and ``rule`` ('split': the threshold found in the batch;
        'argmax': the more probable answer). Sort by ``margin`` to see the doubtful
        values first. Calls whose answers were scored have rows (yes/no maps by
        default; others with ``scored=``, ``calibrate=``, ``cascade=``);
        ``ingredient`` keeps one ingredient's (any case).
        """
        cols = ["ingredient", "value", "answer", "probability", "margin", "stage", "scored", "note",
                "threshold", "rule"]
        rows = []
        for step in self.trace:
            if step.kind != "ingredient" or not step.details.get("decisions"):
                continue
            if ingredient is not None and (step.ingredient or "").lower() != ingredient.lower():
                continue
            rows += [{"ingredient": step.ingredient, **{c: d.get(c) for c in cols[1:]}}
                     for d in step.details["decisions"]]
        return pd.DataFrame(rows, columns=cols)

    def summary(self) -> str:
        m = self.meta
        return (
            f"{len(self.df)} rows | {m.model_calls} model calls ({m.cache_hits} cached) | "
            f"{m.prompt_tokens}+{m.completion_tokens} tokens | "
            f"{m.values_passed} values passed | {m.seconds:.3f} s"
        )

    def __str__(self) -> str:
        """Rows (at most ``TEXT_MAX_ROWS``), the counters and one line per trace step."""
        return "\n\n".join([text_table(self.df), self.summary(),
                             "Trace:\n" + "\n".join(
                                 f"  {i + 1}. {s.line()}" for i, s in enumerate(self.trace))])

    def __repr__(self) -> str:
        return f"<Smoothie {self.summary()}>"

    def to_html(self, max_rows: int = HTML_MAX_ROWS) -> str:
        """The Jupyter view: result table, counters, a collapsible trace with time bars.

        Self-contained HTML (inline CSS, no script), so it also works in an
        nbconvert export and on the ``blendsql serve`` page.
        """
        return smoothie_html(self.df, self.meta, self.trace, max_rows=max_rows)

    def _repr_html_(self) -> str:
        return self.to_html()


def notebook_progress(min_interval: float = 0.2) -> Any:
    """A ``progress=`` callback drawing bars in Jupyter: ``BlendSQL(db, progress=notebook_progress())``."""
    return NotebookProgress(min_interval)


def text_table(df: pd.DataFrame, max_rows: int = TEXT_MAX_ROWS) -> str:
    """The rows for a terminal; says how many were left out rather than eliding silently."""
    if not len(df.columns):
        return "(no columns)"
    if df.empty:
        return "(no rows)\n" + "  ".join(str(c) for c in df.columns)
    shown = df.head(max_rows)
    text = str(shown.to_string(index=False))
    if len(df) > max_rows:
        text += f"\n... showing {max_rows} of {len(df)} rows"
    return text
