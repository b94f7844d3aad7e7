"""Identical calls share one evaluation; aliases, IN with QA, subquery options.

Each test's docstring says which wrong behaviour it rules out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientError
from blendsql.ingredients.base import MapIngredient, QAIngredient
from blendsql.ingredients.llm_map import LLMMap
from blendsql.models.base import FunctionModel, Request
from blendsql.models.constraints import Bool, Constraint, Float, Int, ListOf

from .conftest import CountCtx, StartsWith


class Letters(MapIngredient):
    """Number of letters of the value; records every run and its constraint."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.runs: list[tuple[list[Any], Constraint | None]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        self.runs.append((list(values), kwargs.get("constraint")))
        return [sum(ch.isalpha() for ch in str(v)) for v in values]


class Answer(QAIngredient):
    """Returns a fixed answer; records runs and constraints."""

    def __init__(self, answer: Any, name: str | None = None) -> None:
        super().__init__(name)
        self.answer = answer
        self.runs: list[Constraint | None] = []

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        self.runs.append(kwargs.get("constraint"))
        return self.answer


def _rows(df: pd.DataFrame) -> list[tuple]:
    return [tuple(r) for r in df.itertuples(index=False)]


# ------------------------------------------------------------ 1. identical calls


@pytest.mark.parametrize("query, twin", [
    ("SELECT Name, {{Letters('How many letters?', city.Name)}} AS n FROM city "
     "WHERE CountryCode = 'NLD' AND {{Letters('How many letters?', city.Name)}} > 8",
     "SELECT Name FROM city WHERE CountryCode = 'NLD'"),
    # spelled differently: paper reference, unqualified column, a table alias
    ("SELECT c.Name, {{Letters('How many letters?', 'city::Name')}} FROM city AS c "
     "WHERE c.CountryCode = 'NLD' AND {{Letters('How many letters?', Name)}} > 8",
     "SELECT Name FROM city WHERE CountryCode = 'NLD'"),
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' "
     "AND {{Letters('How many letters?', city.Name)}} > 8 "
     "ORDER BY {{Letters('How many letters?', city.Name)}}, Name",
     "SELECT Name FROM city WHERE CountryCode = 'NLD'"),
])
def test_identical_calls_run_once_with_one_constraint(world: Path, query: str,
                                                      twin: str, plain: Any) -> None:
    """The WHERE copy and the SELECT / ORDER BY copy are one run under one constraint
    (not two runs, one under Int and one under none, free to disagree)."""
    ing = Letters()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        out = b.execute(query)
    assert len(ing.runs) == 1, ing.runs
    values, constraint = ing.runs[0]
    assert isinstance(constraint, Int)
    names = {r[0] for r in plain(twin)}
    assert set(values) == names  # the union of what the uses need, each value once
    want = sorted(n for n in names if sum(ch.isalpha() for ch in n) > 8)
    assert sorted(r[0] for r in _rows(out.df)) == want
    if out.df.shape[1] == 2:
        for name, n in _rows(out.df):
            assert n == sum(ch.isalpha() for ch in name)


def test_identical_llm_map_calls_share_model_calls(world: Path, plain: Any) -> None:
    """LLMMap through a FunctionModel: one request per distinct value, all under Int,
    and the shown number is the one the filter used."""
    requests: list[Request] = []

    def fn(req: Request) -> int:
        requests.append(req)
        return sum(map(ord, req.prompt)) % 7

    query = ("SELECT Name, {{LLMMap('How many letters?', city.Name)}} AS n FROM city "
             "WHERE CountryCode = 'NLD' AND {{LLMMap('How many letters?', city.Name)}} > 3")
    with BlendSQL(str(world), model=FunctionModel(fn), ingredients=[LLMMap],
                  cache=False) as b:
        out = b.execute(query)
    names = {r[0] for r in plain("SELECT Name FROM city WHERE CountryCode = 'NLD'")}
    assert len(requests) == len(names)
    assert all(isinstance(r.constraint, Int) for r in requests)
    assert len(out.df) > 0 and all(n > 3 for n in out.df["n"])


