"""A new backend is one entry point plus one class (docs/backends.md).

The toy backend (``tests/data/toy_backend_pkg``: a ``pyproject.toml`` and one
module) is a second SQLite-backed class written only against
``GuardedBackend``'s hooks; installed here as its metadata would be (a
dist-info on ``sys.path``), ``BlendSQL("toy://...")`` finds it through the
``blendsql.backends`` entry-point group and answers a query with an ingredient
as SQLite does. ``register_backend`` adds a backend from Python the same way.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

from blendsql import BlendSQL
from blendsql.db import backend
from blendsql.db.backend import (
    BUILTIN_POINTS,
    GROUP,
    Backend,
    Capabilities,
    backend_kind,
    backends,
    open_database,
    register_backend,
    reload_backends,
    unregister_backend,
)
from blendsql.errors import ExecutionError, UnsafeQueryError
from blendsql.ingredients import MapIngredient

ROOT = Path(__file__).resolve().parents[2]
TOY_PKG = ROOT / "tests" / "data" / "toy_backend_pkg"
SINGERS = ROOT / "tests" / "data" / "spider" / "concert_singer" / "concert_singer.sqlite"
TOY_URL = f"toy://{SINGERS}"
QUERY = ("SELECT Name, Age FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
         "AND Age > 20 ORDER BY Age")


class StartsWith(MapIngredient):
    """True where str(value) starts with the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(v).startswith(str(question)) for v in values]


def install(site: Path, pkg: Path) -> None:
    """``pkg`` as ``pip install`` would leave it in ``site``: its modules and a
    dist-info whose entry points are those its pyproject.toml declares."""
    project = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]
    for module in pkg.glob("*.py"):
        shutil.copy(module, site / module.name)
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    lines = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items())
             for group, points in project["entry-points"].items()]
    (dist / "entry_points.txt").write_text("\n".join(lines))


@pytest.fixture
def toy_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The toy package installed (on sys.path) for this test only; its module."""
    install(tmp_path, TOY_PKG)
    monkeypatch.syspath_prepend(str(tmp_path))
    reload_backends()
    yield importlib.import_module("toy_blendsql_backend")
    sys.modules.pop("toy_blendsql_backend", None)
    reload_backends()


def test_the_toy_package_declares_one_entry_point_in_the_group() -> None:
    project = tomllib.loads((TOY_PKG / "pyproject.toml").read_text())["project"]
    assert project["entry-points"] == {GROUP: {"toy": "toy_blendsql_backend:ToyBackend"}}


def test_an_installed_backend_plugin_opens_its_sources_and_answers_a_query(
        toy_installed: Any) -> None:
    points = importlib.metadata.entry_points(group=GROUP)
    assert "toy" in points.names
    assert [e.kind for e in backends()] == ["toy", *BUILTIN_POINTS]  # asked before the built-ins
    assert backend_kind(TOY_URL) == "toy" and backend_kind(str(SINGERS)) == "sqlite"

    toy = BlendSQL(TOY_URL, ingredients=[StartsWith])
    assert isinstance(toy.db, toy_installed.ToyBackend)
    assert toy.db.capabilities == Capabilities(bound_params=250)
    with BlendSQL(str(SINGERS), ingredients=[StartsWith]) as sqlite:
        want = sqlite.execute(QUERY).df
    # the (value, output) table rather than bound passing values: the toy's _store runs
    got = toy.execute(QUERY, rules_off={"static_filter"}).df
    assert got.values.tolist() == want.values.tolist() and len(got) > 0
    # no SQL functions declared: the map's outputs went to a temp table, dropped after
    assert any(s.startswith("CREATE TEMPORARY TABLE") for s in toy.db.statements)
    assert toy.db.conn.execute("SELECT COUNT(*) FROM sqlite_temp_master").fetchone() == (0,)
    with pytest.raises(UnsafeQueryError, match="DELETE"):  # the shared guard's error
        toy.execute("DELETE FROM singer")
    toy.close()


def test_without_the_plugin_its_source_is_sqlites_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError):
        open_database(f"toy://{tmp_path / 'missing.sqlite'}")


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(
        '[project]\nname = "broken-backends"\nversion = "1"\n'
        f'[project.entry-points."{GROUP}"]\n'
        'gone = "no_such_module_here:Backend"\nnot_a_class = "json:dumps"\n'
        'sqlite = "json:JSONDecoder"\n')
    site = tmp_path / "site"
    site.mkdir()
    install(site, pkg)
    monkeypatch.syspath_prepend(str(site))
    reload_backends()
    try:
        with pytest.warns(RuntimeWarning) as caught:
            kinds = [e.kind for e in backends()]
        assert kinds == list(BUILTIN_POINTS)
        said = " ".join(str(w.message) for w in caught)
        assert "could not be loaded" in said and "not a subclass" in said
        assert "'sqlite'" in said and "name is taken" in said
    finally:
        reload_backends()


def test_the_built_in_entry_points_match_pyproject() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[GROUP] == BUILTIN_POINTS
    for kind, value in BUILTIN_POINTS.items():
        module, _, name = value.partition(":")
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, Backend) and isinstance(cls.capabilities, Capabilities), kind


def test_a_backend_registered_from_python_is_asked_first_and_replaced_by_kind(
        toy_installed: Any) -> None:
    toy = toy_installed.ToyBackend
    try:
        register_backend("mine", toy, lambda source: False)
        register_backend("mine", "toy_blendsql_backend:ToyBackend",
                         lambda source: str(source).startswith("mine://"))
        assert [e.kind for e in backends()] == ["mine", "toy", *BUILTIN_POINTS]
        assert backend.implementation("mine") is toy  # "module:Class" imported on use
        assert backend_kind("mine://x") == "mine"
        register_backend("toy", toy, lambda source: False)  # shadows the entry point
        assert backend_kind(TOY_URL) == "sqlite"
    finally:
        unregister_backend("mine")
        unregister_backend("toy")
    assert [e.kind for e in backends()] == ["toy", *BUILTIN_POINTS]


def test_capabilities_are_declared_values() -> None:
    from blendsql.db.database import Database
    from blendsql.db.duck import DuckDBDatabase
    from blendsql.db.postgres import PostgresDatabase
    from blendsql.db.spark import SparkBackend

    assert Database.capabilities.functions and Database.capabilities.collectors
    assert not DuckDBDatabase.capabilities.functions and DuckDBDatabase.capabilities.full_text
    assert PostgresDatabase.capabilities.full_text and not PostgresDatabase.capabilities.executors
    assert SparkBackend.capabilities.executors and not SparkBackend.capabilities.full_text
    with pytest.raises(ValueError, match="bound_params"):
        Capabilities(bound_params=0)
    with BlendSQL(str(SINGERS)) as bsql, pytest.raises(ExecutionError,
                                                       match="no calls on executors"):
        _ = bsql.db.executors
