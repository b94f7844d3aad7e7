"""The database wrapper: one SQLite connection, read-only unless told otherwise.

Why a wrapper: the engine needs (1) a guarantee that a user's query never
changes the user's data, enforced by SQLite itself through an authorizer
rather than by inspecting SQL text, (2) a private place for its own
intermediate results (the session's ``temp`` schema, under names nobody
can guess), cleaned up after every query, and (3) one place that makes a
session safe: a lock for use from several threads, a time limit on every
statement, no transaction left open between queries, and a connection
handed in given back exactly as it came.

What a user statement may do (the engine's own statements run in "engine
mode", which may create and drop temp objects):

- read anything, including read-only PRAGMAs;
- never: transaction control (BEGIN / COMMIT / END / ROLLBACK / SAVEPOINT /
  RELEASE), objects or rows in the ``temp`` schema (they would change what
  the next query sees, e.g. a temp table shadowing ``city``), ATTACH /
  DETACH, PRAGMAs that set a value or act (``optimize``, ``wal_checkpoint``),
  VACUUM;
- with ``allow_writes=True``: also INSERT / UPDATE / DELETE and DDL on the
  user's own schemas (``main`` and attached ones). Each such statement is
  committed when it ran outside a transaction (autocommit), so no lock is
  left behind; on a handed-in connection already inside a transaction it
  joins that transaction and the user commits it.
"""

from __future__ import annotations

import itertools
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from blendsql.db.backend import (  # noqa: F401 - defaults and helpers re-exported here
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    INGREDIENT_VALUE_HINT,
    Backend,
    ParamOrigin,
    StatementHook,
    TableSchema,
    engine_value,
    short,
    user_param,
)
from blendsql.db.frames import rows_to_frame
from blendsql.db.handover import Borrowed
from blendsql.db.statements import TRANSACTION_KEYWORDS, leading_keyword
from blendsql.db.temp_rows import quote, row_selects
from blendsql.db.watchdog import WATCHDOG
from blendsql.errors import (  # noqa: F401 - the three session errors are re-exported here
    BlendSQLError,
    ExecutionError,
    QueryTimeoutError,
    SessionBusyError,
    TooManyRowsError,
    UnsafeQueryError,
)

_CHUNK = 65536

# Authorizer action codes that write to a schema.
_WRITE_ACTIONS = {
    sqlite3.SQLITE_INSERT: "INSERT",
    sqlite3.SQLITE_UPDATE: "UPDATE",
    sqlite3.SQLITE_DELETE: "DELETE",
    sqlite3.SQLITE_CREATE_TABLE: "CREATE TABLE",
    sqlite3.SQLITE_CREATE_INDEX: "CREATE INDEX",
    sqlite3.SQLITE_CREATE_VIEW: "CREATE VIEW",
    sqlite3.SQLITE_CREATE_TRIGGER: "CREATE TRIGGER",
    sqlite3.SQLITE_DROP_TABLE: "DROP TABLE",
    sqlite3.SQLITE_DROP_INDEX: "DROP INDEX",
    sqlite3.SQLITE_DROP_VIEW: "DROP VIEW",
    sqlite3.SQLITE_DROP_TRIGGER: "DROP TRIGGER",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE",
    sqlite3.SQLITE_CREATE_VTABLE: "CREATE VIRTUAL TABLE",
    sqlite3.SQLITE_DROP_VTABLE: "DROP VIRTUAL TABLE",
    sqlite3.SQLITE_REINDEX: "REINDEX",
    sqlite3.SQLITE_ANALYZE: "ANALYZE",
}
# Actions that are always about the temp schema.
_TEMP_ACTIONS = {
    sqlite3.SQLITE_CREATE_TEMP_TABLE: "CREATE TEMP TABLE",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "CREATE TEMP INDEX",
    sqlite3.SQLITE_CREATE_TEMP_VIEW: "CREATE TEMP VIEW",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "CREATE TEMP TRIGGER",
    sqlite3.SQLITE_DROP_TEMP_TABLE: "DROP TEMP TABLE",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "DROP TEMP INDEX",
    sqlite3.SQLITE_DROP_TEMP_VIEW: "DROP TEMP VIEW",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "DROP TEMP TRIGGER",
}
# PRAGMAs that take an argument but only read.
_READ_PRAGMAS = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    "table_list", "function_list", "pragma_list", "collation_list", "database_list",
    "compile_options", "module_list",
}
# PRAGMAs that act even without an argument.
_ACTING_PRAGMAS = {"optimize", "wal_checkpoint", "shrink_memory", "incremental_vacuum"}
_VAR_LIMIT = getattr(sqlite3, "SQLITE_LIMIT_VARIABLE_NUMBER", None)


