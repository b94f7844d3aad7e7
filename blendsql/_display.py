"""HTML for a Smoothie: what a person sees in Jupyter, an nbconvert export and ``blendsql serve``.

A leaf: it reads the counters and steps through the small protocols below
(``blendsql.smoothie`` imports this module, never the other way round).

Plain HTML with one scoped ``<style>`` block and inline widths: no script, so
the trace still expands (``<details>``) where JavaScript is off or stripped.
Every value that came from the data, the query or a model is escaped here and
clipped, because a cell or a prompt can be arbitrarily long and may hold markup.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any, Protocol

CELL_CHARS = 200  # a table cell / one ingredient value
PROMPT_CHARS = 2000  # one prompt
SQL_CHARS = 4000  # one statement
MAX_PAIRS = 20  # ingredient inputs -> outputs shown per step
MAX_PROMPTS = 3  # prompts shown per step

CSS = """
.blendsql-smoothie{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;
  line-height:1.4;max-width:100%}
.blendsql-smoothie table{border-collapse:collapse;margin:4px 0}
/* the doubled class outranks Jupyter's right-aligned table cells */
.blendsql-smoothie.blendsql-smoothie th,.blendsql-smoothie.blendsql-smoothie td{border-bottom:1px solid rgba(128,128,128,.3);
  padding:3px 8px;text-align:left;vertical-align:top}
.blendsql-smoothie th{font-weight:600}
.blendsql-smoothie.blendsql-smoothie td.num{text-align:right;font-variant-numeric:tabular-nums}
.blendsql-smoothie .bsql-null{opacity:.5;font-style:italic}
.blendsql-smoothie .bsql-note{opacity:.75;margin:2px 0 6px}
.blendsql-smoothie .bsql-meta{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0}
.blendsql-smoothie .bsql-chip{border:1px solid rgba(128,128,128,.4);border-radius:10px;
  padding:1px 8px;white-space:nowrap}
.blendsql-smoothie details>summary{cursor:pointer}
.blendsql-smoothie .bsql-trace>summary,.blendsql-smoothie .bsql-analyze>summary{font-weight:600;margin:4px 0}
.blendsql-smoothie .bsql-kind{border-radius:4px;padding:0 5px;font-size:12px;
  background:rgba(128,128,128,.18)}
.blendsql-smoothie .bsql-kind-ingredient{background:rgba(46,160,67,.25)}
.blendsql-smoothie .bsql-kind-sql,.blendsql-smoothie .bsql-kind-temp_table{background:rgba(56,132,244,.22)}
.blendsql-smoothie .bsql-kind-error,.blendsql-smoothie .bsql-kind-warning{background:rgba(230,60,60,.3)}
.blendsql-smoothie pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:4px 6px;
  background:rgba(128,128,128,.1);border-radius:4px;max-height:24em;overflow:auto}
.blendsql-smoothie .bsql-bar{display:inline-block;height:10px;min-width:1px;
  background:rgba(244,140,36,.85);vertical-align:middle;margin-right:6px}
