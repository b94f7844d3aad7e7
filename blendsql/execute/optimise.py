"""Engine-side helpers of the call-saving rules: cost estimates and ENUM matching.

Why here: the rules in ``blendsql.plan.order`` / ``blendsql.plan.enum_match``
are pure; this module feeds them what only a running query knows (candidate
counts from SQLite, a column's vocabulary, the session model) and traces
what they decided.
"""

from __future__ import annotations

from typing import Any, cast

from sqlglot import exp

from blendsql.errors import BlendSQLError
from blendsql.execute.metering import MeteredModel
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import JoinIngredient, MapIngredient
from blendsql.models.base import Request
from blendsql.models.constraints import Choice
from blendsql.plan.context import RunContext
from blendsql.plan.enum_match import (
    DEFAULT_THRESHOLD,
    MAX_VALUES,
    Classifier,
    embedding_classifier,
)
from blendsql.plan.infer import literal_value
from blendsql.plan.order import CostEstimate, estimate
from blendsql.plan.render import render
from blendsql.plan.rules import enum_match, rule_of
from blendsql.smoothie import TraceStep

NONE_OPTION = "(none of these)"


# ------------------------------------------------------------------ cost ordering


def call_cost(run: RunContext, call: IngredientCall) -> float:
    """Estimated cost of computing ``call`` now (see :mod:`blendsql.plan.order`).

    Estimated once per call, the first time it is ready, and memoised by
    call id. Why not re-estimate after every computed call: that measured
    every remaining call at every step, n AND-ed filters costing ~n^2
    counting statements of growing size (44 s for 40 filters). The first
    estimate already ranks the calls by their values x tokens over the same
    relaxed rows; a cascade only shrinks every later candidate, so the
    ranking rarely changes, and the order never changes the answer. Any
    failure counts as cost 0 (the call's own errors are reported when it is
    computed).
    """
    est = cost_estimate(run, call)
    return est.cost if est is not None else 0.0


def cost_estimate(run: RunContext, call: IngredientCall) -> CostEstimate | None:
    """Distinct candidate values and their average length, measured with SQLite.

    One counting statement per distinct candidate query of the run: calls
    whose candidates are the same text (n filters over a few columns, all
    relaxed alike) reuse its counts, traced as a ``plan`` step without SQL.
    """
    memo = run.state.costs.estimates
    if call.call_id in memo:  # first: the cheapest ready call is chosen at every step
        return memo[call.call_id]
    ing = run.registry.get(call.key_name)
    if not isinstance(ing, (MapIngredient, JoinIngredient)):
        return None
    cand = run.readiness_candidate(call)
    if cand is None or cand.find(IngredientCall) is not None:
        return None
    sql = render(cand, copy=False)  # built for this estimate (readiness_candidate)
    # the same candidate query counts the same: n filters on a few columns scan each once
    counted = run.state.costs.counts
    known = counted.get(sql)
    if known is not None:
        n, avg, first = known
        run.trace.append(TraceStep(
            "plan", f"cost estimate for {call.name}: the counts of {first} (the same "
            "candidate query)", rows_out=1, details={"call": run.call_text(call),
                                                     "same_candidate_as": first}))
    else:
        count_sql = (f"WITH __bsql_cost(__v) AS ({sql}) "
                     "SELECT COUNT(*), AVG(LENGTH(CAST(__v AS TEXT))) FROM __bsql_cost")
        try:
            _, rows = run.sql(count_sql, f"cost estimate for {call.name}", kind="plan")
        except BlendSQLError:
            memo[call.call_id] = None
            return None
        n, avg = (rows[0][0] or 0, float(rows[0][1] or 0.0)) if rows else (0, 0.0)
        counted[sql] = (int(n), avg, run.call_text(call))
    question = next((literal_value(a) for a in call.call_args
                     if isinstance(a, exp.Literal) and a.is_string), "")
    est = estimate(int(n), len(str(question or "")), avg, bool(ing.needs_model))
    memo[call.call_id] = est
    return est


# ------------------------------------------------------------------ ENUM matching


def vocabulary_of(run: RunContext, table: str, column: str) -> list[Any] | None:
    """Distinct non-NULL values of ``table.column`` when there are at most MAX_VALUES."""
    ident = '"' + column.replace('"', '""') + '"'
    tab = '"' + table.replace('"', '""') + '"'
    try:
        _, rows = run.sql(
            f"SELECT DISTINCT {ident} FROM {tab} WHERE {ident} IS NOT NULL LIMIT {MAX_VALUES + 1}",
            f"vocabulary of {table}.{column}", kind="plan")
    except BlendSQLError:
        return None
    return [r[0] for r in rows] if len(rows) <= MAX_VALUES else None


def model_classifier(run: RunContext) -> Classifier:
    """The session model picks a value (or none) under a Choice constraint; metered."""

    def classify(text: str, values: list[str]) -> tuple[str | None, float, str]:
        options = tuple(values) + (NONE_OPTION,)
        listing = "\n".join(f"- {v}" for v in options)
        prompt = (f"A database column only holds these values:\n{listing}\n"
                  f"Which value means the same as {text!r}? Answer with one value "
                  f"exactly as written, or {NONE_OPTION!r}.\nAnswer: ")
        model = cast(MeteredModel, run.model)
        before = model.snapshot()
        resp = model.generate([Request(prompt=prompt, constraint=Choice(options),
                                           max_tokens=32)])[0]
        used = model.snapshot().minus(before)
        m = run.meta
        m.model_calls += used.model_calls
        m.cache_hits += used.cache_hits
        m.prompt_tokens += used.prompt_tokens
        m.completion_tokens += used.completion_tokens
        m.cached_tokens += used.cached_tokens
        value = resp.value if resp.value is not None else resp.text.strip()
        choice = str(value) if str(value) in values else None
        return choice, 1.0 if choice else 0.0, "model"

    return classify


def enum_classifier(run: RunContext) -> Classifier:
    """The ``enum_match`` rule's classifier for this run's setting.

    ``enum_match=True`` / ``"embedding"``: nearest value by embedding
    (threshold ``enum_threshold``, default 0.5); ``"hashing"``: the same with
    the hashing embedder; ``"model"``: the model chooses.
    """
    setting = run.options.get(rule_of(enum_match).name)  # the rule's own option
    if str(setting).lower() == "model":
        return model_classifier(run)
    from blendsql.retrieval.prefilter import session_embedder

    kind = "hashing" if str(setting).lower() == "hashing" else "default"
    return embedding_classifier(
        session_embedder(kind), float(run.options.get("enum_threshold", DEFAULT_THRESHOLD)))
