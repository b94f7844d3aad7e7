"""Unit tests of the planner rules (pure AST -> AST / info functions)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from blendsql.grammar import parse
from blendsql.ingredients.base import AliasIngredient, IngredientRegistry, StringIngredient
from blendsql.plan.calls import (
    call_by_id,
    effective_scope,
    find_calls,
    next_call,
    number_calls,
    scope_of,
    visible_ctes,
)
from blendsql.plan.candidates import can_keep_limit, join_side_candidate, map_candidate
from blendsql.plan.expand import expand_macros
from blendsql.plan.infer import infer_hint
from blendsql.plan.lookup import map_lookup, replace_call
from blendsql.plan.relax import polarity, predicate_atom, relax_predicate

from .conftest import CountCtx, Len, LowerJoin, StartsWith

REG = IngredientRegistry([StartsWith, Len, CountCtx, LowerJoin])


def p(sql: str, reg: IngredientRegistry = REG) -> exp.Expression:
    return parse(sql, reg)


def sql(e: exp.Expression) -> str:
    return e.sql(dialect="sqlite")


def calls(sql_text: str) -> list[Any]:
    return find_calls(p(sql_text))


def value_of(call: Any) -> exp.Expression:
    return call.call_args[-1]


# -- relaxation -----------------------------------------------------------------------


def test_relax_positive_predicate_becomes_true() -> None:
    where = p("SELECT * FROM t WHERE a = 1 AND {{StartsWith('x', t.b)}} = TRUE").args["where"]
    assert sql(relax_predicate(where.this)) == "a = 1 AND TRUE"


def test_relax_under_not_becomes_false() -> None:
    where = p("SELECT * FROM t WHERE NOT ({{StartsWith('x', t.b)}} = TRUE) AND a = 1")
    relaxed = relax_predicate(where.args["where"].this)
    assert sql(relaxed) == "NOT (FALSE) AND a = 1"


def test_relax_double_negation_is_positive() -> None:
    where = p("SELECT * FROM t WHERE NOT (NOT {{StartsWith('x', t.b)}} OR a = 1)")
    assert sql(relax_predicate(where.args["where"].this)) == "NOT (NOT TRUE OR a = 1)"


def test_relax_atom_is_the_whole_comparison() -> None:
    tree = p("SELECT * FROM t WHERE a + {{Len(t.b)}} > 3 OR c = 2")
    call = find_calls(tree)[0]
    where = tree.args["where"]
    assert sql(predicate_atom(call, where)) == sql(call.parent.parent)
    assert polarity(call, where)
    assert sql(relax_predicate(where.this)) == "TRUE OR c = 2"


def test_relax_predicate_around_a_subquery_holding_a_call() -> None:
    tree = p("SELECT * FROM t WHERE (SELECT COUNT(*) FROM u WHERE {{Len(t.b)}} > 1) > 0 "
             "AND x = 1")
    assert sql(relax_predicate(tree.args["where"].this)) == "TRUE AND x = 1"


# -- candidates -----------------------------------------------------------------------


def test_candidate_keeps_plain_filters_and_relaxes_ingredients() -> None:
    c = calls("SELECT Name FROM city WHERE CountryCode = 'NLD' "
              "AND {{StartsWith('A', city.Name)}} = TRUE")[0]
    assert sql(map_candidate(c, value_of(c))) == (
        "SELECT DISTINCT city.Name FROM city WHERE CountryCode = 'NLD' AND TRUE")


def test_candidate_cascade_sees_computed_lookup() -> None:
    tree = p("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE "
             "AND {{Len(city.Name)}} > 5")
    first, second = find_calls(tree)
    tree = replace_call(tree, first.call_id, map_lookup("m0", value_of(first)))
    second = call_by_id(tree, second.call_id)
    cand = sql(map_candidate(second, value_of(second)))
    assert 'FROM temp."m0" WHERE k = city.Name) = TRUE AND TRUE' in cand


def test_candidate_keeps_limit_when_only_projection_uses_call() -> None:
    c = calls("SELECT {{Len(city.Name)}} AS n FROM city WHERE ID > 10 ORDER BY ID LIMIT 3 "
              "OFFSET 2")[0]
    assert can_keep_limit(scope_of(c))
    text = sql(map_candidate(c, value_of(c)))
    assert "ORDER BY ID LIMIT 3 OFFSET 2" in text and text.startswith("SELECT DISTINCT __bsql_v")


def test_candidate_drops_limit_when_where_uses_call() -> None:
    c = calls("SELECT Name FROM city WHERE {{Len(city.Name)}} > 3 ORDER BY ID LIMIT 3")[0]
    assert not can_keep_limit(scope_of(c))
    assert "LIMIT" not in sql(map_candidate(c, value_of(c)))


def test_candidate_drops_limit_when_order_uses_call_through_alias() -> None:
    c = calls("SELECT Name, {{Len(city.Name)}} AS n FROM city ORDER BY n LIMIT 3")[0]
    assert "LIMIT" not in sql(map_candidate(c, value_of(c)))


def test_candidate_drops_where_after_relaxing_outer_join_on() -> None:
    c = calls("SELECT a.Name FROM city a LEFT JOIN country b ON "
              "{{StartsWith('A', b.Name)}} = TRUE WHERE b.Code IS NULL")[0]
    text = sql(map_candidate(c, value_of(c)))
    assert "WHERE" not in text and "LEFT JOIN country AS b ON TRUE" in text


def test_candidate_carries_visible_ctes() -> None:
    c = calls("WITH nl AS (SELECT * FROM city WHERE CountryCode = 'NLD') "
              "SELECT Name FROM nl WHERE {{Len(nl.Name)}} > 5")[0]
    assert sql(map_candidate(c, value_of(c))).startswith("WITH nl AS (")


def test_candidate_of_correlated_argument_uses_outer_scope() -> None:
    c = calls("SELECT k.Name FROM country k WHERE EXISTS (SELECT 1 FROM city c "
              "WHERE c.CountryCode = k.Code AND {{Len(k.Name)}} > 5)")[0]
    assert effective_scope(c, value_of(c)) is not scope_of(c)
    assert sql(map_candidate(c, value_of(c))) == "SELECT DISTINCT k.Name FROM country AS k WHERE TRUE"


def test_join_sides_use_only_their_own_filters() -> None:
    c = calls("SELECT * FROM city c JOIN country k ON {{LowerJoin(c.Name, k.Name)}} "
              "WHERE c.Population > 5 AND k.Continent = 'Asia' AND c.ID < k.Capital")[0]
    left, right = c.call_args
    assert sql(join_side_candidate(c, left)) == (
        "SELECT DISTINCT c.Name FROM city AS c WHERE c.Population > 5")
    assert sql(join_side_candidate(c, right)) == (
        "SELECT DISTINCT k.Name FROM country AS k WHERE k.Continent = 'Asia'")


# -- scopes, order, ids ------------------------------------------------------------------


def test_visible_ctes_exclude_later_siblings() -> None:
    tree = p("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a WHERE {{Len(a.x)}} > 0), "
             "c AS (SELECT 2) SELECT * FROM b")
    call = find_calls(tree)[0]
    assert [c.alias for c in visible_ctes(scope_of(call))] == ["a"]


def test_next_call_qa_first_then_inner_scope_then_text_order() -> None:
    tree = p("SELECT Name FROM city WHERE {{Len(city.Name)}} > 3 AND ID IN "
             "(SELECT ID FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE) "
             "AND Population > {{CountCtx('q', (SELECT * FROM country))}}")
    cand = lambda c: map_candidate(c, value_of(c))  # noqa: E731
    order = []
    while (c := next_call(tree, REG, cand)) is not None:
        order.append(c.name)
        tree = replace_call(tree, c.call_id, exp.true())
    assert order == ["CountCtx", "StartsWith", "Len"]


def test_outer_call_waits_for_call_in_derived_table() -> None:
    tree = p("SELECT d.Name FROM (SELECT Name FROM city WHERE {{Len(city.Name)}} > 3 LIMIT 5) d "
             "WHERE {{StartsWith('A', d.Name)}} = TRUE")
    cand = lambda c: map_candidate(c, value_of(c))  # noqa: E731
    assert next_call(tree, REG, cand).name == "Len"


def test_number_calls_makes_ids_unique() -> None:
    tree = p("SELECT {{Len(t.a)}}, {{Len(t.b)}} FROM t")
    for c in find_calls(tree):
        c.meta["call_id"] = 7
    ids = [c.call_id for c in find_calls(number_calls(tree))]
    assert len(set(ids)) == 2


# -- constraint hints --------------------------------------------------------------------


def _hint(where: str) -> Any:
    return infer_hint(calls(f"SELECT * FROM city WHERE {where}")[0])


def test_hints_from_context() -> None:
    assert _hint("{{Len(city.Name)}} = TRUE").kind == "bool"
    assert _hint("{{Len(city.Name)}} > 3").kind == "int"
    assert _hint("{{Len(city.Name)}} < 2.5").kind == "float"
    h = _hint("{{Len(city.Name)}} = 'CA'")
    assert (h.kind, h.values) == ("example", ["CA"])
    h = _hint("Name = {{CountCtx('q')}}")
    assert h.kind == "choice_column" and h.column is not None and h.column.name == "Name"
    h = _hint("{{Len(city.Name)}} IN ('a', 'b')")
    assert (h.kind, h.values) == ("choice", ["a", "b"])
    assert _hint("Name IN {{CountCtx('q')}}").kind == "list"
    assert _hint("{{StartsWith('A', city.Name)}}").kind == "bool"
    assert infer_hint(calls("SELECT * FROM city ORDER BY {{Len(city.Name)}}")[0]).kind == "number"


def test_combined_hints_of_identical_uses() -> None:
    """One constraint for several uses: numbers widen, a sort key or a projection adds
    nothing, text against a number disagrees (free text)."""
    from blendsql.plan.infer import Hint, combine_hints

    def kind(*kinds: str | None) -> tuple[str | None, bool]:
        h, disagreed = combine_hints([Hint(k) for k in kinds])
        return h.kind, disagreed

    assert kind("int", None) == ("int", False)
    assert kind("bool", "int") == ("int", False)
    assert kind("int", "float", "number") == ("float", False)
    assert kind("number", None) == ("number", False)
    assert kind("int", "number") == ("int", False)
    assert kind("list", "example") == ("list", False)
    assert kind("example", "int") == (None, True)
    h, _ = combine_hints([Hint("choice", values=["a"]), Hint("choice", values=["b", "a"])])
    assert h.values == ["a", "b"]


# -- expansion ---------------------------------------------------------------------------


class IsLong(AliasIngredient):
    def run(self, *args: str, **kwargs: str) -> str:
        return "{{Len(" + args[0] + ")}} > 10"


class Recent(StringIngredient):
    def run(self, *args: Any, **kwargs: Any) -> str:
        return f"Population > {int(args[0])}"


def test_expand_alias_and_string_ingredients() -> None:
    reg = IngredientRegistry([Len, IsLong, Recent])
    tree = p("SELECT Name FROM city WHERE {{IsLong(city.Name)}} AND {{Recent(5)}}", reg)
    out = expand_macros(tree, reg, lambda t: parse(f"SELECT {t}", reg).expressions[0],
                        lambda n: int(n.name))
    assert [c.name for c in find_calls(out)] == ["Len"]
    assert "(Population > 5)" in sql(out.args["where"]).replace("\n", " ") or \
        "Population > 5" in sql(out.args["where"])
    assert "{{Len(city.Name)}} > 10" in out.sql(dialect=__import__(
        "blendsql.grammar.nodes", fromlist=["BlendSQLDialect"]).BlendSQLDialect)


# -- atoms under comparisons, filter lookups, outer joins ------------------------------


def test_relax_and_inside_a_comparison_relaxes_the_whole_comparison() -> None:
    where = p("SELECT * FROM t WHERE ({{StartsWith('J', t.a)}} = TRUE) = (b > 40) AND c = 1")
    assert sql(relax_predicate(where.args["where"].this)) == "TRUE AND c = 1"
    where = p("SELECT * FROM t WHERE CASE WHEN {{StartsWith('J', t.a)}} AND {{Len(t.a)}} > 3 "
              "THEN 0 ELSE 1 END = 1")
    assert sql(relax_predicate(where.args["where"].this)) == "TRUE"


def test_filter_atom_only_in_positive_filter_position() -> None:
    from blendsql.plan.lookup import filter_atom, null_passes_statically

    c = calls("SELECT * FROM t WHERE a = 1 AND {{StartsWith('x', t.b)}} = TRUE")[0]
    atom = filter_atom(c)
    assert atom is not None and sql(atom).endswith("= TRUE")
    assert null_passes_statically(atom, c) is False
    assert filter_atom(calls("SELECT * FROM t WHERE NOT {{StartsWith('x', t.b)}}")[0]) is None
    assert filter_atom(calls("SELECT {{StartsWith('x', t.b)}} FROM t")[0]) is None
    assert filter_atom(calls("SELECT * FROM t WHERE {{Len(t.b)}} > t.c")[0]) is None
    assert filter_atom(calls("SELECT * FROM t WHERE ({{Len(t.b)}} > 1) = (c > 2)")[0]) is None
    c2 = calls("SELECT * FROM t WHERE {{Len(t.b)}} IS NULL")[0]
    a2 = filter_atom(c2)
    assert a2 is not None and null_passes_statically(a2, c2) is None


def test_filter_lookup_sql_shape() -> None:
    from blendsql.plan.lookup import filter_atom, filter_lookup, replace_node

    tree = p("SELECT * FROM t WHERE a = 1 AND NOT NOT {{Len(t.b)}} > 3")
    c = find_calls(tree)[0]
    atom = filter_atom(c)
    assert atom is not None
    out = replace_node(tree, atom, filter_lookup(atom, c, "m0", value_of(c), True))
    assert sql(out) == ('SELECT * FROM t WHERE a = 1 AND NOT NOT (t.b IN (SELECT k FROM '
                        'temp."m0" WHERE v > 3) OR t.b IS NULL)')
    assert find_calls(tree), "the input tree is left unchanged"


def test_join_side_of_left_join_ignores_where_on_null_extended_side() -> None:
    c = calls("SELECT co.Name FROM country co LEFT JOIN city ci ON "
              "{{LowerJoin(co.Capital, ci.ID)}} WHERE ci.ID IS NULL AND co.Code > 'B'")[0]
    left, right = c.call_args
    assert sql(join_side_candidate(c, right)) == "SELECT DISTINCT ci.ID FROM city AS ci"
    assert sql(join_side_candidate(c, left)) == (
        "SELECT DISTINCT co.Capital FROM country AS co WHERE co.Code > 'B'")
