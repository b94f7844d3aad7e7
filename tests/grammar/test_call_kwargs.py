"""Keyword arguments are checked against the options the ingredient declares
(``options_spec``: the names a query may write)."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ParseError
from blendsql.ingredients import IngredientOption, MapIngredient, QAIngredient
from blendsql.ingredients.base import accepted_kwargs


class Tag(MapIngredient):
    """Declares what it reads: ``prefix=``."""

    options_spec = (IngredientOption("prefix", (str,)),)

    def run(self, question, values, **kwargs):
        return [f"{kwargs.get('prefix', '')}{v}" for v in values]


class Free(MapIngredient):
    """Declares nothing: reads **kwargs freely, so any keyword is accepted."""

    def run(self, question, values, **kwargs):
        return [str(kwargs.get("anything", v)) for v in values]


class Pick(QAIngredient):
    options_spec = (IngredientOption("style", (str,)),)

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


def test_a_subclass_inherits_its_parents_keywords_and_adds_its_own():
    class Same(Tag):
        def run(self, question, values, **kwargs):
            return [f"{kwargs.get('prefix', '')}{v}" for v in values]

    class Declared(Tag):
        options_spec = (IngredientOption("suffix", (str,)),)

        def run(self, question, values, **kwargs):
            return [f"{kwargs.get('prefix', '')}{v}{kwargs.get('suffix', '')}" for v in values]

    assert accepted_kwargs(Same()) == accepted_kwargs(Tag())
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Same, Declared])
    assert bsql.execute("SELECT {{Same('t', w.x, prefix='>')}} AS y FROM w").df["y"][0] == ">a"
    assert bsql.execute("SELECT {{Declared('t', w.x, prefix='<', suffix='!')}} AS y FROM w"
                        ).df["y"][0] == "<a!"
    with pytest.raises(ParseError, match="no keyword argument 'suffix'"):
        bsql.execute("SELECT {{Same('t', w.x, suffix='!')}} AS y FROM w")
