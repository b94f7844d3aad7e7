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
- ``dialect``: the sqlglot dialect it runs; ``json_collect``: whether the
  SQLite ``json_group_array`` fast path for candidate values applies.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from blendsql.errors import BlendSQLError, ExecutionError

ParamOrigin = Callable[[str], str]
StatementHook = Callable[[str, "int | None", float, bool, "str | None"], None]


class Backend(ABC):
    """What the engine needs from a database (see the module docstring)."""

    #: the sqlglot dialect this backend runs
    dialect: str = "sqlite"
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
    def session(self, timeout: float | None | str = "keep") -> AbstractContextManager[Any]:
        """Hold the connection for one use (see the implementations)."""

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

    def _run(self, sql: str, params: Any, origin: ParamOrigin,
             ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement (:meth:`_run_statement`), reported to the tracer if any."""
        hook = self.tracer
        if hook is None:
            return self._run_statement(sql, params, origin)
        t0 = time.perf_counter()
        try:
            cols, rows = self._run_statement(sql, params, origin)
        except BlendSQLError as e:
            hook(sql, None, time.perf_counter() - t0, self._engine, e.message)
            raise
        hook(sql, len(rows), time.perf_counter() - t0, self._engine, None)
        return cols, rows

    @abstractmethod
    def _run_statement(self, sql: str, params: Any, origin: ParamOrigin,
                       ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement under the session's limits, untraced (see :meth:`_run`)."""

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
        from blendsql.db.temp_rows import quote

        cols, _ = self.execute(f"SELECT * FROM {quote(table)} LIMIT 0")
        return cols

    def fts_tables(self) -> list[str]:
        """Names of the full-text document tables (withheld from prompts)."""
        return []

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


def _suffix(source: str | Path) -> str:
    return Path(str(source)).suffix.lower()


def open_database(source: Any, *, allow_writes: bool = False) -> Backend:
    """The backend for ``source``.

    - a ``Backend`` (returned as is);
    - a SQLite path or ``sqlite3.Connection`` (SQLite), a dict of DataFrames
      (an in-memory SQLite, as before);
    - a ``.duckdb`` path or a ``duckdb.DuckDBPyConnection`` (DuckDB);
    - a ``.parquet`` / ``.csv`` path, a pandas / polars DataFrame, or
      ``{"name": path-or-frame}`` with any Parquet / CSV / polars value (an
      in-memory DuckDB);
    - ``postgresql://`` / ``postgres://`` URLs or a ``psycopg.Connection``.
    """
    if isinstance(source, Backend):
        return source
    kind = backend_kind(source)
    if kind == "duckdb":
        from blendsql.db.duck import DuckDBDatabase

        return DuckDBDatabase(source, allow_writes=allow_writes)
    if kind == "postgres":
        from blendsql.db.postgres import PostgresDatabase

        return PostgresDatabase(source, allow_writes=allow_writes)
    from blendsql.db.database import Database

    return Database(source, allow_writes=allow_writes)


_DUCK_FILES = (".duckdb", ".ddb", ".parquet", ".csv", ".tsv")


def backend_kind(source: Any) -> str:
    """``sqlite`` / ``duckdb`` / ``postgres`` for a database source (see open_database)."""
    module = type(source).__module__.split(".")[0].lstrip("_")  # DuckDB's is "_duckdb"
    if module == "duckdb":
        return "duckdb"
    if module == "psycopg":
        return "postgres"
    if isinstance(source, str) and source.split("://", 1)[0] in ("postgresql", "postgres"):
        return "postgres"
    if isinstance(source, (str, Path)):
        return "duckdb" if _suffix(source) in _DUCK_FILES else "sqlite"
    if module == "polars" or isinstance(source, pd.DataFrame):
        return "duckdb"
    if isinstance(source, Mapping):
        values = list(source.values())
        if values and any(_duck_value(v) for v in values):
            return "duckdb"
    return "sqlite"


def _duck_value(value: Any) -> bool:
    """A dict value only DuckDB can read (a Parquet / CSV path or a polars frame)."""
    if isinstance(value, (str, Path)):
        return _suffix(value) in _DUCK_FILES
    return type(value).__module__.split(".")[0] == "polars"


def require(module: str, package: str) -> Any:
    """Import an optional backend driver, or say clearly how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExecutionError(f"this database needs the {package!r} package",
                             hint=f"pip install {package}") from None
