"""Bad input gets a clear ParseError; the dialect accepts what users write.

Covers: a query that is one ingredient call, a trailing comma in an argument
list, non-text / empty / multi-statement queries, malformed ``'table::column'``
strings, very large and very deeply nested queries.
"""

from __future__ import annotations

import re
import time

import pytest
from sqlglot import exp

from blendsql.errors import ParseError, QueryTypeError
from blendsql.grammar import IngredientCall, parse, to_blendsql
from blendsql.grammar.parser import check_query_size
from blendsql.ingredients import BUILTINS
from blendsql.ingredients.base import IngredientRegistry

# ------------------------------------------------------------ a lone ingredient call

WHO = "{{LLMQA('Who won?')}}"
NESTED = "<<llmqa('q', (SELECT a FROM t WHERE {{LLMMap('m', t.b)}} = TRUE))>>"
LONE = [
    (WHO, WHO),
    ("<<LLMQA('q', (SELECT * FROM documents))>>", "<<LLMQA('q', (SELECT * FROM documents))>>"),
    ("  \n {{LLMQA('Who won?')}}  \n", WHO),
    ("{{LLMQA('Who won?')}};", WHO),
    ("{{LLMQA('Who won?')}} ;  -- trailing comment\n", WHO),
    ("/* lead */ {{ LLMQA ( 'Who won?' , options=('a', 'b') ) }} -- tail",
     "{{LLMQA('Who won?', options=('a', 'b'))}}"),
    ("-- a question\n" + NESTED + ";", NESTED),
    ("{{LLMQA(?)}}", "{{LLMQA(?)}}"),
]


@pytest.mark.parametrize(("query", "call"), LONE)
def test_lone_call_means_select_call(query, call, registry):
    tree = parse(query, registry)
    assert isinstance(tree, exp.Select)
    assert len(tree.expressions) == 1 and isinstance(tree.expressions[0], IngredientCall)
    assert tree.args.get("from_") is None and tree.args.get("from") is None
    assert tree == parse("SELECT " + call, registry)  # the same tree as the explicit SELECT
    again = parse(to_blendsql(tree), registry)
    assert again == tree


def test_lone_bare_call_means_select_call():
    reg = IngredientRegistry(BUILTINS)
    tree = parse(" SUMMARY('long text') ; ", reg)
    assert tree == parse("SELECT SUMMARY('long text')", reg)
    assert tree.find(IngredientCall).brace == ""


@pytest.mark.parametrize("query", [
    "{{LLMQA('a')}} {{LLMQA('b')}}",
    "{{LLMQA('a')}}; {{LLMQA('b')}}",
    "{{LLMQA('a')}} = 1",
    "{{LLMQA('a')}} FROM t",
    "t.a = {{LLMQA('a')}}",
    "1 + 1",
])
def test_not_a_lone_call_is_still_an_error(query, registry):
    with pytest.raises(ParseError) as info:
        parse(query, registry)
    assert info.value.line is not None and info.value.hint


def test_lone_call_error_points_into_the_call(registry):
    with pytest.raises(ParseError) as info:
        parse("{{LLMQA('q', options=(1, 2)}}", registry)
    assert (info.value.line, info.value.column) == (1, 28)


# ------------------------------------------------------------ trailing comma

