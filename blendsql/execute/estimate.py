"""Pricing a plan's steps without calling any model: values, model calls, prompt tokens.

Why with the database: the estimate must count what the engine will really
do, so the walk (``execute.walk``) asks this estimator to price each step it
decides, on the tree as the step will see it. A call's candidate query is run
on the database to count the distinct values the call would receive. A marker
(``__bsql_planned_<id>()``) stands where an earlier call's outputs will be: a
candidate that holds one depends on that call, and its size is then bounded
(0 .. the candidate with every call relaxed, run on the prepared tree), not
guessed.

Model calls per step: a map ingredient that needs a model sends one
request per new distinct value (``LLMMap``), a join at most one per left
value (``LLMJoin`` matches equal values without the model: a bound), a
QA one; an ingredient may declare otherwise with a method
``estimate_model_calls(n_values) -> int`` (a ranking map, ``LLMRank``, also
receives ``k=``: the call's own ``k=``, else the LIMIT + OFFSET of the ORDER BY
it stands in). Values already counted for an identical call (same
``call_key``) are not counted again, as the engine shares them. Prompt tokens
are estimated from the question and the values' average length
(``blendsql.plan.order.tokens_per_value``), a rough figure.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp

from blendsql.budget import Prices
from blendsql.errors import BlendSQLError
from blendsql.execute.run import Run
from blendsql.execute.steps import join_sides
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient
from blendsql.plan.calls import find_calls, map_value
from blendsql.plan.candidates import join_side_candidate, map_candidate
from blendsql.plan.infer import infer_hint, literal_value, order_limit
from blendsql.plan.order import tokens_per_value
from blendsql.plan.render import render
from blendsql.plan.steps import (
    PLANNED_MARK,
    Bound,
    CallStep,
    Estimate,
    LateMap,
    MapCall,
    Plan,
    Step,
    Strategy,
    planned_in,
)

#: time limit (seconds) on the plan's probe of an LLMQA context
PROBE_SECONDS = 5.0

MARKER = PLANNED_MARK

_MARK_RE = re.compile(MARKER + r"(\d+)\(\)", re.IGNORECASE)


class Estimator:
    """Prices the steps of one plan; ``seen`` holds, per call key, the values counted."""

    def __init__(self, run: Run, plan: Plan, base: exp.Expression,
                 prices: Prices | None) -> None:
        self.run = run
        self.plan = plan
        self.base = base  # the prepared tree (no marker): upper bounds are counted on it
        self.prices = prices
        self.seen: dict[str, set[Any]] = {}
        self.inexact_keys: set[str] = set()  # call keys whose earlier counts were bounds
        self.final_tree: exp.Expression | None = None
        self.final_sql: str | None = None

    def finish(self) -> None:
        """Markers in step SQL read ``<output of step N>``."""
        number = {s.details.get("call_id"): i + 1 for i, s in enumerate(self.plan.steps)}

        def name(m: re.Match[str]) -> str:
            return f"<output of step {number.get(int(m.group(1)), '?')}>"

        for step in self.plan.steps:
            if step.sql:
                step.sql = _MARK_RE.sub(name, step.sql)

    # -- call steps ------------------------------------------------------------------

    def call(self, tree: exp.Expression, step: CallStep, call: IngredientCall,
             ing: Any) -> None:
        if isinstance(step, MapCall) and isinstance(ing, MapIngredient):
            self.map_step(step, call, ing)
        elif isinstance(ing, QAIngredient):
            self.qa_step(step, ing, call)
        elif isinstance(ing, JoinIngredient):
            self.join_step(step, ing, call)

    def map_step(self, step: MapCall, call: IngredientCall, ing: MapIngredient) -> None:
        value = map_value(call, self.run.registry)
        if value is None:
            self.plan.notes.append(f"{call.name}: no value argument (fails when run)")
            return
        cand = map_candidate(call, value)
        sql = render(cand)
        why = step.depends_on
        key = self.run.call_key(call)
        values: list[Any] | None
        if planned_in(cand):  # the engine's candidate will hold an earlier call's lookup
            values, n, high = None, 0, self._upper(call)
            why = why or "sees only the rows that earlier ingredient steps pass"
        else:
            values = self.run.candidate_values(cand.copy(), f"plan: candidate values for "
                                               f"{call.name}")
            n, high = len(values), len(values)
        if values is not None:
            done = self.seen.setdefault(key, set())
            new = [v for v in values if (type(v).__name__, v) not in done]
            done.update((type(v).__name__, v) for v in values)
            n = high = len(new)
            if key in self.inexact_keys and new:
                n = 0  # an identical call may already have computed some of them
                why = why or "an identical call may already have computed some values"
        else:
            self.inexact_keys.add(key)
        low = 0 if why else n
        if step.strategy is Strategy.LAZY and not step.depends_on:
            why = why or "stops once LIMIT rows qualify (upper bound: every candidate)"
            low = 0
        self.price(step, call, ing, Bound(low, high), sql, why, avg_len=_avg_len(values))

    def _upper(self, call: IngredientCall) -> float | None:
        """Distinct values of the call's candidate on the prepared tree (all calls
        relaxed): a superset of what any evaluation order passes; None if unknown."""
        orig = next((c for c in find_calls(self.base) if c.call_id == call.call_id), None)
        value = map_value(orig, self.run.registry) if orig is not None else None
        if orig is None or value is None:
            return None
        cand = map_candidate(orig, value)
        if cand.find(IngredientCall) is not None:
            return None
        try:
            return len(self.run.candidate_values(cand, f"plan: upper bound for {call.name}"))
        except BlendSQLError:
            return None

    def price(self, step: Step, call: IngredientCall, ing: Any, values: Bound,
              sql: str | None, why: str, avg_len: float = 12.0,
              calls: Bound | None = None) -> None:
        """Fill in ``step``'s estimate, summary and SQL from its values (a bound)."""
        needs = bool(getattr(ing, "needs_model", False))
        per = getattr(ing, "estimate_model_calls", None)
        if calls is None:
            if not needs:
                calls = Bound(0, 0)
            elif callable(per):
                if getattr(ing, "ordered_by_limit", False):  # a ranking map: the LIMIT's k
                    k = call_k(call)
                    calls = Bound(per(values.low, k=k),
                                  None if values.high is None else per(values.high, k=k))
                else:
                    calls = Bound(per(values.low),
                                  None if values.high is None else per(values.high))
            else:
                calls = values
        question = next((literal_value(a) for a in call.call_args
                         if isinstance(a, exp.Literal) and a.is_string), "")
        per_call = tokens_per_value(len(str(question or "")), avg_len)
        tokens = Bound(round(calls.low * per_call),
                       None if calls.high is None else round(calls.high * per_call))
        dollars = None
        if self.prices is not None:
            dollars = Bound(self.prices.cost(tokens.low, 0), None if tokens.high is None
                            else self.prices.cost(tokens.high, calls.high or 0))
        hint = infer_hint(call)
        step.summary = summary(step, call.name, str(values))
        db = self.run.db
        where = (db.executors.placement(needs, calls, lambda: self.run.model)
                 if db.capabilities.executors else None)
        if where is not None:
            step.details["distributed"] = where
        step.sql = sql
        step.estimate = Estimate(values, calls, tokens, dollars)
        step.constraint = hint.kind if hint.kind != "none" else None
        step.depends_on = why

    def qa_step(self, step: Step, ing: QAIngredient, call: IngredientCall) -> None:
        key = self.run.call_key(call)
        first = key not in self.seen
        self.seen.setdefault(key, set())
        context = next((a for a in call.call_args[1:] if a.find(exp.Select)), None)
        sql = None
        select = context.find(exp.Select) if context is not None else None
        if select is not None:
            sql = render(select)
        depends = select is not None and planned_in(select)
        n = 1 if first else 0
        avg = 200.0  # context unknown until run: a short guess
        if context is not None and sql is not None and not depends \
                and context.find(IngredientCall) is None:
            avg = self._context_chars(ing, call, sql, avg)
        self.price(step, call, ing, Bound.exact(n), sql,
                   "its context holds an earlier call's output" if depends else "",
                   avg_len=avg)

    def _context_chars(self, ing: QAIngredient, call: IngredientCall, sql: str,
                       default: float) -> float:
        """Characters of a QA call's context as its prompt will hold them: the context
        query run (plain SQL, before any model call) and rendered within the call's
        ``context_chars`` budget. Why: a context is most of a QA prompt (HybridQA:
        ~2,400 of ~2,600 characters); without it the plan's token estimate was a
        tenth of what the call spent."""
        import pandas as pd

        kwargs = {k: literal_value(v) for k, v in call.call_kwargs.items()
                  if k in ("context_chars", "cell_chars") and isinstance(v, exp.Literal)}
        cap = kwargs.get("context_chars", getattr(ing, "context_chars", 6000))
        # a row takes at least one character of the budget: more rows are never shown
        limit = int(cap) + 1 if isinstance(cap, (int, float)) and cap > 0 else 100_000
        # its own short time limit: a slow context must cost the estimate, not the plan
        # (a statement stopped at the query's limit would refuse every later one)
        current = getattr(self.run.db, "timeout", None)
        probe_limit = (min(float(current), PROBE_SECONDS) if isinstance(current, (int, float))
                       else PROBE_SECONDS)
        try:
            with self.run.db.session(timeout=probe_limit):
                cols, rows = self.run.sql(f"SELECT * FROM ({sql}) LIMIT {limit}",
                                          f"plan: context of {call.name}", kind="plan")
        except BlendSQLError:
            return default
        frame = pd.DataFrame(rows, columns=cols)
        question = next((literal_value(a) for a in call.call_args
                         if isinstance(a, exp.Literal) and a.is_string), None)
        render_arg = getattr(ing, "render_context_arg", None)
        try:
            text = (render_arg(frame, kwargs, question=question) if callable(render_arg)
                    else frame.to_csv())
        except Exception:  # noqa: BLE001 - an estimate: a user's renderer failing here is not our error
            return default
        return float(len(text))

    def join_step(self, step: Step, ing: JoinIngredient, call: IngredientCall) -> None:
        try:
            left, right, _ = join_sides(call)
            cands = [join_side_candidate(call, left), join_side_candidate(call, right)]
        except BlendSQLError:
            self.plan.notes.append(f"{call.name}: arguments do not bind (fails when run)")
            return
        sizes: list[int | None] = []
        for side, cand in zip(("left", "right"), cands, strict=True):
            sql = render(cand)
            if planned_in(cand) or cand.find(IngredientCall) is not None:
                sizes.append(None)
                continue
            _, rows = self.run.sql(sql, f"plan: {side} values for {call.name}", kind="plan")
            sizes.append(len({r[0] for r in rows if r[0] is not None}))
        lv, rv = sizes
        if lv is None or rv is None:
            values = Bound(0, None)
            calls = Bound(0, None)
            why = "a side depends on an earlier call's outputs"
        else:
            values = Bound.exact(lv + rv)
            per = getattr(ing, "estimate_model_calls", None)
            if callable(per):
                calls = Bound.exact(per(lv + rv))
                why = ""
            else:  # e.g. LLMJoin: values matching exactly (or after normalising) need no call
                calls = Bound(0, lv if lv and rv else 0)
                why = "at most one model call per left value; exact matches need none"
        self.price(step, call, ing, values, " ;\n".join(render(c) for c in cands), why,
                   calls=calls)

    # -- the final query and the late maps ------------------------------------------

    def final(self, tree: exp.Expression, step: Step) -> None:
        final_sql = render(tree)
        depends = planned_in(tree)
        self.final_tree = None if depends else tree
        self.final_sql = None if depends else final_sql
        step.summary = "final query" + (" (on the lookups of the steps above)" if depends
                                        else "")
        step.sql = final_sql

    def late(self, step: LateMap, call: IngredientCall) -> None:
        """A projection-only map: its values are the final rows' distinct values."""
        ing = self.run.registry.get(call.key_name)
        values: Bound
        why = ""
        vals: list[Any] | None = None
        if self.final_sql is not None:
            _, rows = self.run.sql(self.final_sql, f"plan: final rows for {call.name}",
                                   kind="plan")
            index = step.index
            vals = list(dict.fromkeys(r[index] for r in rows if r[index] is not None))
            key = self.run.call_key(call)
            done = self.seen.setdefault(key, set())
            new = [v for v in vals if (type(v).__name__, v) not in done]
            done.update((type(v).__name__, v) for v in vals)
            values = Bound.exact(len(new))
        else:
            values = Bound(0, self._upper(call))
            why = "the final rows depend on earlier ingredient steps"
        self.price(step, call, ing, values, None, why, avg_len=_avg_len(vals))


