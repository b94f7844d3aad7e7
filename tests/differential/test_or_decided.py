"""Under OR, no value reaches an ingredient from a row another branch already keeps.

Each case is a BlendSQL query with deterministic recording ingredients, its
plain-SQL twin, and for each ingredient (``Name`` or ``Name:question``) the
exact set of distinct values it must receive: those of the rows where the rest
of the WHERE does not already decide the row is kept. The rows must be the
twin's, and the values strictly fewer than the relaxed candidate (every row
the plain AND-parts keep) would have sent.
"""

from __future__ import annotations

import pytest

from tests.differential.common import (
    assert_same_rows,
    df_rows,
    distinct_values,
    normalise_cell,
    run_blend,
    run_sql,
)

WORLD = "world_1"
CS = "concert_singer"

# id, db, query, twin, {ingredient[:question]: SQL of the exact values}, {same: SQL of
# the relaxed candidate's values, which must hold strictly more}
CASES = [
    ("plain_or_map", CS,
     "SELECT Name FROM singer WHERE Age < 30 OR {{Length(singer.Name)}} > 11",
     "SELECT Name FROM singer WHERE Age < 30 OR length(Name) > 11",
     {"Length": "SELECT Name FROM singer WHERE NOT ((Age < 30) IS TRUE)"},
     {"Length": "SELECT Name FROM singer"}),
    ("dutch_cities_or_prefix", WORLD,
     "SELECT Name FROM city WHERE CountryCode = 'NLD' OR {{StartsWith('A', city.Name)}} = TRUE",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' OR substr(Name, 1, 1) = 'A'",
     {"StartsWith": "SELECT Name FROM city WHERE NOT ((CountryCode = 'NLD') IS TRUE)"},
     {"StartsWith": "SELECT Name FROM city"}),
    ("cheap_branch_first", WORLD,
     "SELECT Code FROM country WHERE {{StartsWith('A', country.Name)}} = TRUE "
     "OR {{StartsWith('E', country.Continent)}} = TRUE",
     "SELECT Code FROM country WHERE substr(Name, 1, 1) = 'A' "
     "OR substr(Continent, 1, 1) = 'E'",
     {"StartsWith:E": "SELECT Continent FROM country",
      "StartsWith:A": "SELECT Name FROM country WHERE NOT (substr(Continent, 1, 1) = 'E')"},
     {"StartsWith:A": "SELECT Name FROM country"}),
    ("cheap_branch_first_symmetric", WORLD,
     "SELECT Code FROM country WHERE {{StartsWith('E', country.Continent)}} = TRUE "
     "OR {{StartsWith('A', country.Name)}} = TRUE",
     "SELECT Code FROM country WHERE substr(Continent, 1, 1) = 'E' "
     "OR substr(Name, 1, 1) = 'A'",
     {"StartsWith:E": "SELECT Continent FROM country",
      "StartsWith:A": "SELECT Name FROM country WHERE NOT (substr(Continent, 1, 1) = 'E')"},
     {"StartsWith:A": "SELECT Name FROM country"}),
    ("or_inside_and", WORLD,
     "SELECT Name FROM country WHERE Continent = 'Asia' AND "
     "(Population > 100000000 OR {{StartsWith('I', country.Name)}})",
     "SELECT Name FROM country WHERE Continent = 'Asia' AND "
     "(Population > 100000000 OR substr(Name, 1, 1) = 'I')",
     {"StartsWith": "SELECT Name FROM country WHERE Continent = 'Asia' "
                    "AND NOT ((Population > 100000000) IS TRUE)"},
     {"StartsWith": "SELECT Name FROM country WHERE Continent = 'Asia'"}),
    ("not_over_and", WORLD,
     "SELECT Name FROM country WHERE NOT (Population < 100000 "
     "AND {{StartsWith('S', country.Name)}} = TRUE)",
     "SELECT Name FROM country WHERE NOT (Population < 100000 AND substr(Name, 1, 1) = 'S')",
     {"StartsWith": "SELECT Name FROM country WHERE NOT ((NOT (Population < 100000)) IS TRUE)"},
     {"StartsWith": "SELECT Name FROM country"}),
]


def _received(ingredients: dict, key: str) -> list:
    name, _, question = key.partition(":")
    return ingredients[name].passed(question or None)


@pytest.mark.parametrize(("case_id", "db", "query", "twin", "exact", "relaxed"), CASES,
                         ids=[c[0] for c in CASES])
def test_or_sends_only_undecided_rows(case_id: str, db: str, query: str, twin: str,
                                      exact: dict[str, str], relaxed: dict[str, str]) -> None:
    smoothie, ingredients = run_blend(db, query)
    want, _ = run_sql(db, twin)
    assert_same_rows(df_rows(smoothie.df), want, ordered=False, context=case_id)
    for key, sql in exact.items():
        got = [normalise_cell(v) for v in _received(ingredients, key)]
        assert len(got) == len(set(got)), f"{case_id}: {key} got a value twice"
        assert set(got) == distinct_values(db, sql), f"{case_id}: {key}"
    for key, sql in relaxed.items():
        assert len(_received(ingredients, key)) < len(distinct_values(db, sql)), (
            f"{case_id}: {key} received as many values as without the OR rule")


def test_call_in_filter_and_projection_still_computes_kept_rows() -> None:
    """A row the plain branch keeps still gets the projection's output."""
    query = ("SELECT Name, {{StartsWith('A', country.Name)}} AS a FROM country "
             "WHERE Continent = 'Antarctica' OR {{StartsWith('A', country.Name)}} = TRUE")
    twin = ("SELECT Name, substr(Name, 1, 1) = 'A' AS a FROM country "
            "WHERE Continent = 'Antarctica' OR substr(Name, 1, 1) = 'A'")
    smoothie, _ = run_blend(WORLD, query)
    want, _ = run_sql(WORLD, twin)
    assert_same_rows(df_rows(smoothie.df), want, ordered=False, context="projection")