TRAILING = [
    ("SELECT {{LLMQA('q', options=(1,2,3),)}}", "SELECT {{LLMQA('q', options=(1,2,3))}}"),
    ("SELECT {{LLMQA(\n  'q',\n  options=(1, 2, 3),\n)}} FROM t",
     "SELECT {{LLMQA('q', options=(1, 2, 3))}} FROM t"),
    ("SELECT <<LLMQA('q', (SELECT a FROM t), )>>", "SELECT <<LLMQA('q', (SELECT a FROM t))>>"),
    ("SELECT {{LLMMap('q', t.c, -- one per line\n)}} FROM t", "SELECT {{LLMMap('q', t.c)}} FROM t"),
    ("SELECT {{LLMMap('q', t.c /* c */ , /* after */ )}} FROM t",
     "SELECT {{LLMMap('q', t.c)}} FROM t"),
    ("SELECT ANSWER(reviews, 'q',) FROM t", "SELECT ANSWER(reviews, 'q') FROM t"),
    ("SELECT {{LLMQA('q', (SELECT {{LLMMap('m', t.b,)}} FROM t),)}}",
     "SELECT {{LLMQA('q', (SELECT {{LLMMap('m', t.b)}} FROM t))}}"),
    ("{{LLMQA('Who?',)}}", "SELECT {{LLMQA('Who?')}}"),
]


@pytest.mark.parametrize(("query", "same_as"), TRAILING)
def test_single_trailing_comma_is_accepted(query, same_as, registry):
    assert parse(query, registry) == parse(same_as, registry)


@pytest.mark.parametrize(("query", "column"), [
    ("SELECT {{LLMQA('q', options=(1,2,3),,)}}", 37),
    ("SELECT {{LLMQA('q',,)}}", 20),
    ("SELECT {{LLMQA(,)}}", 16),
    ("SELECT {{LLMQA(, 'q')}}", 16),
])
def test_double_or_lone_comma_is_still_an_error(query, column, registry):
    with pytest.raises(ParseError, match="empty argument") as info:
        parse(query, registry)
    assert (info.value.line, info.value.column) == (1, column)
    assert info.value.hint


def test_blank_argument_list_with_a_comment_is_no_arguments(registry):
    tree = parse("SELECT {{LLMQA(/* none */)}}", registry)
    assert tree.find(IngredientCall).call_args == []


# ------------------------------------------------------------ type, empty, statements


@pytest.mark.parametrize("query", [None, b"SELECT 1", 1, ["SELECT 1"], 2.5, bytearray(b"x")])
def test_non_text_query_is_a_query_type_error(query, registry):
    with pytest.raises(QueryTypeError) as info:
        parse(query, registry)  # type: ignore[arg-type]
    err = info.value
    assert isinstance(err, ParseError) and isinstance(err, TypeError)
    assert type(query).__name__ in str(err) and err.hint and err.code == "type"


@pytest.mark.parametrize("query", ["", ";", "   \n\t", "-- only a comment", "/* c */",
                                   "-- c\n;\n/* d */", ";;"])
def test_empty_query_is_a_parse_error_with_a_hint(query, registry):
    with pytest.raises(ParseError) as info:
        parse(query, registry)
    err = info.value
    assert err.code == "empty" and err.hint
    assert err.line is not None and err.column is not None


@pytest.mark.parametrize("query", ["SELECT 1; SELECT 2", "SELECT 1;\n-- c\nSELECT 2;",
                                   "SELECT {{LLMQA('q')}}; SELECT 2"])
def test_two_statements_are_refused(query, registry):
    with pytest.raises(ParseError, match="one SQL statement") as info:
        parse(query, registry)
    assert info.value.code == "statements"


# ------------------------------------------------------------ 'table::column'


@pytest.mark.parametrize(("text", "fragment", "column"), [
    ("'city::'", "no column name", 29),
    ("'::col'", "no table name", 23),
    ("'a::b::c'", "more than one '::'", 27),
    ("'w::  '", "no column name", 26),
    ("'main.w::'", "no column name", 31),
    ("'a.b.c::d'", "not of the form", 22),
    ("'w::a:b'", "not of the form", 22),
    ("'::'", "no table name", 23),
])
def test_malformed_column_reference_is_a_parse_error(text, fragment, column, registry):
    query = f"SELECT {{{{LLMMap('q', {text})}}}} FROM w"
    with pytest.raises(ParseError, match=fragment) as info:
        parse(query, registry)
    err = info.value
    assert err.code == "column_ref" and (err.line, err.column) == (1, column)
    assert err.source_line == query and err.caret.endswith("^") and "table::column" in err.hint


