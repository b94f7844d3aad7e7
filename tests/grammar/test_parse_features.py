"""SQLite syntax that must survive, parameters, tuples, error positions, caching."""

from __future__ import annotations

import pytest
from sqlglot import exp

from blendsql.errors import ParseError
from blendsql.grammar import IngredientCall, parse, parse_expression, to_blendsql
from blendsql.grammar.scanner import scanner_for
from blendsql.ingredients.base import IngredientRegistry, MapIngredient

from .conftest import make_registry


def the_call(tree: exp.Expression) -> IngredientCall:
    (call,) = list(tree.find_all(IngredientCall))
    return call


def test_fts5_match_rank_bm25_survive(registry):
    q = ("SELECT title, bm25(documents) FROM documents WHERE documents MATCH 'sydney OR 120' "
         "ORDER BY rank LIMIT 3")
    tree = parse(q, registry)
    match = tree.find(exp.Match)
    assert match is not None and match.expression.this == "sydney OR 120"
    out = to_blendsql(tree)
    assert "documents MATCH 'sydney OR 120'" in out and "ORDER BY rank" in out
    assert "bm25(documents)".upper() in out.upper()


def test_glob_and_shifts(registry):
    tree = parse("SELECT a << 2, b >> 1 FROM t WHERE c GLOB 'x*' AND d <<e", registry)
    assert tree.find(exp.Glob) is not None
    assert len(list(tree.find_all(exp.BitwiseLeftShift))) == 2
    assert tree.find(exp.BitwiseRightShift) is not None
    assert not list(tree.find_all(IngredientCall))


def test_shift_becomes_call_only_for_registered_names():
    reg = IngredientRegistry()
    q = "SELECT a <<Shifty(1)>> 2 FROM t"
    assert parse(q, reg).find(IngredientCall) is None

    class Shifty(MapIngredient):
        """Registered later: the same text now holds a call."""

    reg.add(Shifty)
    assert parse("SELECT <<shifty(1)>> FROM t", reg).find(IngredientCall) is not None


def test_braces_inside_strings_identifiers_and_comments(registry):
    q = ("SELECT '{{LLMMap(''q'', t.c)}}' AS \"{{x}}\", [<<LLMQA(1)>>] -- {{LLMMap(\n"
         "FROM t /* }} {{ */")
    tree = parse(q, registry)
    assert tree.find(IngredientCall) is None
    assert tree.expressions[0].this.this == "{{LLMMap('q', t.c)}}"


def test_backslashes_are_ordinary_characters(registry):
    tree = parse(r"SELECT 'a\' AS x, {{LLMMap('c:\dir\', t.c)}} FROM t", registry)
    assert tree.expressions[0].this.this == "a\\"
    assert the_call(tree).call_args[0].this == "c:\\dir\\"


def test_question_marks_numbered_in_text_order_across_nesting(registry):
    q = ("SELECT {{LLMQA(?, (SELECT {{LLMMap(?, d.x)}} FROM d WHERE d.y = ?))}} "
         "FROM t WHERE a = '?' AND b = ? -- ?\n LIMIT ?")
    tree = parse(q, registry)
    out = to_blendsql(tree)
    positions = [out.index(f":p{i}") for i in range(5)]
    assert positions == sorted(positions)
    assert "'?'" in out and ":p5" not in out


def test_named_parameters_stay(registry):
    tree = parse("SELECT * FROM t WHERE a = :city AND {{LLMMap(:q, t.c)}}", registry)
    assert sorted(p.name for p in tree.find_all(exp.Placeholder)) == ["city", "q"]


@pytest.mark.parametrize("options", ["('a')", "('a',)", "( 'a' , )"])
def test_one_element_options_are_tuples(registry, options):
    call = the_call(parse(f"SELECT {{{{LLMMap('q', t.c, options={options})}}}} FROM t", registry))
    opts = call.call_kwargs["options"]
    assert isinstance(opts, exp.Tuple) and [e.this for e in opts.expressions] == ["a"]
    assert "options=('a',)" in to_blendsql(call)


def test_parenthesised_expression_stays_expression(registry):
    call = the_call(parse("SELECT {{LLMMap('q', (t.a + 1))}} FROM t", registry))
    assert isinstance(call.call_args[1], exp.Paren)


