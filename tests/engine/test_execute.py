"""End-to-end engine behaviour: results equal plain-SQL twins; trace, meta, errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ExecutionError, IngredientError, ParseError
from blendsql.models.constraints import Bool, Choice, Int

from .conftest import (
    AskModel,
    CountCtx,
    CountingModel,
    Len,
    LowerJoin,
    PickMax,
    ShortOutput,
    StartsWith,
)

TWINS = [
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('A', city.Name)}} = TRUE",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND substr(Name, 1, 1) = 'A'"),
    ("SELECT Name, {{Len(city.Name)}} AS n FROM city WHERE CountryCode = 'BEL' ORDER BY n, Name",
     "SELECT Name, length(Name) AS n FROM city WHERE CountryCode = 'BEL' ORDER BY n, Name"),
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND NOT {{StartsWith('A', city.Name)}} "
     "OR {{Len(city.Name)}} = 4 ORDER BY Name",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND NOT substr(Name, 1, 1) = 'A' "
     "OR length(Name) = 4 ORDER BY Name"),
    ("SELECT {{Len(city.District)}} AS d, COUNT(*) FROM city GROUP BY d HAVING COUNT(*) > 50 "
     "ORDER BY d",
     "SELECT length(District) AS d, COUNT(*) FROM city GROUP BY d HAVING COUNT(*) > 50 "
     "ORDER BY d"),
    ("SELECT CASE WHEN {{StartsWith('S', country.Name)}} THEN 'S' ELSE 'other' END AS k, "
     "COUNT(*) FROM country GROUP BY k ORDER BY k",
     "SELECT CASE WHEN substr(Name, 1, 1) = 'S' THEN 'S' ELSE 'other' END AS k, COUNT(*) "
     "FROM country GROUP BY k ORDER BY k"),
    ("SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM city WHERE "
     "{{Len(city.Name)}} > 25) ORDER BY Name",
     "SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM city WHERE "
     "length(Name) > 25) ORDER BY Name"),
    ("WITH big AS (SELECT * FROM city WHERE Population > 5000000) SELECT b.Name FROM big b "
     "WHERE {{StartsWith('S', b.Name)}} = TRUE ORDER BY b.Name",
     "WITH big AS (SELECT * FROM city WHERE Population > 5000000) SELECT b.Name FROM big b "
     "WHERE substr(b.Name, 1, 1) = 'S' ORDER BY b.Name"),
    ("SELECT d.Name FROM (SELECT Name FROM city WHERE {{Len(city.Name)}} = 5 ORDER BY ID "
     "LIMIT 20) d WHERE {{StartsWith('B', d.Name)}} = TRUE",
     "SELECT d.Name FROM (SELECT Name FROM city WHERE length(Name) = 5 ORDER BY ID LIMIT 20) d "
     "WHERE substr(d.Name, 1, 1) = 'B'"),
    ("SELECT DISTINCT {{Len(city.CountryCode)}} FROM city",
     "SELECT DISTINCT length(CountryCode) FROM city"),
    ("SELECT Name FROM city WHERE {{Len(city.Name)}} > 3 ORDER BY ID LIMIT 5 OFFSET 10",
     "SELECT Name FROM city WHERE length(Name) > 3 ORDER BY ID LIMIT 5 OFFSET 10"),
    ("SELECT c.Name, k.Name FROM city c JOIN country k ON {{LowerJoin(c.Name, k.Name)}} "
     "WHERE c.Population > 100000 ORDER BY c.Name",
     "SELECT c.Name, k.Name FROM city c JOIN country k ON lower(c.Name) = lower(k.Name) "
     "WHERE c.Population > 100000 ORDER BY c.Name"),
    ("SELECT COUNT(*) FROM city WHERE Population > {{CountCtx('q', (SELECT * FROM country "
     "WHERE Continent = 'Asia'))}} * 100000",
     "SELECT COUNT(*) FROM city WHERE Population > (SELECT COUNT(*) FROM country "
     "WHERE Continent = 'Asia') * 100000"),
    ("SELECT Name FROM country WHERE Name = {{PickMax('which?', options='country::Name')}}",
     "SELECT Name FROM country WHERE Name = (SELECT MAX(Name) FROM country)"),
    ("SELECT COUNT(*) FROM city WHERE Population > {{CountCtx('q', (SELECT * FROM country "
     "WHERE {{StartsWith('A', country.Name)}} = TRUE))}}",
     "SELECT COUNT(*) FROM city WHERE Population > (SELECT COUNT(*) FROM country "
     "WHERE substr(Name, 1, 1) = 'A')"),
]


@pytest.mark.parametrize("query,twin", TWINS)
def test_matches_plain_sql_twin(world: Path, plain: Any, query: str, twin: str) -> None:
    b = BlendSQL(world, ingredients=[StartsWith, Len, CountCtx, PickMax, LowerJoin])
    got = [tuple(r) for r in b.execute(query).df.itertuples(index=False)]
    want = plain(twin)
    if "ORDER BY" in twin:
        assert got == want
    else:
        assert Counter(got) == Counter(want)


def test_map_sees_distinct_non_null_values_after_plain_filters(world: Path, plain: Any) -> None:
    sw = StartsWith()
    b = BlendSQL(world, ingredients=[sw])
    b.execute("SELECT Name FROM city WHERE CountryCode = 'NLD' AND "
              "{{StartsWith('A', city.Name)}} = TRUE")
    (seen,) = sw.seen
    assert sorted(seen) == sorted(r[0] for r in plain(
        "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD'"))
    assert None not in seen and len(seen) == len(set(seen))


def test_cascade_second_ingredient_sees_only_rows_passing_first(world: Path,
                                                                plain: Any) -> None:
    sw, ln = StartsWith(), Len()
    b = BlendSQL(world, ingredients=[sw, ln])
    b.execute("SELECT Name FROM city WHERE CountryCode = 'NLD' AND "
              "{{StartsWith('A', city.Name)}} = TRUE AND {{Len(city.Name)}} > 6")
    assert sorted(ln.seen[0]) == sorted(r[0] for r in plain(
        "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD' AND Name LIKE 'A%'"))


def test_join_sides_see_their_filtered_distinct_values(world: Path, plain: Any) -> None:
    lj = LowerJoin()
    b = BlendSQL(world, ingredients=[lj])
    b.execute("SELECT c.Name FROM city c JOIN {{LowerJoin(left_on='city::Name', "
              "right_on='country::Name')}} WHERE c.CountryCode = 'NLD'")
    left, right = lj.seen[0]
    assert sorted(left) == sorted(r[0] for r in plain(
        "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD'"))
    assert len(right) == plain("SELECT COUNT(DISTINCT Name) FROM country")[0][0]


def test_params_list_and_dict(world: Path, plain: Any) -> None:
    b = BlendSQL(world, ingredients=[StartsWith])
    want = plain("SELECT Name FROM city WHERE CountryCode = ? AND substr(Name, 1, 1) = ? "
                 "ORDER BY Name", ("NLD", "H"))
    q = ("SELECT Name FROM city WHERE CountryCode = ? AND {{StartsWith(?, city.Name)}} = TRUE "
         "ORDER BY Name")
    assert [tuple(r) for r in b.execute(q, ["NLD", "H"]).df.itertuples(index=False)] == want
    q2 = ("SELECT Name FROM city WHERE CountryCode = :cc AND "
          "{{StartsWith(:p, city.Name)}} = TRUE ORDER BY Name")
    got = b.execute(q2, {"cc": "NLD", "p": "H"}).df
    assert [tuple(r) for r in got.itertuples(index=False)] == want


def test_outputs_travel_as_data_not_sql_text(world: Path) -> None:
    class Secret(CountCtx):
        def run(self, *a: Any, **k: Any) -> Any:
            return "x'); DROP TABLE city; --"

    b = BlendSQL(world, ingredients=[Secret])
    s = b.execute("SELECT COUNT(*) AS n FROM city WHERE Name = {{Secret('q')}}")
    assert s.df["n"].tolist() == [0]
    assert all("DROP" not in (t.sql or "") for t in s.trace)


def test_trace_and_meta_with_metered_model(world: Path) -> None:
    model = CountingModel()
    b = BlendSQL(world, model=model, ingredients=[AskModel], cache=False)
    s = b.execute("SELECT Name FROM city WHERE CountryCode = 'NLD' AND "
                  "{{AskModel('Is it big?', city.Name)}} = TRUE")
    n = len(model.requests)
    assert n == 28 and len(s.df) == 28
    assert s.meta.values_passed == n and s.meta.model_calls == n
    assert (s.meta.prompt_tokens, s.meta.completion_tokens, s.meta.cached_tokens) == (
        10 * n, n, 2 * n)
    assert s.meta.ingredient_calls == 1 and s.meta.seconds > 0
    kinds = [t.kind for t in s.trace]
    assert kinds[:2] == ["parse", "plan"] and kinds[-1] == "sql"
    step = next(t for t in s.trace if t.kind == "ingredient")
    assert step.ingredient == "AskModel" and step.model_calls == n
    assert len(step.inputs or []) == n and step.outputs == [True] * n
    assert step.prompts and step.prompts[0].startswith("Is it big?: ")
    sql_steps = [t for t in s.trace if t.kind == "sql"]
    assert all(t.sql and t.rows_out is not None for t in sql_steps)
    # the 28 passing values are bound parameters of the final query (no temp table)
    assert ":__bsql_v" in (sql_steps[-1].sql or "")
    assert not [t for t in s.trace if t.kind == "temp_table"]


def test_model_not_loaded_when_no_ingredient_needs_it(world: Path) -> None:
    b = BlendSQL(world, ingredients=[StartsWith])
    b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE")
    assert b._model is None


def test_inferred_and_explicit_constraints_reach_the_ingredient(world: Path) -> None:
    sw, pm = StartsWith(), PickMax()
    b = BlendSQL(world, ingredients=[sw, pm])
    b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE LIMIT 1")
    assert sw.kwargs[-1]["constraint"] == Bool()
    b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} > 0 LIMIT 1")
    assert sw.kwargs[-1]["constraint"] == Int()
    b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name, options=('x', 'y'))}}"
              " = 'x' LIMIT 1")
    assert sw.kwargs[-1]["constraint"] == Choice(("x", "y"))
    b.execute("SELECT Name FROM country WHERE Continent = {{PickMax('which continent?')}}")
    opts = pm.seen[-1]["options"]
    assert sorted(opts) == sorted({"Asia", "Europe", "North America", "Africa", "Oceania",
                                   "Antarctica", "South America"})
    assert isinstance(pm.seen[-1]["constraint"], Choice)


def test_errors_are_blendsql_errors(world: Path) -> None:
    b = BlendSQL(world, ingredients=[ShortOutput, StartsWith])
    with pytest.raises(IngredientError) as info:
        b.execute("SELECT Name FROM city WHERE {{ShortOutput('q', city.Name)}} = 1")
    assert "ShortOutput" in str(info.value) and info.value.hint
    with pytest.raises(ExecutionError) as e2:
        b.execute("SELECT nope FROM city WHERE {{StartsWith('A', city.Name)}}")
    assert "nope" in str(e2.value)
    with pytest.raises(BlendSQLError):
        b.execute("SELECT * FROM city WHERE {{NoSuchThing('A', city.Name)}}")
    with pytest.raises(ExecutionError):
        b.execute("SELECT * FROM city WHERE Name = ?", [])


def test_unknown_ingredient_is_parse_or_ingredient_error(world: Path) -> None:
    b = BlendSQL(world, ingredients=[StartsWith])
    with pytest.raises((ParseError, IngredientError)):
        b.execute("SELECT * FROM city WHERE {{StartWith('A', city.Name)}}")


def test_plain_query_runs_as_written(world: Path, plain: Any) -> None:
    b = BlendSQL(world)
    s = b.execute("SELECT COUNT(*) AS n FROM city WHERE CountryCode = ?", ["NLD"])
    assert s.df["n"].tolist() == [plain("SELECT COUNT(*) FROM city WHERE CountryCode='NLD'")[0][0]]
    assert s.meta.ingredient_calls == 0


def test_execute_never_mutates_the_parsed_tree(world: Path) -> None:
    b = BlendSQL(world, ingredients=[StartsWith, Len, CountCtx])
    q = ("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE AND "
         "{{Len(city.Name)}} > 5 AND Population > {{CountCtx('q', (SELECT * FROM country))}}")
    tree = b.parse(q)
    before = repr(tree)
    first = b.execute(q).df
    assert repr(tree) == before
    assert b.execute(q).df.equals(first)


def test_filter_lookup_keeps_null_semantics(world: Path, plain: Any) -> None:
    b = BlendSQL({"t": __import__("pandas").DataFrame({"a": ["ab", None, "cd", "ae"]})},
                 ingredients=[StartsWith])
    got = b.execute("SELECT a FROM t WHERE {{StartsWith('a', t.a)}} IS NULL").df["a"].tolist()
    assert len(got) == 1 and (got[0] is None or got[0] != got[0])
    got = b.execute("SELECT a FROM t WHERE NOT {{StartsWith('a', t.a)}}").df["a"].tolist()
    assert got == ["cd"]
    got = b.execute("SELECT a FROM t WHERE {{StartsWith('a', t.a)}} = TRUE OR a IS NULL")
    assert [None if x is None or x != x else x for x in got.df["a"]] == ["ab", None, "ae"]


def test_cache_hits_are_metered(world: Path, tmp_path: Path) -> None:
    model = CountingModel()
    b = BlendSQL(world, model=model, ingredients=[AskModel], cache=str(tmp_path / "c.sqlite"))
    q = ("SELECT Name FROM city WHERE CountryCode = 'BEL' AND "
         "{{AskModel('Is it big?', city.Name)}} = TRUE")
    first, second = b.execute(q), b.execute(q)
    n = len(first.df)
    assert n > 0 and (first.meta.model_calls, first.meta.cache_hits) == (n, 0)
    assert (second.meta.model_calls, second.meta.cache_hits) == (0, n)
    assert len(model.requests) == n and second.df.equals(first.df)