def _engine_own(action: int, dbname: str | None) -> bool:
    """True for what the engine does to its own temp objects and transactions.

    Why the user's authorizer is not asked about these: it guards the user's
    data, and a denial here would leave an engine temp table behind on the
    user's connection (its cleanup refused). Reads of the user's tables, even
    in engine mode, still go to the user's authorizer.
    """
    return (action in _TEMP_ACTIONS
            or action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT)
            or (action in _WRITE_ACTIONS and dbname == "temp"))


_CONN_LOCKS: dict[int, tuple[threading.RLock, int]] = {}  # id(conn) -> (lock, wrappers)
_CONN_LOCKS_GUARD = threading.Lock()


def _connection_lock(conn: sqlite3.Connection) -> threading.RLock:
    """The one session lock of a connection, shared by every wrapper around it.

    Why per connection and not per wrapper: two ``BlendSQL`` sessions over the
    same handed-in connection, used from two threads, deadlock exactly like
    one session would (the lock exists for the connection's sake). Connections
    cannot be weakly referenced, so wrappers count themselves in and out.
    """
    with _CONN_LOCKS_GUARD:
        lock, n = _CONN_LOCKS.get(id(conn), (threading.RLock(), 0))
        _CONN_LOCKS[id(conn)] = (lock, n + 1)
        return lock


def _forget_connection_lock(key: int) -> None:
    """A wrapper is gone: drop the shared lock with the last one."""
    with _CONN_LOCKS_GUARD:
        lock, n = _CONN_LOCKS.get(key, (None, 0))
        if n <= 1:
            _CONN_LOCKS.pop(key, None)
        elif lock is not None:
            _CONN_LOCKS[key] = (lock, n - 1)


