"""The backend interface: what the engine needs from a database, whatever it is.

Why one interface: the engine plans and renders BlendSQL's SQLite-flavoured
SQL once; a backend runs it (transpiled by sqlglot to its own dialect),
keeps the user's data and session unchanged, and stores the engine's
intermediate rows in its own temporary objects. SQLite
(:class:`blendsql.db.database.Database`), DuckDB
(:class:`blendsql.db.duck.DuckDBDatabase`) and PostgreSQL
(:class:`blendsql.db.postgres.PostgresDatabase`) implement it; nothing
outside ``blendsql.db`` needs to know which one it talks to.

The contract, per method:

- ``session(timeout=)``: hold the connection for one use (a lock; a time
  limit per statement; a handed-in connection given back as it came).
- ``tracing(hook)`` + ``execute(sql, params, origin=)``: every statement
  goes through one traced path; user statements are read-only unless
  ``allow_writes``; errors are ``blendsql.errors`` classes.
- ``temp_name`` / ``create_temp_table`` / ``create_temp_table_as`` /
  ``drop_temp_table``: engine objects in the session's temporary schema,
  under names no user object can collide with.
- ``bind_function`` / ``release_function``: a Python function as a SQL
  function where the backend supports it (None: the engine uses temp
  tables instead).
- ``tables()``, ``columns(table)``, ``fts_tables()``: the schema, for
  prompts and full-text search.
- What the plain-language layer reads (``blendsql.nl``), each statement
  through the same traced, guarded, time-limited path as the engine's:
  ``schema()`` (tables with typed columns and a CREATE statement),
  ``table_columns(table)``, ``sample_rows(table, n)``,
  ``distinct_values(table, column, limit, ...)``, ``row_count(table)``,
  ``dry_run(sql, seconds)`` (does a query compile here, under a time
  limit) and ``run_native(sql, params)`` (a statement in the backend's own
  SQL, e.g. a catalog read). Generic versions live here (plain SQL through
  :meth:`execute`); a backend overrides where its catalog or types differ.
- ``name``: how errors and prompts name the backend ("SQLite", ...).
- ``capabilities``: what the backend can do beyond the contract above
  (:class:`Capabilities`: SQL functions, collector functions, full-text
  search, executors, bound parameters), declared, so the engine reads a
  value instead of probing for methods; ``executors``: its executor model
  (:class:`blendsql.db.executors.Executors`) where it declares executors.
- ``dialect``: the sqlglot dialect it runs; ``json_collect``: whether the
  SQLite ``json_group_array`` fast path for candidate values applies.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from blendsql.errors import BlendSQLError, ExecutionError
from blendsql.plugins import BUILTIN_DIST as BUILTIN_DIST  # the built-ins' distribution
from blendsql.plugins import group_points, load_point

if TYPE_CHECKING:
    from blendsql.db.executors import Executors

ParamOrigin = Callable[[str], str]
StatementHook = Callable[[str, "int | None", float, bool, "str | None"], None]
#: a column as the schema declares it: (name, type; '' when none is declared)
Column = tuple[str, str]

#: default time limit (seconds) for one SQL statement; the ``timeout`` option overrides it
DEFAULT_TIMEOUT = 300.0
#: most rows one statement may return (guards memory against never-ending results)
DEFAULT_MAX_ROWS = 20_000_000
#: default time (seconds) a thread waits for a session another thread is using
DEFAULT_LOCK_TIMEOUT = 600.0
#: hint for a value an ingredient returned that the database cannot take
INGREDIENT_VALUE_HINT = ("the value came from an ingredient's output, not from your params: "
                         "make the ingredient return None, an int within 64 bits, a float, "
                         "valid text (no lone surrogates) or bytes")
#: declared types whose values are text (any backend's spelling)
_TEXT_TYPES = ("CHAR", "TEXT", "CLOB", "STRING", "VARCHAR")


def user_param(name: str) -> str:
    """Where a parameter of a user's own statement came from."""
    return f"the value you passed for parameter {name!r}"


def engine_value(name: str) -> str:
    """How a parameter of an engine statement is named in an error: an ingredient's output."""
    return "an ingredient's output"


def short(sql: str, limit: int = 2000) -> str:
    """A statement cut for an error message."""
    return sql if len(sql) <= limit else sql[:limit] + " ..."


