"""The result of a query: a DataFrame, summary counters and the full trace."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd


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


@dataclass
class TraceStep:
    """One thing the engine did, in order.

    ``kind`` is one of: ``parse``, ``plan``, ``sql``, ``temp_table``,
    ``ingredient``, ``retrieval``, ``warning``, ``error`` (the failure that
    ended a run; found in ``BlendSQLError.trace``).
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
        bits.append(f"{self.seconds * 1000:.1f} ms")
        return "  ".join(bits)


@dataclass
class Smoothie:
    """``df`` (the rows), ``meta`` (counters) and ``trace`` (ordered steps)."""

    df: pd.DataFrame
    meta: Meta
    trace: list[TraceStep] = field(default_factory=list)
    query: str = ""

    def summary(self) -> str:
        m = self.meta
        return (
            f"{len(self.df)} rows | {m.model_calls} model calls ({m.cache_hits} cached) | "
            f"{m.prompt_tokens}+{m.completion_tokens} tokens | "
            f"{m.values_passed} values passed | {m.seconds:.3f} s"
        )

    def __str__(self) -> str:
        table = self.df.to_string(index=False, max_rows=30) if len(self.df.columns) else "(no columns)"
        steps = "\n".join(f"  {i + 1}. {s.line()}" for i, s in enumerate(self.trace))
        return f"{table}\n\n{self.summary()}\nTrace:\n{steps}"

    def __repr__(self) -> str:
        return f"<Smoothie {self.summary()}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i + 1}</td><td>{html.escape(s.kind)}</td><td>{html.escape(s.summary)}</td>"
            f"<td>{'' if s.rows_out is None else s.rows_out}</td><td>{s.model_calls}</td>"
            f"<td>{s.prompt_tokens}+{s.completion_tokens}</td><td>{s.seconds * 1000:.1f}</td></tr>"
            for i, s in enumerate(self.trace)
        )
        return (
            f"<div class='blendsql-smoothie'>{self.df.to_html(index=False, max_rows=50)}"
            f"<p><b>{html.escape(self.summary())}</b></p>"
            "<details><summary>Trace</summary><table><tr><th>#</th><th>step</th><th>what</th>"
            f"<th>rows</th><th>calls</th><th>tokens</th><th>ms</th></tr>{rows}</table></details></div>"
        )