.blendsql-smoothie .bsql-barbox{display:inline-block;width:120px}
.blendsql-smoothie .bsql-tokbox{width:60px}
.blendsql-smoothie .bsql-tok{background:rgba(120,90,220,.75)}
.blendsql-smoothie td.bsql-time{white-space:nowrap}
.blendsql-smoothie .bsql-kind-call,.blendsql-smoothie .bsql-kind-late_map,
.blendsql-smoothie .bsql-kind-lazy_scan,.blendsql-smoothie .bsql-kind-preaggregate{background:rgba(46,160,67,.25)}
.blendsql-smoothie .bsql-kind-final,.blendsql-smoothie .bsql-kind-materialise,
.blendsql-smoothie .bsql-kind-collect{background:rgba(56,132,244,.22)}
.blendsql-smoothie .bsql-range{background:rgba(120,90,220,.3)}
.blendsql-smoothie .bsql-plan .bsql-bar{margin-right:0;min-width:0}
.blendsql-smoothie .bsql-plan .bsql-actual{background:rgba(46,125,50,.07)}
.blendsql-smoothie .bsql-plan .bsql-tokbox{margin-right:6px;white-space:nowrap}
.blendsql-smoothie .bsql-bound{opacity:.75;font-size:12px}
"""


class Meta(Protocol):
    """The counters this view shows (``blendsql.smoothie.Meta`` has them)."""

    values_passed: int
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_hits: int
    seconds: float
    ingredient_calls: int
    planner_misses: int


class TraceStep(Protocol):
    """What this view shows of one step (``blendsql.smoothie.TraceStep`` has it)."""

    kind: str
    summary: str
    sql: str | None
    rows_out: int | None
    seconds: float
    inputs: list[Any] | None
    outputs: list[Any] | None
    prompts: list[str] | None
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    details: dict[str, Any]


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def esc(value: Any, limit: int = CELL_CHARS) -> str:
    """A value as escaped, clipped text (the one door model and data output goes through)."""
    return html.escape(clip(str(value), limit))


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell(value: Any) -> str:
    if _is_null(value):
        return "<td class='bsql-null'>NULL</td>"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"<td class='num'>{esc(value)}</td>"
    return f"<td>{esc(value)}</td>"


def rows_html(df: Any, max_rows: int) -> str:
    """The first ``max_rows`` rows as a table, and a line with the full row count."""
    n = len(df)
    if not len(df.columns):
        return "<p class='bsql-note'>(no columns)</p>"
    head = "".join(f"<th>{esc(c)}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>"
                   for row in df.head(max_rows).itertuples(index=False, name=None))
    if n == 0:
        note = "no rows"
    elif n > max_rows:
        note = f"showing {max_rows} of {n} rows"
    else:
        note = f"{n} row{'s' if n != 1 else ''}"
    return (f"<table class='bsql-rows'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<p class='bsql-note'>{note} × {len(df.columns)} column"
            f"{'s' if len(df.columns) != 1 else ''}</p>")


def meta_html(meta: Meta, rows: int | None = None) -> str:
    """The counters as a row of chips; the rarely non-zero ones only when they are not."""
    chips: list[tuple[str, str]] = [] if rows is None else [(str(rows), "rows")]
    chips += [
        (str(meta.model_calls), "model calls"),
        (str(meta.cache_hits), "cache hits"),
        (f"{meta.prompt_tokens}+{meta.completion_tokens}", "tokens (prompt+completion)"),
        (str(meta.values_passed), "values passed"),
        (str(meta.ingredient_calls), "ingredient calls"),
    ]
    if meta.cached_tokens:
        chips.append((str(meta.cached_tokens), "cached tokens"))
    if meta.planner_misses:
        chips.append((str(meta.planner_misses), "planner misses"))
    chips.append((f"{meta.seconds:.3f} s", "total"))
    return "<div class='bsql-meta'>" + "".join(
        f"<span class='bsql-chip'><b>{html.escape(v)}</b> {html.escape(label)}</span>"
        for v, label in chips) + "</div>"


def _pairs_html(step: TraceStep) -> str:
    """An ingredient's inputs next to its outputs (or whichever list it has)."""
    ins, outs = step.inputs, step.outputs
    if ins is None and outs is None:
        return ""
    if ins is not None and outs is not None and len(ins) == len(outs):
        rows = list(zip(ins, outs, strict=True))
        head = "<tr><th>input</th><th>output</th></tr>"
        body = "".join(f"<tr><td>{esc(i)}</td><td>{esc(o)}</td></tr>" for i, o in rows[:MAX_PAIRS])
        total = len(rows)
    else:
        lists = [("inputs", ins or []), ("outputs", outs or [])]
        head = ""
        body = "".join(f"<tr><th>{name}</th><td>{esc(json.dumps(vals[:MAX_PAIRS], default=str), 2000)}"
                       "</td></tr>" for name, vals in lists if vals)
        total = max(len(ins or []), len(outs or []))
    more = (f"<p class='bsql-note'>… {total - MAX_PAIRS} more</p>" if total > MAX_PAIRS else "")
    return f"<table class='bsql-io'>{head}{body}</table>{more}"


def _prompts_html(prompts: Sequence[str] | None) -> str:
    if not prompts:
        return ""
    shown = "".join(f"<pre class='bsql-prompt'>{esc(p, PROMPT_CHARS)}</pre>"
                    for p in prompts[:MAX_PROMPTS])
    more = (f"<p class='bsql-note'>… {len(prompts) - MAX_PROMPTS} more prompt(s)</p>"
            if len(prompts) > MAX_PROMPTS else "")
    return f"<div class='bsql-note'>prompts ({len(prompts)}):</div>{shown}{more}"


