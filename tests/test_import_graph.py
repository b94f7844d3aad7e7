"""The import graph of the whole package: one path to the data, and no cycles.

One path to the data: the plain-language layer reads through the ``Backend``
interface only (no driver, no ``.conn``), so each of its statements is traced,
guarded and time-limited on every backend; ``db/backend.py`` imports none of its
implementations, and the engine none of them either. The rules (``plan/``) import
neither the databases nor the models, and run no statement. For these checks every
import statement counts, wherever it stands (module level, a ``TYPE_CHECKING``
block, a function body).

No cycles: the package's modules, and its folders (each subpackage and each
top-level module a unit), form no import cycle. Imports in function bodies
count (a cycle hidden in a function is still a cycle in the design);
``TYPE_CHECKING`` imports do not.

Layers: the folders stand in the order of :data:`LAYERS` (the leaves, then
models / db / ingredients below every stage, then the pipeline's stages
``grammar`` -> ``plan`` -> ``execute``, then the plain-language layer, the
public API and the front ends), and each imports only folders of an earlier
layer (or its own).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

import blendsql

ROOT = Path(blendsql.__file__).parent
DRIVERS = ("sqlite3", "duckdb", "psycopg")
IMPLEMENTATIONS = ("blendsql.db.database", "blendsql.db.duck", "blendsql.db.postgres")
#: Spark's own modules (``blendsql/db/spark*.py``): the only ones that may import Spark code
SPARK_MODULES = tuple(sorted(f"blendsql.db.{p.stem}" for p in (ROOT / "db").glob("spark*.py")))


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


def spark_imports(names: set[str]) -> set[str]:
    """The Spark code among imported modules: pyspark, or a ``blendsql.db.spark*`` module."""
    return {n for n in names if n == "pyspark" or n.startswith("pyspark.")
            or n.startswith("blendsql.db.spark")}


OUTSIDE_SPARK = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                       if not (p.parent == ROOT / "db" and p.name.startswith("spark")))


@pytest.mark.parametrize("rel", OUTSIDE_SPARK)
def test_nothing_outside_the_spark_backend_imports_spark_code(rel: str) -> None:
    """Spark is a backend plugin: the engine reaches it through ``Backend.capabilities`` and
    ``Backend.executors``, never by importing it."""
    bad = spark_imports(imported(ROOT / rel))
    assert not bad, f"blendsql/{rel} imports {sorted(bad)}: go through the Backend"


def test_the_spark_check_knows_the_spark_modules_and_sees_an_import(tmp_path: Path) -> None:
    assert {"blendsql.db.spark", "blendsql.db.spark_calls"} <= set(SPARK_MODULES)
    assert "db/guarded.py" in OUTSIDE_SPARK and "db/spark_calls.py" not in OUTSIDE_SPARK
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from pyspark.sql import types\n"
                   "    from blendsql.db.spark_calls import ExecutorModel\n"
                   "    import blendsql.db.spark_extra\n")
    assert spark_imports(imported(src)) == {
        "pyspark.sql", "pyspark.sql.types", "blendsql.db.spark_calls",
        "blendsql.db.spark_calls.ExecutorModel", "blendsql.db.spark_extra"}


PLAN_MODULES = sorted((ROOT / "plan").glob("*.py"))


@pytest.mark.parametrize("path", PLAN_MODULES, ids=lambda p: p.name)
def test_the_rules_import_neither_the_databases_nor_the_models(path: Path) -> None:
    """``plan/`` holds pure decisions: statistics come in as data (``run.statistics``),
    and the SQL, temp tables and model calls of a step are ``execute/``'s."""
    bad = _under(imported(path), ("blendsql.db", "blendsql.models") + DRIVERS)
    assert not bad, f"blendsql/plan/{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", PLAN_MODULES, ids=lambda p: p.name)
def test_the_rules_run_no_statement_and_read_no_backend(path: Path) -> None:
    """No ``run.sql(...)`` / ``run.db`` / ``run.model`` in ``plan/`` (the protocol
    ``plan/context.py`` declares them for ``execute/``'s helpers)."""
    if path.name == "context.py":
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and n.attr in ("sql", "db", "model") and isinstance(n.value, ast.Name)
            and n.value.id == "run"]
    assert not uses, f"blendsql/plan/{path.name} reaches the database on lines {uses}"


def test_the_checks_would_see_a_violation(tmp_path: Path) -> None:
    """The AST reading finds imports in functions and TYPE_CHECKING blocks too."""
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlite3\n"
                   "def f():\n    from blendsql.db.database import Database\n    return x.conn\n")
    assert _under(imported(src), DRIVERS + IMPLEMENTATIONS) == {
        "sqlite3", "blendsql.db.database", "blendsql.db.database.Database"}


# ---------------------------------------------------------------- cycles

