"""Running a planned query: compute ingredient outputs, then the final SQL.

The loop (see docs/ARCHITECTURE.md, "How execution keeps that meaning"):
pick the next ready call (inner scopes first), run its candidate query to
get the distinct values it must see, call the ingredient once with them,
store the outputs as a session temp table or a bound parameter, and replace
the call in the AST by a lookup of those outputs. When no call is left the
AST is plain SQLite: render it, run it, return a Smoothie.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.db.backend import Backend
from blendsql.db.database import INGREDIENT_VALUE_HINT
from blendsql.db.frames import rows_to_frame
from blendsql.errors import BlendSQLError, ExecutionError, IngredientError
from blendsql.execute.collect import (
    Collector,
    collectable,
    distinct_values,
    json_candidate,
    json_ready,
    json_values,
    without_distinct,
)
from blendsql.execute.lazy import lazy_pairs, pop_engine_kwargs
from blendsql.execute.metering import Counters, MeteredModel
from blendsql.execute.optimise import call_cost, enum_classifier, vocabulary_of
from blendsql.execute.preagg import preaggregate
from blendsql.execute.project import apply_late_maps, bind_late_maps
from blendsql.execute.values import first_column, lossy_notes, outputs_to_sqlite, to_sqlite
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import (
    Ingredient,
    IngredientRegistry,
    JoinIngredient,
    MapIngredient,
    QAIngredient,
)
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Float,
    Int,
    ListOf,
    Text,
    constraint_from_return_type,
)
from blendsql.plan.aliases import projection_names
from blendsql.plan.calls import (
    call_key,
    find_calls,
    map_value,
    next_call,
    scope_of,
    source_names,
    twins,
    visible_ctes,
)
from blendsql.plan.candidates import join_side_candidate, map_candidate
from blendsql.plan.enum_match import Classifier
from blendsql.plan.infer import Hint, combine_hints, infer_hint, literal_value
from blendsql.plan.lookup import (
    filter_atom,
    filter_lookup,
    in_target,
    join_lookup,
    map_lookup,
    null_passes_statically,
    null_test,
    qa_list,
    qa_param,
    replace_call,
    replace_node,
)
from blendsql.plan.lookup import temp_table as lookup_table
from blendsql.plan.memo import RegistryKey, TreeMemo, registry_key
from blendsql.plan.rules import RULES, PlanState, apply_stage, has_macros, rule_on
from blendsql.plan.static_filter import member_lookup, passing_values
from blendsql.smoothie import Meta, Smoothie, TraceStep

Parser = Callable[[str, IngredientRegistry], exp.Expression]
MAX_CHOICES = 2000  # an inferred Choice larger than this is not worth a grammar
_RUN_IDS = itertools.count()


def bind_params(params: Sequence[Any] | Mapping[str, Any] | None) -> dict[str, Any]:
    """User params as named bindings: a list binds ``?`` as ``p0, p1, ...``."""
    if params is None:
        return {}
    if isinstance(params, Mapping):
        return {str(k).lstrip(":"): v for k, v in params.items()}
    if isinstance(params, (str, bytes)):
        raise ExecutionError("params must be a list/tuple or a dict, not a string",
                             hint="write params=[value] for one '?'")
    return {f"p{i}": v for i, v in enumerate(params)}


class Run:
    """State of one ``execute`` call: params, temp tables, counters and trace."""

    def __init__(self, db: Backend, registry: IngredientRegistry, model: MeteredModel,
                 params: dict[str, Any], options: dict[str, Any] | None = None) -> None:
        self.db = db
        self.registry = registry
        self.model = model
        self.params = params
        self.options = options or {}
        self.meta = Meta()
        self.trace: list[TraceStep] = []
        # only objects this run created itself: cleanup never drops anything else
        self.temp_tables: list[str] = []
        self.functions: list[str] = []  # lookup functions bound on the connection
        # unguessable: engine names and parameters can never meet a user's
        self.run_id = f"{secrets.token_hex(4)}_{next(_RUN_IDS)}"
        self._n = itertools.count()
        self._texts: dict[int, str] = {}
        self._label: tuple[str, str] | None = None  # (kind, summary) of the next statements
        self._cleaning = False

    # -- the one traced path to the database ---------------------------------------------

    @contextmanager
    def labelled(self, kind: str, summary: str) -> Iterator[None]:
        """Statements run inside get this trace kind and summary (see :meth:`on_statement`)."""
        saved, self._label = self._label, (kind, summary)
        try:
            yield
        finally:
            self._label = saved

    def on_statement(self, sql: str, rows: int | None, seconds: float, engine: bool,
                     error: str | None) -> None:
        """Record one statement the database ran (``Database.tracing``'s hook).

        Why every statement: a cost scan or a schema probe costs time too, and a
        trace that shows only some statements hides where it went. Unlabelled
        statements are the engine's temp objects (``temp_table``) or someone
        else's reads (an ingredient's, ``sql``). Statements of the cleanup run
        after the result is complete; they are listed in the last step's
        ``details["cleanup"]`` so the trace still ends with the final query.
        """
        details: dict[str, Any] = {"error": error} if error else {}
        if self._cleaning and self.trace:
            self.trace[-1].details.setdefault("cleanup", []).append(
                {"sql": sql, "rows": rows, "seconds": seconds, **details})
            return
        kind, summary = self._label or (
            ("temp_table", sql.split("(", 1)[0][:60]) if engine else ("sql", "statement"))
        self.trace.append(TraceStep(kind, summary, sql=sql, rows_out=rows, seconds=seconds,
                                    details=details))

    def call_text(self, call: IngredientCall) -> str:
        """BlendSQL text of a call, rendered once per call (for traces and hints)."""
        text = self._texts.get(call.call_id)
        if text is None:
            # also kept on the node: parse-cached trees (and their copies) reuse it
            text = call.meta.get("bsql_text")
            if text is None:
                text = call.meta["bsql_text"] = to_blendsql(call)
            self._texts[call.call_id] = text
        return text

    # -- rule decisions -----------------------------------------------------------

    def decided(self, rule: str, summary: str, **details: Any) -> None:
        """A planning rule's decision as a ``plan`` trace step (``details["rule"]``).

        Why: rules that need runtime information (candidate counts, a row
        sample, a LIMIT scan's progress) decide inside the executor; the
        trace says which rule decided what, and on what condition.
        """
        self.trace.append(TraceStep("plan", summary, details={"rule": rule, **details}))

    def note_rules_off(self) -> None:
        """One trace step naming the rules switched off for this run (when any)."""
        off = [r.name for r in RULES if not r.required and r.default
               and not rule_on(self.options, r.name)]
        if off:
            self.trace.append(TraceStep("plan", "rules switched off: " + ", ".join(off),
                                        details={"rules_off": off}))

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        """The cost function of the ``cost_order`` rule (None when it is off).

        The costs it measures are kept for :meth:`trace_order`.
        """
        if not rule_on(self.options, "cost_order"):
            return None
        seen: dict[int, float] = self.__dict__.setdefault("_costs_seen", {})

        def cost(c: IngredientCall) -> float:
            seen[c.call_id] = value = call_cost(self, c)
            return value

        return cost

    def trace_order(self, chosen: IngredientCall) -> None:
        """When ``cost_order`` compared ready calls to pick ``chosen``: a decision step."""
        seen: dict[int, float] = self.__dict__.get("_costs_seen") or {}
        if len(seen) < 2 or chosen.call_id not in seen:
            seen.clear()
            return
        others = {i: c for i, c in seen.items() if i != chosen.call_id}
        mine = seen[chosen.call_id]
        seen.clear()
        self.decided("cost_order", f"cost_order: {chosen.name} first (estimated cost "
                     f"{mine:.3g}; {len(others)} other ready call(s) cost "
                     f"{', '.join(f'{c:.3g}' for c in others.values())})",
                     call=self.call_text(chosen), costs=list(others.values()))

    # -- SQL ----------------------------------------------------------------------

    def sql(self, tree: exp.Expression | str, summary: str, *, kind: str = "sql",
            params: Mapping[str, Any] | None = None) -> tuple[list[str], list[tuple]]:
        """Run one statement with the session's bindings (or ``params``), traced.

        ``kind``: ``sql`` for the query's own work, ``plan`` for probes made
        to plan it (costs, column names, samples).
        """
        text = tree if isinstance(tree, str) else render(tree)
        binds = self._bindings(text) if params is None else params
        try:
            with self.labelled(kind, summary):
                return self.db.execute(text, binds, origin=self.param_origin)
        except ExecutionError as e:
            raise self._lookup_error(e, text) from None

    def _lookup_error(self, e: ExecutionError, text: str) -> ExecutionError:
        """``e``, or, when one of this run's lookup functions failed, an error that
        says so: the value it returned (an ingredient's output) was not storable."""
        if "user-defined function raised exception" not in e.message:
            return e
        upper = text.upper()
        if not any(name.upper() in upper for name in self.functions):
            return e
        return ExecutionError(f"SQLite could not take an ingredient's output (returned "
                              f"through a lookup function):\n  {text[:2000]}",
                              hint=INGREDIENT_VALUE_HINT)

    def candidate_values(self, cand: exp.Expression, summary: str) -> list[Any]:
        """Distinct non-NULL values of a candidate query (see ``execute.collect``)."""
        conn = getattr(self.db, "functions_conn", None)  # None: register no functions
        if not collectable(cand):
            return first_column(self.sql(render(cand, copy=False), summary)[1])
        assert isinstance(cand, exp.Select)
        as_json = json_candidate(cand) if self.db.json_collect else None
        if as_json is not None and json_ready(
                lambda q: self.sql(q, "column type and size (for collecting)", kind="plan")[1],
                cand):
            try:
                _, rows = self.sql(render(as_json, copy=False), summary)
            except ExecutionError:
                pass  # a BLOB in the column: collect row by row below
            else:
                values = json_values(rows[0][0])
                self.trace[-1].rows_out = len(values)
                return values
        if self.db.dialect != "sqlite":  # typed backends: their own DISTINCT (no collations)
            values = distinct_values(self.sql(render(cand, copy=False), summary)[1])
        elif conn is None:  # a borrowed connection: no functions, the rows deduplicated here
            values = distinct_values(self.sql(render(without_distinct(cand)), summary)[1])
        else:
            with Collector(conn) as col:
                self.sql(render(col.rewrite(cand), copy=False), summary)
                values = col.values()
        self.trace[-1].rows_out = len(values)
        return values

    def _bindings(self, text: str) -> dict[str, Any]:
        """Only the named parameters the statement uses (sqlite rejects none extra, but
        a missing one must be reported clearly)."""
        if ":" not in text:
            return {}
        return {k: v for k, v in self.params.items() if f":{k}" in text}

    def param_origin(self, name: str) -> str:
        """Who made a bound parameter's value, for error messages: the user's params
        (``p0`` is the first ``?``) or the engine (an ingredient's answer)."""
        name = name.lstrip(":")
        if name.startswith("__bsql"):
            return f"the answer of an ingredient (bound by blendsql as :{name})"
        if name.startswith("p") and name[1:].isdigit():
            return f"the value you passed in params (:{name}, i.e. params[{name[1:]}])"
        return f"the value you passed for parameter :{name}"

    def temp_table(self, kind: str, rows: list[tuple[Any, Any]], key: bool = True,
                   index: bool = True) -> str:
        """Create a session temp table ``(k, v)`` from bound rows; traced, dropped later.

        ``index``: make ``k`` the primary key (for per-row probes); set-membership
        lookups need none, and inserting into an index is the dominant cost.
        """
        name = self.db.temp_name(kind)
        cols = ["k", "v"] if key else ["v"]
        start = len(self.trace)
        with self.labelled("temp_table", f"temp.{name}"):
            self.db.create_temp_table(name, cols, rows if key else [(r[1],) for r in rows],
                                      primary_key="k" if key and index else None)
        self.temp_tables.append(name)  # after success: a failed CREATE made nothing of ours
        if len(self.trace) > start:  # the statements' steps: the first one counts the rows
            self.trace[start].rows_out = len(rows)
        return name

    def map_lookup_node(self, pairs: list[tuple[Any, Any]], value: exp.Expression,
                        ) -> exp.Expression:
        """A per-row lookup of a map's outputs: ``__bsql_f<k>(<value>)``.

        Why a registered function over a dict rather than ``(SELECT v FROM
        temp.m WHERE k = <value>)``: no temp table to create and fill, and
        SQLite evaluates a GROUP BY alias's scalar subquery twice per row
        (measured on 100k rows: 63 vs 95 ms CPU for GROUP BY, 10 vs 13 ms
        for a projection). The outputs stay data (returned values), never
        SQL text. Keys are the candidate's distinct values, so the dict
        matches SQLite's ``=`` on them (same storage class; 1 == 1.0).
        """
        bind = getattr(self.db, "bind_function", None)
        t0 = time.perf_counter()
        name = bind(dict(pairs).get) if bind is not None else None
        if name is None:  # a borrowed connection gets no functions: a temp table
            return map_lookup(self.temp_table("m", pairs), value)
        self.functions.append(name)
        self.trace.append(TraceStep("temp_table", f"lookup function {name} over "
                                    f"{len(pairs)} value(s)", rows_out=len(pairs),
                                    seconds=time.perf_counter() - t0))
        return exp.Anonymous(this=name, expressions=[value.copy()])

    def cleanup(self) -> None:
        """Drop every temp table and lookup function of this run (also after errors)."""
        self._cleaning = True
        try:
            for name in self.temp_tables:
                self.db.drop_temp_table(name)
        finally:
            self._cleaning = False
        self.temp_tables.clear()
        for name in self.functions:
            self.db.release_function(name)  # the name is reused: the count stays constant
        self.functions.clear()

    # -- argument evaluation --------------------------------------------------------

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
            if name not in self.params:
                raise ExecutionError(f"no value bound for parameter {node.sql()!r}",
                                     hint="pass params=[...] with one value per '?'")
            return self.params[name]
        if isinstance(node, (exp.Tuple, exp.Array)):
            return [self.evaluate(e, call) for e in node.expressions]
        if isinstance(node, exp.Column):
            return self.column_values(node, call)
        if isinstance(node, (exp.Subquery, exp.Select)) or (
            isinstance(node, exp.Paren) and isinstance(node.this, exp.Select)
        ):
            inner = node.this if isinstance(node, (exp.Subquery, exp.Paren)) else node
            return self.subquery_df(inner, call)
        _, rows = self.sql(exp.select(node.copy()), f"evaluate argument of {call.name}")
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
            q = _attach_ctes(q, scope)
        return self.candidate_values(q, f"values of {to_blendsql(col)} for {call.name}")

    def subquery_df(self, select: exp.Expression, call: IngredientCall) -> pd.DataFrame:
        """A subquery argument (a QA context) as a DataFrame."""
        q = select.copy()
        scope = scope_of(call)
        if scope is not None and isinstance(q, exp.Select) and q.args.get("with_") is None:
            q = _attach_ctes(q, scope)
        cols, rows = self.sql(q, f"context of {call.name}")
        return rows_to_frame(cols, rows)

    def kwargs_of(self, call: IngredientCall) -> dict[str, Any]:
        """Evaluated keyword arguments of a call.

        A list-valued keyword (``options=``, ``example_outputs=``) given as a
        subquery becomes the list of its column's distinct non-NULL values.
        """
        out = {}
        for k, v in call.call_kwargs.items():
            value = self.evaluate(v, call)
            if k in LIST_KWARGS and isinstance(value, pd.DataFrame):
                value = subquery_list(value, k, call.name)
            out[k] = value
        return out

    # -- constraints -----------------------------------------------------------------

    def constraint_for(self, call: IngredientCall, kw: dict[str, Any],
                       hint: Hint | None = None) -> Constraint | None:
        """Explicit ``return_type=`` / ``options=`` win; otherwise the inferred hint.

        ``hint``: the hint of all identical uses (:meth:`shared_hint`); by
        default the one of ``call``'s own context.
        """
        if kw.get("return_type") is not None:
            return constraint_from_return_type(str(kw["return_type"]))
        if kw.get("options") is not None:
            opts = kw["options"] if isinstance(kw["options"], list) else [kw["options"]]
            return Choice(tuple(str(o) for o in opts))
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

    # -- identical calls share one evaluation ------------------------------------------

    def call_key(self, call: IngredientCall) -> str:
        """:func:`blendsql.plan.calls.call_key`, memoised per call id for this run."""
        keys: dict[int, str] = self.__dict__.setdefault("_call_keys", {})
        key = keys.get(call.call_id)
        if key is None:
            key = call_key(call)
            if not rule_on(self.options, "share_identical"):  # every call on its own
                key = f"{key}#{call.call_id}"
            keys[call.call_id] = key
        return key

    def shared(self, call: IngredientCall) -> SharedCall:
        """The evaluation shared by every call identical to ``call`` (created on first use).

        Why: identical calls (same ingredient, arguments and resolved
        columns, :func:`blendsql.plan.calls.call_key`) must agree, so they
        get one constraint inferred from all their uses (found in the whole
        tree when the first of them is bound) and one table of outputs: a
        value computed for one use is never computed again for another.
        """
        memo: dict[str, SharedCall] = self.__dict__.setdefault("_shared_calls", {})
        key = self.call_key(call)
        entry = memo.get(key)
        if entry is None:
            uses = twins(call, self.call_key)
            hint, disagreed = combine_hints([infer_hint(c) for c in uses])
            entry = memo[key] = SharedCall(hint=hint, uses=len(uses))
            if len(uses) > 1:
                self.decided("share_identical", f"share_identical: {len(uses)} identical "
                             f"uses of {call.name} share one evaluation",
                             call=self.call_text(call), uses=len(uses))
            if disagreed:
                self.trace.append(TraceStep(
                    "warning", f"{call.name}: its {len(uses)} identical uses imply different "
                    "output types; no output constraint is inferred (give return_type=)",
                    ingredient=call.name))
        return entry

    # -- ingredient invocation ----------------------------------------------------------

    def invoke(self, ing: Ingredient, call: IngredientCall, inputs: list[Any],
               fn: Callable[[Any, list[str]], Any], n_values: int) -> Any:
        """Call ``fn(model, warnings)`` for one ingredient: meter, time, trace, wrap errors.

        ``warnings`` is a list the ingredient may append to (e.g. an answer that
        could not be parsed and became NULL); each entry becomes a trace step.
        """
        warnings: list[str] = []
        self.model.label = call.name
        model = self.model if ing.needs_model else None
        before = self.model.snapshot()
        nprompts = len(self.model.prompt_log)
        t0 = time.perf_counter()
        try:
            out = fn(model, warnings)
        except Exception as e:  # noqa: BLE001 - user code: report, never leak
            err = e if isinstance(e, BlendSQLError) else IngredientError(
                f"ingredient {call.name} failed: {type(e).__name__}: {e}",
                hint=f"the error came from {type(ing).__name__}.run while evaluating "
                f"{self.call_text(call)}",
            )
            self.trace.append(TraceStep(  # BlendSQLError.trace ends with what failed
                "error", f"{call.name}: {err.message}", seconds=time.perf_counter() - t0,
                ingredient=call.name, details={"call": self.call_text(call),
                                               "error": type(err).__name__}))
            if err is e:
                raise
            raise err from e
        seconds = time.perf_counter() - t0
        used: Counters = self.model.snapshot().minus(before)
        m = self.meta
        m.ingredient_calls += 1
        m.values_passed += n_values
        m.model_calls += used.model_calls
        m.cache_hits += used.cache_hits
        m.prompt_tokens += used.prompt_tokens
        m.completion_tokens += used.completion_tokens
        m.cached_tokens += used.cached_tokens
        outputs = out if isinstance(out, list) else [out]
        warnings.extend(lossy_notes(outputs))  # values SQLite cannot hold exactly
        self.trace.append(TraceStep(
            "ingredient", f"{call.name} ({ing.kind}) on {n_values} value(s)",
            seconds=seconds, ingredient=call.name, inputs=inputs,
            outputs=outputs if not isinstance(out, dict) else [out],
            prompts=self.model.prompt_log[nprompts:] or None,
            prompt_tokens=used.prompt_tokens, completion_tokens=used.completion_tokens,
            cached_tokens=used.cached_tokens, model_calls=used.model_calls,
            cache_hits=used.cache_hits, details={"call": self.call_text(call)},
        ))
        for w in warnings:
            self.trace.append(TraceStep("warning", f"{call.name}: {w}", ingredient=call.name))
        return out

    # -- per-kind computation ------------------------------------------------------------

    def readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        """The candidate query(ies) a map / join call would run now (for readiness).

        Argument errors are left for :meth:`compute` to report, so such a call
        counts as ready.
        """
        ing = self.registry.get(call.key_name)
        try:
            if isinstance(ing, MapIngredient):
                value = map_value(call, self.registry)
                return map_candidate(call, value) if value is not None else exp.select(
                    exp.Literal.number(1))
            if isinstance(ing, JoinIngredient):
                left, right, _ = join_sides(call)
                cands = [join_side_candidate(call, left), join_side_candidate(call, right)]
                return next((c for c in cands if c.find(IngredientCall) is not None), cands[0])
        except (BlendSQLError, IndexError, TypeError, KeyError):
            return exp.select(exp.Literal.number(1))
        return exp.select(exp.Literal.number(1))

    def compute(self, tree: exp.Expression, call: IngredientCall) -> exp.Expression:
        """Compute one ready call; return ``tree`` with it replaced by a lookup."""
        ing = self.registry.get(call.key_name)
        if isinstance(ing, MapIngredient):
            return self.compute_map(tree, ing, call)
        if isinstance(ing, QAIngredient):
            repl = self.compute_qa(ing, call)
        elif isinstance(ing, JoinIngredient):
            repl = self.compute_join(ing, call)
        else:
            raise IngredientError(
                f"{call.name} is a {getattr(ing, 'kind', 'unknown')} ingredient, which "
                "cannot be computed here",
                hint="map, qa and join ingredients run in queries; alias and string "
                "ingredients expand before planning")
        return replace_call(tree, call.call_id, repl)

    def map_runner(self, ing: MapIngredient, call: IngredientCall,
                   ) -> tuple[exp.Expression, Any, dict[str, Any], Callable[[list[Any]], list[Any]]]:
        """Bind a map call: (value node, question, engine kwargs, ``run_values``).

        Arguments are evaluated here, while the call is still in the tree (its
        scope resolves column references); ``run_values(values)`` runs the
        ingredient once on a batch and checks the outputs' length.
        """
        args = call.call_args
        try:
            qi, _ = ing.bind(args, call.call_kwargs)
            value_cols = ing.value_args(args, call.call_kwargs)
            value_node = map_value(call, self.registry)
            if value_node is None:
                raise IndexError(qi)
        except (IndexError, TypeError, KeyError) as e:
            raise IngredientError(f"{call.name} needs a value argument",
                                  hint=f"write {call.name}('question', table.column)") from e
        if len(value_cols) > 1:  # several columns: values are tuples (MapIngredient)
            kw_names = {"value_names": [to_blendsql(args[i]) for i in value_cols]}
        else:
            kw_names = {}
        question = self.evaluate(args[qi], call) if qi is not None and qi < len(args) else None
        kw = self.kwargs_of(call)
        engine_kw = pop_engine_kwargs(kw)  # prefilter= is for the engine, not run()
        shared = self.shared(call)
        constraint = self.constraint_for(call, kw, shared.hint)
        outputs = shared.outputs

        def run_batch(vals: list[Any]) -> list[Any]:
            given = [decode_tuple(v) for v in vals] if kw_names else list(vals)
            out = self.invoke(ing, call, given, lambda model, warns: ing.run(
                question, given, model=model, db=self.db, constraint=constraint,
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
                    ) -> exp.Expression:
        """Map: the candidate query's distinct values -> one run -> temp table lookup.

        In a positive filter (``WHERE {{M(x)}} = TRUE``) the lookup is a set
        membership test on an unindexed table; elsewhere an indexed probe.
        """
        pre = preaggregate(self, tree, ing, call)  # a GROUP BY key: one grouped scan
        if pre is not None:
            return pre
        value_node, question, engine_kw, run_values = self.map_runner(ing, call)
        # under LIMIT: stop once enough rows qualify (blendsql.plan.lazy); else all at once
        lazy = lazy_pairs(self, call, value_node, filter_atom(call), question, engine_kw,
                          run_values)
        if lazy is not None:
            values, outputs = lazy
        else:
            values = self.candidate_values(map_candidate(call, value_node),
                                           f"candidate values for {call.name}")
            outputs = run_values(values) if values else []
        stored = outputs_to_sqlite(outputs)
        atom = filter_atom(call)
        if (atom is not None and rule_on(self.options, "static_filter")
                and null_passes_statically(atom, call) is False):
            passing = passing_values(atom, call, values, stored)
            if passing is not None:  # decided in Python: store only the passing values
                self.decided("static_filter", f"static_filter: {call.name}'s condition "
                             f"decided in Python, {len(passing)} of {len(values)} value(s) "
                             "pass", call=self.call_text(call))
                table = self.temp_table("m", [(None, v) for v in passing], key=False)
                return replace_node(tree, atom, member_lookup(lookup_table(table), value_node))
        pairs = list(zip(values, stored, strict=True))
        if atom is not None:
            table = self.temp_table("m", pairs, index=False)
            null_passes = null_passes_statically(atom, call)
            if null_passes is None:
                _, r = self.sql(null_test(atom, call), f"does a NULL output pass for {call.name}")
                null_passes = bool(r and r[0][0])
            repl = filter_lookup(atom, call, table, value_node, null_passes)
            return replace_node(tree, atom, repl)
        return replace_call(tree, call.call_id, self.map_lookup_node(pairs, value_node))

    def compute_qa(self, ing: QAIngredient, call: IngredientCall) -> exp.Expression:
        """QA: evaluated once; scalar answer -> bound parameter, list -> temp table."""
        args = call.call_args
        kw = self.kwargs_of(call)
        question = self.evaluate(args[0], call) if args else kw.pop("question", None)
        context = kw.pop("context", None)
        if context is None and len(args) > 1:
            context = self.evaluate(args[1], call)
        if isinstance(context, list):
            context = pd.DataFrame({"value": context})
        hint = infer_hint(call)
        options = kw.pop("options", None)
        if options is not None and not isinstance(options, list):
            options = [options]
        shared = self.shared(call)
        if "answer" in shared.outputs:  # an identical call was answered already
            answer = shared.outputs["answer"]
        else:
            constraint = self.constraint_for(call, dict(kw, options=options), shared.hint)
            if options is None and isinstance(constraint, Choice):
                options = list(constraint.options)
            extra = {k: v for k, v in kw.items()}
            answer = self.invoke(ing, call, [question], lambda model, warns: ing.run(
                question, context, options, model=model, db=self.db, constraint=constraint,
                warnings=warns, **extra), 1)
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
            table = self.temp_table("q", [(None, to_sqlite(v)) for v in answer], key=False)
            return qa_list(table)
        name = f"__bsql_qa{self.run_id}_{next(self._n)}"
        self.params[name] = to_sqlite(answer)
        return qa_param(name)

    def compute_join(self, ing: JoinIngredient, call: IngredientCall) -> exp.Expression:
        """Join: each side's distinct values after its own filters -> mapping table."""
        left, right, question_node = join_sides(call)
        kw = self.kwargs_of(call)
        for k in ("left_on", "right_on"):
            kw.pop(k, None)
        question = kw.pop("question", None)
        if question is None and question_node is not None:
            question = self.evaluate(question_node, call)
        _, lrows = self.sql(join_side_candidate(call, left), f"left values for {call.name}")
        _, rrows = self.sql(join_side_candidate(call, right), f"right values for {call.name}")
        lv, rv = first_column(lrows), first_column(rrows)
        mapping: dict[Any, Any] = {}
        if lv and rv:
            out = self.invoke(ing, call, [lv, rv], lambda model, warns: ing.run(
                list(lv), list(rv), question=question, model=model, db=self.db,
                constraint=None, warnings=warns, **kw), len(lv) + len(rv))
            if not isinstance(out, Mapping):
                raise IngredientError(f"{call.name} returned {_describe(out)}",
                                      hint="a join ingredient's run() returns a dict "
                                      "{left_value: right_value}")
            mapping = dict(out)
        rows = [(to_sqlite(k), to_sqlite(v)) for k, v in mapping.items()
                if k is not None and v is not None]
        table = self.temp_table("j", rows)
        return join_lookup(table, left, right)


@dataclass
class SharedCall:
    """What identical calls of one query share: the combined hint and the outputs.

    ``outputs`` maps :func:`value_key` of each computed value to its output
    (a QA call's answer under the key ``None``).
    """

    hint: Hint
    uses: int
    outputs: dict[Any, Any] = field(default_factory=dict)


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


def _describe(out: Any) -> str:
    if isinstance(out, (list, tuple)):
        return f"a {type(out).__name__} of {len(out)} item(s)"
    return f"a {type(out).__name__}"


def _attach_ctes(q: exp.Select, scope: exp.Select) -> exp.Select:
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        q.set("with_", exp.With(expressions=ctes))
    return q


def render(tree: exp.Expression, copy: bool = True) -> str:
    """Plain SQLite text of an AST without ingredient calls.

    ``copy=False`` for trees built for this one statement (candidates, the
    final query): sqlglot's generator otherwise deep-copies the tree first.
    """
    return str(tree.sql(dialect="sqlite", copy=copy))


@dataclass
class Prepared(TreeMemo):
    """A macro-free tree after name checks and alias qualification (memoised)."""

    key: RegistryKey
    tree: exp.Expression


class RuleEnv:
    """What the planning rules may ask of a run (:class:`blendsql.plan.rules.RuleContext`)."""

    def __init__(self, run: Run, parse_expr: Callable[[str], exp.Expression]) -> None:
        self.run = run
        self.registry = run.registry
        self.options = run.options
        self.parse_expr = parse_expr

    def literal(self, node: exp.Expression) -> Any:
        return self.run.evaluate(node, IngredientCall(this=exp.to_identifier("arg")))

    def source_columns(self, scope: exp.Select, src: exp.Expression) -> set[str] | None:
        return source_columns(self.run, scope, src)

    def vocabulary(self, table: str, column: str) -> list[Any] | None:
        return vocabulary_of(self.run, table, column)

    def enum_classifier(self) -> Classifier:
        return enum_classifier(self.run)

    def decided(self, rule: str, summary: str, **details: Any) -> None:
        self.run.decided(rule, summary, **details)


def prepare(run: Run, given: exp.Expression, parse_expr: Callable[[str], exp.Expression],
            memo: bool = False) -> exp.Expression:
    """The ``prepare`` rules (:data:`blendsql.plan.rules.RULES`) applied to ``given``.

    With ``memo`` (a session-cached parse), memoised on ``given`` when it
    holds no alias / string call: then nothing was evaluated, and the result
    depends only on the tree and the registry (these rules cannot be switched off).
    """
    key = registry_key(run.registry)
    done = given.meta.get("bsql_prepared") if memo else None
    if isinstance(done, Prepared) and done.key == key:
        return done.tree
    tree = apply_stage("prepare", PlanState(given), RuleEnv(run, parse_expr)).tree
    if memo and not has_macros(given, run.registry):
        given.meta["bsql_prepared"] = Prepared(key, tree)
    return tree


def plan_tree(run: Run, given: exp.Expression, parse_expr: Callable[[str], exp.Expression],
              memo: bool = False) -> PlanState:
    """Every tree rule, in list order: ``prepare`` (memoised), then ``rewrite``.

    Shared by :func:`execute_tree` and the planner (``execute.explain``), so
    ``plan()`` sees the tree the engine will compute on.
    """
    tree = prepare(run, given, parse_expr, memo)
    return apply_stage("rewrite", PlanState(tree, memo=memo), RuleEnv(run, parse_expr))


def source_columns(run: Run, scope: exp.Select, src: exp.Expression) -> set[str] | None:
    """Lower-case column names of a FROM source (None when they cannot be known).

    A CTE or derived table is read from its SELECT list (or its column
    list); a base table is asked of the database once per run
    (``SELECT * ... LIMIT 0`` reads no row).
    """
    alias = src.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return {c.name.lower() for c in alias.columns}
    if isinstance(src, exp.Subquery):
        return projection_names(src.this)
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
        return None
    cte = next((c for c in reversed(visible_ctes(scope))
                if c.alias_or_name.lower() == src.name.lower()), None)
    if cte is not None and not src.db:
        cols = cte.args.get("alias")
        if isinstance(cols, exp.TableAlias) and cols.columns:
            return {c.name.lower() for c in cols.columns}
        return projection_names(cte.this)
    cache: dict[str, set[str] | None] = run.__dict__.setdefault("_source_columns", {})
    table = exp.Table(this=src.this.copy(), db=src.args["db"].copy() if src.db else None)
    text = table.sql(dialect="sqlite")
    if text not in cache:
        try:
            cols = run.sql(f"SELECT * FROM {text} LIMIT 0", f"column names of {text}",
                           kind="plan")[0]
            cache[text] = {str(c).lower() for c in cols}
        except BlendSQLError:
            cache[text] = None
    return cache[text]


def execute_tree(run: Run, tree: exp.Expression, parse_expr: Callable[[str], exp.Expression],
                 memo: bool = False) -> pd.DataFrame:
    """Plan and run an AST; the caller owns cleanup of ``run``'s temp tables.

    ``memo``: ``tree`` is a session-cached parse that nobody changes, so
    planning work may be memoised on it (``blendsql.plan.memo``).
    """
    t0 = time.perf_counter()
    given = tree
    run.note_rules_off()
    state = plan_tree(run, tree, parse_expr, memo)
    tree = state.tree
    late, late_plan = bind_late_maps(run, state)
    calls = find_calls(tree)
    run.trace.append(TraceStep("plan", f"{len(calls)} ingredient call(s) to compute",
                               seconds=time.perf_counter() - t0,
                               details={"calls": [run.call_text(c) for c in calls]}))
    ready: set[int] = set()  # calls found ready once stay ready (see next_call)
    while calls:
        call = next_call(tree, run.registry, run.readiness_candidate,
                         cost=run.ordering_cost(), known_ready=ready)
        if call is None:
            raise ExecutionError("could not order the ingredient calls of this query",
                                 hint="an ingredient argument may refer to an outer query; "
                                 "rewrite it without the correlation")
        run.trace_order(call)
        tree = run.compute(tree, call)
        calls = find_calls(tree)
    if late_plan is not None and tree is late_plan.projected:  # nothing else was computed
        late_plan.sql = late_plan.sql or render(tree)
        cols, rows = run.sql(late_plan.sql, "final query")
    else:
        cols, rows = run.sql(render(tree, copy=tree is given), "final query")
    rows = apply_late_maps(late, rows)
    return rows_to_frame(cols, rows)


def to_smoothie(run: Run, df: pd.DataFrame, query: str, started: float) -> Smoothie:
    """Package the result with counters and trace."""
    run.meta.seconds = time.perf_counter() - started
    return Smoothie(df=df, meta=run.meta, trace=run.trace, query=query)
