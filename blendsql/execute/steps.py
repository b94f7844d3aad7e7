"""The step runners: compute one ready call and put a lookup of its outputs in the tree.

Why its own module: a map, a QA and a join each run differently (candidate
values, lazy scans, pre-aggregation; one answer; two value sets) but all
end the same way, with the call replaced by data, never SQL text. Each
call runs as its plan step says (a map's :class:`~blendsql.plan.steps.Strategy`
was decided once, when the plan was made); only the ``STORE`` hook, a decision
on the outputs, applies here (``SHARE`` in ``execute.session``, ``ORDER`` in
:meth:`Ordering.call_order`, for the walk). The rules' code is in ``plan/``
and reads the run only through :class:`~blendsql.plan.context.RunContext`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.errors import BlendSQLError, IngredientError
from blendsql.execute.collect import json_shaped
from blendsql.execute.evaluate import Evaluator, Sharing, _describe, decode_tuple, value_key
from blendsql.execute.lazy_scan import lazy_pairs
from blendsql.execute.limits import DEFAULT_INGREDIENT_TIMEOUT, call_user
from blendsql.execute.optimise import call_cost
from blendsql.execute.preaggregate import apply_grouped
from blendsql.execute.session import Decisions, Session
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients._llm import as_list as option_list
from blendsql.ingredients.base import Ingredient, JoinIngredient, MapIngredient, QAIngredient
from blendsql.models.constraints import Choice
from blendsql.plan.bind import bind_map, map_args
from blendsql.plan.calls import effective_scope, map_value
from blendsql.plan.candidates import DECIDED_META, join_side_candidate, map_candidate
from blendsql.plan.context import MapRunner, RunContext
from blendsql.plan.infer import Hint, infer_hint, order_limit
from blendsql.plan.lazy import ENGINE_KWARGS, lazy_strategy
from blendsql.plan.lookup import (
    filter_atom,
    filter_lookup,
    in_target,
    join_lookup,
    null_passes_statically,
    null_test,
    qa_list,
    qa_param,
    replace_call,
    replace_node,
)
from blendsql.plan.order import CallOrder
from blendsql.plan.preagg import preaggregate
from blendsql.plan.relax import AtomTexts, ClauseTexts
from blendsql.plan.rules import Hook, Rule, apply_hook, rule_of
from blendsql.plan.state import RunState, TreeTexts
from blendsql.plan.steps import CallStep, JoinCall, MapCall, QACall, Strategy
from blendsql.plan.values import first_column, outputs_to_sqlite, to_sqlite
from blendsql.smoothie import TraceStep

PREAGGREGATE = rule_of(preaggregate)  # the rules whose decisions a map step applies
LAZY = rule_of(lazy_strategy)


@dataclass(eq=False)
class Ordering:
    """Which ready call comes next: the first ``ORDER`` rule's :class:`CallOrder`, asked
    once per run, and its decisions traced."""

    run: RunContext
    decisions: Decisions
    asked: bool = False  # the ORDER rules were asked for a CallOrder (``order``: theirs)
    order: tuple[Rule, CallOrder] | None = None

    def call_order(self) -> CallOrder | None:
        """The first ``order`` rule's way of choosing the next ready call (None: none on)."""
        if not self.asked:
            self.asked = True
            for rule in self.run.hooks[Hook.ORDER]:
                order = rule.fn(self.run)  # decides nothing yet: its choices are traced by chosen
                if order is not None:
                    self.order = (rule, order)
                    break
        found = self.order
        return found[1] if found is not None else None

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        """The cost the ``order`` rule chooses the next ready call by (None when none is on)."""
        order = self.call_order()
        return order.cost if order is not None else None

    def call_cost(self, call: IngredientCall) -> float:
        return call_cost(self.run, call)

    def trace_order(self, chosen: IngredientCall) -> None:
        """The ``order`` rule's decision, when it compared ready calls to pick ``chosen``."""
        found = self.order
        if found is None:
            return
        if len(found[1].seen) < 2:  # no comparison was made: nothing to trace
            found[1].seen.clear()
            return
        with self.decisions.applying(found[0]):
            found[1].chosen(chosen)