def step_body(step: TraceStep) -> str:
    """What a step's expander holds: SQL, values in and out, prompts, details."""
    parts: list[str] = []
    if step.sql:
        parts.append(f"<pre class='bsql-sql'>{esc(step.sql, SQL_CHARS)}</pre>")
    parts.append(_pairs_html(step))
    parts.append(_prompts_html(step.prompts))
    if step.details:
        text = json.dumps(step.details, default=str, indent=1, ensure_ascii=False)
        parts.append(f"<pre class='bsql-details'>{esc(text, SQL_CHARS)}</pre>")
    return "".join(parts)


def _pct(value: float, largest: float) -> float:
    return 0.0 if largest <= 0 else max(0.0, min(100.0, 100.0 * value / largest))


def _bar(seconds: float, longest: float) -> str:
    """Time as an inline bar scaled to the slowest step, then milliseconds."""
    return (f"<span class='bsql-barbox'><span class='bsql-bar' "
            f"style='width:{_pct(seconds, longest):.1f}%'></span></span>{seconds * 1000:.1f} ms")


def _token_bar(step: TraceStep, most: int) -> str:
    """Tokens as prompt + completion, with a bar scaled to the step that used the most."""
    used = step.prompt_tokens + step.completion_tokens
    if not used:
        return ""
    return (f"<span class='bsql-barbox bsql-tokbox'><span class='bsql-bar bsql-tok' "
            f"style='width:{_pct(used, most):.1f}%'></span></span>"
            f"{step.prompt_tokens}+{step.completion_tokens}")


def _step_row(i: int, step: TraceStep, longest: float, most_tokens: int = 0) -> str:
    body = step_body(step)
    summary = esc(step.summary, 300)
    what = (f"<details class='bsql-step'><summary>{summary}</summary>{body}</details>"
            if body else summary)
    kind = html.escape(step.kind)
    return (f"<tr><td class='num'>{i}</td>"
            f"<td><span class='bsql-kind bsql-kind-{kind}'>{kind}</span></td>"
            f"<td>{what}</td><td class='num'>{'' if step.rows_out is None else step.rows_out}</td>"
            f"<td class='num'>{step.model_calls or ''}</td>"
            f"<td class='bsql-time'>{_token_bar(step, most_tokens)}</td>"
            f"<td class='bsql-time'>{_bar(step.seconds, longest)}</td></tr>")


def trace_html(trace: Sequence[TraceStep], open_: bool = False) -> str:
    """The steps as a collapsible table (also used for a failed run's ``error.trace``)."""
    total = sum(s.seconds for s in trace)
    longest = max((s.seconds for s in trace), default=0.0)
    most = max((s.prompt_tokens + s.completion_tokens for s in trace), default=0)
    rows = "".join(_step_row(i, s, longest, most) for i, s in enumerate(trace, 1))
    head = ("<tr><th>#</th><th>kind</th><th>step</th><th>rows</th><th>calls</th>"
            "<th>tokens</th><th>time</th></tr>")
    return (f"<details class='bsql-trace'{' open' if open_ else ''}><summary>Trace: "
            f"{len(trace)} step{'s' if len(trace) != 1 else ''}, {total * 1000:.1f} ms</summary>"
            f"<table class='bsql-steps'><thead>{head}</thead><tbody>{rows}</tbody></table></details>")


def wrap(inner: str) -> str:
    """The scoped style and container every blendsql HTML fragment sits in."""
    return f"<div class='blendsql-smoothie'><style>{CSS}</style>{inner}</div>"


def smoothie_html(df: Any, meta: Meta, trace: Sequence[TraceStep], max_rows: int = 20,
                  plan: Any = None) -> str:
    """Result table, counters and trace: the whole Jupyter view of one run.

    ``plan``: the plan that ran (``Smoothie.plan``); when it was priced before the run
    (``BlendSQL.run(BlendSQL.plan(q))``), the trace ends with its steps, each one's
    estimate beside its actual figures (:func:`plan_table`, as ``plan_html`` shows them).
    """
    analyzed = (plan_trace_html(plan) if plan is not None and plan.estimated
                and plan.analyzed else "")
    return wrap(rows_html(df, max_rows) + meta_html(meta, len(df)) + trace_html(trace)
                + analyzed)


