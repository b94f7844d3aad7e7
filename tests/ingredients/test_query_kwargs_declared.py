"""Each built-in ingredient declares exactly the keyword arguments its code reads.

``query_kwargs`` is what the parser accepts (a misspelt keyword is a ParseError
instead of being ignored); if a class starts reading a new keyword without
declaring it, queries using it would be refused, and a declared keyword nobody
reads would be silently ignored. Both directions are checked from the source.
"""

from __future__ import annotations

import inspect
import re

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ParseError
from blendsql.ingredients import BUILTINS as BUILTIN_CLASSES
from blendsql.ingredients.base import ENGINE_QUERY_KWARGS, Ingredient

#: keywords the engine passes to run() itself, never written in a query
ENGINE_SUPPLIED = {"model", "warnings", "constraint", "value_names", "db"}
READS = re.compile(r'setting\(\s*kwargs,\s*"(\w+)"|kwargs\["(\w+)"\]|kwargs\.get\("(\w+)"'
                   r'|"(\w+)" in kwargs')


def reads(cls: type) -> set[str]:
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("blendsql.ingredients") and klass is not Ingredient \
                and klass.__module__ != "blendsql.ingredients.base":
            for groups in READS.findall(inspect.getsource(klass)):
                names.update(g for g in groups if g)
    return names - ENGINE_SUPPLIED


BUILTINS = [c if isinstance(c, type) else type(c) for c in BUILTIN_CLASSES]


@pytest.mark.parametrize("cls", BUILTINS, ids=[c.__name__ for c in BUILTINS])
def test_declared_keywords_are_the_ones_read(cls):
    assert cls.query_kwargs is not None, f"{cls.__name__} declares no query_kwargs"
    engine = ENGINE_QUERY_KWARGS.get(cls.kind, frozenset())
    assert reads(cls) - engine == set(cls.query_kwargs) - engine


@pytest.mark.parametrize("query, near", [
    ("SELECT {{LLMQA('which?', (SELECT x FROM w), optoins='w::x')}} AS a", "options"),
    ("SELECT x FROM w WHERE {{LLMMap('ok?', w.x, retrun_type='bool')}} = TRUE", "return_type"),
    ("SELECT x FROM w WHERE {{LLMMap('ok?', w.x, instrucions='be brief')}} = TRUE", "instructions"),
    ("SELECT a.x FROM w a JOIN w b ON {{LLMJoin(a.x, b.x, kk=3)}}", "k"),
])
def test_a_misspelt_builtin_keyword_is_refused_before_any_model_call(query, near):
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a", "b"]})})  # no model: parsing fails first
    with pytest.raises(ParseError, match="has no keyword argument") as e:
        bsql.execute(query)
    assert f"did you mean {near}=?" in e.value.hint