def test_quoted_column_forms(registry):
    call = the_call(parse(
        "SELECT {{LLMMap('q', 'w::school/club team', options='main.w::team')}} FROM w", registry
    ))
    col = call.call_args[1]
    assert (col.table, col.name) == ("w", "school/club team")
    opts = call.call_kwargs["options"]
    assert (opts.args["db"].name, opts.table, opts.name) == ("main", "w", "team")
    # a question that merely contains '::' stays a string
    call = the_call(parse("SELECT {{LLMMap('what is a :: b?', t.c)}} FROM t", registry))
    assert isinstance(call.call_args[0], exp.Literal)


def test_join_form_keeps_other_kwargs_and_db(registry):
    tree = parse(
        "SELECT * FROM t1 LEFT JOIN {{LLMJoin(left_on='t1::a', right_on='main.t2::b', k=2)}}",
        registry,
    )
    join = tree.args["joins"][0]
    assert join.side == "LEFT" and join.this.name == "t2" and join.this.args["db"].name == "main"
    call = join.args["on"]
    assert call.call_kwargs["k"].this == "2"
    assert to_blendsql(tree).endswith(
        "LEFT JOIN {{LLMJoin(left_on='t1::a', right_on='main.t2::b', k=2)}}"
    )


def test_on_form_is_an_expression(registry):
    tree = parse("SELECT * FROM t1 JOIN t2 ON {{LLMJoin(t1.a, t2.b)}}", registry)
    call = tree.args["joins"][0].args["on"]
    assert isinstance(call, IngredientCall) and not call.meta.get("join_form")


def test_error_inside_nested_argument_points_into_original_text(registry):
    q = ("SELECT *\nFROM t\nWHERE {{LLMMap('q', (SELECT {{LLMQA('x', (SELECT a FROM u "
         "WHERE a = = 1))}} FROM v))}} = 1")
    with pytest.raises(ParseError) as info:
        parse(q, registry)
    err = info.value
    assert err.line == 3
    assert err.source_line == q.splitlines()[2]
    # the caret sits inside the innermost subquery, at the doubled '='
    inner = q.splitlines()[2].index("= = 1")
    assert inner <= err.column <= inner + 6


def test_parse_error_str_shows_line_caret_and_hint(registry):
    with pytest.raises(ParseError) as info:
        parse("SELECT {{LLMMapp('q', t.c)}} FROM t", registry)
    text = str(info.value)
    assert "line 1, column 10" in text and "\n           ^" in text and "Hint:" in text


def test_non_string_query_is_a_parse_error(registry):
    with pytest.raises(ParseError):
        parse(None, registry)  # type: ignore[arg-type]


def test_grammar_cached_per_name_set():
    a = scanner_for(make_registry().names())
    b = scanner_for(list(reversed(make_registry().names())))
    assert a is b
    assert scanner_for(["Other"]) is not a


def test_parse_expression(registry):
    e = parse_expression("{{LLMMap('q', 'w::a')}} = TRUE AND x > ?", registry)
    assert isinstance(e, exp.And) and e.parent is None
    assert e.find(IngredientCall) is not None
    with pytest.raises(ParseError) as info:
        parse_expression("{{LLMMapp(1)}}", registry)
    assert (info.value.line, info.value.column) == (1, 3)
    with pytest.raises(ParseError):
        parse_expression("a FROM t", registry)


def test_call_meta_and_accessors(registry):
    tree = parse("SELECT <<llmqa('q')>>, {{LLMMap('q', t.c, options=t.d)}} FROM t", registry)
    calls = sorted(tree.find_all(IngredientCall), key=lambda c: c.call_id)
    assert [c.call_id for c in calls] == [0, 1]
    assert calls[0].brace == "<<" and calls[0].name == "llmqa" and calls[0].key_name == "llmqa"
    assert isinstance(calls[1].call_kwargs["options"], exp.Column)
    assert calls[1].meta["position"] == len("SELECT <<llmqa('q')>>, ")


def test_node_positions_point_into_the_original_text(registry):
    q = "SELECT {{LLMMap('q', t.c)}} AS x,\n  ? AS y, zed FROM t"
    tree = parse(q, registry)
    zed = next(i for i in tree.find_all(exp.Identifier) if i.name == "zed")
    assert q[zed.meta["start"]:zed.meta["end"] + 1] == "zed"
    assert (zed.meta["line"], zed.meta["col"]) == (2, q.splitlines()[1].index("zed") + 3)
    c = next(i for i in tree.find_all(exp.Identifier) if i.name == "c")
    assert q[c.meta["start"]] == "c"
