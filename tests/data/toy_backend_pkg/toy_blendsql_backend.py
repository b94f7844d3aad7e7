"""A toy blendsql backend: a SQLite file opened from a ``toy://<path>`` URL.

Written only against ``GuardedBackend``'s hooks (no code of blendsql's own
SQLite backend) and registered by its package's ``pyproject.toml`` in the
``blendsql.backends`` entry-point group: ``BlendSQL("toy://" + path)``
then runs on it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blendsql.db.backend import Capabilities, engine_value, quote
from blendsql.db.guarded import GuardedBackend
from blendsql.db.statements import leading_keyword
from blendsql.errors import ExecutionError

SCHEME = "toy://"


class ToyBackend(GuardedBackend):
    """SQLite through sqlglot's SQLite dialect, read-only by statement keyword."""

    name = "Toy"
    capabilities = Capabilities(bound_params=250)

    @classmethod
    def accepts(cls, source: Any) -> bool:
        return isinstance(source, str) and source.startswith(SCHEME)

    def __init__(self, source: str, *, allow_writes: bool = False) -> None:
        super().__init__(allow_writes=allow_writes, dialect="sqlite")
        path = Path(source[len(SCHEME):])
        self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                                    check_same_thread=False, isolation_level=None)
        self.statements: list[str] = []

    def _interrupter(self) -> Any:
        return self.conn

    def _check_user_statement(self, sql: str) -> None:
        if leading_keyword(sql) not in ("SELECT", "WITH", "EXPLAIN"):
            raise self.refused(leading_keyword(sql), sql)

    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        self.statements.append(text)
        cur = self.conn.execute(text, binds if binds is not None else ())
        rows = self.fetch_limited(cur.fetchmany, text)
        return [d[0] for d in cur.description or ()], rows

    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        if not isinstance(e, sqlite3.Error):
            return None
        return ExecutionError(f"Toy error: {e}\n  in: {sql}", hint="check the SQL")

    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        cols = ", ".join(f"{quote(c)} {t}" for c, t in zip(columns, types, strict=True))
        self._run(f"CREATE TEMP TABLE {quote(name)} ({cols})", (), engine_value)
        marks = ", ".join("?" for _ in columns)
        self.conn.executemany(f"INSERT INTO temp.{quote(name)} VALUES ({marks})", rows)

    def tables(self) -> list[str]:
        _, rows = self.run_native("SELECT name FROM sqlite_master WHERE type IN "
                                  "('table', 'view') ORDER BY name")
        return [r[0] for r in rows]