def test_malformed_column_reference_as_keyword_and_join(registry):
    with pytest.raises(ParseError, match="no column name"):
        parse("SELECT * FROM w WHERE c = {{LLMQA('q', options='w::')}}", registry)
    with pytest.raises(ParseError, match="no table name"):
        parse("SELECT * FROM a JOIN {{LLMJoin(left_on='a::x', right_on='::y')}}", registry)


@pytest.mark.parametrize("text", [
    "'What is 10::20?'", "'10::20'", "'ratio 3::4'", "'a :: b'", "'say ::hi'",
    "'a:' || ':b'", "'no colons'", "'one:colon'",
])
def test_strings_that_are_not_column_references_stay_strings(text, registry):
    tree = parse(f"SELECT {{{{LLMMap({text}, w.c)}}}} FROM w", registry)
    first = tree.find(IngredientCall).call_args[0]
    assert not isinstance(first, exp.Column)


@pytest.mark.parametrize(("text", "table", "column"), [
    ("'w::city'", "w", "city"), ("'main.w::city'", "w", "city"), ("'w::home team'", "w", "home team"),
])
def test_valid_column_references_still_parse(text, table, column, registry):
    call = parse(f"SELECT {{{{LLMMap('q', {text})}}}} FROM w", registry).find(IngredientCall)
    col = call.call_args[1]
    assert isinstance(col, exp.Column) and (col.table, col.name) == (table, column)


def test_column_check_only_applies_to_whole_arguments(registry):
    # strings inside subqueries and tuples are SQL strings, never column references
    tree = parse("SELECT {{LLMQA('q', (SELECT 'x::' FROM t), options=('a::', 'b'))}}", registry)
    assert tree.find(IngredientCall) is not None


# ------------------------------------------------------------ size and nesting


def test_size_limit_is_refused_quickly_with_position(registry):
    query = "SELECT " + " + ".join(["1"] * 400_000)  # ~1.6 MB
    t0 = time.perf_counter()
    with pytest.raises(ParseError, match="max_query_chars") as info:
        check_query_size(query, 1_000_000)
    assert time.perf_counter() - t0 < 20
    err = info.value
    assert err.code == "too_large" and (err.line, err.column) == (1, 1_000_001)
    assert len(str(err)) < 2_000, "a huge line is shortened in the message"
    check_query_size(query, None)  # no limit
    check_query_size(query, len(query))


def test_megabyte_query_is_refused_fast_by_default(registry):
    # before: 126 s and 828 MB before failing; now refused before any parsing
    query = "SELECT " + " + ".join(["1"] * 250_000)  # 1 MB
    t0 = time.perf_counter()
    with pytest.raises(ParseError, match="max_query_chars") as info:
        parse(query, registry)
    assert time.perf_counter() - t0 < 20
    assert info.value.code == "too_large" and info.value.column == 100_001
    with pytest.raises(ParseError, match="max_query_chars"):
        parse(query, registry, max_chars=999_999)


def _mixed(n: int) -> str:
    """A query of ~10*n characters: a long IN list with strings, ``?`` and calls."""
    items = []
    for i in range(n):
        items.append("?" if i % 20 == 0 else "{{LLMMap('q', t.c)}}" if i % 50 == 1 else f"'v{i}'")
    return f"SELECT * FROM t WHERE {{{{LLMMap('q', t.c)}}}} = TRUE AND t.d IN ({', '.join(items)})"


def _best_time(query: str, registry) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        parse(query, registry, max_chars=None)
        best = min(best, time.perf_counter() - t0)
    return best


def test_parse_time_grows_linearly(registry):
    # 4x the text must cost well under 16x the time (it was quadratic: per-node
    # line counting and sqlglot's replace() re-parenting every sibling); linear is ~4x
    small, large = _mixed(4_000), _mixed(16_000)
    parse(small, registry, max_chars=None)  # warm the grammar cache
    ratio = _best_time(large, registry) / _best_time(small, registry)
    assert ratio < 9, f"parse time grew {ratio:.1f}x for 4x the text"


