"""A map over several value columns sees all of them.

``LLMMap('Do these two agree?', r1.text, r2.text)`` shows both values in every prompt and
keys its lookup on the pair, never on the first column alone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient
from blendsql.ingredients.llm_map import LLMMap
from blendsql.models.base import FunctionModel, Request


class Pairwise(MapIngredient):
    """Records what it gets; True when the two parts share their first letter."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.values: list[Any] = []
        self.names: list[Any] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        self.values.extend(values)
        self.names.append(kwargs.get("value_names"))
        return [str(v[0])[:1] == str(v[1])[:1] for v in values]


def test_two_columns_become_tuples_keyed_as_tuples(world: Path, plain: Any) -> None:
    ing = Pairwise()
    query = ("SELECT a.Name, b.Name FROM city AS a JOIN city AS b "
             "ON a.District = b.District AND a.ID < b.ID WHERE a.CountryCode = 'NLD' "
             "AND {{Pairwise('same letter?', a.Name, b.Name)}}")
    with BlendSQL(str(world), ingredients=[ing], cache=False) as s:
        out = s.execute(query)
    want = plain("SELECT a.Name, b.Name FROM city AS a JOIN city AS b "
                 "ON a.District = b.District AND a.ID < b.ID WHERE a.CountryCode = 'NLD' "
                 "AND substr(a.Name, 1, 1) = substr(b.Name, 1, 1)")
    assert sorted(map(tuple, out.df.itertuples(index=False))) == sorted(want)
    assert all(isinstance(v, tuple) and len(v) == 2 for v in ing.values)
    assert len(ing.values) == len(set(ing.values))  # distinct tuples
    assert ing.names == [["a.Name", "b.Name"]]


def test_null_part_maps_to_null_and_is_not_passed(world: Path) -> None:
    ing = Pairwise()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as s:
        out = s.execute("SELECT Name, {{Pairwise('q', country.Name, country.IndepYear)}} AS p "
                        "FROM country WHERE Continent = 'Antarctica' OR Code = 'NLD'")
    con = sqlite3.connect(world)
    nulls = {r[0] for r in con.execute("SELECT Name FROM country WHERE IndepYear IS NULL "
                                       "AND (Continent = 'Antarctica' OR Code = 'NLD')")}
    con.close()
    assert nulls and all(v[1] is not None for v in ing.values)
    for name, p in out.df.itertuples(index=False):
        assert (p is None or p != p) == (name in nulls)


def test_llm_map_prompt_shows_every_column(world: Path) -> None:
    prompts: list[str] = []

    def fn(req: Request) -> bool:
        prompts.append(req.prompt)
        return True

    with BlendSQL(str(world), model=FunctionModel(fn), ingredients=[LLMMap],
                  cache=False) as s:
        s.execute("SELECT Name FROM city WHERE CountryCode = 'NLD' AND "
                  "{{LLMMap('Is this city in this district?', city.Name, city.District)}}")
    con = sqlite3.connect(world)
    pairs = con.execute("SELECT DISTINCT Name, District FROM city "
                        "WHERE CountryCode = 'NLD'").fetchall()
    con.close()
    assert len(prompts) == len(pairs)
    for name, district in pairs:
        assert any(f"city.Name: {name}\ncity.District: {district}" in p for p in prompts)


def test_single_column_unchanged(world: Path) -> None:
    seen: list[Any] = []

    class One(MapIngredient):
        def run(self, question: Any, values: list, **kwargs: Any) -> list:
            seen.append((list(values), "value_names" in kwargs))
            return [True for _ in values]

    with BlendSQL(str(world), ingredients=[One], cache=False) as s:
        s.execute("SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{One('q', city.Name)}}")
    assert seen and all(isinstance(v, str) for v in seen[0][0]) and not seen[0][1]
