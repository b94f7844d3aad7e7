"""What every backend shares (SQLite, DuckDB, PostgreSQL): the session, the traced
path, the limits.

Why a shared base: the session guarantees (one thread at a time, a time
limit on every statement, a row limit, a query after a timed-out statement
refused, every statement traced, errors as ``blendsql.errors``) are the
same whatever the driver; only running one statement, storing rows in a
temp table and telling the user's statements from the engine's differ.
A backend supplies those through the hooks below (``_driver_run``,
``_interrupter``, ``_driver_error``, ``_store``; optionally
``_begin_use`` / ``_end_use``, ``_statement_starts`` / ``_statement_ends``,
``_bind_error``, ``_check_user_statement``, ``_translate``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import secrets
import threading
import time
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from blendsql.cancel import current as current_token
from blendsql.db.backend import (  # noqa: F401 - defaults and helpers re-exported here
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    Backend,
    ParamOrigin,
    StatementHook,
    engine_value,
    quote,
    short,
    user_param,
)
from blendsql.db.executors import EXECUTOR_MODE
from blendsql.db.statements import (
    EXECUTOR_JOB,
    PLAIN_READ_STARTS,
    TRANSACTION_KEYWORDS,
    leading_keyword,
)
from blendsql.db.transpile import Transpiler
from blendsql.db.watchdog import WATCHDOG
from blendsql.errors import (
    BlendSQLError,
    ExecutionError,
    QueryTimeoutError,
    SessionBusyError,
    TooManyRowsError,
    UnsafeQueryError,
)

_CHUNK = 65536
#: time limit (seconds) of one statement dropping an engine temp object (see
#: :meth:`GuardedBackend.drop_temp_table`), whatever the session's ``timeout``
CLEANUP_TIMEOUT = 10.0


class GuardedBackend(Backend):
    """Session lock, time limits, row limits and tracing around a driver's ``execute``."""

    #: the tail of the hint of :meth:`refused`: what ``allow_writes=True`` still refuses
    still_refused = "temp objects and transaction control"
    #: False: temp tables get untyped columns (``_store`` receives '' for each type)
    typed_temp_columns = True
    #: the time limit of each cleanup statement (see :meth:`drop_temp_table`)
    cleanup_timeout: float = CLEANUP_TIMEOUT
    #: False: BlendSQL's SQL is the driver's; statements run as written (no :meth:`_translate`)
    translates = True
    #: whether the class has a :meth:`_check_user_statement` of its own (set per class)
    _checks_user_statements = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Decided once per class, not per statement: is there a user check to call."""
        super().__init_subclass__(**kwargs)
        cls._checks_user_statements = (
            cls._check_user_statement is not GuardedBackend._check_user_statement)

    def __init__(self, *, allow_writes: bool, dialect: str,
                 transpiler: Transpiler | None = None) -> None:
        self.allow_writes = allow_writes
        self.dialect = dialect
        # None: sqlglot's own translation to ``dialect`` (a backend may override _translate)
        self.transpile = transpiler if transpiler is not None else Transpiler(dialect)
        self.timeout: float | None = DEFAULT_TIMEOUT
        self.lock_timeout = DEFAULT_LOCK_TIMEOUT
        self.max_rows = DEFAULT_MAX_ROWS
        self.token = secrets.token_hex(6)
        self.tracer: StatementHook | None = None
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None
        self._engine = False
        self._expired: str | None = None
        self._cleaning = False
        self._names = itertools.count()
        self._closed = False

    # -- driver hooks ------------------------------------------------------------------

    @abstractmethod
    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one translated statement; ``user``: a user statement (read-only rules)."""

    @abstractmethod
    def _interrupter(self) -> Any:
        """An object whose ``interrupt()`` stops the running statement from another thread
        (None: this statement runs without a time limit)."""

    @abstractmethod
    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        """The driver's exception as ours, or None when ``e`` is not a driver error."""

    def _bind_error(self, e: Exception, sql: str, binds: Any,
                    origin: ParamOrigin) -> ExecutionError | None:
        """A parameter value the driver could not take, worded by who made it
        (``origin``), or None when ``e`` is not that (checked before a time-out)."""
        return None

    def _statement_starts(self) -> Any:
        """Before one statement; what it returns goes to :meth:`_statement_ends`."""
        return None

    def _statement_ends(self, started: Any, ok: bool) -> None:
        """After one statement, its time limit disarmed (e.g. commit what it began)."""

    def _translate(self, sql: str, params: Any) -> tuple[str, Any]:
        """BlendSQL's SQL and its parameters as the driver's (text, binds)."""
        from blendsql.db.transpile import bind

        text, names = self.transpile(sql)
        return text, bind(names, params)

    def _begin_use(self) -> None:
        """Start of the outermost use (e.g. put a handed-in connection in shape)."""

    def _end_use(self) -> None:
        """End of the outermost use (give a handed-in connection back)."""

    def _check_user_statement(self, sql: str) -> None:
        """Refuse what a user statement may not do before it runs (beyond the driver's)."""

    # -- sessions ----------------------------------------------------------------------

    @contextmanager
    def session(self, timeout: float | None | str = "keep", *,
                tracer: StatementHook | None | str = "keep",
                executors: str | None = None) -> Iterator[GuardedBackend]:
        """Hold the connection for one use (a query, a plan, a question).

        Why: a driver's connection is not safe to use from two threads at once
        (SQLite's connection mutex and Python's GIL deadlock with Python
        callbacks), so every use is serialised here; waiting is time-limited
        (``lock_timeout``). Nested uses in the same thread are fine.
        ``timeout``: the per-statement time limit in seconds for this use
        (None: no limit; "keep": as set). The outermost use starts with
        :meth:`_begin_use` and ends with :meth:`_end_use` (a handed-in
        connection is given back as it came). ``tracer``: the statement hook for this
        use, as :meth:`tracing` installs it ("keep": as set); ``executors``: the
        ``executors`` option of the model calls made inside (as
        :data:`blendsql.db.executors.EXECUTOR_MODE` holds it; None: as set). One
        query's settings, set and restored with the use itself.
        """
        if not self._lock.acquire(timeout=self.lock_timeout):
            raise SessionBusyError(
                f"this BlendSQL session was busy in another thread for more than "
                f"{self.lock_timeout:g} s",
                hint="a session runs one query at a time; use one BlendSQL per thread, "
                "or raise db.lock_timeout")
        saved, expired, saved_tracer = self.timeout, self._expired, self.tracer
        mode = None
        try:
            if self._closed:
                raise ExecutionError("this BlendSQL session is closed",
                                     hint="create a new BlendSQL(...) to run more queries")
            if timeout != "keep":
                self.timeout = timeout  # type: ignore[assignment]
            self._depth += 1
            self._owner = threading.get_ident()
            if self._depth == 1 or timeout != "keep":
                self._expired = None
            if self._depth == 1:
                self._begin_use()
            if not isinstance(tracer, str):
                self.tracer = tracer
            if executors is not None:
                mode = EXECUTOR_MODE.set(executors.lower())
            yield self
        finally:
            if mode is not None:
                EXECUTOR_MODE.reset(mode)
            self.tracer = saved_tracer
            self._depth -= 1
            self.timeout = saved
            if timeout != "keep":
                # e.g. ask(): its program timed out; its fallback's statements still run
                self._expired = expired
            if self._depth == 0:
                self._owner = None
                try:
                    self._end_use()
                finally:
                    self._lock.release()
            else:
                self._lock.release()

    @contextmanager
    def engine(self) -> Iterator[None]:
        """Engine mode: the statements inside are the engine's own (temp objects,
        commits of what it began), not the user's."""
        was, self._engine = self._engine, True
        try:
            yield
        finally:
            self._engine = was

    @contextmanager
    def _cleanup(self) -> Iterator[None]:
        """Cleanup mode: engine statements that drop the engine's own temp objects.

        Why a mode of its own: after a statement of this use hit the time limit,
        every further statement is refused (:meth:`_check_expired`), but a
        cleanup must still run, or the engine's temp table stays on the user's
        connection. Its statements are bounded by ``cleanup_timeout`` instead of
        the session's limit (which may be None, or so small that a DROP could
        not finish), and one that hits it does not mark the use as timed out.
        """
        with self.session(), self.engine():
            was, self._cleaning = self._cleaning, True
            try:
                yield
            finally:
                self._cleaning = was

    # -- running SQL -------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                *, origin: ParamOrigin = user_param,
                ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one statement of BlendSQL's SQL (translated); (column names, rows)."""
        if not self._engine and not sql[:6].upper().startswith(PLAIN_READ_STARTS):
            self._refuse_by_keyword(sql)
        if self._owner == threading.get_ident() and not self._closed:
            # inside this thread's session already: no second use to enter
            return self._run(sql, params if params is not None else (), origin)
        with self.session():
            return self._run(sql, params if params is not None else (), origin)

    def _refuse_by_keyword(self, sql: str) -> None:
        word = leading_keyword(sql)
        if word in TRANSACTION_KEYWORDS or word in ("VACUUM", "ATTACH", "DETACH"):
            raise UnsafeQueryError(
                f"refused to run {word}:\n  {short(sql)}",
                hint="blendsql runs each query on its own and never leaves a transaction "
                "open or changes the session; run it on your own connection, outside blendsql")

    def _run(self, sql: str, params: Any, origin: ParamOrigin, *, native: bool = False,
             ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement under the session's limits, reported to the tracer if any.

        :meth:`Backend._run`'s tracing and :meth:`_run_statement`'s steps in one
        place: refused after a statement of this use timed out (not in cleanup
        mode), translated (``native``: already the backend's SQL), run by
        :meth:`_guarded_run`; a failure is traced with its message.
        """
        hook = self.tracer
        t0 = time.perf_counter()
        try:
            if self._expired is not None and not self._cleaning:
                raise self._expired_error()
            if native:
                text, binds = sql, (params if params else None)
            elif self.translates:
                text, binds = self._translate(sql, params)
            else:
                text, binds = sql, params
            cols, rows = self._guarded_run(sql, text, binds, origin)
        except BlendSQLError as e:
            if hook is not None:
                hook(sql, None, time.perf_counter() - t0, self._engine, e.message)
            raise
        if (not native and self.allow_writes and not self._engine
                and leading_keyword(sql) in _DDL):
            self.transpile.reset()  # a user's table changed: translations read its columns
        if hook is not None:
            hook(sql, len(rows), time.perf_counter() - t0, self._engine, None)
        return cols, rows

    def _run_statement(self, sql: str, params: Any, origin: ParamOrigin,
                       ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """As :meth:`_run`, untraced."""
        saved, self.tracer = self.tracer, None
        try:
            return self._run(sql, params, origin)
        finally:
            self.tracer = saved

    def _run_native(self, sql: str, params: Any, origin: ParamOrigin,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """A statement already in the backend's SQL: no translation, the same guards
        (untraced: see :meth:`_run`)."""
        saved, self.tracer = self.tracer, None
        try:
            return self._run(sql, params, origin, native=True)
        finally:
            self.tracer = saved

    def _expired_error(self) -> QueryTimeoutError:
        """Any further statement of a use after one of its statements timed out."""
        return QueryTimeoutError(
            f"a SQL statement of this query ran longer than the time limit of "
            f"{self.timeout:g} s and was stopped:\n  {short(self._expired or '')}",
            hint="add a LIMIT or a tighter WHERE, or raise the limit with "
            "BlendSQL(..., timeout=<seconds>) or execute(..., timeout=<seconds>)")

    def _explain(self, sql: str) -> None:
        """``EXPLAIN`` of the translated statement (parameters bound as NULL)."""
        from blendsql.db.transpile import bind

        text, names = self.transpile(sql)
        nulls: Any = ({n: None for n in names if n} if any(names)
                      else [None] * len(names))
        with self.session():
            self._run(f"EXPLAIN {text}", bind(names, nulls) or (), user_param, native=True)

    def _guarded_run(self, sql: str, text: str, binds: Any,
                     origin: ParamOrigin = user_param,
                     ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run translated ``text`` (of ``sql``) under the time limit and the user's rules."""
        user = not self._engine
        if user and self._checks_user_statements:
            self._check_user_statement(sql)
        timeout = self.cleanup_timeout if self._cleaning else self.timeout
        token = None if self._cleaning else current_token()
        if token is not None:  # the query's own deadline, when it comes first
            if token.cancelled:
                raise token.error()
            bounded = token.bound(timeout)
            timeout = None if bounded is None else max(0.001, bounded)
        started = self._statement_starts()
        target = self._interrupter() if timeout else None
        ticket = WATCHDOG.arm(target, timeout) if target is not None and timeout else None
        try:
            cols, rows = self._driver_run(text, binds, user)
        except BlendSQLError:
            if ticket is not None:
                WATCHDOG.disarm(ticket)
            self._statement_ends(started, ok=False)
            raise
        except Exception as e:  # noqa: BLE001 - driver errors become ours below
            fired = ticket is not None and WATCHDOG.disarm(ticket)
            self._statement_ends(started, ok=False)
            bad = self._bind_error(e, sql, binds, origin)
            if bad is not None:
                raise bad from None
            if fired:
                if not self._cleaning:
                    self._expired = sql
                if token is not None and token.cancelled:
                    raise token.error() from None
                if sql.startswith(EXECUTOR_JOB):  # calls on Spark's executors, not SQL
                    raise QueryTimeoutError(
                        f"a Spark job answering calls on the executors ran longer than its "
                        f"time limit of {timeout:g} s and was cancelled:\n  {short(sql)}",
                        hint="check that the model servers are reachable from the executors "
                        "and the executors have free cores (the Spark UI), raise the model's "
                        "timeout=, or run the calls on the driver with executors='off'",
                    ) from None
                raise QueryTimeoutError(
                    f"a SQL statement ran longer than the time limit of {timeout:g} s "
                    f"and was stopped:\n  {short(sql)}",
                    hint="add a LIMIT or a tighter WHERE, or raise the limit with "
                    "BlendSQL(..., timeout=<seconds>) or execute(..., timeout=<seconds>)",
                ) from None
            err = self._driver_error(e, sql)
            if err is None:
                raise
            raise err from None
        if ticket is not None:
            WATCHDOG.disarm(ticket)
        self._statement_ends(started, ok=True)
        return cols, rows

    def fetch_limited(self, fetchmany: Any, sql: str) -> list[tuple[Any, ...]]:
        """All rows, refusing more than ``max_rows``."""
        rows: list[tuple[Any, ...]] = list(fetchmany(_CHUNK))
        if len(rows) < _CHUNK:
            return rows
        while True:
            more = fetchmany(_CHUNK)
            rows.extend(more)
            if len(more) < _CHUNK:
                return rows
            if len(rows) > self.max_rows:
                raise TooManyRowsError(
                    f"the statement returned more than {self.max_rows:,} rows and was "
                    f"stopped:\n  {short(sql)}",
                    hint="add a LIMIT or a tighter WHERE (or raise db.max_rows)")

    def refused(self, what: str, sql: str) -> UnsafeQueryError:
        return UnsafeQueryError(
            f"refused to run a statement that would change the database or the "
            f"session ({what}):\n  {short(sql)}",
            hint="blendsql opens databases read-only and keeps each query from changing "
            "what the next one sees; pass allow_writes=True to BlendSQL to change your own "
            f"tables ({self.still_refused} stay refused)")

    # -- engine temp objects -----------------------------------------------------------

    def temp_name(self, kind: str) -> str:
        return f"__bsql_{self.token}_{kind}{next(self._names)}"

    def create_temp_table_as(self, name: str, select_sql: str,
                             params: Sequence[Any] | Mapping[str, Any] = (),
                             origin: ParamOrigin = user_param) -> float:
        """Read the rows under the user's rules (read-only), then store them.

        Why not ``CREATE TEMP TABLE .. AS <select>``: the select may call the
        user's functions; run as the user's statement it stays read-only.
        """
        t0 = time.perf_counter()
        with self.session():
            cols, rows = self._run(select_sql, params, origin)
            self.create_temp_table(name, cols, rows)
        return time.perf_counter() - t0

    def create_temp_table(self, name: str, columns: Sequence[str],
                          rows: Iterable[Sequence[Any]],
                          primary_key: str | None = None) -> float:
        t0 = time.perf_counter()
        rows = list(rows)
        if primary_key is not None:
            at = list(columns).index(primary_key)
            rows = list({r[at]: r for r in reversed(rows)}.values())[::-1]
        types = ([column_type(r[i] for r in rows) for i in range(len(columns))]
                 if self.typed_temp_columns else [""] * len(columns))
        if not self._in_use():
            with self.session(), self.engine():
                self._store(name, list(columns), types, rows, primary_key)
            return time.perf_counter() - t0
        was, self._engine = self._engine, True  # engine mode inside this thread's use
        try:
            self._store(name, list(columns), types, rows, primary_key)
        finally:
            self._engine = was
        return time.perf_counter() - t0

    def _in_use(self) -> bool:
        """Inside this thread's open use already: a nested :meth:`session` would only
        re-take the lock this thread holds (the engine's own statements skip it)."""
        return self._owner == threading.get_ident() and not self._closed

    @abstractmethod
    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        """Create the temp table ``name`` with these columns and rows (engine mode);
        ``types``: :func:`column_type` of each column ('' without ``typed_temp_columns``).
        When it raises, it leaves nothing behind (see :meth:`_dropped_on_failure`)."""

    @contextmanager
    def _dropped_on_failure(self, name: str) -> Iterator[None]:
        """Around the steps of :meth:`_store` after ``name`` was created (rows, an
        index, a view): if one fails (e.g. at the time limit), ``name`` is dropped.

        Why: the engine drops only the tables it created successfully (a failed
        CREATE made nothing of its), so a half-made table would stay on the
        user's connection.
        """
        try:
            yield
        except BaseException:
            self.drop_temp_table(name)
            raise

    def _engine_statement(self, sql: str, params: Any = (),
                          origin: ParamOrigin = engine_value) -> None:
        """One of the engine's own statements, traced (its parameters: ``origin``)."""
        if self._engine and self._in_use():
            self._run(sql, params, origin)
            return
        with self.session(), self.engine():
            self._run(sql, params, origin)

    def drop_temp_table(self, name: str) -> None:
        """Drop an engine temp table; never raises (used in cleanup paths).

        Runs in cleanup mode (:meth:`_cleanup`): still after a statement of this
        use hit the time limit, itself limited to ``cleanup_timeout``. Only call
        it with names this engine created (a failed CREATE created nothing, so
        its name must not be dropped: it may be a user's table).
        """
        if self.transpile.null_columns:
            self.transpile.null_columns = {p for p in self.transpile.null_columns
                                           if p[0] != name}
        self.transpile.forget(name)
        self._drop_objects([f"DROP TABLE IF EXISTS temp.{quote(name)}"])

    def _drop_objects(self, statements: Sequence[str]) -> None:
        """Run engine DROP statements in cleanup mode, each on its own; never raises
        (a DROP that fails or hits ``cleanup_timeout`` does not stop the next).

        Inside this thread's use already, cleanup mode is set here directly
        (what :meth:`_cleanup`'s nested session would add is the lock this
        thread holds)."""
        inside = self._in_use()
        for sql in statements:
            try:
                if not inside:
                    with self._cleanup():
                        self._run(sql, (), engine_value)
                    continue
                was = self._engine, self._cleaning
                self._engine = self._cleaning = True
                try:
                    self._run(sql, (), engine_value)
                finally:
                    self._engine, self._cleaning = was
            except BlendSQLError:
                pass

    def declares_collation(self, names: Sequence[str]) -> bool:
        """Always "cannot tell": the pre-aggregation rewrite (SQLite's bare columns in
        an aggregate query) is kept for SQLite."""
        return True

    @property
    def borrowed(self) -> bool:
        return not getattr(self, "_owns", True)

    def close(self) -> None:
        """Close a connection we opened; a handed-in one stays the user's."""
        if getattr(self, "_owns", True) and not self._closed:
            with self._lock:
                self._closed = True
                self.conn.close()


#: statements that change tables' columns (see Transpiler.reset)
_DDL = ("CREATE", "ALTER", "DROP")


def column_type(values: Iterable[Any]) -> str:
    """A portable SQL type for a column of Python values (the widest that holds them).

    Why: SQLite's untyped temp columns keep each value's storage class; a
    typed backend needs one type per column. Booleans stay BOOLEAN, integers
    BIGINT, numbers DOUBLE, and any mix with text becomes TEXT; a column of
    NULLs is INTEGER (it compares with numbers and booleans).
    """
    kinds: set[str] = set()
    for v in values:
        if v is None:
            continue
        kinds.add(_kind(v))
        if len(kinds) > 1 and kinds != {"BIGINT", "DOUBLE"}:
            return "TEXT"
    if not kinds:
        return "INTEGER"
    if kinds == {"BIGINT", "DOUBLE"}:
        return "DOUBLE"
    return kinds.pop()


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int):
        return "BIGINT" if -(2**63) <= v < 2**63 else "NUMERIC"
    if isinstance(v, float):
        return "DOUBLE"
    if isinstance(v, decimal.Decimal):
        return "NUMERIC"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "BLOB"
    if isinstance(v, dt.datetime):
        return "TIMESTAMP"
    if isinstance(v, dt.date):
        return "DATE"
    return "TEXT"


def floats(rows: list[tuple[Any, ...]], columns: Sequence[int]) -> list[tuple[Any, ...]]:
    """``rows`` with the Decimal values of ``columns`` as floats.

    Why: a typed backend returns AVG / SUM of integers as NUMERIC, which the
    driver gives as ``decimal.Decimal`` (an ``object`` column in pandas);
    ``pandas.read_sql`` users get floats (``coerce_float=True``), and SQLite
    gives floats for the same query.
    """
    if not columns or not rows:
        return rows
    at = set(columns)
    return [tuple(float(v) if i in at and isinstance(v, decimal.Decimal) else v
                  for i, v in enumerate(r)) for r in rows]


def as_type(v: Any, sql_type: str) -> Any:
    """A value as stored in a column of ``sql_type`` (text: its string form)."""
    if v is None:
        return None
    if sql_type == "TEXT" and not isinstance(v, str):
        return "1" if v is True else "0" if v is False else str(v)
    if sql_type == "DOUBLE" and isinstance(v, int):
        return float(v)
    return v

