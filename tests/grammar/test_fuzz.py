"""Hypothesis fuzzing: any text yields an expression or a BlendSQLError, nothing else."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from blendsql.errors import BlendSQLError, ParseError
from blendsql.grammar import parse, to_blendsql

from .conftest import make_registry
from .fixtures import roundtrip_queries

REGISTRY = make_registry()
GOOD = roundtrip_queries()
PIECES = [
    "{{", "}}", "<<", ">>", "(", ")", "'", '"', "`", "[", "]", ",", ";", "?", ":p0", ":x",
    "--", "/*", "*/", "\n", " ", "=", "::", "||", "LLMMap", "llmqa", "LLMJoin", "StartsWith",
    "SELECT", "FROM", "WHERE", "JOIN", "ON", "AND", "NOT", "IN", "t", "t.c", "'t::c'", "1",
    "options=", "left_on=", "right_on=", "(SELECT a FROM t)", "\\", "''", "{", "}", "<", ">",
]
SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def check(text: str) -> None:
    """The property: an expression that renders and re-parses, or a ParseError that points into the text."""
    try:
        tree = parse(text, REGISTRY)
    except ParseError as err:
        lines = text.splitlines() or [""]
        if err.line is not None:
            assert 1 <= err.line <= max(len(lines), 1) + 1
            assert err.column is not None and err.column >= 1
        assert err.hint
        return
    except BlendSQLError:
        return
    assert isinstance(tree, exp.Expression)
    rendered = to_blendsql(tree)
    assert isinstance(rendered, str)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A good fixture query with a few characters inserted, deleted or swapped."""
    text = draw(st.sampled_from(GOOD))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "swap", "piece"]))
        i = draw(st.integers(0, max(len(text) - 1, 0)))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from("{}<>()'\",;?:-/*[]\\=| \n")) + text[i:]
        elif op == "delete" and text:
            text = text[:i] + text[i + 1:]
        elif op == "swap" and len(text) > 1:
            j = draw(st.integers(0, len(text) - 1))
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
        else:
            text = text[:i] + draw(st.sampled_from(PIECES)) + text[i:]
    return text


@SETTINGS
@given(st.text(max_size=200))
@example("")
@example("{{")
@example("<<LLMMap(")
@example("SELECT {{LLMMap('q', (((((((((( t.c)}}")
def test_random_text(text: str) -> None:
    check(text)


@SETTINGS
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_random_pieces(text: str) -> None:
    check(text)


@SETTINGS
@given(mutated())
def test_mutated_fixtures(text: str) -> None:
    check(text)


def test_deep_nesting_is_a_parse_error_or_tree() -> None:
    deep = "SELECT " + "{{LLMMap('q', " * 60 + "t.c" + ")}}" * 60 + " FROM t"
    check(deep)
    parens = "SELECT {{LLMMap('q', " + "(" * 300 + "1" + ")" * 300 + ")}} FROM t"
    check(parens)