@pytest.mark.parametrize("uses, want", [
    ("{{Letters('q', city.Name)}} = TRUE AND {{Letters('q', city.Name)}} > 2", Int),
    ("{{Letters('q', city.Name)}} > 2 AND {{Letters('q', city.Name)}} < 7.5", Float),
    ("{{Letters('q', city.Name)}} AND {{Letters('q', city.Name)}} = TRUE", Bool),
])
def test_constraint_precedence_of_identical_uses(world: Path, uses: str, want: type) -> None:
    ing = Letters()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        b.execute(f"SELECT Name FROM city WHERE CountryCode = 'NLD' AND {uses}")
    assert len(ing.runs) == 1
    assert type(ing.runs[0][1]) is want


def test_different_questions_are_not_shared(world: Path) -> None:
    ing = Letters()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        b.execute("SELECT Name, {{Letters('a', city.Name)}} FROM city "
                  "WHERE CountryCode = 'NLD' AND {{Letters('b', city.Name)}} > 8")
    assert len(ing.runs) == 2


def test_identical_qa_calls_answer_once(world: Path) -> None:
    qa = Answer(["Amsterdam", "Rotterdam"], name="Cities")
    with BlendSQL(str(world), ingredients=[qa], cache=False) as b:
        out = b.execute("SELECT Name FROM city WHERE Name IN {{Cities('which?')}} "
                        "OR District IN {{Cities('which?')}} ORDER BY Name")
    assert len(qa.runs) == 1 and isinstance(qa.runs[0], ListOf)
    assert list(out.df["Name"]) == ["Amsterdam", "Rotterdam"]


# ------------------------------------------------------------ 2. aliases


@pytest.mark.parametrize("query, twin", [
    ("SELECT Name, {{StartsWith('A', city.District)}} AS f FROM city "
     "WHERE CountryCode = 'NLD' AND f = TRUE",
     "SELECT Name, 1 FROM city WHERE CountryCode = 'NLD' AND District LIKE 'A%'"),
    ("SELECT Name, {{StartsWith('A', city.District)}} AS f FROM city "
     "WHERE f = TRUE AND CountryCode = 'NLD' LIMIT 1",
     "SELECT Name, 1 FROM city WHERE CountryCode = 'NLD' AND District LIKE 'A%' LIMIT 1"),
    ("SELECT Name, {{StartsWith('A', city.District)}} AS f FROM city "
     "WHERE CountryCode = 'NLD' AND NOT f",
     "SELECT Name, 0 FROM city WHERE CountryCode = 'NLD' AND District NOT LIKE 'A%'"),
])
def test_where_uses_select_alias_of_a_call(world: Path, plain: Any, query: str,
                                          twin: str) -> None:
    """WHERE may name a SELECT alias of a call: the rows of the plain twin, under LIMIT
    or not (never 'no such column: f')."""
    ing = StartsWith()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        out = b.execute(query)
    assert sorted(_rows(out.df)) == sorted(plain(twin))
    passed = [v for batch in ing.seen for v in batch]  # lazy under LIMIT: several batches
    assert len(passed) == len(set(passed))  # the alias shares the call's evaluation


def test_having_call_over_group_alias(world: Path, plain: Any) -> None:
    """``GROUP BY g HAVING {{M(g)}}``: ``g`` inside the call is the SELECT expression."""
    ing = StartsWith()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        out = b.execute("SELECT {{StartsWith('N', city.CountryCode)}} AS g, COUNT(*) AS c "
                        "FROM city GROUP BY g HAVING {{StartsWith('1', g)}}")
    want = plain("SELECT 1, COUNT(*) FROM city WHERE CountryCode LIKE 'N%'")
    assert _rows(out.df) == want


def test_where_alias_loses_to_a_real_column(world: Path, plain: Any) -> None:
    """SQLite reads ``Name`` in WHERE as the column when FROM has one, not the alias."""
    ing = StartsWith()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        out = b.execute("SELECT {{StartsWith('A', city.District)}} AS Name FROM city "
                        "WHERE Name = 'Amsterdam'")
    assert _rows(out.df) == [(0,)]  # Noord-Holland; as the alias it would match no row


