"""Evaluating a call's arguments, choosing its constraint and invoking its ingredient.

Why its own layer: argument values, constraint precedence, identical-call
sharing and metered invocation are the same for every kind of call; the
step runners (``execute.steps``) build on them, and nothing here knows
how a call's outputs get back into the query.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pandas as pd
from sqlglot import exp

from blendsql.db.frames import rows_to_frame
from blendsql.errors import BlendSQLError, ExecutionError, IngredientError, IngredientTimeoutError
from blendsql.execute.limits import DEFAULT_INGREDIENT_TIMEOUT, RunExpired, can_limit, time_limit
from blendsql.execute.metering import Counters
from blendsql.execute.session import KEY_META, Decisions, Session
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients._llm import as_list as option_list
from blendsql.ingredients.base import Ingredient
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Float,
    Int,
    ListOf,
    Text,
    constraint_from_return_type,
    constraint_source,
)
from blendsql.models.gguf import loads_since
from blendsql.plan.calls import call_key, scope_of, source_names
from blendsql.plan.context import RunContext
from blendsql.plan.infer import Hint, Uses, identical_uses, infer_hint, literal_value
from blendsql.plan.render import attach_ctes
from blendsql.plan.rules import Hook, apply_hook
from blendsql.plan.state import SharedCall
from blendsql.plan.values import lossy_notes
from blendsql.smoothie import TraceStep

MAX_CHOICES = 2000  # an inferred Choice larger than this is not worth a grammar



@dataclass(eq=False)
class Evaluator:
    """Evaluates a call's arguments, chooses its constraint and invokes its ingredient
    (metered and traced in ``session``)."""

    session: Session
    limit_noted: bool = False  # the trace said once that ingredient_timeout cannot be armed

    def evaluate(self, node: exp.Expression, call: IngredientCall) -> Any:
        """Python value of an argument (see module ``blendsql.ingredients.base``)."""
        while isinstance(node, exp.Paren) and not isinstance(node.this, exp.Select):
            node = node.this
        if isinstance(node, exp.Null):
            return None
        lit = literal_value(node)
        if lit is not None:
            return lit
        if isinstance(node, exp.Placeholder):
            name = node.name or ""
            if name not in self.session.params:
                raise ExecutionError(f"no value bound for parameter {node.sql()!r}",
                                     hint="pass params=[...] with one value per '?'")
            return self.session.params[name]
        if isinstance(node, (exp.Tuple, exp.Array)):
            return [self.evaluate(e, call) for e in node.expressions]
        if isinstance(node, exp.Column):
            return self.column_values(node, call)
        if isinstance(node, (exp.Subquery, exp.Select)) or (
            isinstance(node, exp.Paren) and isinstance(node.this, exp.Select)
        ):
            inner = node.this if isinstance(node, (exp.Subquery, exp.Paren)) else node
            return self.subquery_df(inner, call)
        _, rows = self.session.sql(exp.select(node.copy()), f"evaluate argument of {call.name}")
        return rows[0][0] if rows else None

    def column_values(self, col: exp.Column, call: IngredientCall) -> list[Any]:
        """Distinct non-NULL values of a column reference (``'t::c'`` or ``t.c``)."""
        scope = scope_of(call)
        table = col.table
        src: exp.Expression | None = None
        if scope is not None:
            sources = source_names(scope)
            if table and table.lower() in sources:
                src = sources[table.lower()].copy()
            elif not table and len(sources) == 1:
                src = next(iter(sources.values())).copy()
        if src is None:
            if not table:
                raise IngredientError(
                    f"cannot tell which table column {col.name!r} in {call.name} belongs to",
                    hint="qualify it as 'table::column' or table.column")
            src = exp.to_table(table)
        q = exp.select(exp.column(col.name)).distinct(copy=False).from_(src, copy=False)
        # no ``IS NOT NULL`` filter: every collection path drops NULL itself, and a
        # per-row test would cost a scan's worth of comparisons
        if scope is not None:
            q = attach_ctes(q, scope)
        return self.session.candidate_values(q, f"values of {to_blendsql(col)} for {call.name}")

    def subquery_df(self, select: exp.Expression, call: IngredientCall) -> pd.DataFrame:
        """A subquery argument (a QA context) as a DataFrame."""
        q = select.copy()
        scope = scope_of(call)
        if scope is not None and isinstance(q, exp.Select) and q.args.get("with_") is None:
            q = attach_ctes(q, scope)
        cols, rows = self.session.sql(q, f"context of {call.name}")
        return rows_to_frame(cols, rows)

    def kwargs_of(self, call: IngredientCall,
                  nodes: dict[str, exp.Expression] | None = None) -> dict[str, Any]:
        """Evaluated keyword arguments of a call.

        A list-valued keyword (``options=``, ``example_outputs=``) given as a
        subquery becomes the list of its column's distinct non-NULL values.
        ``nodes``: the call's keyword argument nodes when already read.
        """
        out = {}
        for k, v in (call.call_kwargs if nodes is None else nodes).items():
            value = self.evaluate(v, call)
            if k in LIST_KWARGS and isinstance(value, pd.DataFrame):
                value = subquery_list(value, k, call.name)
            out[k] = value
        return out

    def constraint_for(self, call: IngredientCall, kw: dict[str, Any],
                       hint: Hint | None = None) -> Constraint | None:
        """Explicit ``options=`` / ``return_type=`` win (in the order of
        :func:`blendsql.models.constraints.constraint_source`); otherwise the inferred hint.

        ``hint``: the hint of all identical uses (:meth:`shared`); by
        default the one of ``call``'s own context.
        """
        given = kw.get("options")
        opts = option_list(given) if given is not None else None
        source = constraint_source(bool(opts), kw.get("return_type"), None)
        if source == "options" and opts:
            return Choice(tuple(str(o) for o in opts))
        if source == "return_type":
            return constraint_from_return_type(str(kw["return_type"]))
        hint = infer_hint(call) if hint is None else hint
        if hint.kind == "example" and "example_outputs" not in kw:
            kw["example_outputs"] = list(hint.values)
        return self._from_hint(call, hint)

    def _from_hint(self, call: IngredientCall, hint: Hint) -> Constraint | None:
        if hint.kind == "bool":
            return Bool()
        if hint.kind == "int":
            return Int()
        if hint.kind in ("float", "number"):
            return Float()
        if hint.kind == "choice":
            return Choice(tuple(str(v) for v in hint.values))
        if hint.kind in ("choice_column", "list"):
            item: Constraint = Text()
            if hint.column is not None:
                try:
                    vals = self.column_values(hint.column, call)
                except BlendSQLError:
                    vals = []
                if 0 < len(vals) <= MAX_CHOICES:
                    item = Choice(tuple(str(v) for v in vals))
            return ListOf(item) if hint.kind == "list" else (
                item if isinstance(item, Choice) else None)
        if hint.kind == "example":
            return Text()
        return None

    def load_details(self) -> dict[str, Any]:
        """``{"model_load": [...]}``: the GGUF loads (kernels, threads) since the last
        ingredient step of this run, so the trace shows how a local model was loaded."""
        loads = loads_since(self.session.load_mark)
        if not loads:
            return {}
        self.session.load_mark += len(loads)
        return {"model_load": [info.as_dict() for info in loads]}

    def invoke(self, ing: Ingredient, call: IngredientCall, inputs: list[Any],
               fn: Callable[[Any, list[str]], Any], n_values: int) -> Any:
        """Call ``fn(model, warnings)`` for one ingredient: meter, time, trace, wrap errors.

        ``warnings`` is a list the ingredient may append to (e.g. an answer that
        could not be parsed and became NULL); each entry becomes a trace step.
        """
        warnings: list[str] = []
        self.session.model.label = call.name
        model = self.session.model if ing.needs_model else None
        before = self.session.model.snapshot()
        nprompts = len(self.session.model.prompt_log)
        ndecisions = len(self.session.model.decision_log)
        t0 = time.perf_counter()
        limit = None if ing.needs_model else (self.session.options.get("ingredient_timeout")
                                              or DEFAULT_INGREDIENT_TIMEOUT)
        if self.session.options.get("ingredient_timeout") is not None and limit is not None \
                and not self.limit_noted and (why := can_limit()) is not None:
            self.limit_noted = True  # once per query, and only when the user set a limit
            self.session.trace.append(TraceStep(
                "warning", f"{call.name}: ingredient_timeout not enforced ({why})",
                ingredient=call.name))
        cancel = self.session.cancel  # the query's own deadline, when nearer, stops it too
        armed = (limit if limit is None or cancel is None or cancel.deadline is None
                 else cancel.bound(limit))
        token = None
        try:
            with time_limit(None if armed is None else max(0.001, armed)) as token:
                out = fn(model, warnings)
        except RunExpired as stop:
            if token is None or stop.token != token:
                raise  # an enclosing ingredient's limit: it reports it
            expired: BlendSQLError
            if cancel is not None and cancel.cancelled:  # the query's deadline came first
                expired = cancel.error()
            else:
                expired = IngredientTimeoutError(
                    f"ingredient {call.name} ran longer than {limit:g} s and was stopped",
                    hint=f"{type(ing).__name__}.run did not return while evaluating "
                    f"{self.session.call_text(call)}; make it faster, or raise the limit with "
                    "execute(..., ingredient_timeout=<seconds>)")
            self.session.trace.append(TraceStep(
                "error", f"{call.name}: {expired.message}", seconds=time.perf_counter() - t0,
                ingredient=call.name, details={"call": self.session.call_text(call),
                                               "error": type(expired).__name__}))
            raise expired from None
        except Exception as e:  # noqa: BLE001 - user code: report, never leak
            err = e if isinstance(e, BlendSQLError) else IngredientError(
                f"ingredient {call.name} failed: {type(e).__name__}: {e}",
                hint=f"the error came from {type(ing).__name__}.run while evaluating "
                f"{self.session.call_text(call)}",
            )
            self.session.trace.append(TraceStep(  # BlendSQLError.trace ends with what failed
                "error", f"{call.name}: {err.message}", seconds=time.perf_counter() - t0,
                ingredient=call.name, details={"call": self.session.call_text(call),
                                               "error": type(err).__name__}))
            if err is e:
                raise
            raise err from e
        seconds = time.perf_counter() - t0
        used: Counters = self.session.model.snapshot().minus(before)
        m = self.session.meta
        m.ingredient_calls += 1
        m.values_passed += n_values
        m.model_calls += used.model_calls
        m.cache_hits += used.cache_hits
        m.prompt_tokens += used.prompt_tokens
        m.completion_tokens += used.completion_tokens
        m.cached_tokens += used.cached_tokens
        outputs = out if isinstance(out, list) else [out]
        self.session.trace.append(TraceStep(
            "ingredient", f"{call.name} ({ing.kind}) on {n_values} value(s)",
            seconds=seconds, ingredient=call.name, inputs=inputs,
            outputs=outputs if not isinstance(out, dict) else [out],
            prompts=self.session.model.prompt_log[nprompts:] or None,
            prompt_tokens=used.prompt_tokens, completion_tokens=used.completion_tokens,
            cached_tokens=used.cached_tokens, model_calls=used.model_calls,
            cache_hits=used.cache_hits,
            details={"call": self.session.call_text(call),
                     **endpoint_details(self.session.model.endpoint_log[nprompts:]),
                     **decision_details(self.session.model.decision_log[ndecisions:]),
                     **self.load_details()},
        ))
        warnings.extend(lossy_notes(outputs))  # values SQLite cannot hold exactly
        for w in warnings:
            self.session.trace.append(TraceStep("warning", f"{call.name}: {w}",
                                                ingredient=call.name))
        return out


@dataclass(eq=False)
class Sharing:
    """Which calls are identical (:meth:`call_key`) and the evaluation they share (:meth:`shared`).

    ``run``: the run the ``SHARE`` rules are applied to; ``decisions``: where their
    decisions are traced.
    """

    run: RunContext
    session: Session
    decisions: Decisions
    call_keys: dict[int, str] = field(default_factory=dict)  # call_key by call id
    shared_calls: dict[str, SharedCall] = field(default_factory=dict)  # by key
    #: the calls of the working tree they were found in, grouped by key
    call_groups: tuple[exp.Expression, dict[str, list[IngredientCall]]] | None = None

    def shared_key(self, call: IngredientCall, key: str) -> str:
        """The key ``call`` shares with identical calls under the ``share`` rules
        (none on: its own, so every call is evaluated on its own)."""
        shared = apply_hook(self.run, Hook.SHARE, call, key)
        return str(shared) if shared is not None else f"{key}#{call.call_id}"

    def call_key(self, call: IngredientCall) -> str:
        """:func:`blendsql.plan.calls.call_key`, memoised per call id for this run."""
        keys = self.call_keys
        key = keys.get(call.call_id)
        if key is None:
            key = call.meta.get(KEY_META)
            if key is None:
                key = call_key(call)
                if "@" not in key:  # names no scope by identity: valid in every copy
                    call.meta[KEY_META] = key
            key = self.shared_key(call, key)
            keys[call.call_id] = key
        return key

    def uses_inputs(self, call: IngredientCall) -> tuple[
            Callable[[IngredientCall], str], dict[int, str],
            dict[str, list[IngredientCall]] | None]:
        """What :func:`blendsql.plan.infer.identical_uses` needs: the key function, the keys
        known, and the calls of ``call``'s tree grouped by key (None: not grouped yet)."""
        root = call.root()
        grouped = self.call_groups  # grouped once per working tree
        return (self.call_key, self.call_keys,
                grouped[1] if grouped is not None and grouped[0] is root else None)

    def is_shared_yet(self, call: IngredientCall) -> bool:
        """Whether an identical call's evaluation exists already (:meth:`shared`)."""
        return self.call_key(call) in self.shared_calls

    def shared(self, call: IngredientCall, uses: Uses | None = None) -> SharedCall:
        """The evaluation shared by every call identical to ``call`` (created on first use).

        Why: identical calls (same ingredient, arguments and resolved
        columns, :func:`blendsql.plan.calls.call_key`) must agree, so they
        get one constraint inferred from all their uses (found in the whole
        tree when the first of them is bound) and one table of outputs: a
        value computed for one use is never computed again for another.
        """
        memo = self.shared_calls
        key = self.call_key(call)
        entry = memo.get(key)
        if entry is None:  # ``uses``: identical_uses's answer, when the caller has it
            root = cast(exp.Expression, call.root())
            found, hint, disagreed, groups = (
                uses if uses is not None else identical_uses(call, *self.uses_inputs(call)))
            self.call_groups = (root, groups)
            entry = memo[key] = SharedCall(hint=hint, uses=len(found))
            for rule in self.run.hooks[Hook.SHARE][:1] if len(found) > 1 else ():
                with self.decisions.applying(rule):
                    self.decisions.decided(
                        f"{rule.name}: {len(found)} identical uses of {call.name} "
                        "share one evaluation", call=self.session.call_text(call),
                        uses=len(found))
            if disagreed:
                self.session.trace.append(TraceStep(
                    "warning", f"{call.name}: its {len(found)} identical uses imply different "
                    "output types; no output constraint is inferred (give return_type=)",
                    ingredient=call.name))
        return entry


