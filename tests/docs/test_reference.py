"""The generated reference pages: the CLI from its parser, ingredient and session options
from their declarations, and the defaults the reference states are the code's."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from pathlib import Path

import pytest

from blendsql import _reference
from blendsql.cli import build_parser
from blendsql.ingredients import ANSWER, LLMQA, SUMMARY, LLMJoin, LLMMap, LLMRank, LLMValidate
from blendsql.options import KNOWN

ROOT = Path(__file__).resolve().parents[2]
BUILTINS = [LLMMap, LLMQA, LLMJoin, LLMValidate, LLMRank, ANSWER, SUMMARY]


def test_cli_reference_lists_every_command_and_flag() -> None:
    parser = build_parser()
    text = _reference.cli_reference(parser)
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subs.choices) >= {"run", "explain", "schema", "chat", "serve", "models"}
    for name, sub in subs.choices.items():
        assert f"## `blendsql {name}`" in text
        section = text.split(f"## `blendsql {name}`", 1)[1].split("\n## ", 1)[0]
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section, (name, flag)
    assert "| `--max-rows N` | rows shown in table format (default 100; 0 = all) | `100` |" in text


def test_a_new_flag_shows_up_without_editing_the_docs() -> None:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    subs.choices["schema"].add_argument("--brand-new", default=3, help="a flag added today")
    assert "| `--brand-new BRAND_NEW` | a flag added today | `3` |" in _reference.cli_reference(parser)


@pytest.mark.parametrize("cls", BUILTINS, ids=lambda c: c.__name__)
def test_options_table_has_every_declared_option(cls: type) -> None:
    table = _reference.options_table(cls)
    declared = cls.declared_options() or {}
    assert declared
    for name in declared:
        assert f"| `{name}` |" in table, name


def test_defaults_come_from_class_attributes_and_declarations() -> None:
    table = _reference.options_table(LLMMap)
    assert re.search(r"\| `value_chars` \| int \| [^|]+ \| `2000` \|", table)
    assert re.search(r"\| `scored` \| bool or int \| [^|]+ \| `False` \|", table)
    assert "(class attribute `template`)" in table
    assert re.search(r"\| `k` \| int \| [^|]+ \| `5` \|", _reference.options_table(LLMJoin))


def _literal_defaults(cls: type) -> dict[str, object]:
    """``self.setting(kwargs, "name", LITERAL)`` defaults in the class's source."""
    found: dict[str, object] = {}
    for node in ast.walk(ast.parse(inspect.getsource(inspect.getmodule(cls)))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "setting" \
                and len(node.args) == 3 and isinstance(node.args[1], ast.Constant):
            try:
                found[node.args[1].value] = ast.literal_eval(node.args[2])
            except ValueError:
                continue  # a name (a class attribute or a constant): not a literal
    return found


@pytest.mark.parametrize("cls", [LLMMap, LLMQA], ids=lambda c: c.__name__)
def test_declared_defaults_are_the_ones_the_code_uses(cls: type) -> None:
    literals = _literal_defaults(cls)
    assert literals, "the source's defaults are found"
    declared = cls.declared_options() or {}
    for name, value in literals.items():
        if name in declared and getattr(cls, name, None) is None:
            assert declared[name].default == value, (name, declared[name].default, value)


def test_session_options_table() -> None:
    table = _reference.session_options_table()
    for name in KNOWN:
        assert f"| `{name}` |" in table
    assert re.search(r"\| `model_timeout` \| [^|]+ \| `120.0` \|", table)


def test_markers_are_replaced_and_pages_use_them() -> None:
    page = "a\n<!-- blendsql:cli -->\n<!-- blendsql:options blendsql.ingredients.LLMQA -->\n"
    out = _reference.render(page)
    assert "<!--" not in out and "## `blendsql run`" in out and "| `cell_chars` |" in out
    docs = {p.name: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    assert _reference.CLI_MARKER in docs["cli.md"]
    assert _reference.SESSION_OPTIONS_MARKER in docs["budgets.md"]
    for cls in BUILTINS:
        assert f"<!-- blendsql:options blendsql.ingredients.{cls.__name__} -->" in docs["ingredients.md"]
