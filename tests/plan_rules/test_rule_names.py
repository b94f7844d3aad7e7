"""A rule is named once, in its entry of ``RULES``; a new call rule is one function and
that entry.

- No code of the package outside ``blendsql/plan/rules.py`` writes a rule's name as a
  string: it holds the :class:`Rule` (or asks ``rule_of(fn)``), so renaming or adding a
  rule cannot leave a stale string switch somewhere.
- A toy call rule, written as one function here and added as one entry to ``RULES``,
  runs at its hook, traces its decisions under its name, is switched off by
  ``rules_off`` with the others, and keeps the query's rows.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

import blendsql
from blendsql.errors import OptionError
from blendsql.grammar.nodes import IngredientCall
from blendsql.plan import rules
from blendsql.plan.context import RunContext
from blendsql.plan.lookup import null_passes_statically, replace_node
from blendsql.plan.static_filter import passing_values

from .rule_fixtures import session

PACKAGE = Path(blendsql.__file__).parent
RULES_FILE = PACKAGE / "plan" / "rules.py"


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def rule_name_strings(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of each string constant (docstrings aside) that is a rule's name."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value in names and id(n) not in skip)


def test_no_rule_name_is_written_as_a_string_outside_the_list() -> None:
    names = {r.name for r in rules.RULES}
    found = [f"blendsql/{p.relative_to(PACKAGE)}:{line}: {name!r}"
             for p in sorted(PACKAGE.rglob("*.py")) if p != RULES_FILE
             for line, name in rule_name_strings(p.read_text(encoding="utf-8"), names)]
    assert not found, ("rule names written as strings (hold the Rule, or rule_of(fn)):\n"
                       + "\n".join(found))


def test_the_name_check_sees_a_string_but_not_a_docstring() -> None:
    src = ('"""The lazy rule."""\ndef f(run):\n    """lazy"""\n'
           '    return rule_on(run.options, "lazy") or {"x": "lazy_skipped"}\n')
    assert rule_name_strings(src, {"lazy"}) == [(4, "lazy")]


# ---------------------------------------------------------------- a toy call rule

INLINE_AT_MOST = 20


def inline_passing(run: RunContext, tree: exp.Expression, call: IngredientCall,
                   atom: exp.Expression | None, value: exp.Expression, values: list[Any],
                   stored: list[Any]) -> exp.Expression | None:
    """A filter passed by a few values becomes ``value IN (v1, v2, ..)``, with no table.

    Why: a temp table costs two statements (create, drop) for a handful of values
    that a literal list carries as well.
    """
    if atom is None or null_passes_statically(atom, call) is not False:
        return None
    passing = passing_values(atom, call, values, stored)
    if passing is None or len(passing) > INLINE_AT_MOST:
        return None
    run.decided(f"{len(passing)} passing value(s) of {call.name} inlined",
                call=run.call_text(call))
    listed = [exp.convert(v) for v in passing] or [exp.null()]
    test = exp.Paren(this=exp.In(this=value.copy(), expressions=listed))
    return replace_node(tree, atom, test, in_place=True)


@pytest.fixture
def toy_rule(monkeypatch: pytest.MonkeyPatch) -> rules.Rule:
    """The toy rule as one entry of RULES, before static_filter (same hook, tried first)."""
    toy = rules.call_rule("inline_passing", inline_passing, rules.Hook.STORE)
    at = next(i for i, r in enumerate(rules.RULES) if r.hook is rules.Hook.STORE)
    listed = rules.RULES[:at] + (toy,) + rules.RULES[at:]
    # BY_NAME and OPTIONAL are read from RULES when the module loads
    monkeypatch.setattr(rules, "RULES", listed)
    monkeypatch.setattr(rules, "BY_NAME", {r.name: r for r in listed})
    monkeypatch.setattr(rules, "OPTIONAL", tuple(r.name for r in listed if not r.required))
    return toy


QUERY = "SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('A', city.Name)}}"
TWIN = "SELECT Name FROM city WHERE CountryCode = 'NLD' AND substr(Name, 1, 1) = 'A'"


def decisions(smoothie: Any) -> list[str]:
    return [t.details["rule"] for t in smoothie.trace if "rule" in t.details]


def test_a_toy_call_rule_runs_at_its_hook_under_its_name(toy_rule: rules.Rule) -> None:
    b = session()
    try:
        want = sorted(b.execute(TWIN).df["Name"])
        on = b.execute(QUERY)
        assert sorted(on.df["Name"]) == want and want
        assert "inline_passing" in decisions(on) and "static_filter" not in decisions(on)
        assert not [t for t in on.trace if t.kind == "temp_table"]  # no table for it
        assert toy_rule.doc.startswith("A filter passed by a few values") and "Why" in toy_rule.doc

        off = b.execute(QUERY, rules_off={"inline_passing"})
        assert sorted(off.df["Name"]) == want
        assert "inline_passing" not in decisions(off) and "static_filter" in decisions(off)
    finally:
        b.close()


def test_a_toy_rule_name_is_checked_like_the_others(toy_rule: rules.Rule) -> None:
    b = session()
    try:
        with pytest.raises(OptionError) as e:
            b.execute(QUERY, rules_off={"inline_pasing"})
        assert "inline_passing" in (e.value.hint or "")
    finally:
        b.close()


def test_a_call_rule_names_a_known_hook() -> None:
    with pytest.raises(TypeError, match="hooks: ORDER, SHARE, STRATEGY, STORE"):
        rules.call_rule("toy", inline_passing, "store")  # type: ignore[arg-type]
    assert rules.CALL_HOOKS == tuple(rules.Hook)
