"""No import cycles inside ``blendsql/execute`` and ``blendsql/plan``.

Why: a helper module that imports ``execute/engine.py``'s ``Run`` back
(under ``TYPE_CHECKING`` or inside a function) ties itself to the whole
engine, so it cannot be read, tested or replaced on its own. Every
import statement counts here, wherever it stands (module level, a
``TYPE_CHECKING`` block, a function body): a cycle hidden in a function is
still a cycle in the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import blendsql

ROOT = Path(blendsql.__file__).parent
PACKAGES = ("execute", "plan")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).glob("*.py")):
            out[module_name(path)] = path
    return out


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Modules of ``known`` that ``path`` imports anywhere in its text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.stem == "__init__" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                base = ".".join(up[:len(up) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            if t in known and t != name:
                found.add(t)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, name, known) for name, path in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``g`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_graph_sees_the_packages() -> None:
    g = graph()
    assert "blendsql.execute.engine" in g and "blendsql.plan.rules" in g
    assert "blendsql.plan.calls" in g["blendsql.plan.rules"]


def test_finder_reports_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_execute_and_plan() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