def plan_trace_html(plan: Any) -> str:
    """An analysed plan as a collapsible part of the trace: estimate vs actual per step
    (the totals in its summary line, so the run's counters stay the only chips)."""
    n = len(plan.steps)
    total, act = plan.total, plan.actual
    totals = (f"{_count(total.values)} values, {_count(total.model_calls)} model calls "
              f"estimated; {act.values:,} values, {act.model_calls:,} model calls ran")
    return (f"<details class='bsql-analyze' open><summary>Plan: {n} "
            f"step{'s' if n != 1 else ''}, estimate vs actual ({html.escape(totals)})"
            f"</summary>{plan_table(plan, chips=False)}</details>")


def _count(bound: Any, digits: int = 0) -> str:
    """A bound as text: ``12`` exact, ``3..12`` bounded, ``3+`` open-ended."""
    def fmt(v: float) -> str:
        return f"{v:,.{digits}f}"

    if bound.high is None:
        return f"{fmt(bound.low)}+"
    return fmt(bound.low) if bound.high == bound.low else f"{fmt(bound.low)}..{fmt(bound.high)}"


def _range_bar(bound: Any, most: float) -> str:
    """Estimated tokens: solid up to the lower bound, lighter up to the upper one."""
    if not bound.high and not bound.low:
        return ""
    low = _pct(bound.low, most)
    high = 100.0 - low if bound.high is None else _pct(bound.high, most) - low
    return (f"<span class='bsql-barbox bsql-tokbox'><span class='bsql-bar bsql-tok' "
            f"style='width:{low:.1f}%'></span><span class='bsql-bar bsql-range' "
            f"style='width:{max(high, 0.0):.1f}%'></span></span>{_count(bound)}")


def plan_html(plan: Any) -> str:
    """A plan as a reader wants it: totals as chips, then one row per step (kind, what it
    does, values, model calls, a prompt-token bar; SQL and the reason a size is a bound,
    when it is one, under the step); after a run, each step's actual values, calls,
    tokens, rows and milliseconds beside its estimate (EXPLAIN ANALYZE)."""
    return wrap(plan_table(plan))


def plan_table(plan: Any, chips: bool = True) -> str:
    """:func:`plan_html`'s content: a heading, the totals as chips (``chips``) and the table
    of steps (an estimate cell has the class ``bsql-estimate``, an actual one ``bsql-actual``)."""
    total = plan.total
    analyzed = plan.analyzed
    totals = [(_count(total.values), "values"), (_count(total.model_calls), "model calls"),
             (_count(total.prompt_tokens), "prompt tokens (estimate)")] if plan.estimated else []
    if total.dollars is not None and plan.estimated:
        totals.append(("$" + _count(total.dollars, 4), "estimate"))
    if analyzed:
        act = plan.actual
        totals += [(f"{act.values:,}", "values (actual)"),
                  (f"{act.model_calls:,}", "model calls (actual)"),
                  (f"{act.prompt_tokens:,}", "prompt tokens (actual)"),
                  (f"{act.seconds * 1000:.1f} ms", "(actual)")]
    meta = "<div class='bsql-meta'>" + "".join(
        f"<span class='bsql-chip'><b>{html.escape(v)}</b> {html.escape(label)}</span>"
        for v, label in totals) + "</div>" if chips else ""
    most = max((s.estimate.prompt_tokens.high if s.estimate.prompt_tokens.high is not None
                else s.estimate.prompt_tokens.low for s in plan.steps), default=0)
    rows = []
    for i, step in enumerate(plan.steps, 1):
        kind = html.escape(step.kind)
        extra = "".join([
            f"<div class='bsql-bound'>constraint: {esc(step.constraint, 300)}</div>"
            if step.constraint else "",
            f"<div class='bsql-bound'>bound: {esc(step.depends_on, 300)}</div>"
            if step.depends_on else "",
            f"<pre>{esc(step.sql, SQL_CHARS)}</pre>" if step.sql else ""])
        what = (f"<details class='bsql-step'><summary>{esc(step.summary, 300)}</summary>{extra}"
                f"</details>" if extra else esc(step.summary, 300))
        est = step.estimate
        priced = bool(step.ingredient) and plan.estimated
        rows.append(
            f"<tr><td class='num'>{i}</td><td><span class='bsql-kind bsql-kind-{kind}'>{kind}"
            f"</span></td><td>{what}</td><td>{esc(step.ingredient or '')}</td>"
            f"<td class='num bsql-estimate'>{_count(est.values) if priced else ''}</td>"
            f"<td class='num bsql-estimate'>{_count(est.model_calls) if priced else ''}</td>"
            f"<td class='bsql-time bsql-estimate'>"
            f"{_range_bar(est.prompt_tokens, most) if priced else ''}"
            f"</td>{_actual_cells(step.actual) if analyzed else ''}</tr>")
    head = ("<tr><th>#</th><th>kind</th><th>step</th><th>ingredient</th><th>values</th>"
            "<th>calls</th><th>prompt tokens</th>"
            + ("<th class='bsql-actual'>actual values</th><th class='bsql-actual'>calls</th>"
               "<th class='bsql-actual'>tokens</th><th class='bsql-actual'>rows</th>"
               "<th class='bsql-actual'>ms</th>" if analyzed else "") + "</tr>")
    notes = "".join(f"<p class='bsql-note'>note: {esc(n, 500)}</p>" for n in plan.notes)
    state = ("estimate vs actual, after the run" if analyzed else "nothing has run yet")
    return (f"<p class='bsql-note'><b>Plan</b> ({state}) for "
            f"<code>{esc(' '.join(plan.query.split()), 300)}</code></p>{meta}"
            f"<table class='bsql-steps bsql-plan'><thead>{head}</thead><tbody>{''.join(rows)}"
            f"</tbody></table>{notes}")


