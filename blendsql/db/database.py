"""The database wrapper: one SQLite connection, read-only unless told otherwise.

Why a wrapper: the engine needs (1) a guarantee that a user's query never
changes the user's data, enforced by SQLite itself through an authorizer
rather than by inspecting SQL text, and (2) a private place for its own
intermediate results (the session's ``temp`` schema), which the authorizer
allows and the engine cleans up after every query.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from blendsql.errors import ExecutionError, UnsafeQueryError

# Authorizer action codes that write to a schema; allowed only in ``temp``.
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
# Actions that are always about the session's own temp schema.
_TEMP_ACTIONS = {
    sqlite3.SQLITE_CREATE_TEMP_TABLE,
    sqlite3.SQLITE_CREATE_TEMP_INDEX,
    sqlite3.SQLITE_CREATE_TEMP_VIEW,
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER,
    sqlite3.SQLITE_DROP_TEMP_TABLE,
    sqlite3.SQLITE_DROP_TEMP_INDEX,
    sqlite3.SQLITE_DROP_TEMP_VIEW,
    sqlite3.SQLITE_DROP_TEMP_TRIGGER,
}
# PRAGMAs that take an argument but only read.
_READ_PRAGMAS = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
    "table_list", "function_list", "pragma_list", "collation_list", "database_list",
    "compile_options", "module_list",
}


class Database:
    """A SQLite connection with write protection and engine temp-table helpers.

    ``source`` is a path (opened read-only with ``mode=ro``), an open
    ``sqlite3.Connection`` (used as is, still guarded), or a dict of pandas
    DataFrames (loaded into an in-memory database).
    """

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        self.allow_writes = allow_writes
        self._denied: str | None = None
        self._owns = True
        self.path: str | None = None
        self.conn: sqlite3.Connection
        if isinstance(source, Database):
            source = source.conn
        if isinstance(source, sqlite3.Connection):
            self.conn = source
            self._owns = False
        elif isinstance(source, Mapping):
            self.conn = sqlite3.connect(":memory:", check_same_thread=False)
            for name, df in source.items():
                if not isinstance(df, pd.DataFrame):
                    raise ExecutionError(
                        f"table {name!r} is a {type(df).__name__}, not a DataFrame",
                        hint="pass a dict of table name -> pandas.DataFrame",
                    )
                df.to_sql(str(name), self.conn, index=False)
        elif isinstance(source, (str, Path)):
            self.conn = self._open_path(Path(source), allow_writes)
        else:
            raise ExecutionError(
                f"cannot open a database from {type(source).__name__}",
                hint="pass a file path, a sqlite3.Connection or a dict of DataFrames",
            )
        self.conn.set_authorizer(self._authorize)

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

    # -- safety -----------------------------------------------------------------

    def _authorize(self, action: int, arg1: str | None, arg2: str | None,
                   dbname: str | None, source: str | None) -> int:
        """SQLite authorizer: deny writes outside the temp schema.

        Why here and not by parsing SQL: SQLite reports every table it is about
        to touch, including through views, triggers and CTEs, so nothing slips by.
        """
        if self.allow_writes or action in _TEMP_ACTIONS:
            return sqlite3.SQLITE_OK
        if action in _WRITE_ACTIONS:
            if dbname == "temp":
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_schema"):
                # FTS5 (any virtual table) reports this while connecting, even on a read.
                # A user cannot write the schema table without PRAGMA writable_schema,
                # which is refused below, so allowing it here writes nothing.
                return sqlite3.SQLITE_OK
            return self._deny(f"{_WRITE_ACTIONS[action]} on {dbname}.{arg1}")
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return self._deny("ATTACH / DETACH")
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if arg2 is not None and name not in _READ_PRAGMAS:
                return self._deny(f"PRAGMA {name} = {arg2}")
        return sqlite3.SQLITE_OK

    def _deny(self, what: str) -> int:
        self._denied = what
        return sqlite3.SQLITE_DENY

    # -- running SQL --------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one statement; return (column names, rows). Errors become ExecutionError."""
        self._denied = None
        try:
            cur = self.conn.execute(sql, params if params is not None else ())
            rows = cur.fetchall()
            cols = [d[0] for d in cur.description] if cur.description else []
            return cols, rows
        except sqlite3.Error as e:
            raise self._error(e, sql) from None
        except (OverflowError, ValueError) as e:
            raise ExecutionError(f"could not bind parameters: {e}", hint="check params") from None

    def _error(self, e: sqlite3.Error, sql: str) -> ExecutionError:
        """Turn a sqlite error into ours, naming the statement and a hint."""
        if self._denied is not None:
            what, self._denied = self._denied, None
            return UnsafeQueryError(
                f"refused to run a statement that writes to the database ({what}):\n  {sql}",
                hint="blendsql opens databases read-only; pass allow_writes=True to BlendSQL "
                "if you really mean to change the data",
            )
        msg = str(e)
        hint = "check the table and column names" if "no such" in msg else "check the SQL"
        if "readonly" in msg:
            return UnsafeQueryError(f"{msg}:\n  {sql}", hint="the database is opened "
                                    "read-only; pass allow_writes=True to change it")
        return ExecutionError(f"SQLite error: {msg}\n  in: {sql}", hint=hint)

    def query_df(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None,
                 ) -> pd.DataFrame:
        """Run a query and return a DataFrame (columns in query order)."""
        cols, rows = self.execute(sql, params)
        return _frame(cols, rows)

    def create_temp_table(self, name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                          primary_key: str | None = None) -> float:
        """Create ``temp.<name>`` and fill it with bound rows (data, never SQL text).

        Columns are declared without a type so values keep their storage class and
        compare equal to the expressions they came from. Returns seconds taken.
        """
        t0 = time.perf_counter()
        cols = ", ".join(f'"{c}"' + (" PRIMARY KEY" if c == primary_key else "")
                         for c in columns)
        self.execute(f'CREATE TEMP TABLE "{name}" ({cols})')
        marks = ", ".join("?" for _ in columns)
        verb = "INSERT OR IGNORE" if primary_key else "INSERT"
        try:
            self.conn.executemany(f'INSERT INTO temp."{name}" VALUES ({marks})'
                                  if verb == "INSERT" else
                                  f'{verb} INTO temp."{name}" VALUES ({marks})', rows)
        except sqlite3.Error as e:
            raise self._error(e, f"INSERT INTO temp.{name}") from None
        return time.perf_counter() - t0

    def drop_temp_table(self, name: str) -> None:
        """Drop an engine temp table; never raises (used in cleanup paths)."""
        try:
            self.conn.execute(f'DROP TABLE IF EXISTS temp."{name}"')
        except sqlite3.Error:
            pass

    def tables(self) -> list[str]:
        """Names of the user's tables (main schema)."""
        _, rows = self.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                               "ORDER BY name")
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection if this wrapper opened it."""
        if self._owns:
            self.conn.close()


def _frame(cols: list[str], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Build a DataFrame that keeps duplicate column names and SQLite values as-is."""
    if not rows:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in cols}
                            if len(set(cols)) == len(cols) else None,
                            columns=cols if len(set(cols)) != len(cols) else None)
    return pd.DataFrame.from_records(rows, columns=cols)
