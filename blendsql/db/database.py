"""The SQLite backend: one SQLite connection, read-only unless told otherwise.

Why a wrapper: the engine needs (1) a guarantee that a user's query never
changes the user's data, enforced by SQLite itself through an authorizer
rather than by inspecting SQL text, (2) a private place for its own
intermediate results (the session's ``temp`` schema, under names nobody
can guess), cleaned up after every query, and (3) one place that makes a
session safe: a lock for use from several threads, a time limit on every
statement, no transaction left open between queries, and a connection
handed in given back exactly as it came. (3) and the traced path are the
shared :class:`blendsql.db.guarded.GuardedBackend`'s; this module holds what
is SQLite's own: the authorizer, the error wording, giving a handed-in
connection back, untyped temp tables, FTS5 and Python functions as SQL
functions.

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

import functools
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from blendsql.db.allowlist import SQLITE_KNOWN_LIBRARY, Verdict, refusal, sqlite_verdict
from blendsql.db.backend import (  # noqa: F401 - the defaults are re-exported here
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT,
    INGREDIENT_VALUE_HINT,
    Backend,
    Capabilities,
    ParamOrigin,
    TableSchema,
    engine_value,
    quote,
    short,
    user_param,
)
from blendsql.db.guarded import GuardedBackend
from blendsql.db.handover import Borrowed
from blendsql.db.statements import TRANSACTION_KEYWORDS, leading_keyword
from blendsql.db.temp_rows import row_selects
from blendsql.errors import (  # noqa: F401 - the three session errors are re-exported here
    ExecutionError,
    QueryTimeoutError,
    SessionBusyError,
    TooManyRowsError,
    UnsafeQueryError,
)

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
# Temp objects and transactions: the engine's own in engine mode (see _engine_own).
_ENGINE_ACTIONS = frozenset({*_TEMP_ACTIONS, sqlite3.SQLITE_TRANSACTION,
                             sqlite3.SQLITE_SAVEPOINT})
# Actions that only read (a column, a SELECT, a function call, a recursive CTE): no
# problem for ``_problem`` whoever runs them.
_READ_ACTIONS = frozenset({sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION,
                           getattr(sqlite3, "SQLITE_RECURSIVE", sqlite3.SQLITE_SELECT)})


_FUNCTION = sqlite3.SQLITE_FUNCTION
#: name -> verdict of the functions user and engine statements called so far (the rule
#: depends only on the name and the SQLite library of this process)
_VERDICTS: dict[str, Verdict] = {}


@functools.lru_cache(maxsize=1)
def sqlite_library() -> frozenset[str]:
    """Every function of this process's SQLite library (built-in and its compiled-in
    extensions: FTS3/4/5, R-tree, JSON...), read from ``pragma_function_list`` on a fresh
    connection, plus :data:`blendsql.db.allowlist.SQLITE_KNOWN_LIBRARY` (a library
    built without the pragma still refuses those)."""
    probe = sqlite3.connect(":memory:")
    try:
        names = {str(r[0]).lower() for r in probe.execute(
            "SELECT name FROM pragma_function_list")}
    except sqlite3.Error:
        names = set()
    finally:
        probe.close()
    return frozenset(names | SQLITE_KNOWN_LIBRARY)


def function_verdict(name: str) -> Verdict:
    """May a statement call the SQLite function ``name``? (cached; see
    :func:`blendsql.db.allowlist.sqlite_verdict`)"""
    key = name.lower()
    found = _VERDICTS.get(key)
    if found is None:
        found = sqlite_verdict(key, sqlite_library())
        if found.why != "engine":  # engine names carry a session's token: not kept
            _VERDICTS[key] = found
    return found


def _engine_own(action: int, dbname: str | None) -> bool:
    """True for what the engine does to its own temp objects and transactions.

    Why the user's authorizer is not asked about these: it guards the user's
    data, and a denial here would leave an engine temp table behind on the
    user's connection (its cleanup refused). Reads of the user's tables, even
    in engine mode, still go to the user's authorizer.
    """
    return action in _ENGINE_ACTIONS or (action in _WRITE_ACTIONS and dbname == "temp")


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


class Database(GuardedBackend):
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
    capabilities = Capabilities(functions=True, collectors=True, full_text=True)

    @classmethod
    def accepts(cls, source: Any) -> bool:
        """Anything: SQLite, asked last, opens what no other backend accepts (and says
        clearly what it cannot open)."""
        return True
    still_refused = "temp objects, ATTACH, transaction control and setting PRAGMAs"
    # untyped columns: values keep their storage class and compare equal to the
    # expressions they came from
    typed_temp_columns = False
    # BlendSQL's SQL is SQLite's: statements run as written
    translates = False

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        super().__init__(allow_writes=allow_writes, dialect="sqlite")
        self._denied: str | None = None
        self._denied_call: str | None = None
        self._borrowed: Borrowed | None = None
        self._free_functions: list[str] = []
        self._owns = True
        self.path: str | None = None
        self.conn: sqlite3.Connection
        if isinstance(source, Database):
            source = source.conn
        if isinstance(source, sqlite3.Connection):
            self.conn = source
            self._owns = False
            self._lock = _connection_lock(source)  # shared with other sessions over it
            weakref.finalize(self, _forget_connection_lock, id(source))
            return  # guarded per session use: see _begin_use()
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

    # -- sessions: the outermost use of the connection --------------------------------

    def _begin_use(self) -> None:
        """Our own connection: still open; a borrowed one: the write guard installed for
        this use only (given back as it came by :meth:`_end_use`)."""
        if self._owns:
            self._check_open()
            return
        try:
            self._borrowed = Borrowed(self.conn, self._authorize)
        except sqlite3.ProgrammingError as e:  # e.g. the user closed it
            raise ExecutionError(f"cannot use the connection handed to BlendSQL: {e}",
                                 hint="keep the sqlite3.Connection open while the "
                                 "BlendSQL session uses it") from None

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

    def _end_use(self) -> None:
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

    # -- safety -----------------------------------------------------------------

    def _authorize(self, action: int, arg1: str | None, arg2: str | None,
                   dbname: str | None, source: str | None) -> int:
        """SQLite authorizer: our verdict first, then a borrowed connection's own.

        Why here and not by parsing SQL: SQLite reports every table it is about
        to touch, including through views, triggers and CTEs, so nothing slips by.
        On our own connection (no user's authorizer to ask) two kinds of action
        that :meth:`_problem` always allows are allowed at once: reads
        (``_READ_ACTIONS``, most actions of a statement) and, in engine mode,
        what the engine does to its own temp objects (:func:`_engine_own`). A function
        call is judged first, in engine mode too (the engine's statements hold the
        user's expressions): only what :func:`function_verdict` allows.
        """
        if action == _FUNCTION:
            verdict = _VERDICTS.get(arg2 or "") or function_verdict(arg2 or "")
            if not verdict.allowed:
                self._denied_call = f"{verdict.name}() ({verdict.why})"
                return sqlite3.SQLITE_DENY
        if self._borrowed is None and (
                action in _READ_ACTIONS or (self._engine and (
                    action in _ENGINE_ACTIONS
                    or (dbname == "temp" and action in _WRITE_ACTIONS)))):
            return sqlite3.SQLITE_OK
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

    # -- running SQL: the driver hooks of GuardedBackend ------------------------------

    def _translate(self, sql: str, params: Any) -> tuple[str, Any]:
        """BlendSQL's SQL is SQLite's: run as written, parameters as given."""
        return sql, params

    def _explain(self, sql: str) -> None:
        """``EXPLAIN`` of the statement as written (its parameters unbound)."""
        Backend._explain(self, sql)

    def _statement_starts(self) -> bool:
        """Whether the statement starts outside a transaction (see _statement_ends)."""
        self._denied = self._denied_call = None
        return not self.conn.in_transaction

    def _statement_ends(self, started: Any, ok: bool) -> None:
        """Commit (or roll back) a transaction the statement itself opened.

        Python's sqlite3 opens one before INSERT / UPDATE / DELETE on a
        connection with an ``isolation_level``; left open, it would lock
        other processes out of the file. A transaction the user had opened
        before is theirs and is left alone.
        """
        if started and self.conn.in_transaction:
            with self.engine():
                try:
                    self.conn.commit() if ok else self.conn.rollback()
                except sqlite3.Error as e:
                    raise self._error(e, "COMMIT") from None

    def _interrupter(self) -> sqlite3.Connection | None:
        """The connection (``interrupt()`` stops its statement); None for an engine
        write inside the user's transaction.

        Why no time limit for that: SQLite rolls back the whole transaction when
        a write inside it is interrupted, which would discard the user's pending
        writes. Such a statement only stores rows already read (under the limit)
        or indexes them, so its work is bounded without one.
        """
        return None if self._engine and self.conn.in_transaction else self.conn

    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement (the authorizer judges it); all its rows, at most ``max_rows``
        (memory runs out long before a time limit on a query that never ends, e.g. an
        unbounded recursive CTE)."""
        cur = self.conn.execute(text, binds if binds is not None else ())
        try:
            rows = self.fetch_limited(cur.fetchmany, text)
        except TooManyRowsError:
            cur.close()
            raise
        return ([d[0] for d in cur.description] if cur.description else []), rows

    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        return self._error(e, sql) if isinstance(e, sqlite3.Error) else None

    def _error(self, e: sqlite3.Error, sql: str) -> ExecutionError:
        """Turn a sqlite error into ours, naming the statement and a hint."""
        if self._denied_call is not None:
            call, self._denied_call = self._denied_call, None
            return refusal(self.name, f"calls {call}", sql)
        if self._denied is not None:
            what, self._denied = self._denied, None
            return self.refused(what, sql)
        msg = str(e)
        hint = "check the table and column names" if "no such" in msg else "check the SQL"
        if "readonly" in msg:
            return UnsafeQueryError(f"{msg}:\n  {short(sql)}", hint="the database is opened "
                                    "read-only; pass allow_writes=True to change it")
        if "interrupted" in msg:
            hint = ("the statement was interrupted (conn.interrupt() or a progress handler on "
                    "the connection); run it again once nothing interrupts it")
        return ExecutionError(f"SQLite error: {msg}\n  in: {short(sql)}", hint=hint)

    def _bind_error(self, e: Exception, sql: str, binds: Any,
                    origin: ParamOrigin) -> ExecutionError | None:
        """A value SQLite cannot store, worded by who made it (the user or the engine)."""
        if isinstance(e, sqlite3.Error):
            if "binding parameter" not in str(e):  # else a type sqlite3 cannot bind
                return None
        elif not isinstance(e, (OverflowError, ValueError, TypeError)):
            return None
        params = binds if binds is not None else ()
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

    def bound_params_limit(self) -> int:
        """The connection's own ``SQLITE_LIMIT_VARIABLE_NUMBER`` (999 where Python cannot
        read it, or the connection is closed: the session says so when it is used)."""
        try:
            return int(self.conn.getlimit(_VAR_LIMIT)) if hasattr(self.conn, "getlimit") else 999
        except sqlite3.Error:
            return 999

    # -- engine temp objects ---------------------------------------------------------

    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        """``temp.<name>`` from the rows as data (bound, never SQL text), untyped columns;
        with ``primary_key`` its column indexed. Raises if ``name`` exists."""
        limit = self.bound_params_limit()
        parts = row_selects(columns, rows, limit)
        if sum(len(p) for _, p in parts) <= limit:
            self._create_as(name, " UNION ALL ".join(s for s, _ in parts),
                            [v for _, p in parts for v in p])
        else:
            self._create_from_parts(name, parts)
        if primary_key is not None:
            with self._dropped_on_failure(name):
                self._engine_statement(f"CREATE INDEX temp.{quote(name + '_' + primary_key)} "
                                       f"ON {quote(name)} ({quote(primary_key)})")

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
        if self.conn.in_transaction:
            # a handed-in connection inside the user's transaction: SQLite rolls the whole
            # transaction back when a write is interrupted (our time limit), so the rows
            # are read first (a read may be interrupted safely) and then stored
            return super().create_temp_table_as(name, select_sql, params, origin)
        t0 = time.perf_counter()
        self._create_as(name, select_sql, params, origin)
        return time.perf_counter() - t0

    def _create_as(self, name: str, select_sql: str, params: Any,
                   origin: ParamOrigin = engine_value) -> None:
        self._engine_statement(f"CREATE TEMP TABLE {quote(name)} AS {select_sql}", params,
                               origin)

    def declares_collation(self, names: Sequence[str]) -> bool:
        """False: the engine reads SQLite's declared collations itself (``plan/preagg.py``)."""
        return False

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