class Database(Backend):
    """A SQLite connection with write protection, a session lock and engine temp tables.

    ``source`` is a path (opened read-only with ``mode=ro``), an open
    ``sqlite3.Connection`` (borrowed: guarded only while blendsql uses it and
    returned as it came), or a dict of pandas DataFrames (loaded into an
    in-memory database). The SQLite implementation of
    :class:`blendsql.db.backend.Backend`.
    """

    dialect = "sqlite"
    name = "SQLite"
    json_collect = True

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        self.allow_writes = allow_writes
        self.timeout: float | None = DEFAULT_TIMEOUT  # per statement; see session()
        self.lock_timeout = DEFAULT_LOCK_TIMEOUT
        self.max_rows = DEFAULT_MAX_ROWS
        self.token = secrets.token_hex(6)  # makes engine object names unguessable
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # thread holding the session
        self._engine = False
        self._denied: str | None = None
        self._borrowed: Borrowed | None = None
        self._names = itertools.count()
        # the statement that ran past the time limit in this use (see _run_statement)
        self._expired: str | None = None
        self._free_functions: list[str] = []
        self._owns = True
        # called after every statement (see tracing()): the one traced path to SQLite
        self.tracer: StatementHook | None = None
        self.path: str | None = None
        self.conn: sqlite3.Connection
        if isinstance(source, Database):
            source = source.conn
        if isinstance(source, sqlite3.Connection):
            self.conn = source
            self._owns = False
            self._lock = _connection_lock(source)  # shared with other sessions over it
            weakref.finalize(self, _forget_connection_lock, id(source))
            return  # guarded per session use: see session()
        if isinstance(source, Mapping):
            self.conn = self._from_frames(source)
        elif isinstance(source, (str, Path)):
            self.conn = self._open_path(Path(source), allow_writes)
        else:
            raise ExecutionError(
                f"cannot open a database from {type(source).__name__}",
                hint="pass a file path, a sqlite3.Connection or a dict of DataFrames",
            )
        # our own connection: autocommit (no implicit BEGIN), guard installed for good
        self._lock = _connection_lock(self.conn)  # a Database wrapping this one shares it
        weakref.finalize(self, _forget_connection_lock, id(self.conn))
        self.conn.isolation_level = None
        self.conn.set_authorizer(self._authorize)

    @staticmethod
    def _from_frames(source: Mapping[Any, Any]) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        for name, df in source.items():
            if not isinstance(df, pd.DataFrame):
                conn.close()
                raise ExecutionError(
                    f"table {name!r} is a {type(df).__name__}, not a DataFrame",
                    hint="pass a dict of table name -> pandas.DataFrame",
                )
            df.to_sql(str(name), conn, index=False)
        conn.commit()
        return conn

    @staticmethod
    def _open_path(path: Path, allow_writes: bool) -> sqlite3.Connection:
        """Open read-only by URI so even a bug cannot modify the user's file."""
        if not path.exists():
            raise ExecutionError(f"database file not found: {path}", hint="check the path")
        mode = "rw" if allow_writes else "ro"
        try:
            return sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True,
                                   check_same_thread=False)
        except sqlite3.Error as e:
            raise ExecutionError(f"cannot open {path}: {e}", hint="is it a SQLite file?") from e

    @property
    def borrowed(self) -> bool:
        """True for a connection the user handed in (returned as it came)."""
        return not self._owns

    # -- sessions -----------------------------------------------------------------

    @contextmanager
    def session(self, timeout: float | None | str = "keep") -> Iterator[Database]:
        """Hold the connection for one use (a query, a plan, a question).

        Why: SQLite's connection mutex and Python's GIL deadlock when two
        threads use one connection with Python callbacks, so every use is
        serialised here; waiting is time-limited (``lock_timeout``). Nested
        uses in the same thread are fine. ``timeout``: the per-statement
        time limit in seconds for this use (None: no limit; "keep": as set).
        A borrowed connection gets the write guard for the outermost use
        only and is given back as it came (authorizer, transaction state).
        """
        if not self._lock.acquire(timeout=self.lock_timeout):
            raise SessionBusyError(
                f"this BlendSQL session was busy in another thread for more than "
                f"{self.lock_timeout:g} s",
                hint="a session runs one query at a time; use one BlendSQL per thread, "
                "or raise db.lock_timeout")
        saved, expired = self.timeout, self._expired
        try:
            if timeout != "keep":
                self.timeout = timeout  # type: ignore[assignment]
            self._depth += 1
            self._owner = threading.get_ident()
            if self._depth == 1 or timeout != "keep":
                self._expired = None  # a query with its own time limit starts afresh
            if self._depth == 1 and self._owns:
                self._check_open()
            if self._depth == 1 and not self._owns:
                try:
                    self._borrowed = Borrowed(self.conn, self._authorize)
                except sqlite3.ProgrammingError as e:  # e.g. the user closed it
                    raise ExecutionError(f"cannot use the connection handed to BlendSQL: {e}",
                                         hint="keep the sqlite3.Connection open while the "
                                         "BlendSQL session uses it") from None
            yield self
        finally:
            self._depth -= 1
            self.timeout = saved
            if timeout != "keep":
                # e.g. ask(): its program timed out; its fallback's statements still run
                self._expired = expired
            if self._depth == 0:
                self._owner = None
                self._give_back()
            self._lock.release()

    def _check_open(self) -> None:
        """A session used after ``close()`` fails here, with our error.

        Why at the start of a use: the first statement may come from anywhere
        (a collector registering a function, a schema probe), and each would
        otherwise surface sqlite3's raw ``ProgrammingError``.
        """
        try:
            self.conn.in_transaction  # noqa: B018 - raises on a closed connection
        except sqlite3.ProgrammingError:
            raise ExecutionError("this BlendSQL session is closed",
                                 hint="create a new BlendSQL(...) to run more queries "
                                 "(close() ends a session for good)") from None

    def _give_back(self) -> None:
        """End of the outermost use: no transaction of ours open, the user's guard back."""
        borrowed, self._borrowed = self._borrowed, None
        began = not (borrowed.in_transaction if borrowed else False)
        try:
            if began and self.conn.in_transaction:
                with self.engine():
                    self.conn.rollback()
        except sqlite3.Error:
            pass  # closed meanwhile, or nothing to roll back
        if borrowed is not None:
            borrowed.restore()

    @contextmanager
    def engine(self) -> Iterator[None]:
        """Engine mode: the statements inside are the engine's own (temp objects,
        commits of what it began), not the user's."""
        was, self._engine = self._engine, True
        try:
            yield
        finally:
            self._engine = was

    # -- safety -----------------------------------------------------------------

    def _authorize(self, action: int, arg1: str | None, arg2: str | None,
                   dbname: str | None, source: str | None) -> int:
        """SQLite authorizer: our verdict first, then a borrowed connection's own.

        Why here and not by parsing SQL: SQLite reports every table it is about
        to touch, including through views, triggers and CTEs, so nothing slips by.
        """
        problem = self._problem(action, arg1, arg2, dbname)
        if problem is not None:
            self._denied = problem
            return sqlite3.SQLITE_DENY
        borrowed = self._borrowed
        if borrowed is not None and not (self._engine and _engine_own(action, dbname)):
            return borrowed.user_authorizer(action, arg1, arg2, dbname, source)
        return sqlite3.SQLITE_OK

    def _problem(self, action: int, arg1: str | None, arg2: str | None,
                 dbname: str | None) -> str | None:
        """Why a statement may not do ``action`` (None: it may)."""
        if action in (sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT):
            if self._engine or (self.allow_writes and action == sqlite3.SQLITE_TRANSACTION
                                and (arg1 or "").upper() == "BEGIN"):
                return None  # ours, or Python's implicit BEGIN before an allowed write
            return f"transaction control ({arg1 or 'SAVEPOINT'})"
        if action in _TEMP_ACTIONS:
            return None if self._engine else f"{_TEMP_ACTIONS[action]} {arg1}"
        if action in _WRITE_ACTIONS:
            if dbname == "temp":
                return None if self._engine else f"{_WRITE_ACTIONS[action]} on temp.{arg1}"
            if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_schema"):
                # FTS5 (any virtual table) reports this while connecting, even on a read.
                # A user cannot write the schema table without PRAGMA writable_schema,
                # which is refused below, so allowing it here writes nothing.
                return None
            if self.allow_writes and not self._engine:
                return None
            return f"{_WRITE_ACTIONS[action]} on {dbname}.{arg1}"
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return "ATTACH / DETACH"
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if (arg2 is not None and name not in _READ_PRAGMAS) or name in _ACTING_PRAGMAS:
                return f"PRAGMA {name}" + (f" = {arg2}" if arg2 is not None else "")
        return None

    def _refuse_by_keyword(self, sql: str) -> None:
        """Statements refused by their first keyword (see ``blendsql.db.statements``)."""
        word = leading_keyword(sql)
        if word in TRANSACTION_KEYWORDS:
            raise UnsafeQueryError(
                f"refused to run transaction control ({word}):\n  {sql}",
                hint="blendsql runs each query on its own and never leaves a transaction "
                "open; commit or roll back on your own connection (conn.commit() / "
                "conn.rollback()), outside blendsql")
        if word == "VACUUM":
            raise UnsafeQueryError(f"refused to run VACUUM:\n  {sql}",
                                   hint="run VACUUM on your own connection, outside blendsql")

    # -- running SQL --------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                *, origin: ParamOrigin = user_param,
                ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one user-side statement; return (column names, rows).

        Errors become ExecutionError; a statement past the time limit a
        QueryTimeoutError. ``origin(name)`` says who made a parameter's value,
        for the message when it cannot be bound.
        """
        if not self._engine:
            self._refuse_by_keyword(sql)
        if self._owner == threading.get_ident():  # inside this thread's session already
            return self._run(sql, params if params is not None else (), origin)
        with self.session():
            return self._run(sql, params if params is not None else (), origin)

    def _run_statement(self, sql: str, params: Any, origin: ParamOrigin,
                       ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement under the time limit; commit only what it began."""
        conn = self.conn
        if self._expired is not None:
            raise self._expired_error()
        began_outside = not conn.in_transaction
        self._denied = None
        ticket = (WATCHDOG.arm(conn, self.timeout)
                  if self.timeout and not self._in_users_transaction() else None)
        try:
            cur = conn.execute(sql, params)
            rows = self._fetch(cur, sql)
            cols = [d[0] for d in cur.description] if cur.description else []
        except TooManyRowsError:
            if ticket is not None:
                WATCHDOG.disarm(ticket)
            self._end_ours(began_outside, ok=False)
            raise
        except sqlite3.Error as e:
            fired = ticket is not None and WATCHDOG.disarm(ticket)
            self._end_ours(began_outside, ok=False)
            if "binding parameter" in str(e):  # a value of a type sqlite3 cannot bind
                raise self._bind_error(e, sql, params, origin) from None
            if fired:
                self._expired = sql
            raise self._error(e, sql, timed_out=fired) from None
        except (OverflowError, ValueError, TypeError) as e:
            if ticket is not None:
                WATCHDOG.disarm(ticket)
            self._end_ours(began_outside, ok=False)
            raise self._bind_error(e, sql, params, origin) from None
        if ticket is not None:
            WATCHDOG.disarm(ticket)
        self._end_ours(began_outside, ok=True)
        return cols, rows

    def _in_users_transaction(self) -> bool:
        """An engine write (a temp table from rows it holds) inside the user's transaction.

        Why no time limit for it: SQLite rolls back the whole transaction when a
        write inside it is interrupted, which would discard the user's pending
        writes. Such a statement only stores rows already read (under the limit)
        or indexes them, so its work is bounded without one.
        """
        return self._engine and self.conn.in_transaction

    def _fetch(self, cur: sqlite3.Cursor, sql: str) -> list[tuple[Any, ...]]:
        """All rows, refusing more than ``max_rows`` (memory runs out long before a
        time limit on a query that never ends, e.g. an unbounded recursive CTE)."""
        rows: list[tuple[Any, ...]] = cur.fetchmany(_CHUNK)
        if len(rows) < _CHUNK:
            return rows
        while True:
            more = cur.fetchmany(_CHUNK)
            rows.extend(more)
            if len(more) < _CHUNK:
                return rows
            if len(rows) > self.max_rows:
                cur.close()
                raise TooManyRowsError(
                    f"the statement returned more than {self.max_rows:,} rows and was "
                    f"stopped:\n  {short(sql)}",
                    hint="add a LIMIT or a tighter WHERE (or raise db.max_rows)")

    def _expired_error(self) -> QueryTimeoutError:
        """A statement after one that hit the time limit in the same use.

        Why refuse it: the engine's planning probes (cost estimates, samples)
        recover from their own failures, so a probe stopped at the limit was
        followed by the real statement, stopped at the limit again: a query
        took two or three times the ``timeout`` it was given.
        """
        return QueryTimeoutError(
            f"a SQL statement of this query ran longer than the time limit of "
            f"{self.timeout:g} s and was stopped:\n  {short(self._expired or '')}",
            hint="add a LIMIT or a tighter WHERE, or raise the limit with "
            "BlendSQL(..., timeout=<seconds>) or execute(..., timeout=<seconds>)")

    def _end_ours(self, began_outside: bool, ok: bool) -> None:
        """Commit (or roll back) a transaction the statement itself opened.

        Python's sqlite3 opens one before INSERT / UPDATE / DELETE on a
        connection with an ``isolation_level``; left open, it would lock
        other processes out of the file. A transaction the user had opened
        before is theirs and is left alone.
        """
        if began_outside and self.conn.in_transaction:
            with self.engine():
                try:
                    self.conn.commit() if ok else self.conn.rollback()
                except sqlite3.Error as e:
                    raise self._error(e, "COMMIT") from None

    def _error(self, e: sqlite3.Error, sql: str, timed_out: bool = False) -> ExecutionError:
        """Turn a sqlite error into ours, naming the statement and a hint."""
        if timed_out:
            return QueryTimeoutError(
                f"a SQL statement ran longer than the time limit of {self.timeout:g} s "
                f"and was stopped:\n  {short(sql)}",
                hint="add a LIMIT or a tighter WHERE, or raise the limit with "
                "BlendSQL(..., timeout=<seconds>) or execute(..., timeout=<seconds>)")
        if self._denied is not None:
            what, self._denied = self._denied, None
            return UnsafeQueryError(
                f"refused to run a statement that would change the database or the "
                f"session ({what}):\n  {short(sql)}",
                hint="blendsql opens databases read-only and keeps each query from "
                "changing what the next one sees; pass allow_writes=True to BlendSQL to "
                "change your own tables (temp objects, ATTACH, transaction control and "
                "setting PRAGMAs stay refused)",
            )
        msg = str(e)
        hint = "check the table and column names" if "no such" in msg else "check the SQL"
        if "readonly" in msg:
            return UnsafeQueryError(f"{msg}:\n  {short(sql)}", hint="the database is opened "
                                    "read-only; pass allow_writes=True to change it")
        if "interrupted" in msg:
            hint = ("the statement was interrupted (conn.interrupt() or a progress handler on "
                    "the connection); run it again once nothing interrupts it")
        return ExecutionError(f"SQLite error: {msg}\n  in: {short(sql)}", hint=hint)

    def _bind_error(self, e: Exception, sql: str, params: Any,
                    origin: ParamOrigin) -> ExecutionError:
        """A value SQLite cannot store, worded by who made it (the user or the engine)."""
        items = (params.items() if isinstance(params, Mapping)
                 else ((f"?{i + 1}", v) for i, v in enumerate(params)))
        bad = next(((k, v) for k, v in items if _unbindable(v)), None)
        if bad is None and _unbindable(sql):
            return ExecutionError(
                f"the query text holds a character SQLite cannot take ({e}):\n  "
                f"{short(sql).encode('utf-8', 'backslashreplace').decode()}",
                hint="remove the lone surrogate (e.g. '\\ud800') from the query; text "
                "read with errors='surrogateescape' must be decoded properly first")
        if bad is None:
            return ExecutionError(f"could not bind parameters: {e}\n  in: {short(sql)}",
                                  hint="check the values passed as params")
        name, value = bad
        who = origin(str(name))
        return ExecutionError(
            f"SQLite cannot store {who} ({_describe(value)}): {e}",
            hint="pass None, an int within 64 bits, a float, str or bytes"
            if who.startswith("the value you passed") else INGREDIENT_VALUE_HINT)

    def query_df(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                 ) -> pd.DataFrame:
        """Run a query and return a DataFrame (columns in query order, duplicates kept)."""
        cols, rows = self.execute(sql, params)
        return rows_to_frame(cols, rows)

    # -- engine temp objects ---------------------------------------------------------

    def temp_name(self, kind: str) -> str:
        """A fresh engine object name: ``__bsql_<session token>_<kind><n>``."""
        return f"__bsql_{self.token}_{kind}{next(self._names)}"

    def create_temp_table(self, name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                          primary_key: str | None = None) -> float:
        """Create ``temp.<name>`` holding ``rows`` (data bound, never SQL text).

        Columns carry no declared type, so values keep their storage class and
        compare equal to the expressions they came from. With ``primary_key``,
        the first row of each key is kept and the key column is indexed.
        Returns seconds taken. Raises if ``name`` exists (never replaces it).
        """
        t0 = time.perf_counter()
        rows = list(rows)
        if primary_key is not None:
            at = list(columns).index(primary_key)
            rows = list({r[at]: r for r in reversed(rows)}.values())[::-1]
        limit = self.conn.getlimit(_VAR_LIMIT) if hasattr(self.conn, "getlimit") else 999
        parts = row_selects(columns, rows, limit)
        if sum(len(p) for _, p in parts) <= limit:
            self._create_as(name, " UNION ALL ".join(s for s, _ in parts),
                            [v for _, p in parts for v in p])
        else:
            self._create_from_parts(name, parts)
        if primary_key is not None:
            self._engine_sql(f"CREATE INDEX temp.{quote(name + '_' + primary_key)} "
                             f"ON {quote(name)} ({quote(primary_key)})", (), name)
        return time.perf_counter() - t0

    def _create_from_parts(self, name: str, parts: list[tuple[str, list[Any]]]) -> None:
        """Beyond the parameter limit: one helper table per part, then their union."""
        helpers: list[str] = []
        try:
            for sql, params in parts:
                helper = self.temp_name("part")
                self._create_as(helper, sql, params)
                helpers.append(helper)
            self._create_as(name, " UNION ALL ".join(
                f"SELECT * FROM temp.{quote(h)}" for h in helpers), [])
        finally:
            for h in helpers:
                self.drop_temp_table(h)

    def create_temp_table_as(self, name: str, select_sql: str,
                             params: Sequence[Any] | Mapping[str, Any] = (),
                             origin: ParamOrigin = user_param) -> float:
        """``CREATE TEMP TABLE <name> AS <select>`` (engine mode); seconds taken.

        ``select_sql`` must be a SELECT the engine built; engine mode lets it
        create the temp table and nothing else a SELECT could not do anyway.
        """
        t0 = time.perf_counter()
        if self.conn.in_transaction:
            # a handed-in connection inside the user's transaction: SQLite rolls the whole
            # transaction back when a write is interrupted (our time limit), so the rows
            # are read first (a read may be interrupted safely) and then stored
            with self.session():
                cols, rows = self._run(select_sql, params, origin)
            self.create_temp_table(name, cols, rows)
        else:
            self._create_as(name, select_sql, params, origin)
        return time.perf_counter() - t0

    def _create_as(self, name: str, select_sql: str, params: Any,
                   origin: ParamOrigin | None = None) -> None:
        self._engine_sql(f"CREATE TEMP TABLE {quote(name)} AS {select_sql}", params, name,
                         origin)

    def _engine_sql(self, sql: str, params: Any, name: str,
                    origin: ParamOrigin | None = None) -> None:
        """Run one of the engine's own statements about ``temp.<name>`` (engine mode)."""
        with self.session(), self.engine():
            self._run(sql, params, origin or engine_value)

    def drop_temp_table(self, name: str) -> None:
        """Drop an engine temp table; never raises (used in cleanup paths).

        Only call it with names this engine created (a failed CREATE created
        nothing, so its name must not be dropped: it may be a user's table).
        """
        sql = f"DROP TABLE IF EXISTS temp.{quote(name)}"
        with self.session(), self.engine():
            t0 = time.perf_counter()
            error = None
            try:
                self.conn.execute(sql)
            except sqlite3.Error as e:
                error = str(e)
            if self.tracer is not None:
                self.tracer(sql, None if error else 0, time.perf_counter() - t0, True, error)

    # -- engine functions -------------------------------------------------------------

    @property
    def functions_conn(self) -> sqlite3.Connection | None:
        """The connection when the engine may register SQL functions on it, else None.

        Why None for a borrowed connection: Python (3.11) cannot remove a
        registered function (registering ``None`` leaves the name listed in
        ``PRAGMA function_list``), so the engine registers nothing there and
        uses temp tables and plain SQL instead.
        """
        return None if not self._owns else self.conn

    def bind_function(self, fn: Callable[[Any], Any]) -> str | None:
        """Register ``fn`` as a one-argument SQL function; its name, or None (borrowed).

        Names are reused after :meth:`release_function`, so the number of
        registrations stays bounded by the most functions one query needs.
        """
        if not self._owns:
            return None
        name = self._free_functions.pop() if self._free_functions else self.temp_name("f")
        with self._lock:
            self.conn.create_function(name, 1, fn, deterministic=True)
        return name

    def release_function(self, name: str) -> None:
        """Unbind a function from :meth:`bind_function` (frees its data); never raises."""
        try:
            with self._lock:
                self.conn.create_function(name, 1, None)
        except sqlite3.Error:
            return
        self._free_functions.append(name)

    # -- misc ----------------------------------------------------------------------------

    def tables(self) -> list[str]:
        """Names of the user's tables and views (main schema; SQLite's own left out)."""
        _, rows = self.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                               "AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name")
        return [r[0] for r in rows]

    def fts_tables(self) -> list[str]:
        """Names of the FTS5 document tables (main schema)."""
        _, rows = self.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE "
            "'CREATE VIRTUAL TABLE%' AND lower(sql) LIKE '%using fts5%' ORDER BY name")
        return [r[0] for r in rows]

    def table_columns(self, table: str) -> list[tuple[str, str]]:
        """Columns a ``SELECT *`` reads (declared and generated ones) with declared types.

        Hidden columns of a virtual table (FTS5's ``rank`` and the column named
        after the table) are left out, as ``SELECT *`` leaves them out.
        """
        _, rows = self.execute("SELECT name, type, hidden FROM pragma_table_xinfo(?)", (table,))
        return [(str(n), str(t or "")) for n, t, hidden in rows if hidden != 1]

    def schema(self) -> list[TableSchema]:
        """Tables in the order they were created, with their own CREATE statements;
        FTS5 tables are document tables, their shadow tables and ``_``-named ones left out."""
        _, rows = self.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        fts = {n for n, sql in rows if "USING FTS" in sql.upper()}
        shadow = {f"{t}_{suffix}" for t in fts
                  for suffix in ("data", "idx", "content", "docsize", "config")}
        return [TableSchema(n, tuple(self.table_columns(n)), sql.strip(), n in fts)
                for n, sql in rows if n not in shadow and not n.startswith("_")]

    def distinct_values(self, table: str, column: str, limit: int, *,
                        text_lengths: tuple[int, int] | None = None,
                        equal_to: str | None = None, nocase: bool = False) -> list[Any]:
        """As :meth:`Backend.distinct_values`; SQLite's columns hold any type, so text
        is told by each value's ``typeof`` and case is ignored by ``COLLATE NOCASE``."""
        c = quote(column)
        where = []
        params: list[Any] = []
        if text_lengths is not None:
            where += [f"typeof({c}) = 'text'",
                      f"length({c}) BETWEEN {int(text_lengths[0])} AND {int(text_lengths[1])}"]
        if equal_to is not None:
            where.append(f"{c} = ?" + (" COLLATE NOCASE" if nocase else ""))
            params.append(equal_to)
        if not where:
            where.append(f"{c} IS NOT NULL")
        _, rows = self.execute(f"SELECT DISTINCT {c} FROM {quote(table)} WHERE "
                               f"{' AND '.join(where)} LIMIT {max(0, int(limit))}", params)
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection if this wrapper opened it (a borrowed one stays open)."""
        if self._owns:
            if not self._lock.acquire(timeout=self.lock_timeout):
                raise SessionBusyError("cannot close: the session is busy in another thread",
                                       hint="close it once its queries have finished")
            try:
                self.conn.close()
            finally:
                self._lock.release()


def _unbindable(v: Any) -> bool:
    """True for a value sqlite3 cannot bind (without a registered adapter)."""
    if v is None or isinstance(v, (float, bytes, bytearray, memoryview)):
        return False
    if isinstance(v, int):
        return not -(2**63) <= v <= 2**63 - 1
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    return (type(v), sqlite3.PrepareProtocol) not in sqlite3.adapters


def _describe(v: Any) -> str:
    text = repr(v)
    return f"{type(v).__name__} {text[:60] + '...' if len(text) > 60 else text}"
