"""Keyword arguments are checked against what the ingredient reads (``query_kwargs``)."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ParseError
from blendsql.ingredients import MapIngredient, QAIngredient
from blendsql.ingredients.base import accepted_kwargs


class Tag(MapIngredient):
    """Declares what it reads: ``prefix=``."""

    query_kwargs = frozenset({"prefix"})

    def run(self, question, values, **kwargs):
        return [f"{kwargs.get('prefix', '')}{v}" for v in values]


class Free(MapIngredient):
    """Declares nothing: reads **kwargs freely, so any keyword is accepted."""

    def run(self, question, values, **kwargs):
        return [str(kwargs.get("anything", v)) for v in values]


class Pick(QAIngredient):
    query_kwargs = frozenset({"style"})

    def run(self, question, context, options, **kwargs):
        return (options or ["none"])[0]


def session() -> BlendSQL:
    return BlendSQL({"w": pd.DataFrame({"x": ["a", "b"]})}, ingredients=[Tag, Free, Pick])


def test_a_declared_keyword_runs():
    df = session().execute("SELECT {{Tag('t', w.x, prefix='>')}} AS y FROM w ORDER BY x").df
    assert list(df["y"]) == [">a", ">b"]


@pytest.mark.parametrize("query, wrong, near", [
    ("SELECT {{Tag('t', w.x, prefx='>')}} FROM w", "prefx", "prefix"),
    ("SELECT {{Tag('t', w.x, Prefix='>')}} FROM w", "Prefix", "prefix"),
    ("SELECT {{Tag('t', w.x, optoins=('a', 'b'))}} FROM w", "optoins", "options"),
    ("SELECT x FROM w WHERE {{Tag('t', w.x, retrun_type='bool')}} = TRUE", "retrun_type", "return_type"),
    ("SELECT {{Pick('q', (SELECT x FROM w), optons='w::x')}} AS a", "optons", "options"),
    ("SELECT 1 FROM w WHERE x IN (SELECT {{Tag('t', w.x, prefixx='-')}} FROM w)", "prefixx", "prefix"),
])
def test_a_misspelt_keyword_is_a_parse_error_with_did_you_mean(query, wrong, near):
    with pytest.raises(ParseError) as e:
        session().execute(query)
    err = e.value
    assert err.code == "unknown_keyword" and repr(wrong) in err.message
    assert f"did you mean {near}=?" in err.hint
    assert err.line == 1 and query[err.column - 1:].startswith("{{")  # points at the call


def test_engine_keywords_are_always_accepted_for_a_declaring_ingredient():
    allowed = accepted_kwargs(Tag())
    assert allowed is not None and {"options", "return_type", "example_outputs", "prefilter",
                                    "prefix"} <= allowed
    sm = session().execute("SELECT x FROM w WHERE {{Tag('t', w.x, return_type='str')}} = 'a'")
    assert list(sm.df["x"]) == ["a"]


def test_an_ingredient_that_declares_nothing_accepts_anything():
    assert accepted_kwargs(Free()) is None
    df = session().execute("SELECT {{Free('t', w.x, anything='z')}} AS y FROM w").df
    assert list(df["y"]) == ["z", "z"]


def test_a_subclass_of_a_declaring_ingredient_accepts_anything_until_it_declares():
    class Wider(Tag):
        def run(self, question, values, **kwargs):
            return [f"{kwargs.get('suffix', '')}{v}" for v in values]

    class Declared(Tag):
        query_kwargs = frozenset({"suffix"})

        def run(self, question, values, **kwargs):
            return [f"{v}{kwargs.get('suffix', '')}" for v in values]

    assert accepted_kwargs(Wider()) is None
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Wider, Declared])
    assert bsql.execute("SELECT {{Wider('t', w.x, suffix='!')}} AS y FROM w").df["y"][0] == "!a"
    assert bsql.execute("SELECT {{Declared('t', w.x, suffix='!')}} AS y FROM w").df["y"][0] == "a!"
    with pytest.raises(ParseError, match="no keyword argument 'prefix'"):
        bsql.execute("SELECT {{Declared('t', w.x, prefix='!')}} AS y FROM w")