def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root`` by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement, nested ones included, leaving out ``if TYPE_CHECKING:`` blocks."""
    for node in body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from _statements(node.orelse)
            continue
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _statements([child])
            elif isinstance(child, ast.excepthandler):
                yield from _statements(child.body)


def runtime_imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The package modules ``path`` (module ``name``) imports at run time.

    ``from a import b`` is the module ``a.b`` when there is one, else ``a``.
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif base in known:
                    found.add(base)
    found.discard(name)
    return found


@functools.cache
def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time (read once per root)."""
    known = module_names(root)
    return {name: runtime_imports(path, name, known) for name, path in known.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The cycles of ``graph``: its strongly connected parts with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.add(top)
                    if top == node:
                        break
                if len(part) > 1:
                    out.append(part)
    return out


def folder_of(module: str, root: Path) -> str:
    """The unit a module belongs to: its top-level subpackage, or the top-level file."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    return parts[1] if (root / parts[1]).is_dir() else f"{parts[1]}.py"


def folder_graph(graph: dict[str, set[str]], root: Path) -> dict[str, set[str]]:
    """Folder -> the folders it imports (edges inside one folder left out)."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = folder_of(module, root)
        out.setdefault(here, set()).update(
            f for f in (folder_of(t, root) for t in targets) if f != here)
    return out


def cycles_by_folder(root: Path) -> dict[str, list[str]]:
    """Each folder's cycles in words: module cycles inside or through it, folder cycles."""
    graph = import_graph(root)
    report: dict[str, list[str]] = {}
    for part in strongly_connected(graph):
        edges = sorted(f"{a} -> {b}" for a in part for b in graph[a] & part)
        for folder in {folder_of(m, root) for m in part}:
            report.setdefault(folder, []).append("modules: " + "; ".join(edges))
    folders = folder_graph(graph, root)
    for part in strongly_connected(folders):
        for folder in part:
            report.setdefault(folder, []).append("folders: " + " <-> ".join(sorted(part)))
    return report


def folder_cycles(root: Path) -> list[frozenset[str]]:
    return [frozenset(p) for p in strongly_connected(folder_graph(import_graph(root), root))]


FOLDERS = sorted(folder_graph(import_graph(ROOT), ROOT))


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_import_cycle_runs_through(folder: str) -> None:
    found = cycles_by_folder(ROOT).get(folder, [])
    assert not found, f"blendsql/{folder} is on import cycles:\n" + "\n".join(found)


# ---------------------------------------------------------------- layers

#: the folders from the bottom up; a folder imports only those of earlier layers (or its own)
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: errors, value rendering, option type checks, text display, the result type
    ("errors.py", "text_values.py", "option_types.py", "_display.py", "plugins.py", "eval"),
    ("budget.py", "smoothie.py", "cancel.py"),
    # below every stage: model clients, retrieval, databases, ingredient classes
    ("models", "retrieval"),
    ("db", "ingredients"),
    # the pipeline: grammar -> plan -> execute
    ("grammar",),
    ("plan",),
    ("options.py",),
    ("execute",),
    # above the engine: the plain-language layer (through the Session protocol), the API
    ("nl",),
    ("blend.py",),
    ("_magic.py",),  # the IPython magic, loaded by __init__'s load_ipython_extension
    ("__init__.py",),
    ("web",),
    ("cli.py",),
    ("_reference.py",),  # the documentation's generated pages (the CLI's parser)
)


def layer_problems(folders: dict[str, set[str]],
                   layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each folder edge that points to the same or a later layer, in words."""
    rank = {f: i for i, layer in enumerate(layers) for f in layer}
    problems = [f"{f} has no layer" for f in sorted(folders) if f not in rank]
    for here, targets in sorted(folders.items()):
        for there in sorted(targets):
            if here in rank and there in rank and rank[there] >= rank[here]:
                problems.append(f"{here} imports {there} (layer {rank[there]} >= {rank[here]})")
    return problems


def test_each_folder_imports_only_earlier_layers() -> None:
    problems = layer_problems(folder_graph(import_graph(ROOT), ROOT), LAYERS)
    assert not problems, "\n".join(problems)


def test_the_layer_check_sees_an_upward_import() -> None:
    folders = {"grammar": {"errors.py"}, "plan": {"grammar", "execute"}, "execute": {"plan"},
               "errors.py": set(), "new": set()}
    layers = (("errors.py",), ("grammar",), ("plan",), ("execute",))
    assert layer_problems(folders, layers) == [
        "new has no layer", "plan imports execute (layer 3 >= 2)"]


def test_the_cycle_check_sees_function_imports_and_skips_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.sub import b\n    return b\n")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nimport pkg.a\n"
                              "if TYPE_CHECKING:\n    from pkg import d\n")
    (pkg / "d.py").write_text("try:\n    import pkg.c\nexcept ImportError:\n    pass\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.d"] == {"pkg.c"}
    assert strongly_connected(graph) == [{"pkg.a", "pkg.sub.b"}]
    assert folder_cycles(pkg) == [frozenset({"a.py", "sub"})]
    report = cycles_by_folder(pkg)
    assert set(report) == {"a.py", "sub"}
    assert "modules: pkg.a -> pkg.sub.b; pkg.sub.b -> pkg.a" in report["sub"]
