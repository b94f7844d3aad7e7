"""A run's session (the database, its statements, temporary objects and their cleanup) and
its decisions (which rule is applied, and what it decided, as trace steps).

Why its own module: everything that touches the connection for one
``execute`` (the one traced statement path, candidate-value collection,
temp tables, lookup functions, cleanup) is here, below the evaluator and
the step runners, and imports nothing back from them.
"""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from blendsql.cancel import CancelToken
from blendsql.db.backend import INGREDIENT_VALUE_HINT, Backend
from blendsql.db.trace import StatementTrace
from blendsql.errors import ExecutionError
from blendsql.execute.collect import (
    Collector,
    collectable,
    distinct_values,
    json_text,
    json_values,
    one_table_column,
    sized_json_text,
    without_distinct,
)
from blendsql.execute.metering import MeteredModel
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.gguf import load_count
from blendsql.plan.lookup import map_lookup
from blendsql.plan.render import SQLITE
from blendsql.plan.rules import Rule
from blendsql.plan.state import RunState
from blendsql.plan.values import first_column
from blendsql.smoothie import Meta, TraceStep

_RUN_IDS = itertools.count()
_PARAM_NAME = re.compile(r":([A-Za-z_]\w*)")  # a named parameter in a statement's text
KEY_META = "bsql_key"  # a call's memoised call_key, kept on the node (and its copies)


def decision_step(rule_name: str, summary: str, outcome: str,
                  details: dict[str, Any]) -> TraceStep:
    """The ``plan`` trace step of a rule's decision: ``details["rule"]`` is the rule's name,
    ``<name>_<outcome>`` when an outcome is given."""
    rule = f"{rule_name}_{outcome}" if outcome else rule_name
    return TraceStep("plan", summary, details={"rule": rule, **details})


@dataclass(eq=False)
class Decisions:
    """The rule being applied (``state.rule_name``), and its decisions as ``plan`` trace steps."""

    trace: list[TraceStep]
    state: RunState  # ``state.rule_name``: the rule being applied

    @contextmanager
    def applying(self, rule: Rule) -> Iterator[None]:
        """Decisions made inside are ``rule``'s (:meth:`decided`)."""
        state = self.state
        saved, state.rule_name = state.rule_name, rule.name
        try:
            yield
        finally:
            state.rule_name = saved

    def decided(self, summary: str, outcome: str = "", **details: Any) -> None:
        """The applied rule's decision as a ``plan`` trace step (``details["rule"]``:
        its name, ``<name>_<outcome>`` when an outcome is given).

        Why: rules that need runtime information (candidate counts, a row
        sample, a LIMIT scan's progress) decide inside the executor; the
        trace says which rule decided what, and on what condition.
        """
        self.trace.append(decision_step(self.state.rule_name, summary, outcome, details))

    def note_rules_off(self, rules_off: tuple[str, ...] | list[str]) -> None:
        """One trace step naming the rules switched off for this run (when any)."""
        off = list(rules_off)
        if off:
            self.trace.append(TraceStep("plan", "rules switched off: " + ", ".join(off),
                                        details={"rules_off": off}))


