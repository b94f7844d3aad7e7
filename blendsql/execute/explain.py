"""Building a query's :class:`~blendsql.plan.steps.Plan` without calling any model.

Why a dry run of the engine's own steps: the estimate must count what the
engine will really do, so it walks the same steps
(``execute.interpreter.next_step``) with runners that count instead of
computing, and uses the same preparation (macros, aliases),
the same late-map rule, the same choice of the next call (``next_call``
with the same cost estimates) and the same candidate queries. Instead of
computing a call, it runs the call's candidate query on the database to
count the distinct values the call would receive, records a step, and puts
a marker (``__bsql_planned_<id>()``) where the engine would put a lookup of
the outputs. A later candidate query that contains a marker depends on an
earlier call's outputs: its size is then bounded (0 .. the candidate with
every call relaxed, run on the prepared tree), not guessed.

Model calls per step: a map ingredient that needs a model sends one
request per new distinct value (``LLMMap``), a join at most one per left
value (``LLMJoin`` matches equal values without the model: a bound), a
QA one; an ingredient may declare otherwise with a method
``estimate_model_calls(n_values) -> int`` (a ranking map, ``LLMRank``, also
receives ``k=``: the call's own ``k=``, else the LIMIT + OFFSET of the ORDER BY
it stands in). Values already computed for an
identical call (same ``call_key``) are not counted again, as the engine
shares them. Prompt tokens are estimated from the question and the values'
average length (``blendsql.plan.order.tokens_per_value``), a rough figure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp

from blendsql.budget import Prices
from blendsql.errors import BlendSQLError
from blendsql.execute.interpreter import ExecStep, Interpreter, WalkState, interpret
from blendsql.execute.planning import plan_tree
from blendsql.execute.steps import join_sides
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient
from blendsql.plan import preagg
from blendsql.plan.calls import find_calls, map_value, next_call
from blendsql.plan.candidates import join_side_candidate, map_candidate
from blendsql.plan.context import RunContext
from blendsql.plan.infer import infer_hint, literal_value, order_limit
from blendsql.plan.lazy import conjunct_atom, lazy_pairs, lazy_plan
from blendsql.plan.lookup import filter_atom, replace_call
from blendsql.plan.order import tokens_per_value
from blendsql.plan.render import render
from blendsql.plan.rules import rule_of
from blendsql.plan.steps import Bound, Estimate, Plan, Step

#: time limit (seconds) on the plan's probe of an LLMQA context
PROBE_SECONDS = 5.0

MARKER = "__bsql_planned_"


_MARK_RE = re.compile(MARKER + r"(\d+)\(\)", re.IGNORECASE)


def _marked(sql: str | None) -> bool:
    """True when SQL holds a marker of a planned call (its output is unknown)."""
    return sql is not None and MARKER in sql.lower()


def build_plan(run: RunContext, tree: exp.Expression, parse_expr: Callable[[str], exp.Expression],
               query: str, prices: Prices | None = None) -> Plan:
    """The plan of ``tree`` (a parsed query): steps in the engine's order, with estimates.

    ``prices``: the model's declared prices, for dollar estimates (the model
    is never loaded for a plan).
    """
    return _Planner(run, query, prices).build(tree, parse_expr)


class _Planner(Interpreter):
    """One dry run over the engine's own steps (:func:`~blendsql.execute.interpreter.next_step`).

    Its runners count instead of computing; ``seen`` holds, per call key,
    the values counted already.
    """

    runners: ClassVar[dict[str, str]] = {
        "prepare": "plan_prepare", "call": "plan_call", "unordered": "plan_unordered",
        "final": "plan_final", "late_map": "plan_late_maps"}

    def __init__(self, run: RunContext, query: str, prices: Prices | None) -> None:
        super().__init__(run)
        self.plan = Plan(query)
        self.seen: dict[str, set[Any]] = {}
        self.inexact_keys: set[str] = set()  # call keys whose earlier counts were bounds
        self.base: exp.Expression | None = None
        self.prices = prices
        self.cost: Callable[[IngredientCall], float] | None = None
        self.parse_expr: Callable[[str], exp.Expression] | None = None
        self.late: list[IngredientCall] = []
        self.late_plan: Any = None
        self.final_tree: exp.Expression | None = None

    # -- the walk --------------------------------------------------------------------

    def build(self, tree: exp.Expression, parse_expr: Callable[[str], exp.Expression]) -> Plan:
        self.parse_expr = parse_expr
        interpret(self, WalkState(tree))
        self._readable_markers()
        return self.plan

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        return self.cost

    def plan_prepare(self, state: WalkState, step: ExecStep) -> None:
        """The engine's tree rules; the late maps are planned after the final query."""
        run = self.run
        assert self.parse_expr is not None
        planned = plan_tree(run, state.tree, self.parse_expr)
        tree = planned.tree
        self.late_plan = planned.late if planned.deferred else None
        self.late = [call for _, call in self.late_plan.deferred] if self.late_plan else []
        self.base = tree
        self.cost = run.ordering_cost()
        work = tree.copy()  # the walk's own copy: markers replace calls in place
        state.replace_tree(work)
        state.calls = find_calls(work)
        for c in state.calls:  # keys from one tree, as the engine's twins() computes them
            run.call_key(c)
        state.prepared = True
        state.late_pending = bool(self.late)

    def plan_call(self, state: WalkState, step: ExecStep) -> None:
        """A call's step; a marker stands for its outputs in the tree."""
        assert step.call is not None
        call = self.step_for(state.tree, step.call)
        marked = replace_call(state.tree, call.call_id, exp.Anonymous(
            this=f"{MARKER}{call.call_id}", expressions=[]), in_place=True)
        memo = self.run.memo  # the tree changed: candidates are built afresh (as compute does)
        memo["tree_version"] = memo.get("tree_version", 0) + 1
        state.computed(marked, {call.call_id})

    def plan_unordered(self, state: WalkState, step: ExecStep) -> None:
        self.plan.notes.append("the remaining calls cannot be ordered (a correlated "
                               "argument?); the query will fail when run")
        state.stuck = True

    def plan_final(self, state: WalkState, step: ExecStep) -> None:
        final_sql = render(state.tree)
        depends = _marked(final_sql)
        self.final_tree = None if depends else state.tree
        self.plan.steps.append(Step(
            "final", "final query" + (" (on the lookups of the steps above)" if depends else ""),
            sql=final_sql))
        state.final_done = True

    def plan_late_maps(self, state: WalkState, step: ExecStep) -> None:
        for late_call in self.late:
            self.late_step(late_call, self.final_tree, self.late_plan)
        state.late_pending = False

    def _readable_markers(self) -> None:
        """Show a planned call's output in step SQL as ``<output of step N>``."""
        number = {s.details.get("call_id"): i + 1 for i, s in enumerate(self.plan.steps)}

        def name(m: re.Match[str]) -> str:
            return f"<output of step {number.get(int(m.group(1)), '?')}>"

        for step in self.plan.steps:
            if step.sql:
                step.sql = _MARK_RE.sub(name, step.sql)

    # -- steps -----------------------------------------------------------------------

    def step_for(self, tree: exp.Expression, call: IngredientCall) -> IngredientCall:
        """Record the step of ``call`` (or of the call the engine computes first
        instead, see :meth:`_preagg_first`); return the call planned."""
        ing = self.run.registry.get(call.key_name)
        if isinstance(ing, MapIngredient):
            first = self._preagg_first(tree, call)
            if first is not None:
                return self.step_for(tree, first)
            self.map_step(tree, ing, call)
        elif isinstance(ing, QAIngredient):
            self.qa_step(ing, call)
        elif isinstance(ing, JoinIngredient):
            self.join_step(ing, call)
        return call

    def _preagg_first(self, tree: exp.Expression, call: IngredientCall) -> IngredientCall | None:
        """The WHERE call the engine computes before a GROUP BY map it pre-aggregates
        (``plan.preagg._compute_first``): the map then sees only the passing rows."""
        decided = preagg.decide(self.run, tree, call) if self._on(preagg.preaggregate) else None
        if decided is None or not decided[1]:
            return None
        others = decided[1]

        def candidate(c: IngredientCall) -> exp.Expression | None:
            return None if c.call_id == call.call_id else self.run.readiness_candidate(c)

        nxt = next_call(tree, self.run.registry, candidate, cost=self.cost)
        if nxt is None or nxt.call_id not in {c.call_id for c in others}:
            return None
        return nxt

    def map_step(self, tree: exp.Expression, ing: MapIngredient, call: IngredientCall) -> None:
        value = map_value(call, self.run.registry)
        if value is None:
            self.plan.notes.append(f"{call.name}: no value argument (fails when run)")
            return
        cand = map_candidate(call, value)
        sql = render(cand)
        kind, why = "call", ""
        if self._on(lazy_pairs) and self._lazy(call, value):
            kind, why = "lazy_scan", "stops once LIMIT rows qualify (upper bound: every candidate)"
        elif self._on(preagg.preaggregate):
            decided = preagg.decide(self.run, tree, call)
            with self.run.applying(rule_of(preagg.preaggregate)):  # its skip, by its name
                unique = decided is not None and preagg.near_unique(self.run, decided[0], call)
            if decided is not None and not unique:
                kind = "grouped_call"
        self._collect_and_call(call, ing, cand, sql, kind, why)

    def _on(self, fn: Callable[..., Any]) -> bool:
        """Whether the call rule whose function is ``fn`` is on for this run."""
        return any(r.fn is fn for rules in self.run.hooks.values() for r in rules)

    def _lazy(self, call: IngredientCall, value: exp.Expression) -> bool:
        atom = filter_atom(call) or conjunct_atom(call)
        try:
            return lazy_plan(call, value, atom) is not None
        except (BlendSQLError, KeyError, TypeError, ValueError):
            return False

    def _collect_and_call(self, call: IngredientCall, ing: MapIngredient, cand: exp.Expression,
                          sql: str, kind: str, why: str) -> None:
        key = self.run.call_key(call)
        if _marked(sql):  # the engine's candidate will hold an earlier call's lookup
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
        vb = Bound(low, high)
        self.add_call_step(kind, call, ing, vb, sql, why, avg_len=self._avg_len(values))

    def _upper(self, call: IngredientCall) -> float | None:
        """Distinct values of the call's candidate on the prepared tree (all calls
        relaxed): a superset of what any evaluation order passes; None if unknown."""
        assert self.base is not None
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

    @staticmethod
    def _avg_len(values: list[Any] | None) -> float:
        if not values:
            return 12.0
        return sum(len(str(v)) for v in values) / len(values)

    def add_call_step(self, kind: str, call: IngredientCall, ing: Any, values: Bound,
                      sql: str | None, why: str, avg_len: float = 12.0,
                      calls: Bound | None = None) -> None:
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
        summary = {
            "call": f"call {call.name} on {values} value(s)",
            "lazy_scan": f"scan lazily under LIMIT, calling {call.name} on at most "
                         f"{values} value(s)",
            "grouped_call": f"pre-aggregate by the value of {call.name}, then call it on "
                            f"{values} group key(s)",
            "late_map": f"call {call.name} on the final rows' {values} value(s)",
        }[kind]
        details = {"call": self.run.call_text(call), "call_id": call.call_id}
        db = self.run.db
        where = (db.executors.placement(needs, calls, lambda: self.run.model)
                 if db.capabilities.executors else None)
        if where is not None:
            details["distributed"] = where
        self.plan.steps.append(Step(
            kind, summary, sql=sql, estimate=Estimate(values, calls, tokens, dollars),
            ingredient=call.name, constraint=hint.kind if hint.kind != "none" else None,
            depends_on=why, details=details))

    def qa_step(self, ing: QAIngredient, call: IngredientCall) -> None:
        key = self.run.call_key(call)
        first = key not in self.seen
        self.seen.setdefault(key, set())
        context = next((a for a in call.call_args[1:] if a.find(exp.Select)), None)
        sql = None
        if context is not None:
            select = context.find(exp.Select)
            sql = render(select) if select is not None else None
        n = 1 if first else 0
        avg = 200.0  # context unknown until run: a short guess
        if context is not None and sql is not None and not _marked(sql) \
                and context.find(IngredientCall) is None:
            avg = self._context_chars(ing, call, sql, avg)
        self.add_call_step("call", call, ing, Bound.exact(n), sql,
                           "" if not _marked(sql) else "its context holds "
                           "an earlier call's output", avg_len=avg)

    def _context_chars(self, ing: QAIngredient, call: IngredientCall, sql: str, default: float) -> float:
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
        probe_limit = min(float(current), PROBE_SECONDS) if isinstance(current, (int, float)) else PROBE_SECONDS
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
            text = render_arg(frame, kwargs, question=question) if callable(render_arg) else frame.to_csv()
        except Exception:  # noqa: BLE001 - an estimate: a user's renderer failing here is not our error
            return default
        return float(len(text))

    def join_step(self, ing: JoinIngredient, call: IngredientCall) -> None:
        try:
            left, right, _ = join_sides(call)
            cands = [join_side_candidate(call, left), join_side_candidate(call, right)]
        except BlendSQLError:
            self.plan.notes.append(f"{call.name}: arguments do not bind (fails when run)")
            return
        sizes: list[int | None] = []
        for side, cand in zip(("left", "right"), cands, strict=True):
            sql = render(cand)
            if _marked(sql) or cand.find(IngredientCall) is not None:
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
        self.add_call_step("call", call, ing, values, " ;\n".join(render(c) for c in cands),
                           why, calls=calls)

    def late_step(self, call: IngredientCall, final: exp.Expression | None,
                  late_plan: Any) -> None:
        """A projection-only map: its values are the final rows' distinct values."""
        ing = self.run.registry.get(call.key_name)
        index = next((i for i, c in (late_plan.deferred if late_plan else [])
                      if c.call_id == call.call_id), None)
        values: Bound
        why = ""
        vals: list[Any] | None = None
        if final is not None and index is not None:
            _, rows = self.run.sql(render(final), f"plan: final rows for {call.name}",
                                   kind="plan")
            vals = list(dict.fromkeys(r[index] for r in rows if r[index] is not None))
            key = self.run.call_key(call)
            done = self.seen.setdefault(key, set())
            new = [v for v in vals if (type(v).__name__, v) not in done]
            done.update((type(v).__name__, v) for v in vals)
            values = Bound.exact(len(new))
        else:
            values = Bound(0, self._upper(call))
            why = "the final rows depend on earlier ingredient steps"
        self.add_call_step("late_map", call, ing, values, None, why,
                           avg_len=self._avg_len(vals))


def call_k(call: IngredientCall) -> int | None:
    """A ranking call's ``k``: its own ``k=`` literal, else its ORDER BY's LIMIT + OFFSET."""
    given = call.call_kwargs.get("k")
    value = literal_value(given) if given is not None else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    placed = order_limit(call)
    return placed[0] if placed is not None else None