def test_call_argument_uses_plain_alias(world: Path, plain: Any) -> None:
    """An alias of a plain expression inside a call in WHERE: the candidate query needs
    the expression (it has no SELECT list)."""
    ing = StartsWith()
    with BlendSQL(str(world), ingredients=[ing], cache=False) as b:
        out = b.execute("SELECT upper(Name) AS u FROM city "
                        "WHERE CountryCode = 'NLD' AND {{StartsWith('A', u)}}")
    assert sorted(_rows(out.df)) == sorted(plain(
        "SELECT upper(Name) FROM city WHERE CountryCode = 'NLD' AND upper(Name) LIKE 'A%'"))


# ------------------------------------------------------------ 4. subquery options


def test_options_subquery_becomes_its_values(world: Path) -> None:
    """run() gets the subquery's values as options (not ``[DataFrame]``, whose printed
    text would become the Choice)."""
    qa = Answer("Amsterdam", name="Pick")
    seen: list[Any] = []

    class Rec(QAIngredient):
        def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
            seen.append((options, kwargs.get("constraint")))
            return options[0]

    with BlendSQL(str(world), ingredients=[qa, Rec], cache=False) as b:
        out = b.execute("SELECT Name FROM city WHERE Name = {{Rec('which?', options=("
                        "SELECT DISTINCT Name FROM city WHERE CountryCode = 'NLD' "
                        "ORDER BY Name))}}")
    options, constraint = seen[0]
    assert options[:2] == ["Alkmaar", "Almere"] and all(isinstance(o, str) for o in options)
    assert "Alkmaar" in constraint.options
    assert list(out.df["Name"]) == ["Alkmaar"]


def test_map_options_and_example_outputs_subqueries(world: Path) -> None:
    seen: list[dict[str, Any]] = []

    class Rec(MapIngredient):
        def run(self, question: Any, values: list, **kwargs: Any) -> list:
            seen.append(kwargs)
            return [kwargs["options"][0] for _ in values]

    with BlendSQL(str(world), ingredients=[Rec], cache=False) as b:
        b.execute("SELECT {{Rec('q', city.Name, options=(SELECT Code FROM country "
                  "WHERE Code IN ('NLD', 'BEL', NULL)), example_outputs=(SELECT 'x' "
                  "UNION ALL SELECT 'x'))}} FROM city LIMIT 2")
    assert sorted(seen[0]["options"]) == ["BEL", "NLD"]
    assert seen[0]["example_outputs"] == ["x"]


def test_options_subquery_with_two_columns_is_rejected(world: Path) -> None:
    with BlendSQL(str(world), ingredients=[CountCtx], cache=False) as b:
        with pytest.raises(IngredientError) as e:
            b.execute("SELECT Name FROM city WHERE Name = {{CountCtx('q', "
                      "options=(SELECT Name, District FROM city))}}")
    assert "2 columns" in str(e.value) and "one column" in (e.value.hint or "")


# ------------------------------------------------------------ 5. IN with a QA call


@pytest.mark.parametrize("answer", ["Amsterdam", ["Amsterdam"], ["Amsterdam", "Utrecht"]])
@pytest.mark.parametrize("form", ["IN {{Pick('q')}}", "IN (<<Pick('q')>>)",
                                  "NOT IN {{Pick('q')}}", "IN ({{Pick('q')}})"])
def test_in_with_qa_scalar_or_list(world: Path, plain: Any, answer: Any, form: str) -> None:
    """A scalar answer is a set of one, a list answer a set, in every IN form."""
    qa = Answer(answer, name="Pick")
    with BlendSQL(str(world), ingredients=[qa], cache=False) as b:
        out = b.execute(f"SELECT Name FROM city WHERE CountryCode = 'NLD' AND Name {form}")
    items = [answer] if isinstance(answer, str) else answer
    marks = ", ".join("?" for _ in items)
    neg = "NOT " if form.startswith("NOT") else ""
    want = plain(f"SELECT Name FROM city WHERE CountryCode = 'NLD' AND Name {neg}IN ({marks})",
                 items)
    assert sorted(_rows(out.df)) == sorted(want)
