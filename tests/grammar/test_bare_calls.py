"""SUQL's bare ``ANSWER(..)`` / ``SUMMARY(..)``: golden round trips and the shadowing rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from blendsql.errors import ParseError
from blendsql.grammar import IngredientCall, parse, to_blendsql
from blendsql.grammar.scanner import sqlite_functions
from blendsql.ingredients import BUILTINS
from blendsql.ingredients.base import IngredientRegistry, MapIngredient

FIXTURE = Path(__file__).with_name("bare_roundtrip.sql")


def _blocks() -> list[tuple[str, int]]:
    out = []
    for block in FIXTURE.read_text().split("\n;;\n"):
        m = re.search(r"-- calls=(\d+)\n", block)
        assert m, block
        out.append((block[m.end():].strip(), int(m.group(1))))
    return out


REG = IngredientRegistry(BUILTINS)


@pytest.mark.parametrize("query,n", _blocks())
def test_bare_roundtrip(query: str, n: int) -> None:
    tree = parse(query, REG)
    calls = list(tree.find_all(IngredientCall))
    assert len(calls) == n
    rendered = to_blendsql(tree)
    again = parse(rendered, REG)
    assert again == tree
    assert to_blendsql(again) == rendered
    for c in calls:
        if c.name.upper() in ("ANSWER", "SUMMARY"):
            assert c.brace == "" and f"{c.name}(" in rendered


def test_braced_form_keeps_its_braces() -> None:
    tree = parse("SELECT {{ANSWER(reviews, 'q')}} FROM r", REG)
    assert to_blendsql(tree) == "SELECT {{ANSWER(reviews, 'q')}} FROM r"


def test_bare_needs_declared_flag() -> None:
    """A map ingredient without ``bare_call`` is only a call inside braces."""

    class Shout(MapIngredient):
        """Upper-cases."""

    reg = IngredientRegistry([Shout])
    tree = parse("SELECT Shout(a) FROM t", reg)
    assert tree.find(IngredientCall) is None


def test_never_shadows_sqlite_function() -> None:
    """``bare_call`` on a SQLite function name is ignored: LOWER stays SQL."""

    class LOWER(MapIngredient):  # noqa: N801 - the SQL name
        """Pretends to lower-case."""

        bare_call = True

    assert "lower" in sqlite_functions()
    reg = IngredientRegistry([LOWER])
    assert parse("SELECT LOWER(a) FROM t", reg).find(IngredientCall) is None
    assert parse("SELECT {{LOWER(a)}} FROM t", reg).find(IngredientCall) is not None


def test_unclosed_bare_call_reports_position() -> None:
    with pytest.raises(ParseError) as info:
        parse("SELECT ANSWER(reviews, 'q' FROM r", REG)
    assert info.value.hint