def summary(step: Step, name: str, values: str = "") -> str:
    """What a step does, in a line (``values``: its values' estimate, when priced)."""
    on = f" on {values} value(s)" if values else ""
    if isinstance(step, MapCall) and step.strategy is Strategy.LAZY:
        return (f"scan lazily under LIMIT, calling {name} on at most {values} value(s)"
                if values else f"scan lazily under LIMIT, calling {name}")
    if isinstance(step, MapCall) and step.strategy is Strategy.GROUPED:
        return (f"pre-aggregate by the value of {name}, then call it on {values} group "
                "key(s)" if values else f"pre-aggregate by the value of {name}, then call it "
                "on the group keys")
    if isinstance(step, LateMap):
        return f"call {name} on the final rows' {values} value(s)" if values else \
            f"call {name} on the final rows' values"
    return f"call {name}{on}"


def _avg_len(values: list[Any] | None) -> float:
    if not values:
        return 12.0
    return sum(len(str(v)) for v in values) / len(values)


def call_k(call: IngredientCall) -> int | None:
    """A ranking call's ``k``: its own ``k=`` literal, else its ORDER BY's LIMIT + OFFSET."""
    given = call.call_kwargs.get("k")
    value = literal_value(given) if given is not None else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    placed = order_limit(call)
    return placed[0] if placed is not None else None
