"""What ``BlendSQL.execute`` / ``parse`` accept as a query, at the session level."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlglot

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ParseError, QueryTypeError
from blendsql.ingredients.base import QAIngredient
from blendsql.models.base import FunctionModel


class Echo(QAIngredient):
    """Answers with the question and the number of context rows (deterministic)."""

    def run(self, question, context, options, **kwargs):
        rows = 0 if context is None else len(context)
        return f"{question}|{rows}|{','.join(map(str, options or []))}"


@pytest.fixture()
def bsql():
    docs = pd.DataFrame({"title": ["a", "b", "c"], "body": ["x", "y", "z"]})
    with BlendSQL({"documents": docs}, model=FunctionModel(lambda r: "x"),
                  ingredients=[Echo], cache=False) as s:
        yield s


@pytest.mark.parametrize(("query", "call"), [
    ("{{Echo('Who won?')}}", "{{Echo('Who won?')}}"),
    ("  {{Echo('Who won?')}}  ;  -- done\n", "{{Echo('Who won?')}}"),
    ("/* q */ <<Echo('Who won?')>>", "<<Echo('Who won?')>>"),
])
def test_lone_call_is_select_call(bsql, query, call):
    got = bsql.execute(query).df
    want = bsql.execute("SELECT " + call).df
    assert list(want.columns) == [call]  # the column is named after the call as written
    assert len(got) == 1 and list(got.columns) == list(want.columns)
    assert got.iloc[0, 0] == "Who won?|0|"
    assert got.equals(want)


def test_lone_call_with_context_subquery(bsql):
    got = bsql.execute("<<Echo('q', (SELECT * FROM documents WHERE title != 'c'))>>").df
    assert got.shape == (1, 1) and got.iloc[0, 0] == "q|2|"


def test_trailing_comma_runs(bsql):
    got = bsql.execute("SELECT {{Echo('q', options=('a', 'b'),)}} AS x").df
    assert got["x"].tolist() == ["q|0|a,b"]


@pytest.mark.parametrize("query", [None, b"SELECT 1", 1, ["SELECT 1"], {"q": 1}])
def test_wrong_query_type_is_a_clear_error(bsql, query):
    with pytest.raises(QueryTypeError) as info:
        bsql.execute(query)  # type: ignore[arg-type]
    assert isinstance(info.value, BlendSQLError) and info.value.hint
    with pytest.raises(QueryTypeError):
        bsql.parse(query)  # type: ignore[arg-type]


def test_a_sqlglot_expression_is_still_accepted(bsql):
    tree = sqlglot.parse_one("SELECT count(*) AS n FROM documents", read="sqlite")
    assert bsql.execute(tree).df["n"].tolist() == [3]


@pytest.mark.parametrize("query", ["", ";", "   ", "\n\t", "-- nothing", "/* nothing */",
                                   "-- a\n/* b */ ;"])
def test_empty_query_is_a_parse_error_not_an_empty_frame(bsql, query):
    with pytest.raises(ParseError) as info:
        bsql.execute(query)
    assert info.value.code == "empty" and info.value.hint


@pytest.mark.parametrize("query", [
    "SELECT 1; SELECT 2",
    "SELECT 1 AS a;\nSELECT 2 AS b;",
    "SELECT title FROM documents; DELETE FROM documents",
    "SELECT 1; -- c\n SELECT 2",
])
def test_several_statements_are_refused(bsql, query):
    with pytest.raises(ParseError, match="one SQL statement") as info:
        bsql.execute(query)
    assert info.value.code == "statements"
    assert bsql.execute("SELECT count(*) AS n FROM documents").df["n"].tolist() == [3]


def test_one_statement_with_trailing_semicolon_and_comment_runs(bsql):
    assert bsql.execute("SELECT 1 AS a; -- done").df["a"].tolist() == [1]


def test_huge_query_is_refused_before_parsing(bsql):
    query = "SELECT " + " + ".join(["1"] * 300_000)  # 1.2 MB, over the 1,000,000 default
    with pytest.raises(ParseError, match="max_query_chars") as info:
        bsql.execute(query)
    assert info.value.code == "too_large"
    with pytest.raises(ParseError, match="max_query_chars"):
        bsql.parse(query)


def test_deep_nesting_through_execute_is_a_parse_error(bsql):
    with pytest.raises(ParseError) as info:
        bsql.execute("SELECT " + "(" * 10_000 + "1" + ")" * 10_000)
    assert info.value.code == "too_deep"