def _actual_cells(actual: Any) -> str:
    """A step's actual figures (EXPLAIN ANALYZE), beside its estimate."""
    if actual is None:
        return "<td class='bsql-actual' colspan='5'>did not run</td>"
    return (f"<td class='num bsql-actual'>{actual.values:,}</td>"
            f"<td class='num bsql-actual'>{actual.model_calls:,}</td>"
            f"<td class='num bsql-actual'>{actual.prompt_tokens:,}</td>"
            f"<td class='num bsql-actual'>{actual.rows:,}</td>"
            f"<td class='num bsql-actual'>{actual.seconds * 1000:.1f}</td>")


class NotebookProgress:
    """A ``progress=`` callback for Jupyter: one bar per ingredient, redrawn in place.

    ``BlendSQL(db, progress=NotebookProgress())``. The engine calls it as
    ``(ingredient, done, total)`` while model requests finish; a call after
    every bar has finished starts a new output (the next query's), so an
    earlier cell's bar is never overwritten. Redraws are throttled. Outside
    IPython it does nothing.
    """

    def __init__(self, min_interval: float = 0.2) -> None:
        self.min_interval = min_interval
        self.bars: dict[str, tuple[int, int]] = {}
        self._handle: Any = None
        self._last: float | None = None

    def _finished(self) -> bool:
        return bool(self.bars) and all(t > 0 and d >= t for d, t in self.bars.values())

    def __call__(self, ingredient: str, done: int, total: int) -> None:
        import time

        if self._finished():  # the previous query is over: a fresh output for this one
            self.bars, self._handle, self._last = {}, None, None
        self.bars[ingredient] = (done, total)
        now = time.monotonic()
        if (not self._finished() and self._last is not None
                and now - self._last < self.min_interval):
            return
        self._last = now
        self._show()

    def html(self) -> str:
        """The bars as HTML (``<progress>``, no script)."""
        rows = "".join(
            f"<div><progress value='{d}' max='{max(t, 1)}' style='width:200px'></progress> "
            f"{esc(name)} {d}/{t}</div>" for name, (d, t) in self.bars.items())
        return f"<div class='blendsql-progress'>{rows}</div>"

    def _show(self) -> None:
        try:
            from IPython.display import HTML, display
        except ImportError:  # not in IPython: nothing to draw on
            return
        if self._handle is None:
            self._handle = display(HTML(self.html()), display_id=True)
        else:
            self._handle.update(HTML(self.html()))
