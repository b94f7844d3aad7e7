"""A fourth backend is one module and one registration (docs/ARCHITECTURE.md).

The toy backend below is a second SQLite-backed class written only against
``GuardedBackend``'s hooks (no code of ``database.py``); it claims a marker
source type through ``register_backend``, the one mechanism
``open_database`` (and so ``BlendSQL(...)``) picks backends by, and a query
with an ingredient runs through it with the same answer as on SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.db import backend
from blendsql.db.backend import engine_value, open_database, quote, register_backend
from blendsql.db.guarded import GuardedBackend
from blendsql.db.statements import leading_keyword
from blendsql.errors import ExecutionError, UnsafeQueryError
from blendsql.ingredients import MapIngredient

SINGERS = (Path(__file__).resolve().parents[1] / "data" / "spider" / "concert_singer"
           / "concert_singer.sqlite")
QUERY = ("SELECT Name, Age FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
         "AND Age > 20 ORDER BY Age")


class StartsWith(MapIngredient):
    """True where str(value) starts with the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(v).startswith(str(question)) for v in values]


class ToySource:
    """A source only the toy backend accepts: the path of a SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path


class ToyBackend(GuardedBackend):
    """SQLite through sqlglot's SQLite dialect, read-only by statement keyword."""

    name = "Toy"

    def __init__(self, source: ToySource, *, allow_writes: bool = False) -> None:
        super().__init__(allow_writes=allow_writes, dialect="sqlite")
        self.conn = sqlite3.connect(f"{source.path.resolve().as_uri()}?mode=ro", uri=True,
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


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy backend registered for this test only."""
    monkeypatch.setattr(backend, "BACKENDS", list(backend.BACKENDS))
    register_backend("toy", ToyBackend, lambda source: isinstance(source, ToySource))


@pytest.mark.usefixtures("toy_registered")
def test_a_registered_backend_opens_its_sources_and_runs_a_query() -> None:
    db = open_database(ToySource(SINGERS))
    assert isinstance(db, ToyBackend) and backend.backend_kind(ToySource(SINGERS)) == "toy"
    assert backend.backend_kind(str(SINGERS)) == "sqlite"  # the others' sources unchanged

    toy = BlendSQL(ToySource(SINGERS), ingredients=[StartsWith])
    want = BlendSQL(str(SINGERS), ingredients=[StartsWith]).execute(QUERY).df
    # the (value, output) table rather than bound passing values: the toy's _store runs
    got = toy.execute(QUERY, rules_off={"static_filter"}).df
    assert got.values.tolist() == want.values.tolist() and len(got) > 0
    assert isinstance(toy.db, ToyBackend)
    # the engine's rows went to a temp table through the toy's _store, and were dropped
    assert any(s.startswith("CREATE TEMPORARY TABLE") for s in toy.db.statements)
    assert toy.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)
    with pytest.raises(UnsafeQueryError, match="DELETE"):  # the shared guard's error
        toy.execute("DELETE FROM singer")
    toy.db.close()


def test_without_the_registration_the_marker_is_sqlites_clear_error() -> None:
    with pytest.raises(ExecutionError, match="cannot open a database from ToySource"):
        open_database(ToySource(SINGERS))


def test_registering_a_kind_again_replaces_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "BACKENDS", list(backend.BACKENDS))
    register_backend("toy", ToyBackend, lambda source: False)
    register_backend("toy", f"{__name__}:ToyBackend",
                     lambda source: isinstance(source, ToySource))
    assert [b.kind for b in backend.BACKENDS] == ["toy", "postgres", "spark", "duckdb", "sqlite"]
    assert backend.implementation("toy") is ToyBackend  # "module:Class" imported on use