def test_large_argument_parses_with_the_limit_lifted(registry):
    big = "x" * 1_000_000
    tree = parse(f"SELECT {{{{LLMMap('{big}', t.c)}}}} FROM t", registry, max_chars=None)
    assert tree.find(IngredientCall).call_args[0].this == big


@pytest.mark.parametrize("query", [
    "SELECT " + "(" * 10_000 + "1" + ")" * 10_000,
    "SELECT {{LLMMap('q', " + "(" * 10_000 + "t.c" + ")" * 10_000 + ")}} FROM t",
    "SELECT " + "{{LLMMap('q', " * 3_000 + "t.c" + ")}}" * 3_000,
    "SELECT 1 WHERE " + "NOT " * 20_000 + "1",
])
def test_deep_nesting_is_a_clear_error(query, registry):
    with pytest.raises(ParseError) as info:
        parse(query, registry)
    err = info.value
    assert err.code == "too_deep" and err.hint and err.line == 1 and err.column is not None


@pytest.mark.parametrize("query", [
    "SELECT {{LLMQA('q',\n  -- the options\n  options=('a', 'b'),\n)}}",
    "SELECT {{LLMQA('q', /* options= */ options = ('a', 'b'))}}",
    "SELECT {{LLMQA('q', /* one */ -- two\n options=('a', 'b'))}}",
])
def test_comment_before_a_keyword_keeps_it_a_keyword(query, registry):
    # a keyword, not the positional comparison (options = ('a', 'b'))
    call = parse(query, registry).find(IngredientCall)
    assert list(call.call_kwargs) == ["options"] and len(call.call_args) == 1
    assert call == parse("SELECT {{LLMQA('q', options=('a', 'b'))}}", registry).find(IngredientCall)


def _with_trailing_commas(query: str, registry) -> str:
    """``query`` with a ',' after the last argument of every call (nested ones too)."""
    from blendsql.grammar.parser import _walk
    from blendsql.grammar.scanner import Block, scanner_for

    bare = [i.name for i in registry if getattr(i, "bare_call", False)]
    blocks = [b for b in _walk(scanner_for(registry.names(), bare).scan(query))
              if isinstance(b, Block) and b.args]
    for pos in sorted({b.args[-1].end for b in blocks}, reverse=True):
        query = query[:pos] + "," + query[pos:]
    return query


def test_trailing_comma_in_every_fixture_call_changes_nothing(registry):
    from .fixtures import roundtrip_queries

    changed = 0
    for query in roundtrip_queries():
        with_commas = _with_trailing_commas(query, registry)
        changed += with_commas != query
        assert parse(with_commas, registry) == parse(query, registry), with_commas
    assert changed >= 40


@pytest.mark.parametrize("broken", ["{t}::", "::{c}", "{t}::{c}::x", "{t}::{c}:"])
def test_every_fixture_column_reference_broken_is_an_error(broken, registry):
    from .fixtures import roundtrip_queries

    seen = 0
    for query in roundtrip_queries():
        for m in re.finditer(r"'([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)::([^':]+)'", query):
            bad = broken.format(t=m.group(1), c=m.group(2))
            text = query[:m.start()] + f"'{bad}'" + query[m.end():]
            with pytest.raises(ParseError) as info:
                parse(text, registry)
            assert info.value.code == "column_ref", text
            assert m.start() <= _offset(text, info.value) <= m.start() + len(bad) + 1, str(info.value)
            seen += 1
    assert seen >= 10


def _offset(text: str, err: ParseError) -> int:
    """0-based offset of an error's (line, column)."""
    lines = text.split("\n")
    return sum(len(ln) + 1 for ln in lines[: err.line - 1]) + err.column - 1