@dataclass(eq=False)
class StepRunner:
    """Computes one ready call at a time, as its plan step says, and puts a lookup of its
    outputs in the tree.

    ``run``: the run the helpers and the ``STORE`` rules are given; ``session``,
    ``evaluator``, ``sharing``, ``decisions``: the parts it works with; ``state``: the
    run's state.
    """

    run: RunContext
    session: Session
    evaluator: Evaluator
    sharing: Sharing
    decisions: Decisions
    state: RunState

    def atom_texts(self) -> AtomTexts:
        """This run's cache of plain atoms' SQL, for candidate queries (``plan.relax``)."""
        return self.state.tree.atom_texts

    def clause_texts(self) -> ClauseTexts:
        """Relaxed clauses' texts for the tree as it is now (emptied when it changes:
        :meth:`compute`); the calls of one WHERE share its relaxed text at a step."""
        return self.state.tree.now.clause_texts

    def readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        """The candidate query(ies) a map / join call would run now (for readiness).

        Argument errors are left for :meth:`compute` to report, so such a call
        counts as ready. Built once per call and tree state: the readiness test
        and the cost estimate of one step share it (:meth:`compute` changes the
        tree and starts a new state).
        """
        built = self.state.tree.now.readiness
        if call.call_id not in built:
            built[call.call_id] = self._build_readiness_candidate(call)
        return built[call.call_id]

    def _build_readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        ing = self.session.registry.get(call.key_name)
        try:
            if isinstance(ing, MapIngredient):
                value = map_value(call, self.session.registry)
                return map_candidate(call, value, self.atom_texts(), self.clause_texts()) \
                    if value is not None else exp.select(exp.Literal.number(1))
            if isinstance(ing, JoinIngredient):
                left, right, _ = join_sides(call)
                cands = [join_side_candidate(call, left), join_side_candidate(call, right)]
                return next((c for c in cands if c.find(IngredientCall) is not None), cands[0])
        except (BlendSQLError, IndexError, TypeError, KeyError):
            return exp.select(exp.Literal.number(1))
        return exp.select(exp.Literal.number(1))

    def compute(self, tree: exp.Expression, call: IngredientCall, step: CallStep,
                ) -> exp.Expression:
        """Compute one ready call as its plan step says; return ``tree`` with it replaced
        by a lookup.

        ``tree`` is the run's own working copy (``execute.engine.run_plan`` copies
        the plan's tree once per run): the lookup replaces the call in place.
        """
        tree_state = self.state.tree
        tree_state.now = TreeTexts()
        try:
            ing = step.ing if step.ing is not None else self.session.registry.get(call.key_name)
            return self._compute(tree, call, ing, step)
        finally:  # the tree changed: readiness candidates are built afresh
            tree_state.now = TreeTexts()

    def _compute(self, tree: exp.Expression, call: IngredientCall, ing: Ingredient | None,
                 step: CallStep) -> exp.Expression:
        match step:
            case MapCall() if isinstance(ing, MapIngredient):
                return self.compute_map(tree, ing, call, step)
            case QACall() if isinstance(ing, QAIngredient):
                repl = self.compute_qa(ing, call)
            case JoinCall() if isinstance(ing, JoinIngredient):
                repl = self.compute_join(ing, call)
            case _:
                raise IngredientError(
                    f"{call.name} is a {getattr(ing, 'kind', 'unknown')} ingredient, which "
                    "cannot be computed here",
                    hint="map, qa and join ingredients run in queries; alias and string "
                    "ingredients expand before planning")
        return replace_call(tree, call.call_id, repl, in_place=True)

    def map_runner(self, ing: MapIngredient, call: IngredientCall) -> MapRunner:
        """Bind a map call: (value node, question, engine kwargs, ``run_values``).

        Arguments are evaluated here, while the call is still in the tree (its
        scope resolves column references); ``run_values(values)`` runs the
        ingredient once on a batch and checks the outputs' length.
        """
        uses = None
        if self.sharing.is_shared_yet(call):
            bound = map_args(call, ing)
        else:  # the first of its identical calls: its uses found with its arguments
            bound, uses = bind_map(call, ing, *self.sharing.uses_inputs(call))
        value_node = bound.value
        kw_names = {"value_names": bound.value_names} if bound.value_names else {}
        question = bound.question_value
        if question is None and bound.question is not None:
            question = self.evaluator.evaluate(bound.question, call)
        kw = self.evaluator.kwargs_of(call, bound.kwargs)
        if getattr(ing, "ordered_by_limit", False):  # a ranking map: k and direction
            placed = order_limit(call)
            if placed is not None:
                if placed[0] is not None:
                    kw.setdefault("k", placed[0])
                kw.setdefault("descending", placed[1])
        # prefilter= is for the engine, not run()
        engine_kw = {k: kw.pop(k) for k in ENGINE_KWARGS if k in kw}
        shared = self.sharing.shared(call, uses)
        constraint = self.evaluator.constraint_for(call, kw, shared.hint)
        outputs = shared.outputs

        db, invoke = self.session.db, self.evaluator.invoke
        # only a backend that runs calls on executors (Spark) can
        distributed = db.capabilities.executors and db.executors.runs_values(ing)

        def run_batch(vals: list[Any]) -> list[Any]:
            given = [decode_tuple(v) for v in vals] if kw_names else list(vals)
            if distributed:  # Spark, executors='on': run() shipped to the executors
                out = invoke(ing, call, given, lambda _m, warns: db.executors.map_values(
                    ing, question, given, constraint, warns, {**kw_names, **kw},
                    self.session.options.get("ingredient_timeout") or DEFAULT_INGREDIENT_TIMEOUT),
                    len(vals))
            else:
                out = invoke(ing, call, given, lambda model, warns: call_user(
                    ing.run, question, given, model=model, db=db, constraint=constraint,
                    warnings=warns, **kw_names, **kw),
                    len(vals))
            if not isinstance(out, (list, tuple)) or len(out) != len(vals):
                raise IngredientError(
                    f"{call.name} returned {_describe(out)} for {len(vals)} values",
                    hint="a map ingredient's run() returns a list as long as `values`")
            return list(out)

        def run_values(vals: list[Any]) -> list[Any]:
            if shared.uses <= 1:  # no identical call shares the outputs: no keyed store
                return run_batch(vals)
            missing = list(dict.fromkeys(v for v in vals if value_key(v) not in outputs))
            if missing:
                for v, o in zip(missing, run_batch(missing), strict=True):
                    outputs[value_key(v)] = o
            return [outputs[value_key(v)] for v in vals]

        return value_node, question, engine_kw, run_values

    def compute_map(self, tree: exp.Expression, ing: MapIngredient, call: IngredientCall,
                    step: MapCall) -> exp.Expression:
        """Map: its values gathered as the step's strategy says -> one run -> a lookup.

        In a positive filter (``WHERE {{M(x)}} = TRUE``) the lookup is a set
        membership test on an unindexed table; elsewhere an indexed probe.
        """
        if step.strategy is Strategy.GROUPED:
            value = map_value(call, self.session.registry)
            assert value is not None and step.sources is not None
            with self.decisions.applying(PREAGGREGATE):
                done = apply_grouped(self.run, tree, ing, call, value, step.sources)
            if done is not None:
                return done
        value_node, question, engine_kw, run_values = self.map_runner(ing, call)
        lazy = None
        if step.strategy is Strategy.LAZY:  # stop once enough rows qualify
            with self.decisions.applying(LAZY):
                lazy = lazy_pairs(self.run, call, value_node, question, engine_kw, run_values)
        if lazy is not None:
            values, outputs = lazy
        else:
            values = self.cascade_values(call, value_node)
            outputs = run_values(values) if values else []
        atom = filter_atom(call)  # the filter the call stands in, where its outputs go
        stored = outputs_to_sqlite(outputs)
        done = apply_hook(self.run, Hook.STORE, tree, call, atom, value_node, values, stored)
        if done is not None:  # e.g. the filter decided in Python
            return done  # type: ignore[no-any-return]
        pairs = list(zip(values, stored, strict=True))
        if atom is not None:
            table = self.session.temp_table("m", pairs, index=False)
            null_passes = null_passes_statically(atom, call)
            if null_passes is None:
                _, r = self.session.sql(null_test(atom, call),
                                        f"does a NULL output pass for {call.name}")
                null_passes = bool(r and r[0][0])
            repl = filter_lookup(atom, call, table, value_node, null_passes)
            return replace_node(tree, atom, repl, in_place=True)
        return replace_call(tree, call.call_id, self.session.map_lookup_node(pairs, value_node),
                            in_place=True)

    def cascade_values(self, call: IngredientCall, value: exp.Expression) -> list[Any]:
        """A map call's candidate values, with no statement once its scope has no row left.

        Why: under n AND-ed filters the rows often run out long before the last
        filter, and each later candidate would still scan the table through
        every lookup so far. A candidate's WHERE only gets stronger as calls are
        computed (each relaxed atom is at its most permissive constant, which
        its lookup can only narrow), so once a one-table candidate of a scope
        had no row (and held no clause of its own: ``decided_rows``), every
        later one-table candidate of that scope has none either.
        """
        atoms, clauses = self.atom_texts(), self.clause_texts()
        cand = map_candidate(call, value, atoms, clauses)
        scope = effective_scope(call, value)
        summary = f"candidate values for {call.name}"
        if not json_shaped(cand):
            scope = None
        empty = self.state.tree.empty_scopes
        known = empty.get(id(scope)) if scope is not None else None
        if known is not None and known[0] is scope:
            self.session.trace.append(TraceStep(
                "plan", f"{summary}: none, no statement (the candidate for {known[1]} "
                "had no row; this one only adds conditions)", rows_out=0,
                details={"call": self.session.call_text(call), "empty_as": known[1]}))
            return []
        values = self.session.candidate_values(cand, summary)
        if scope is not None and self.session.no_rows and not cand.meta.get(DECIDED_META):
            empty[id(scope)] = (scope, self.session.call_text(call))
        return values

    def compute_qa(self, ing: QAIngredient, call: IngredientCall) -> exp.Expression:
        """QA: evaluated once; scalar answer -> bound parameter, list -> temp table."""
        args = call.call_args
        kw = self.evaluator.kwargs_of(call)
        question = self.evaluator.evaluate(args[0], call) if args else kw.pop("question", None)
        context = kw.pop("context", None)
        if context is None and len(args) > 1:
            context = self.evaluator.evaluate(args[1], call)
        if isinstance(context, list):
            context = pd.DataFrame({"value": context})
        hint = infer_hint(call)
        options = option_list(kw.pop("options", None))  # 'a;b' is two options, as for maps
        shared = self.sharing.shared(call)
        if "answer" in shared.outputs:  # an identical call was answered already
            answer = shared.outputs["answer"]
        else:
            constraint = self.evaluator.constraint_for(call, dict(kw, options=options), shared.hint)
            if options is None and isinstance(constraint, Choice):
                options = list(constraint.options)
            extra = {k: v for k, v in kw.items()}
            answer = self.evaluator.invoke(ing, call, [question], lambda model, warns: call_user(
                ing.run, question, context, options, model=model, db=self.session.db,
                constraint=constraint, warnings=warns, **extra), 1)
            shared.outputs["answer"] = answer
        return self.qa_replacement(call, answer, hint)

    def qa_replacement(self, call: IngredientCall, answer: Any, hint: Hint) -> exp.Expression:
        """The lookup standing for a QA answer at this use.

        On the right of ``IN`` / ``NOT IN`` (``x IN {{QA()}}``, ``x IN (<<QA()>>)``)
        the answer is a set: a list answer becomes a temp table, a scalar one a
        set of one (``IN (:p)``); elsewhere a scalar is a bound parameter.
        """
        in_list = in_target(call) is not None
        if isinstance(answer, pd.DataFrame):
            answer = answer.iloc[:, 0].tolist() if hint.kind == "list" or in_list else (
                answer.iloc[0, 0] if answer.size else None)
        if isinstance(answer, (list, tuple, set)) and (hint.kind == "list" or in_list):
            table = self.session.temp_table("q", [(None, to_sqlite(v)) for v in answer], key=False)
            return qa_list(table)
        name = f"__bsql_qa{self.session.run_id}_{next(self.session.names)}"
        self.session.params[name] = to_sqlite(answer)
        return qa_param(name)

    def compute_join(self, ing: JoinIngredient, call: IngredientCall) -> exp.Expression:
        """Join: each side's distinct values after its own filters -> mapping table."""
        left, right, question_node = join_sides(call)
        kw = self.evaluator.kwargs_of(call)
        for k in ("left_on", "right_on"):
            kw.pop(k, None)
        question = kw.pop("question", None)
        if question is None and question_node is not None:
            question = self.evaluator.evaluate(question_node, call)
        _, lrows = self.session.sql(join_side_candidate(call, left), f"left values for {call.name}")
        _, rrows = self.session.sql(join_side_candidate(call, right),
                                    f"right values for {call.name}")
        lv, rv = first_column(lrows), first_column(rrows)
        mapping: dict[Any, Any] = {}
        if lv and rv:
            out = self.evaluator.invoke(ing, call, [lv, rv], lambda model, warns: call_user(
                ing.run, list(lv), list(rv), question=question, model=model, db=self.session.db,
                constraint=None, warnings=warns, **kw), len(lv) + len(rv))
            if not isinstance(out, Mapping):
                raise IngredientError(f"{call.name} returned {_describe(out)}",
                                      hint="a join ingredient's run() returns a dict "
                                      "{left_value: right_value}")
            mapping = dict(out)
        rows = [(to_sqlite(k), to_sqlite(v)) for k, v in mapping.items()
                if k is not None and v is not None]
        table = self.session.temp_table("j", rows)
        return join_lookup(table, left, right)


def join_sides(call: IngredientCall) -> tuple[exp.Expression, exp.Expression,
                                              exp.Expression | None]:
    """(left, right, question) argument nodes of a join call, in either form."""
    kwargs = call.call_kwargs
    args = call.call_args
    if "left_on" in kwargs and "right_on" in kwargs:
        return kwargs["left_on"], kwargs["right_on"], (args[0] if args else None)
    cols = [a for a in args if not (isinstance(a, exp.Literal) and a.is_string)]
    if len(cols) == 2:
        qs = [a for a in args if isinstance(a, exp.Literal) and a.is_string]
        return cols[0], cols[1], (qs[0] if qs else None)
    raise IngredientError(
        f"{call.name} needs a left and a right column",
        hint=f"write JOIN t2 ON {{{{{call.name}(t1.a, t2.b)}}}} or "
        f"JOIN {{{{{call.name}(left_on='t1::a', right_on='t2::b')}}}}")
