"""The relaxed filter written as text (``relax.relaxed_text``) is the text sqlglot
renders for the relaxed copy (``relax.relax_predicate``), for every shape of filter:
AND / OR / NOT / parentheses, calls in atoms, subqueries, correlated references,
computed lookups standing as plain atoms, and a long AND chain."""

from __future__ import annotations

import random

import pytest
from sqlglot import exp

from blendsql.grammar import parse
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.calls import find_calls, map_value
from blendsql.plan.candidates import map_candidate
from blendsql.plan.lookup import map_lookup, replace_call
from blendsql.plan.relax import relax_predicate, relax_scope, relaxed_text

from .conftest import Len, StartsWith

REG = IngredientRegistry([StartsWith, Len])

WHERES = [
    "a = 1",
    "{{StartsWith('x', t.b)}}",
    "{{StartsWith('x', t.b)}} = TRUE AND a = 1",
    "NOT ({{StartsWith('x', t.b)}} = TRUE) AND a = 1",
    "NOT (NOT {{StartsWith('x', t.b)}} OR a = 1)",
    "a + {{Len(t.b)}} > 3 OR c = 2",
    "(SELECT COUNT(*) FROM u WHERE {{Len(t.b)}} > 1) > 0 AND x = 1",
    "(a = 1 OR b = 2) AND ({{Len(t.b)}} > 3 OR NOT c BETWEEN 1 AND 2) AND d IN (1, 2)",
    "NOT NOT (a = 1 AND NOT ({{StartsWith('y', t.c)}} OR {{Len(t.c)}} < 2))",
    "((a = 1)) AND (((({{Len(t.b)}} > 3))))",
    "t.a = o.x AND {{Len(t.b)}} > 3 OR o.y IS NULL",
    "CASE WHEN {{Len(t.b)}} > 1 AND a = 2 THEN 1 ELSE 0 END = 1 AND a LIKE 'x%'",
    "a = 1 /* note */ AND {{Len(t.b)}} > 3",
]


def _where(sql: str) -> exp.Expression:
    tree = parse(f"SELECT * FROM t WHERE {sql}", REG)
    return tree.args["where"].this


@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("outer", [None, frozenset({"o"})])
def test_text_is_the_rendered_relaxed_copy(where: str, outer: frozenset[str] | None) -> None:
    pred = _where(where)
    want = relax_predicate(pred, outer).sql(dialect="sqlite")
    assert relaxed_text(pred, {}, outer) == want
    texts: dict = {}
    assert relax_predicate(pred, outer, texts=texts).sql(dialect="sqlite") == want
    assert relaxed_text(pred, texts, outer) == want  # from the cached atom texts


def test_long_and_chain_with_computed_lookups() -> None:
    """A cascade's state: some calls computed (lookups), the others relaxed."""
    n = 60
    preds = " AND ".join(f"{{{{StartsWith('q{i}', t.c{i % 4})}}}}" for i in range(n))
    tree = parse(f"SELECT id FROM t WHERE a > 0 AND {preds}", REG)
    texts: dict = {}
    rng = random.Random(1)
    calls = find_calls(tree)
    for c in rng.sample(calls, n // 2):
        tree = replace_call(tree, c.call_id, map_lookup(f"m{c.call_id}",
                                                        map_value(c, REG)), in_place=True)
        pred = tree.args["where"].this
        assert relaxed_text(pred, texts) == relax_predicate(pred).sql(dialect="sqlite")


def test_candidate_text_is_unchanged_by_the_text_path() -> None:
    """map_candidate with a run's text cache renders as without it, also where rows
    decided by the WHERE are left out (an OR around the call)."""
    for where in WHERES + ["a = 1 OR {{Len(t.b)}} > 3", "NOT {{Len(t.b)}} > 3 OR b = 2 AND c = 1",
                           "(a = 1 OR {{Len(t.b)}} > 3) AND ({{StartsWith('x', t.c)}} OR b = 2)"]:
        tree = parse(f"SELECT id FROM t JOIN o ON o.id = t.id AND {{{{Len(o.z)}}}} > 2 "
                     f"WHERE {where}", REG)
        for call in find_calls(tree):
            value = map_value(call, REG)
            if value is None:
                continue
            plain = map_candidate(call, value).sql(dialect="sqlite")
            assert map_candidate(call, value, {}).sql(dialect="sqlite") == plain, where


def test_relax_scope_text_clauses() -> None:
    tree = parse("SELECT id FROM t WHERE {{Len(t.b)}} > 3 AND a = 1 GROUP BY id "
                 "HAVING COUNT(*) > 1 OR {{Len(t.c)}} = 2", REG)
    plain, _ = relax_scope(tree)
    texted, _ = relax_scope(tree, texts={})
    assert texted.sql(dialect="sqlite") == plain.sql(dialect="sqlite")
    assert isinstance(texted.args["where"].this, exp.Var)
