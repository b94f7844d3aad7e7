"""Golden tests of query explanations: deterministic, template-based text.

Regenerate after a deliberate wording change with
``python tests/nl/test_explain.py --regen`` and read the diff.
"""

import sys
from pathlib import Path

import pytest

from blendsql.ingredients.base import IngredientRegistry
from blendsql.ingredients.builtin import BUILTINS
from blendsql.nl.explain import explain

HERE = Path(__file__).parent
QUERIES = [q.strip() for q in (HERE / "explain_queries.sql").read_text().split(";;") if q.strip()]
GOLDEN = HERE / "explain_golden.txt"
REGISTRY = IngredientRegistry(BUILTINS)


def render_all() -> str:
    blocks = [q + "\n" + "\n".join(explain(q, REGISTRY)) for q in QUERIES]
    return "\n\n".join(blocks) + "\n"


def test_at_least_30_varied_queries():
    assert len(QUERIES) >= 30


def test_explanations_match_golden():
    assert render_all() == GOLDEN.read_text()


@pytest.mark.parametrize("query", QUERIES[:5])
def test_explanation_is_deterministic(query):
    assert explain(query, REGISTRY) == explain(query, REGISTRY)


def test_every_ingredient_is_named_in_words():
    for q in QUERIES:
        text = " ".join(explain(q, REGISTRY))
        for name in ("LLMMap", "LLMQA", "LLMJoin", "LLMValidate", "ANSWER", "SUMMARY"):
            if "{{" + name + "(" in q or "<<" + name + "(" in q:
                assert f"({name})" in text, (q, text)


if __name__ == "__main__" and "--regen" in sys.argv:
    GOLDEN.write_text(render_all())


@pytest.mark.parametrize("left, right", [
    ("(age > 30 OR country = 'France') AND name = 'Joe'", "age > 30 OR (country = 'France' AND name = 'Joe')"),
    ("(a = 1 OR b = 2) AND c = 3", "a = 1 OR b = 2 AND c = 3"),
    ("NOT (a = 1 OR b = 2) AND c = 3", "NOT (a = 1 OR b = 2 AND c = 3)"),
    ("(a = 1 AND b = 2) OR (c = 3 AND d = 4)", "a = 1 AND (b = 2 OR c = 3) AND d = 4"),
])
def test_differently_grouped_conditions_read_differently(left, right):
    """A correction is written against this text: two meanings must never read alike."""
    def where(cond):
        return explain(f"SELECT name FROM singer WHERE {cond}")[1]
    assert where(left) != where(right)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_a_chain_of_ors_reads_once_without_repeated_either(n):
    conds = " OR ".join(f"c{i} = {i}" for i in range(n))
    text = explain(f"SELECT name FROM singer WHERE {conds}")[1]
    assert "either either" not in text and text.count("either") <= 1
    assert all(f"c{i} is {i}" in text for i in range(n))


def test_redundant_brackets_do_not_change_the_reading():
    a = explain("SELECT name FROM singer WHERE (a = 1 OR b = 2) OR c = 3")[1]
    b = explain("SELECT name FROM singer WHERE a = 1 OR b = 2 OR c = 3")[1]
    assert a == b