def quote(name: str) -> str:
    """A double-quoted identifier (the same in SQLite, DuckDB and PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


def is_text_type(declared: str) -> bool:
    """True for a declared column type that holds text (``VARCHAR``, ``character varying``)."""
    upper = declared.upper()
    return any(t in upper for t in _TEXT_TYPES)


@dataclass(frozen=True)
class TableSchema:
    """One user table as the plain-language layer shows it to a model.

    ``ddl``: a CREATE statement (the stored one where the backend keeps it,
    else written from the columns); ``documents``: a full-text document
    table (withheld from prompts but for its CREATE statement).
    """

    name: str
    columns: tuple[Column, ...]
    ddl: str
    documents: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.columns)


@dataclass(frozen=True)
class Keys:
    """A table's primary key and foreign keys, as its catalogue declares them.

    ``foreign``: (columns, referenced table, referenced columns) per foreign key.
    """

    primary: tuple[str, ...] = ()
    foreign: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]], primary: str, foreign: str) -> Keys:
        """From a catalogue's (kind, columns, referenced table, referenced columns) rows,
        whose kind is ``primary`` or ``foreign``."""
        rows = list(rows)
        pk = next((tuple(cols) for kind, cols, _, _ in rows if kind == primary), ())
        fks = tuple((tuple(cols), str(ref), tuple(ref_cols))
                    for kind, cols, ref, ref_cols in rows if kind == foreign)
        return cls(pk, fks)


def create_statement(table: str, columns: Sequence[Column], keys: Keys | None = None) -> str:
    """``CREATE TABLE "t" ("a" TYPE, ..., PRIMARY KEY (..), FOREIGN KEY (..) REFERENCES
    "r" (..))`` written from a table's columns and keys."""
    parts = [f"{quote(c)} {t}".rstrip() for c, t in columns]
    if keys is not None and keys.primary:
        parts.append(f"PRIMARY KEY ({', '.join(quote(c) for c in keys.primary)})")
    for cols, ref, ref_cols in keys.foreign if keys is not None else ():
        parts.append(f"FOREIGN KEY ({', '.join(quote(c) for c in cols)}) REFERENCES "
                     f"{quote(ref)} ({', '.join(quote(c) for c in ref_cols)})")
    return f"CREATE TABLE {quote(table)} ({', '.join(parts)})"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do beyond the :class:`Backend` contract, declared.

    - ``functions``: :meth:`Backend.bind_function` registers a Python function as a
      SQL function (it may still return None for one connection, e.g. a borrowed one);
      without it the engine looks a map's outputs up in temp tables.
    - ``collectors``: :attr:`Backend.functions_conn` gives a SQLite connection the
      engine registers aggregate collector functions on (SQLite's candidate values).
    - ``full_text``: ``MATCH`` over the document tables :meth:`Backend.fts_tables` names.
    - ``executors``: ingredient calls may run on the backend's own workers
      (:attr:`Backend.executors`, e.g. Spark's executors).
    - ``bound_params``: parameters one statement may always bind
      (:meth:`Backend.bound_params_limit` may know more of one connection).
    """

    functions: bool = False
    collectors: bool = False
    full_text: bool = False
    executors: bool = False
    bound_params: int = 999

    def __post_init__(self) -> None:
        if not isinstance(self.bound_params, int) or self.bound_params < 1:
            raise ValueError(f"bound_params={self.bound_params!r} is not a positive int")


def information_schema_columns(db: Backend, table: str, schema: str,
                               marker: str = "?") -> list[Column]:
    """Columns of ``table`` (matched ignoring case) with their declared types, in order,
    from a catalogue's ``information_schema.columns`` (DuckDB, PostgreSQL).

    ``schema``: the condition choosing the user's schemas (native SQL); ``marker``:
    the driver's parameter marker (the table name is bound, never written in).
    """
    _, rows = db.run_native(
        "SELECT column_name, data_type FROM information_schema.columns WHERE "
        f"lower(table_name) = lower({marker}) AND {schema} ORDER BY ordinal_position",
        [table])
    return [(str(c), str(t)) for c, t in rows]


class Backend(ABC):
    """What the engine needs from a database (see the module docstring)."""

    #: what this backend can do (see :class:`Capabilities`)
    capabilities: Capabilities = Capabilities()

    @classmethod
    def accepts(cls, source: Any) -> bool:
        """True for a source this backend opens (``BlendSQL(source)``); cheap, and
        without importing a driver: :func:`open_database` asks each backend in turn."""
        return False

    #: the sqlglot dialect this backend runs
    dialect: str = "sqlite"
    #: how errors and prompts name this backend
    name: str = "SQLite"
    #: True where ``json_group_array`` over a TEXT column collects candidates (SQLite)
    json_collect: bool = False
    allow_writes: bool = False
    timeout: float | None
    lock_timeout: float
    max_rows: int
    token: str
    #: the driver's connection (sqlite3 / duckdb / psycopg); the NL layer reads SQLite's
    conn: Any

    @abstractmethod
    def session(self, timeout: float | None | str = "keep", *,
                tracer: StatementHook | None | str = "keep",
                executors: str | None = None) -> AbstractContextManager[Any]:
        """Hold the connection for one use (see the implementations); ``tracer``: the
        statement hook of this use (as :meth:`tracing`; "keep": as set), ``executors``:
        the ``executors`` option of its model calls (None: as set)."""

    #: the statement hook :meth:`tracing` installs; ``_engine``: engine statements running
    tracer: StatementHook | None = None
    _engine: bool = False

    @contextmanager
    def tracing(self, hook: StatementHook | None) -> Iterator[None]:
        """Report every statement run inside to ``hook(sql, rows, seconds, engine, error)``.

        Why here: every statement, whoever issues it (the engine's candidate
        queries, cost scans, schema probes, temp objects, an ingredient's own
        reads), passes through :meth:`_run` or the temp-table methods, so a
        trace built from this hook cannot miss one. ``rows`` is None and
        ``error`` the message when the statement failed.
        """
        saved, self.tracer = self.tracer, hook
        try:
            yield
        finally:
            self.tracer = saved

    def _run(self, sql: str, params: Any, origin: ParamOrigin, *, native: bool = False,
             ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement (:meth:`_run_statement`), reported to the tracer if any.

        ``native``: the text is already the backend's own SQL (not translated).
        """
        hook = self.tracer
        run = self._run_native if native else self._run_statement
        if hook is None:
            return run(sql, params, origin)
        t0 = time.perf_counter()
        try:
            cols, rows = run(sql, params, origin)
        except BlendSQLError as e:
            hook(sql, None, time.perf_counter() - t0, self._engine, e.message)
            raise
        hook(sql, len(rows), time.perf_counter() - t0, self._engine, None)
        return cols, rows

    @abstractmethod
    def _run_statement(self, sql: str, params: Any, origin: ParamOrigin,
                       ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement under the session's limits, untraced (see :meth:`_run`)."""

    def _run_native(self, sql: str, params: Any, origin: ParamOrigin,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement in the backend's own SQL, untraced (SQLite: its SQL is ours)."""
        return self._run_statement(sql, params, origin)

    @abstractmethod
    def engine(self) -> AbstractContextManager[None]:
        """Statements inside are the engine's own (temp objects), not the user's."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                *, origin: ParamOrigin = ...,  # type: ignore[assignment]
                ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one statement written in BlendSQL's SQL; (column names, rows)."""

    def query_df(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                 ) -> pd.DataFrame:
        """Run a query and return a DataFrame (columns in query order, duplicates kept)."""
        from blendsql.db.frames import rows_to_frame

        cols, rows = self.execute(sql, params)
        return rows_to_frame(cols, rows)

    def run_native(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one statement written in the backend's own SQL (a catalog read).

        Why: a catalog (``information_schema``, ``duckdb_tables()``) is read in
        the backend's SQL, which BlendSQL's SQLite flavour cannot express; the
        statement still takes the one traced path, under the user's read-only
        rules and the session's time limit.
        """
        with self.session():
            return self._run(sql, params if params is not None else (), user_param,
                             native=True)

    @abstractmethod
    def temp_name(self, kind: str) -> str:
        """A fresh engine object name no user object can have."""

    @abstractmethod
    def create_temp_table(self, name: str, columns: Sequence[str],
                          rows: Iterable[Sequence[Any]],
                          primary_key: str | None = None) -> float:
        """A temp table holding ``rows`` (data bound, never SQL text); seconds taken."""

    @abstractmethod
    def create_temp_table_as(self, name: str, select_sql: str,
                             params: Sequence[Any] | Mapping[str, Any] = (),
                             origin: ParamOrigin = ...,  # type: ignore[assignment]
                             ) -> float:
        """A temp table holding the rows of an engine-built SELECT; seconds taken."""

    @abstractmethod
    def drop_temp_table(self, name: str) -> None:
        """Drop an engine temp table; never raises."""

    def distribute(self, model: Any) -> Any:
        """The session model as this backend runs it: itself, or (a backend with
        executors) a model that answers large batches where the data is."""
        return model

    @property
    def executors(self) -> Executors:
        """The executor model of a backend declaring ``capabilities.executors``."""
        raise ExecutionError(f"{self.name} runs no calls on executors",
                             hint="ask only a backend whose capabilities.executors is True")

    def bind_function(self, fn: Callable[[Any], Any]) -> str | None:
        """Register ``fn`` as a one-argument SQL function; its name, or None (unsupported)."""
        return None

    def release_function(self, name: str) -> None:
        """Unbind a function from :meth:`bind_function`; never raises."""
        return None

    @property
    def functions_conn(self) -> Any:
        """A SQLite connection the engine may register collector functions on, or None."""
        return None

    @abstractmethod
    def tables(self) -> list[str]:
        """Names of the user's tables and views."""

    def columns(self, table: str) -> list[str]:
        """Column names of a table or view (in order)."""
        cols, _ = self.execute(f"SELECT * FROM {quote(table)} LIMIT 0")
        return cols

    def fts_tables(self) -> list[str]:
        """Names of the full-text document tables (withheld from prompts)."""
        return []

    # -- what the plain-language layer reads -----------------------------------------

    def table_columns(self, table: str) -> list[Column]:
        """Columns of a table or view with their declared types ('' when unknown)."""
        return [(c, "") for c in self.columns(table)]

    def schema(self) -> list[TableSchema]:
        """The user's tables and views for a prompt, internal ones left out.

        Left out: names starting with ``_`` (a loader's metadata, e.g.
        ``_tables``) and the backend's own (engine temp objects never appear:
        they live in the temp schema).
        """
        documents = set(self.fts_tables()) if self.capabilities.full_text else set()
        out = []
        for name in self.tables():
            if name.startswith("_"):
                continue
            cols = tuple(self.table_columns(name))
            out.append(TableSchema(name, cols, create_statement(name, cols, self.keys(name)),
                                   name in documents))
        return out

    def keys(self, table: str) -> Keys:
        """The table's declared primary and foreign keys (none where the backend keeps
        none or cannot say), shown in the schema a model reads: they name the joins."""
        return Keys()

    def sample_rows(self, table: str, n: int) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The first ``n`` rows of a table (as stored; no order promised)."""
        return self.execute(f"SELECT * FROM {quote(table)} LIMIT {max(0, int(n))}")

    def row_count(self, table: str) -> int:
        """Rows in a table."""
        _, rows = self.execute(f"SELECT COUNT(*) FROM {quote(table)}")
        return int(rows[0][0])

    def distinct_values(self, table: str, column: str, limit: int, *,
                        text_lengths: tuple[int, int] | None = None,
                        equal_to: str | None = None, nocase: bool = False) -> list[Any]:
        """Up to ``limit`` distinct non-NULL values of ``table.column``, in sorted order
        (SQLite's own: in the order they first appear).

        ``text_lengths=(lo, hi)``: only text values of ``lo`` to ``hi``
        characters; ``equal_to``: only values equal to this text (``nocase``:
        ignoring ASCII case). On a typed backend a column whose declared type
        is not text holds no text, so both give no values there.
        """
        declared = dict(self.table_columns(table)).get(column)
        if (text_lengths is not None or equal_to is not None) and not is_text_type(
                declared or ""):
            return []
        c = quote(column)
        where = [f"{c} IS NOT NULL"]
        params: list[Any] = []
        if text_lengths is not None:
            where.append(f"length({c}) BETWEEN {int(text_lengths[0])} AND {int(text_lengths[1])}")
        if equal_to is not None:
            where.append(f"lower({c}) = lower(?)" if nocase else f"{c} = ?")
            params.append(equal_to)
        # sorted: a typed backend's DISTINCT comes back in no fixed order (DuckDB hashes in
        # parallel), and a prompt listing the values must be the same on every run
        _, rows = self.execute(f"SELECT DISTINCT {c} FROM {quote(table)} WHERE "
                               f"{' AND '.join(where)} ORDER BY {c} LIMIT {max(0, int(limit))}",
                               params)
        return [r[0] for r in rows]

    def dry_run(self, sql: str, seconds: float | None = None) -> None:
        """Raise the backend's error when ``sql`` (BlendSQL's SQL) would not compile here.

        Plans the statement without running it (``EXPLAIN``), within
        ``seconds`` (None: the session's time limit).
        """
        timeout: float | None | str = "keep" if seconds is None else seconds
        with self.session(timeout=timeout):
            self._explain(sql)

    def _explain(self, sql: str) -> None:
        """Plan one statement without running it (see :meth:`dry_run`)."""
        self.execute(f"EXPLAIN {sql}")

    def bound_params_limit(self) -> int:
        """How many parameters one statement may bind (the declared
        ``capabilities.bound_params``; a backend may read its connection's own)."""
        return self.capabilities.bound_params

    def declares_collation(self, names: Sequence[str]) -> bool:
        """True when one of the named tables declares a column collation (or unknown)."""
        return False

    @abstractmethod
    def close(self) -> None:
        """Close the connection if this backend opened it."""

    @property
    def borrowed(self) -> bool:
        """True for a connection the user handed in."""
        return False


def open_database(source: Any, *, allow_writes: bool = False) -> Backend:
    """The backend for ``source``: the first of :func:`backends` that accepts it.

    - a ``Backend`` (returned as is);
    - whatever a backend added with :func:`register_backend` or a plugin in the
      ``blendsql.backends`` entry-point group accepts (asked first);
    - a ``postgresql://`` / ``postgres://`` URL or a ``psycopg.Connection``;
    - a ``pyspark.sql.SparkSession`` or a dict of Spark DataFrames (Spark SQL);
    - a ``.duckdb`` path or a ``duckdb.DuckDBPyConnection`` (DuckDB);
    - a ``.parquet`` / ``.csv`` path, a pandas / polars DataFrame, or
      ``{"name": path-or-frame}`` with any Parquet / CSV / polars value (an
      in-memory DuckDB);
    - anything else: SQLite (a path, a ``sqlite3.Connection``, a dict of
      DataFrames loaded into an in-memory SQLite; what it cannot open is
      an ``ExecutionError``).
    """
    if isinstance(source, Backend):
        return source
    return implementation(backend_kind(source))(source, allow_writes=allow_writes)


def source_module(source: Any) -> str:
    """The top-level module of a source's type (DuckDB's is ``_duckdb``: ``duckdb``), for a
    backend's :meth:`Backend.accepts` that must not import its driver to answer."""
    return type(source).__module__.split(".")[0].lstrip("_")


# ---------------------------------------------------------------- the registry

#: the entry-point group backends register in (``kind = "module:Class"``)
GROUP = "blendsql.backends"
#: blendsql's own entry points, exactly as ``pyproject.toml`` declares them (a test keeps
#: the two equal), in the order :func:`open_database` asks them (SQLite, last, takes
#: whatever no other one accepts); read only when the installed metadata lacks them
BUILTIN_POINTS: dict[str, str] = {
    "postgres": "blendsql.db.postgres:PostgresDatabase",
    "spark": "blendsql.db.spark:SparkBackend",
    "duckdb": "blendsql.db.duck:DuckDBDatabase",
    "sqlite": "blendsql.db.database:Database",
}


@dataclass(frozen=True)
class BackendEntry:
    """One backend :func:`open_database` can pick.

    ``kind``: its name; ``implementation``: its class, or ``"module:Class"``
    imported on first use; ``accepts(source)``: True for a source it opens
    (cheap, and without importing a driver).
    """

    kind: str
    implementation: str | Callable[..., Backend]
    accepts: Callable[[Any], bool]


class _Registry:
    """Entry-point backends (read once) plus those registered from Python."""

    def __init__(self) -> None:
        self.found: list[BackendEntry] | None = None
        self.added: list[BackendEntry] = []

    def all(self) -> list[BackendEntry]:
        if self.found is None:
            self.found = discover()
        added = {e.kind for e in self.added}
        return [*self.added, *(e for e in self.found if e.kind not in added)]


_REGISTRY = _Registry()


def discover() -> list[BackendEntry]:
    """The backends of the ``blendsql.backends`` entry-point group: other packages'
    first (asked before the built-ins), then blendsql's own in :data:`BUILTIN_POINTS`'
    order.

    An entry point names a :class:`Backend` subclass; its ``accepts`` class method says
    which sources it opens. One that cannot be loaded, names something else, or takes
    a built-in's name is skipped with a warning (one broken plugin must not break every
    query).
    """
    own_points, plugins = group_points(GROUP, BUILTIN_POINTS)
    own = {p.name: p for p in own_points}
    ordered = list(own.values())
    found: list[BackendEntry] = []
    for point in [*plugins, *ordered]:
        if any(e.kind == point.name for e in found) or (
                point in plugins and point.name in own):
            warnings.warn(f"backend {point.name!r} from {point.value} ignored: the name is "
                          "taken", RuntimeWarning, stacklevel=2)
            continue
        cls = _load_point(point)
        if cls is not None:
            found.append(BackendEntry(point.name, cls, cls.accepts))
    return found


def _load_point(point: importlib.metadata.EntryPoint) -> type[Backend] | None:
    return cast("type[Backend] | None", load_point(
        point, "backend", lambda obj: isinstance(obj, type) and issubclass(obj, Backend),
        "a subclass of blendsql.db.backend.Backend"))


def backends() -> list[BackendEntry]:
    """The backends in the order :func:`open_database` asks them: those added with
    :func:`register_backend` (latest first), then the entry points'."""
    return _REGISTRY.all()


def register_backend(kind: str, implementation: str | Callable[..., Backend],
                     accepts: Callable[[Any], bool]) -> None:
    """Add a backend :func:`open_database` (and so ``BlendSQL(...)``) picks for the
    sources ``accepts`` says yes to, from Python (a notebook, a test; a package
    registers its class in the ``blendsql.backends`` entry-point group instead);
    asked before every other one. A ``kind`` registered again replaces the earlier
    entry (an entry point's included).

    ``implementation(source, allow_writes=...)`` must return a :class:`Backend`
    (typically a :class:`blendsql.db.guarded.GuardedBackend` subclass).
    """
    entry = BackendEntry(kind, implementation, accepts)
    _REGISTRY.added[:] = [entry, *(b for b in _REGISTRY.added if b.kind != kind)]


def unregister_backend(kind: str) -> None:
    """Remove a backend added with :func:`register_backend` (entry points stay)."""
    _REGISTRY.added[:] = [b for b in _REGISTRY.added if b.kind != kind]


def reload_backends() -> None:
    """Read the entry points again (after installing or removing a plugin)."""
    _REGISTRY.found = None


def backend_kind(source: Any) -> str:
    """The kind of the first of :func:`backends` that accepts ``source``."""
    for entry in backends():
        if entry.accepts(source):
            return entry.kind
    raise ExecutionError(f"cannot open a database from {type(source).__name__}",
                         hint="pass a file path, a connection, a postgresql:// URL or a "
                         "dict of DataFrames")


def implementation(kind: str) -> Callable[..., Backend]:
    """The backend class of ``kind`` (see :func:`backends`)."""
    known = backends()
    entry = next((b for b in known if b.kind == kind), None)
    if entry is None:
        raise ExecutionError(f"no backend named {kind!r}",
                             hint=f"known: {', '.join(b.kind for b in known)}")
    if not isinstance(entry.implementation, str):
        return entry.implementation
    module, _, name = entry.implementation.partition(":")
    cls: Callable[..., Backend] = getattr(importlib.import_module(module), name)
    return cls


def require(module: str, package: str) -> Any:
    """Import an optional backend driver, or say clearly how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExecutionError(f"this database needs the {package!r} package",
                             hint=f"pip install {package}") from None
