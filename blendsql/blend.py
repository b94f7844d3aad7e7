"""``BlendSQL``: the public entry point that runs BlendSQL queries.

Why a session object: it owns the guarded database connection, the
ingredient registry and the (lazily loaded) model, so one ``execute`` call
needs nothing from globals, and the default local model is only loaded
when an ingredient actually needs a model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlglot import exp

from blendsql.budget import Budget, Prices, prices_of
from blendsql.cancel import INTERRUPTED, CancelToken
from blendsql.cancel import current as current_token
from blendsql.cancel import scope as cancel_scope
from blendsql.db.backend import DEFAULT_TIMEOUT, Backend, open_database
from blendsql.db.frames import rows_to_frame
from blendsql.errors import (
    BlendSQLError,
    ExecutionError,
    ModelError,
    OptionError,
    ParseError,
    QueryTimeoutError,
    TooManyRowsError,
    UnsafeQueryError,
)
from blendsql.execute.engine import Run, bind_params, plan_query, run_plan, to_smoothie
from blendsql.execute.metering import MeteredModel
from blendsql.grammar.nodes import IngredientCall
from blendsql.grammar.parser import READ_DIALECT, check_query_size, check_query_type, parse
from blendsql.ingredients.base import Ingredient, IngredientRegistry
from blendsql.ingredients.builtin import BUILTINS
from blendsql.models.base import Model
from blendsql.models.cache import with_cache
from blendsql.models.guard import guarded
from blendsql.models.providers import DEFAULT_PROVIDER, get_provider
from blendsql.options import DEFAULT_MAX_QUERY_CHARS, Options
from blendsql.plan.rules import RunRules, enum_match, rule_of, rule_on, rules_for
from blendsql.plan.steps import Plan
from blendsql.smoothie import Smoothie, TraceStep

PARSE_CACHE_SIZE = 256

ENUM_MATCH = rule_of(enum_match)  # read at two places: a plain query, plan notes


def _check_dialect(dialect: str | None) -> str | None:
    """``dialect=``: a sqlglot dialect name the user writes queries in (None: SQLite's)."""
    if dialect is None or dialect == "sqlite":
        return None
    import sqlglot

    try:
        sqlglot.Dialect.get_or_raise(dialect)
    except ValueError:
        raise OptionError(f"unknown SQL dialect {dialect!r}",
                          hint="use a sqlglot dialect name: 'duckdb', 'postgres', "
                          "'sqlite', ...") from None
    return dialect


def _check_query(query: object, options: Mapping[str, Any]) -> None:
    """Input checks before any work: a query is text (or a parsed sqlglot
    Expression) no longer than the ``max_query_chars`` option.

    Why here and not only in the parser: a wrong type would otherwise surface
    as an AttributeError, and a huge text would cost minutes of parsing before
    failing.
    """
    if isinstance(query, exp.Expression):
        return
    limit = options.get("max_query_chars", DEFAULT_MAX_QUERY_CHARS)
    if isinstance(query, str) and (limit is None or len(query) <= limit):
        return  # text within the limit: nothing to refuse
    check_query_type(query)
    check_query_size(str(query), limit)


# exceptions that can only mean a bug in blendsql when they escape the engine
_INTERNAL = (KeyError, IndexError, TypeError, ValueError, AttributeError, AssertionError,
             RecursionError)


def internal_error(doing: str, e: BaseException) -> ExecutionError:
    """A bug's exception as a blendsql error (one error hierarchy, even for our bugs)."""
    return ExecutionError(f"internal error while {doing} the query: {type(e).__name__}: {e}",
                          hint="this is a bug in blendsql; please report the query")


class BlendSQL:
    """Run BlendSQL over a SQLite, DuckDB or PostgreSQL database.

    ``db``: a SQLite path (opened read-only), an open ``sqlite3.Connection``
    or a dict of DataFrames (an in-memory SQLite); a ``.duckdb`` path or a
    DuckDB connection; a Parquet / CSV path, a pandas / polars DataFrame
    (table ``df``) or a dict with Parquet / CSV / polars values (an in-memory
    DuckDB); a ``postgresql://`` URL or a psycopg connection (see
    :func:`blendsql.db.backend.open_database`). Queries are written in
    BlendSQL's SQLite-flavoured SQL on every backend; ``dialect=`` (a sqlglot
    dialect name, e.g. ``"duckdb"``) lets them be written in that SQL instead. ``model``: a :class:`blendsql.models.Model`, a GGUF
    path, or ``None`` for the embedded default (loaded lazily).
    ``ingredients``: classes or instances added to (or overriding) the
    built-ins. ``cache``: wrap the model in the persistent cache
    (``blendsql.models.cache``; True = default file, a path = that file).
    ``progress``: called as ``progress(ingredient, done, total)`` while model
    requests finish. Other keyword options (``lazy=``, ``timeout=``,
    ``max_query_chars=`` ...; see :mod:`blendsql.options`) are validated and
    kept in ``self.options``; an unknown name or a wrong type raises
    :class:`blendsql.errors.OptionError` with a did-you-mean hint.
    """

    def __init__(self, db: Any, model: Model | str | None = None,
                 ingredients: Iterable[type[Ingredient] | Ingredient] = (), *,
                 allow_writes: bool = False, cache: bool | str = True,
                 progress: Callable[[str, int, int], None] | None = None,
                 dialect: str | None = None,
                 **options: Any) -> None:
        # checked before the database is opened: a typo leaves nothing behind
        self.options = Options(options)
        self.dialect = _check_dialect(dialect)
        self.db: Backend = open_database(db, allow_writes=allow_writes)
        self.registry = IngredientRegistry(BUILTINS)
        for item in ingredients:
            self.registry.add(item)
        self.cache: bool | str = cache
        self.progress = progress  # progress(ingredient, done, total), e.g. the CLI's bar
        self._model_arg = model
        self._model: Model | None = (guarded(self.db.distribute(model))
                                     if isinstance(model, Model) and not cache else None)
        self._parse_cache: dict[tuple[str, tuple[tuple[str, int], ...]], exp.Expression] = {}
        # the rules in effect for the options last seen (resolved again when they differ)
        self._rules_seen: tuple[dict[str, Any], RunRules] | None = None

    # -- model ------------------------------------------------------------------------

    @property
    def model(self) -> Model:
        """The session model, created on first access (the embedded one by default)."""
        if self._model is None:
            # on Spark, batches are answered on the executors under the cache
            self._model = guarded(with_cache(self.db.distribute(self._load_model()), self.cache))
        return self._model

    def _load_model(self) -> Model:
        arg = self._model_arg
        if isinstance(arg, Model):
            return arg
        if arg is not None and not isinstance(arg, str):
            raise ModelError(f"cannot use {type(arg).__name__} as a model",
                             hint="pass a blendsql.models.Model, a GGUF path, or None")
        try:
            return get_provider(DEFAULT_PROVIDER).create(path=arg)
        except BlendSQLError:
            raise
        except Exception as e:  # noqa: BLE001 - backend import / load failures
            raise ModelError(f"could not load the model: {type(e).__name__}: {e}",
                             hint="pass model= explicitly, e.g. a blendsql.models.OpenAI "
                             "or a GGUF path") from e

    # -- running -----------------------------------------------------------------------

    def parse(self, query: str) -> exp.Expression:
        """The query's AST (with ingredient calls) under this session's registry.

        A copy of the session's cached parse: the caller may change it freely.
        """
        _check_query(query, self.options)
        return self._parse_cached(query).copy()

    def _parse_cached(self, query: str) -> exp.Expression:
        """Parses cached per (text, registered names). Planning rules never mutate
        their input, so a cached tree is reused as is (and carries memoised plans,
        see ``blendsql.plan.memo``); it is never handed to users."""
        key = (query, self.registry.identity)  # the registered (name, ingredient id) pairs
        tree = self._parse_cache.get(key)
        if tree is None:
            # the size limit is the session's max_query_chars, checked by the callers
            token = READ_DIALECT.set(self.dialect or "sqlite")
            try:
                tree = parse(query, self.registry, max_chars=None)
            finally:
                READ_DIALECT.reset(token)
            if len(self._parse_cache) >= PARSE_CACHE_SIZE:
                self._parse_cache.pop(next(iter(self._parse_cache)))
            self._parse_cache[key] = tree
        return tree

    def _rules(self, options: dict[str, Any]) -> RunRules:
        """The rules in effect under ``options``, resolved once while the options a query
        runs with stay the same (a session's queries mostly share theirs)."""
        seen = self._rules_seen
        if seen is None or seen[0] != options:
            seen = self._rules_seen = (dict(options), rules_for(options))
        return seen[1]

    def execute(self, query: str | exp.Expression,
                params: Sequence[Any] | Mapping[str, Any] | None = None,
                **options: Any) -> Smoothie:
        """Run one BlendSQL query; return its Smoothie (rows, meta, trace).

        ``options`` override the session's for this query only (``lazy=False``,
        ``cost_order=False``, ``prefilter=True``, ``enum_match=True``; see
        :mod:`blendsql.options`); unknown or mistyped ones raise ``OptionError``.
        A query that is not text, is empty, holds several statements or is
        longer than ``max_query_chars`` raises a ``ParseError`` before any work.
        """
        started = time.perf_counter()
        run_options = self.options.merged(options, "execute()") if options else dict(self.options)
        _check_query(query, run_options)
        rules = self._rules(run_options)
        # a timeout the user set limits the whole query: past it no model request starts,
        # those in flight are abandoned (blendsql.cancel); an enclosing token (the web
        # page's request) stops it too
        token = CancelToken(run_options.get("timeout"), parent=current_token())
        with cancel_scope(token):
            run = Run(self.db, self.registry, MeteredModel(lambda: self.model, self.progress),
                      bind_params(params), run_options, rules, token)
            run.model.budget = run_options.get("budget")  # enforced around every request batch
            run.model.request_timeout = run_options.get("model_timeout")  # None: each backend's
            # one thread at a time; every statement under the time limit; a borrowed
            # connection is guarded only inside and given back as it came
            # every statement traced into run.trace; the executors option for Spark's calls
            with self.db.session(timeout=run.options.get("timeout", DEFAULT_TIMEOUT),
                                 tracer=run.statements,
                                 executors=run.options.get("executors") or "auto"):
                try:
                    return self._run(run, query, params, started)
                except BaseException as e:
                    err = self._stopped(run, token, e)
                    if err is e:
                        raise
                    raise err from e

    def run(self, plan: Plan) -> Smoothie:
        """Run a :class:`~blendsql.plan.steps.Plan` as it is (``execute(q)`` is
        ``run(plan(q))``): its steps in its order, each as it says, with the params and
        options it was made with. A budget is checked against the plan's estimate first.
        The Smoothie's ``plan`` is ``plan``, each step now with its actual figures.
        """
        if not isinstance(plan, Plan):
            raise ExecutionError(f"run() takes a Plan, not {type(plan).__name__}",
                                 hint="make one with BlendSQL.plan(query), or call "
                                 "execute(query)")
        started = time.perf_counter()
        run_options = dict(plan.options)
        token = CancelToken(run_options.get("timeout"), parent=current_token())
        with cancel_scope(token):  # as execute's
            run = Run(self.db, self.registry, MeteredModel(lambda: self.model, self.progress),
                      dict(plan.params), run_options, self._rules(run_options), token)
            run.model.budget = run_options.get("budget")
            run.model.request_timeout = run_options.get("model_timeout")
            with self.db.session(timeout=run.options.get("timeout", DEFAULT_TIMEOUT),
                                 tracer=run.statements,
                                 executors=run.options.get("executors") or "auto"):
                try:
                    return self._run_plan(run, plan, started)
                except BaseException as e:
                    err = self._stopped(run, token, e)
                    if err is e:
                        raise
                    raise err from e

    @staticmethod
    def _stopped(run: Run, token: CancelToken, e: BaseException) -> BaseException:
        """What a failed query raises: ``e``, or, when its work was stopped (time-out,
        cancellation, Ctrl-C), the token's error with a ``cancelled`` trace step saying
        what was stopped. Ctrl-C stays a ``KeyboardInterrupt``; the token is cancelled
        first, so no request of the query starts after it."""
        if isinstance(e, KeyboardInterrupt):
            token.cancel(INTERRUPTED)
            return e
        if token.reason is None:
            return e
        step = TraceStep("cancelled", f"work stopped ({token.reason}){token.summary()}",
                         seconds=time.monotonic() - token.started, details=token.details())
        err = token.final(e)
        if isinstance(err, BlendSQLError):
            err.trace = [*(e.trace if isinstance(e, BlendSQLError) and e.trace is not None
                           else run.trace), step]
        return err

    def _run(self, run: Run, query: str | exp.Expression, params: Any,
             started: float) -> Smoothie:
        """``execute``'s body, inside the session: temp objects cleaned up on any exit."""
        text = query if isinstance(query, str) else query.sql(dialect="sqlite")
        try:
            t0 = time.perf_counter()
            try:
                tree = self._parse_cached(query) if isinstance(query, str) else query
            except ParseError as pe:
                if (not isinstance(query, str) or "{{" in query or "<<" in query
                        or pe.code != "syntax"):  # empty / several statements: never SQLite's
                    raise
                return to_smoothie(run, self._plain_fallback(run, query, params, pe), text,
                                   started)
            run.trace.append(TraceStep("parse", "parsed query",
                                       seconds=time.perf_counter() - t0))
            if (isinstance(query, str) and not _has_calls(tree)
                    and not rule_on(run.options, ENUM_MATCH)):
                df = self._plain(run, query, params)
                return to_smoothie(run, df, text, started)
            start = len(run.trace)
            plan = self._walk(run, tree, text, memo=isinstance(query, str),
                              estimate=self._priced(run))
            if plan.estimated:  # priced for a budget: the estimates' statements are the plan's
                for step in run.trace[start:]:
                    step.kind = "plan" if step.kind == "sql" else step.kind
                self._check_budget(run, plan)
            df = run_plan(run, plan, owned=True)
            return to_smoothie(run, df, text, started, plan)
        except BlendSQLError as e:
            if e.trace is None:
                e.trace = list(run.trace)  # what ran before the failure, for explaining it
            raise
        except _INTERNAL as e:
            raise internal_error("running", e) from e
        finally:
            run.cleanup()

    def _run_plan(self, run: Run, plan: Plan, started: float) -> Smoothie:
        """``run``'s body, inside the session: temp objects cleaned up on any exit."""
        try:
            self._check_budget(run, plan)
            df = run_plan(run, plan)
            return to_smoothie(run, df, plan.query, started, plan)
        except BlendSQLError as e:
            if e.trace is None:
                e.trace = list(run.trace)
            raise
        except _INTERNAL as e:
            raise internal_error("running", e) from e
        finally:
            run.cleanup()

    # -- plans and budgets -------------------------------------------------------------

    def plan(self, query: str | exp.Expression,
             params: Sequence[Any] | Mapping[str, Any] | None = None,
             **options: Any) -> Plan:
        """The query's plan: ordered typed steps with SQL and estimates, no model called.

        Runs the query's plain candidate queries on the database to count the
        values each ingredient call would receive (see
        :mod:`blendsql.execute.estimate`). ``str(plan)`` prints it; in Jupyter
        it renders as a table; :meth:`run` runs it as it is. Options as for
        :meth:`execute`.
        """
        run_options = self.options.merged(options, "plan()")
        _check_query(query, run_options)
        run = Run(self.db, self.registry, MeteredModel(lambda: self.model), bind_params(params),
                  run_options)
        with self.db.session(timeout=run.options.get("timeout", DEFAULT_TIMEOUT),
                             tracer=run.statements,
                             executors=run.options.get("executors") or "auto"):
            try:
                text = query if isinstance(query, str) else query.sql(dialect="sqlite")
                tree = self._parse_cached(query) if isinstance(query, str) else query
                plan = self._walk(run, tree, text, memo=isinstance(query, str), estimate=True)
                plan.trace = run.trace
                return plan
            finally:
                run.cleanup()

    def _walk(self, run: Run, tree: exp.Expression, text: str, memo: bool,
              estimate: bool) -> Plan:
        """The one walk that makes a query's plan (``execute.walk.plan_query``)."""
        try:
            plan = plan_query(run, tree, self._parse_expr, text, memo=memo, estimate=estimate,
                              prices=self._declared_prices() if estimate else None)
        except BlendSQLError:
            raise
        except _INTERNAL as e:
            raise internal_error("planning", e) from e
        if estimate and rule_on(run.options, ENUM_MATCH):
            plan.notes.append("enum_match may rewrite literals (and call the model) before "
                              "these steps; not estimated")
        return plan

    def _declared_prices(self) -> Prices | None:
        """Prices of the session model when it is given (never loads one)."""
        model = self._model if self._model is not None else self._model_arg
        return prices_of(model) if isinstance(model, Model) else None

    @staticmethod
    def _priced(run: Run) -> bool:
        """Whether the run has a budget of model calls to check its plan against."""
        budget: Budget | None = run.options.get("budget")
        return budget is not None and budget.model_calls is not None

    def _check_budget(self, run: Run, plan: Plan) -> None:
        """Before the first model call: refuse a plan whose estimate exceeds the budget.

        The plan priced is the plan that runs. Model calls are checked against its
        lower bound (what the query certainly costs); prompt tokens and dollars are
        rough estimates here and are enforced exactly before each request batch
        instead (``MeteredModel``).
        """
        if not self._priced(run) or not plan.estimated:
            return
        budget: Budget = run.options["budget"]
        total = plan.total
        run.trace.append(TraceStep("plan", f"budget check ({budget.describe()}): "
                                   f"{total.describe()}", details={"plan": str(plan)}))
        dollars = total.dollars.low if total.dollars is not None else None
        budget.check_estimate(int(total.model_calls.low), int(total.prompt_tokens.low), dollars,
                              str(plan))

    def _plain(self, run: Run, query: str, params: Any) -> Any:
        """A query without ingredients runs as written, with the user's params."""
        if self.dialect is not None:  # the backend reads BlendSQL's (SQLite's) SQL
            query = self._parse_cached(query).sql(dialect="sqlite")
        with run.labelled("sql", "query (no ingredients)"):  # traced by the database
            cols, rows = self.db.execute(query, params)
        return rows_to_frame(cols, rows)

    def _plain_fallback(self, run: Run, query: str, params: Any, err: ParseError) -> Any:
        """Plain SQL our parser does not know (e.g. ALTER): SQLite is the authority.

        The statement still goes through the write guard; if SQLite rejects it
        as well, the parser's error (with its caret) is the more helpful one.
        """
        try:
            return self._plain(run, query, params)
        except (UnsafeQueryError, QueryTimeoutError, TooManyRowsError):
            raise  # SQLite understood it: its refusal / limit is the answer
        except ExecutionError:
            raise err from None

    def _parse_expr(self, text: str) -> exp.Expression:
        """One BlendSQL expression (what alias / string ingredients return)."""
        tree = self._parse_cached(f"SELECT {text}")
        if not isinstance(tree, exp.Select) or len(tree.expressions) != 1:
            raise ExecutionError(f"expected one expression, got: {text}",
                                 hint="an alias or string ingredient must return one "
                                 "SQL expression")
        return tree.expressions[0]

    def ask(self, question: str, **kwargs: Any) -> Any:
        """Answer a plain-language question: write a BlendSQL program, run it, and
        fall back to end-to-end QA when it fails or finds nothing.

        Returns a :class:`blendsql.nl.ask.Answer` (``answer``, ``program``,
        ``smoothie``, ``fallback_used``, ``prompt_tokens``, ``trace``). Keyword
        arguments go to :func:`blendsql.nl.ask.ask` (``parser=``, ``fallback=``,
        ``history=``). Works on every backend: the layer reads the schema and
        values through it, as one use of the session under its time limit, and
        every statement it runs is in ``answer.trace``.
        """
        from blendsql.nl.ask import ask

        return ask(self, question, **kwargs)

    def close(self) -> None:
        """Close the database connection if this session opened it."""
        self.db.close()

    def __enter__(self) -> BlendSQL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


HAS_CALLS_META = "bsql_has_calls"  # memoised on a session-cached parse (nobody changes it)


def _has_calls(tree: exp.Expression) -> bool:
    """Whether a session-cached parse holds an ingredient call (looked for once per parse)."""
    known = tree.meta.get(HAS_CALLS_META)
    if known is None:
        known = tree.meta[HAS_CALLS_META] = tree.find(IngredientCall) is not None
    return bool(known)
