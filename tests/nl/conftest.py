"""The plain-language suite on another backend: ``BLENDSQL_NL_BACKEND=duckdb``.

Every NL test builds its database in SQLite (a connection or a file). With the
variable set, the layer's entry point to the data (``blendsql.nl.source``'s
``open_database``, which ``as_backend`` calls for a connection or a path) opens
a DuckDB copy of that database instead, made afresh whenever the SQLite
database changed, so the same tests check the layer's reads, dry runs and
programs on DuckDB. Tests that are about SQLite itself are marked
``sqlite_only`` and skipped there with the reason.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

NL_BACKEND = os.environ.get("BLENDSQL_NL_BACKEND", "sqlite").lower()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only(reason): a test of SQLite itself, skipped "
                            "when BLENDSQL_NL_BACKEND names another backend")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if NL_BACKEND == "sqlite":
        return
    for item in items:
        mark = item.get_closest_marker("sqlite_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "a test of SQLite itself"
            item.add_marker(pytest.mark.skip(reason=f"on {NL_BACKEND}: {why}"))


class DuckMirror:
    """DuckDB copies of SQLite databases, one per (database, state of its changes)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copies: dict[tuple[Any, ...], Any] = {}
        self.sources: list[Any] = []  # kept alive, so no other connection reuses an id(...)

    def open(self, source: Any) -> Any:
        from blendsql.db.backend import open_database
        from blendsql.db.transfer import sqlite_to_duckdb

        if isinstance(source, sqlite3.Connection):
            key: tuple[Any, ...] = ("conn", id(source), source.total_changes)
        elif isinstance(source, (str, Path)) and Path(source).suffix in (".sqlite", ".db"):
            path = Path(source)
            key = ("file", str(path), path.stat().st_mtime_ns)
        else:
            return open_database(source)
        if key not in self.copies:
            self.sources.append(source)
            n = len(self.copies)
            flat = self.folder / f"copy{n}.sqlite"
            if isinstance(source, sqlite3.Connection):
                # serialize reads through the test's own connection (its uncommitted rows
                # too, FTS5 tables whole), where a backup would wait forever on its open
                # transaction
                image = sqlite3.connect(":memory:")
                image.deserialize(source.serialize())
                out = sqlite3.connect(flat)
                image.backup(out)
                out.close()
                image.close()
            else:
                flat = Path(source)
            self.copies[key] = sqlite_to_duckdb(flat, self.folder / f"copy{n}.duckdb")
        return open_database(str(self.copies[key]))


@pytest.fixture(autouse=True)
def nl_backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if NL_BACKEND == "sqlite":
        yield
        return
    if NL_BACKEND != "duckdb":
        raise pytest.UsageError(f"BLENDSQL_NL_BACKEND={NL_BACKEND!r}: sqlite or duckdb")
    pytest.importorskip("duckdb")
    import blendsql.nl.source as source

    with tempfile.TemporaryDirectory(prefix="bsql-nl-duck-") as tmp:
        monkeypatch.setattr(source, "open_database", DuckMirror(Path(tmp)).open)
        yield
