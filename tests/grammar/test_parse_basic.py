"""Structure of the AST produced by ``parse`` for the basic forms."""

from __future__ import annotations

from sqlglot import exp

from blendsql.grammar import IngredientCall, parse, to_blendsql


def calls(tree: exp.Expression) -> list[IngredientCall]:
    return sorted(tree.find_all(IngredientCall), key=lambda c: c.call_id)


def test_map_with_quoted_column(registry):
    tree = parse(
        "SELECT name FROM w WHERE {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE",
        registry,
    )
    (call,) = calls(tree)
    assert call.name == "LLMMap" and call.key_name == "llmmap"
    q, col = call.call_args
    assert isinstance(q, exp.Literal) and q.this == "Is this a pitcher?"
    assert isinstance(col, exp.Column) and col.table == "w" and col.name == "position"
    assert col.meta["quoted_form"] is True
    assert call.brace == "{{" and call.call_id == 0
    assert isinstance(call.parent, exp.EQ)


def test_qa_with_subquery_and_options(registry):
    tree = parse(
        "SELECT * FROM w WHERE city = <<LLMQA('Which city?', (SELECT * FROM documents "
        "WHERE documents MATCH 'sydney OR 120' ORDER BY rank LIMIT 3), options='w::city')>>",
        registry,
    )
    (call,) = calls(tree)
    assert call.brace == "<<"
    assert isinstance(call.call_args[1], exp.Subquery)
    assert call.call_args[1].find(exp.Match) is not None
    opts = call.call_kwargs["options"]
    assert isinstance(opts, exp.Column) and opts.table == "w" and opts.name == "city"


def test_plain_columns_and_literals(registry):
    (call,) = calls(parse("SELECT {{LLMMap('q', t.c, k=3, flag=FALSE, x=NULL)}} FROM t", registry))
    assert isinstance(call.call_args[1], exp.Column) and not call.call_args[1].meta.get("quoted_form")
    kw = call.call_kwargs
    assert kw["k"].this == "3" and isinstance(kw["flag"], exp.Boolean) and isinstance(kw["x"], exp.Null)


def test_nested_call_ids_in_text_order(registry):
    tree = parse(
        "SELECT {{LLMMap('q', (SELECT {{LLMQA('inner')}} FROM x))}}, {{StartsWith('a', t.b)}} FROM t",
        registry,
    )
    cs = calls(tree)
    assert [c.name for c in cs] == ["LLMMap", "LLMQA", "StartsWith"]
    assert cs[1].find_ancestor(IngredientCall) is cs[0]


def test_question_marks_numbered_in_text_order(registry):
    tree = parse("SELECT {{LLMMap(?, t.c)}} FROM t WHERE a = ? AND b = :name", registry)
    names = [p.name for p in tree.find_all(exp.Placeholder)]
    assert sorted(names) == ["name", "p0", "p1"]
    (call,) = calls(tree)
    assert call.call_args[0] == exp.Placeholder(this="p0")
    assert "a = :p1" in to_blendsql(tree)


def test_shift_operators_stay(registry):
    tree = parse("SELECT a << 2, b >> 1, c <<LLMMap FROM t", registry)
    assert not calls(tree)
    assert tree.find(exp.BitwiseLeftShift) is not None


def test_join_form(registry):
    tree = parse(
        "SELECT * FROM t1 JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}}", registry
    )
    join = tree.args["joins"][0]
    assert join.this.name == "t2"
    call = join.args["on"]
    assert isinstance(call, IngredientCall) and call.meta["join_form"] is True
    left, right = call.call_args
    assert (left.table, left.name, right.table, right.name) == ("t1", "a", "t2", "b")
    assert to_blendsql(tree) == (
        "SELECT * FROM t1 JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}}"
    )