class Session:
    """The database side of one ``execute`` call: params, statements, temp objects, trace."""

    def __init__(self, db: Backend, registry: IngredientRegistry, model: MeteredModel,
                 params: dict[str, Any], options: dict[str, Any], state: RunState,
                 cancel: CancelToken | None = None) -> None:
        self.db = db
        self.registry = registry
        self.model = model
        self.params = params
        self.options = options
        self.state = state
        self.cancel = cancel  # the query's token (its deadline and cancellation), when any
        self.meta = Meta()
        self.trace: list[TraceStep] = []
        # only objects this run created itself: cleanup never drops anything else
        self.temp_tables: list[str] = []
        self.functions: list[str] = []  # lookup functions bound on the connection
        # unguessable: engine names and parameters can never meet a user's
        self.run_id = f"{secrets.token_hex(4)}_{next(_RUN_IDS)}"
        self.names = itertools.count()  # numbers this run's bound parameters
        self._texts: dict[int, str] = {}
        self.load_mark = load_count()  # GGUF loads before this mark are not this run's
        self.bound_limit = db.bound_params_limit()  # parameters one statement may bind
        self.no_rows = False  # the last candidate_values query had no row (when known)
        # every statement the database runs for this run, recorded by the database itself
        # into ``trace`` (kind and summary from ``labelled``; see blendsql.db.trace)
        self.statements = StatementTrace(self.trace)

    @contextmanager
    def labelled(self, kind: str, summary: str) -> Iterator[None]:
        """Statements run inside get this trace kind and summary.

        Why every statement is traced: a cost scan or a schema probe costs time
        too, and a trace that shows only some statements hides where it went.
        The database records each one itself into ``self.trace`` through
        ``self.statements`` (the hook ``BlendSQL.execute`` installs for the run;
        see :class:`blendsql.db.trace.StatementTrace`): unlabelled statements are
        the engine's temp objects (``temp_table``) or someone else's reads (an
        ingredient's, ``sql``); the cleanup's are listed in the last step's
        ``details["cleanup"]``, so the trace still ends with the final query.
        """
        statements = self.statements
        saved, statements.label = statements.label, (kind, summary)
        try:
            yield
        finally:
            statements.label = saved

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

    def sql(self, tree: exp.Expression | str, summary: str, *, kind: str = "sql",
            params: Mapping[str, Any] | None = None, copy: bool = True,
            ) -> tuple[list[str], list[tuple]]:
        """Run one statement with the session's bindings (or ``params``), traced.

        ``kind``: ``sql`` for the query's own work, ``plan`` for probes made
        to plan it (costs, column names, samples); ``copy=False``: ``tree`` is the
        run's own (``plan.render.render``'s ``copy``).
        """
        text = tree if isinstance(tree, str) else str(SQLITE.generate(tree, copy=copy))
        binds = params if params is not None else self.bindings(text) if ":" in text else {}
        statements = self.statements  # labelled(kind, summary), without a context manager
        saved, statements.label = statements.label, (kind, summary)
        try:
            return self.db.execute(text, binds, origin=self.param_origin)
        except ExecutionError as e:
            raise self._lookup_error(e, text) from None
        finally:
            statements.label = saved

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
        """Distinct non-NULL values of a candidate query (see ``execute.collect``).

        ``self.no_rows`` tells afterwards whether the query is known to have had
        no row at all (not only no non-NULL value): the one-table JSON
        collection shows it (``[]``).
        """
        self.no_rows = False
        if not collectable(cand):
            return first_column(self.sql(cand, summary, copy=False)[1])
        assert isinstance(cand, exp.Select)
        # collectable already: only the shape of json_candidate's statement left to check
        as_json = (json_text(cand) if self.db.json_collect and one_table_column(cand)
                   else None)
        unsized = self.state.json_unsized
        src = cand.args["from_"].this
        if as_json is not None and (src.db, src.name) not in unsized:
            try:
                _, rows = self.sql(sized_json_text(cand, as_json), summary)
            except ExecutionError as e:
                values = None  # a BLOB in the column, no rowid: collect row by row below
                if "rowid" in e.message or "sqlite_master" in e.message:  # the table's fault
                    unsized.add((src.db, src.name))
            else:
                text = rows[0][0]
                if text is None:  # not a table of at most JSON_MAX_ROWS rows
                    unsized.add((src.db, src.name))
                self.no_rows = text == "[]"
                values = json_values(text) if text is not None else None  # None: a REAL
            if values is not None:
                self.trace[-1].rows_out = len(values)
                return values
        if self.db.dialect != "sqlite":  # typed backends: their own DISTINCT (no collations)
            values = distinct_values(self.sql(cand, summary, copy=False)[1])
        elif not self.db.capabilities.collectors or (conn := self.db.functions_conn) is None:
            # a borrowed connection: no functions, the rows deduplicated here
            values = distinct_values(self.sql(without_distinct(cand), summary)[1])
        else:
            with Collector(conn) as col:
                self.sql(col.rewrite(cand), summary, copy=False)
                values = col.values()
        self.trace[-1].rows_out = len(values)
        return values

    def bindings(self, text: str) -> dict[str, Any]:
        """Only the named parameters the statement uses (sqlite rejects none extra, but
        a missing one must be reported clearly)."""
        if ":" not in text:
            return {}
        params = self.params
        return {k: params[k] for k in set(_PARAM_NAME.findall(text)) if k in params}

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
        cols = ["k", "v"] if key else ["v"]
        data = rows if key else [(r[1],) for r in rows]
        name = self.db.temp_name(kind)
        start = len(self.trace)
        statements = self.statements  # labelled("temp_table", ...), without a context manager
        saved, statements.label = statements.label, ("temp_table", f"temp.{name}")
        try:
            self.db.create_temp_table(name, cols, data,
                                      primary_key="k" if key and index else None)
        finally:
            statements.label = saved
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
        t0 = time.perf_counter()
        name = self.db.bind_function(dict(pairs).get) if self.db.capabilities.functions else None
        if name is None:  # a borrowed connection gets no functions: a temp table
            return map_lookup(self.temp_table("m", pairs), value)
        self.functions.append(name)
        self.trace.append(TraceStep("temp_table", f"lookup function {name} over "
                                    f"{len(pairs)} value(s)", rows_out=len(pairs),
                                    seconds=time.perf_counter() - t0))
        return exp.Anonymous(this=name, expressions=[value.copy()])

    def cleanup(self) -> None:
        """Drop every temp table and lookup function of this run (also after errors)."""
        self.statements.cleaning = True
        try:
            for name in self.temp_tables:
                self.db.drop_temp_table(name)
        finally:
            self.statements.cleaning = False
        self.temp_tables.clear()
        for name in self.functions:
            self.db.release_function(name)  # the name is reused: the count stays constant
        self.functions.clear()