def endpoint_details(endpoints: list[str | None]) -> dict[str, Any]:
    """``{"endpoints": {url: requests answered}}`` when a model names the endpoint that
    answered (a pool of servers); nothing otherwise (cached answers name none)."""
    counts = Counter(e for e in endpoints if e)
    return {"endpoints": dict(counts)} if counts else {}


def decode_tuple(value: Any) -> tuple[Any, ...]:
    """A several-column value (``json_array`` text, see ``plan.calls.tuple_value``) as a tuple."""
    return tuple(json.loads(value))


def value_key(value: Any) -> tuple[str, Any]:
    """Key of a value in a shared output table: its type and the value.

    Why the type: ``1``, ``1.0`` and ``'1'`` are different inputs to an
    ingredient (it may render them differently), though Python hashes the
    first two alike.
    """
    return type(value).__name__, value


LIST_KWARGS = ("options", "example_outputs")  # keywords whose value is a list of values


def subquery_list(df: pd.DataFrame, key: str, name: str) -> list[Any]:
    """Distinct non-NULL values of a one-column subquery result, in row order.

    Why: ``options=(SELECT DISTINCT c FROM t WHERE ...)`` means the values,
    not the table's printed text; several columns have no single meaning.
    """
    if df.shape[1] != 1:
        cols = ", ".join(map(str, df.columns))
        raise IngredientError(
            f"{key}= of {name} is a subquery with {df.shape[1]} columns ({cols})",
            hint=f"{key}= takes one column: write {key}=(SELECT DISTINCT col FROM ...)")
    values = (v for v in df.iloc[:, 0].tolist() if v is not None and not (
        isinstance(v, float) and v != v))
    return list(dict.fromkeys(values))


def decision_details(decisions: list[dict[str, Any]]) -> dict[str, Any]:
    """Trace details of an ingredient's scored decisions (none: nothing).

    ``decisions``: one record per value (answer, probability, margin, stage);
    ``stages``: how many values each model decided; ``unscored``: how many
    were greedy answers (the backend could not score them); ``cascade_threshold``:
    the probability above which a cascade's first model decided alone (fitted
    on a sample; ``inf``: none, the second model decided every value).
    """
    if not decisions:
        return {}
    stages: dict[str, int] = {}
    for d in decisions:
        stages[str(d.get("stage", ""))] = stages.get(str(d.get("stage", "")), 0) + 1
    thresholds = sorted({d["threshold"] for d in decisions if d.get("threshold") is not None})
    return {"decisions": decisions, "stages": stages,
            "unscored": sum(1 for d in decisions if not d.get("scored")),
            **({"cascade_threshold": thresholds[0] if len(thresholds) == 1 else thresholds}
               if thresholds else {})}


def _describe(out: Any) -> str:
    if isinstance(out, (list, tuple)):
        return f"a {type(out).__name__} of {len(out)} item(s)"
    return f"a {type(out).__name__}"
