"""One path to the data: who may import a database driver or a backend implementation.

Why: the plain-language layer used to talk to ``sqlite3`` directly (21 raw
``conn.execute`` calls), so none of its statements was traced, guarded or
time-limited, and it worked on SQLite only; ``db/backend.py`` imported all
three implementations (an import cycle through every backend), and the
engine reached past the interface into the SQLite implementation. Every
import statement counts, wherever it stands (module level, a
``TYPE_CHECKING`` block, a function body).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import blendsql

ROOT = Path(blendsql.__file__).parent
DRIVERS = ("sqlite3", "duckdb", "psycopg")
IMPLEMENTATIONS = ("blendsql.db.database", "blendsql.db.duck", "blendsql.db.postgres")


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere (``from a import b``: ``a`` and ``a.b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _under(names: set[str], roots: tuple[str, ...]) -> set[str]:
    return {n for n in names if any(n == r or n.startswith(r + ".") for r in roots)}


NL_MODULES = sorted((ROOT / "nl").glob("*.py"))


@pytest.mark.parametrize("path", NL_MODULES, ids=lambda p: p.name)
def test_the_language_layer_imports_no_driver_and_no_backend_implementation(path: Path) -> None:
    bad = _under(imported(path), DRIVERS + IMPLEMENTATIONS)
    assert not bad, f"blendsql/nl/{path.name} imports {sorted(bad)}: read through the Backend"


@pytest.mark.parametrize("path", NL_MODULES, ids=lambda p: p.name)
def test_the_language_layer_never_touches_a_driver_connection(path: Path) -> None:
    """``x.conn`` is the driver's connection: statements run on it bypass the trace."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "conn"]
    assert not uses, f"blendsql/nl/{path.name} uses .conn on lines {uses}"


def test_the_interface_imports_none_of_its_implementations() -> None:
    bad = _under(imported(ROOT / "db" / "backend.py"), IMPLEMENTATIONS)
    assert not bad, f"db/backend.py imports {sorted(bad)}"


@pytest.mark.parametrize("rel", ["blend.py", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "execute").glob("*.py"))])
def test_the_engine_stays_off_the_sqlite_implementation(rel: str) -> None:
    bad = _under(imported(ROOT / rel), IMPLEMENTATIONS)
    assert not bad, f"blendsql/{rel} imports {sorted(bad)}: use blendsql.db.backend"


def test_the_checks_would_see_a_violation(tmp_path: Path) -> None:
    """The AST reading finds imports in functions and TYPE_CHECKING blocks too."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlite3\n"
                   "def f():\n    from blendsql.db.database import Database\n    return x.conn\n")
    assert _under(imported(src), DRIVERS + IMPLEMENTATIONS) == {
        "sqlite3", "blendsql.db.database", "blendsql.db.database.Database"}
