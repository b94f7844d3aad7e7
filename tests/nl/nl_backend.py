"""Which backend the plain-language suite runs on (``BLENDSQL_NL_BACKEND``) and the
mirrors of the tests' SQLite databases on it (used by ``conftest.py``)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

NL_BACKEND = os.environ.get("BLENDSQL_NL_BACKEND", "sqlite").lower()
#: the backend's name as the layer's messages give it ("DuckDB rejected the query: ...")
BACKEND_NAME = {"sqlite": "SQLite", "duckdb": "DuckDB", "postgresql": "PostgreSQL"}.get(
    NL_BACKEND, NL_BACKEND)


class Mirror:
    """Copies of SQLite databases on another backend, one per (database, state of its
    changes); :meth:`open` stands in for ``open_database``. ``close()`` closes every
    backend it opened."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copies: dict[tuple[Any, ...], Any] = {}
        self.sources: list[Any] = []  # kept alive, so no other connection reuses an id(...)
        self.opened: list[Any] = []

    def copy(self, flat: Path, n: int) -> Any:
        """The ``n``-th copy of the SQLite file ``flat``: what ``open_database`` opens."""
        raise NotImplementedError

    def open(self, source: Any, **kwargs: Any) -> Any:
        from blendsql.db.backend import open_database

        if isinstance(source, sqlite3.Connection):
            # rows changed, or tables made / altered (which total_changes does not count)
            version = source.execute("PRAGMA schema_version").fetchone()[0]
            key: tuple[Any, ...] = ("conn", id(source), source.total_changes, version)
        elif isinstance(source, (str, Path)) and Path(source).suffix in (".sqlite", ".db"):
            path = Path(source)
            key = ("file", str(path), path.stat().st_mtime_ns)
        else:
            return open_database(source, **kwargs)
        if key not in self.copies:
            self.sources.append(source)
            n = len(self.copies)
            flat = self.folder / f"copy{n}.sqlite"
            if isinstance(source, sqlite3.Connection):
                # serialize reads through the test's own connection (its uncommitted rows
                # too, FTS5 tables whole), where a backup would wait forever on its open
                # transaction
                image = sqlite3.connect(":memory:")
                if source.execute("PRAGMA page_count").fetchone()[0]:
                    image.deserialize(source.serialize())  # (an empty database has no image)
                out = sqlite3.connect(flat)
                image.backup(out)
                out.close()
                image.close()
            else:
                flat = Path(source)
            self.copies[key] = self.copy(flat, n)
        backend = open_database(str(self.copies[key]), **kwargs)
        self.opened.append(backend)
        return backend

    def close(self) -> None:
        for backend in self.opened:
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - a test may have closed it already
                pass
        self.opened.clear()


class DuckMirror(Mirror):
    """DuckDB files copied from the SQLite databases."""

    def copy(self, flat: Path, n: int) -> Any:
        from blendsql.db.transfer import sqlite_to_duckdb

        return sqlite_to_duckdb(flat, self.folder / f"copy{n}.duckdb")


class PgMirror(Mirror):
    """PostgreSQL databases (on the test session's server) copied from the SQLite ones;
    names keep their case, as ``sqlite_to_postgres`` copies them."""

    def __init__(self, folder: Path, server: Any) -> None:
        super().__init__(folder)
        self.server = server
        self.databases: list[str] = []

    def copy(self, flat: Path, n: int) -> Any:
        from blendsql.db.transfer import sqlite_to_postgres

        name = f"nl_{os.getpid()}_{id(self)}_{n}"
        url = self.server.create_db(name)
        self.databases.append(name)
        sqlite_to_postgres(flat, url)
        return url

    def close(self) -> None:
        super().close()
        import psycopg

        with psycopg.connect(self.server.url(), autocommit=True) as con:
            for name in self.databases:
                con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.databases.clear()
