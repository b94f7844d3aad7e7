"""The plain-language suite on another backend: ``BLENDSQL_NL_BACKEND=duckdb`` or
``postgresql`` (the PostgreSQL server the tests start).

Every NL test builds its database in SQLite (a connection or a file). With the
variable set, the layer's entry point to the data (``blendsql.nl.source``'s
``open_database``, which ``as_backend`` calls for a connection or a path) and
``BlendSQL(...)``'s open a copy of that database on the other backend instead
(``nl_backend.py``), made afresh whenever the SQLite database changed, so the
same tests check the layer's reads, dry runs and programs there. Tests that are
about SQLite itself are marked ``sqlite_only`` and skipped there with the reason.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from nl_backend import NL_BACKEND, DuckMirror, Mirror, PgMirror  # tests/nl/nl_backend.py


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


@pytest.fixture(autouse=True)
def nl_backend(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    if NL_BACKEND == "sqlite":
        yield
        return
    if NL_BACKEND not in ("duckdb", "postgresql"):
        raise pytest.UsageError(f"BLENDSQL_NL_BACKEND={NL_BACKEND!r}: sqlite, duckdb or postgresql")
    import blendsql.blend as blend
    import blendsql.nl.source as source

    with tempfile.TemporaryDirectory(prefix=f"bsql-nl-{NL_BACKEND}-") as tmp:
        mirror: Mirror
        if NL_BACKEND == "duckdb":
            pytest.importorskip("duckdb")
            mirror = DuckMirror(Path(tmp))
        else:
            mirror = PgMirror(Path(tmp), request.getfixturevalue("postgres_server"))
        monkeypatch.setattr(source, "open_database", mirror.open)
        # and the sessions the tests make on their SQLite databases
        monkeypatch.setattr(blend, "open_database", mirror.open)
        try:
            yield
        finally:
            mirror.close()
