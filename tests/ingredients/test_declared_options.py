"""Ingredient options are declared once (``options_spec``) and checked wherever they are
given: constructor keywords, class attributes of a subclass, query keywords (their names
when the query is parsed, their values when read).

Each built-in declares exactly what its code reads: if a class starts reading a new
keyword without declaring it, queries using it would be refused, and a declared keyword
nobody reads would be silently ignored. Both directions are checked from the source.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientError, IngredientOptionError, OptionError, ParseError
from blendsql.ingredients import BUILTINS, IngredientOption, LLMMap, MapIngredient
from blendsql.ingredients.base import (
    ENGINE_QUERY_KWARGS,
    FRAMEWORK_ATTRIBUTES,
    Ingredient,
    accepted_kwargs,
)
from blendsql.models.base import FunctionModel, Request

#: keywords the engine passes to run() itself, never written in a query
ENGINE_SUPPLIED = {"model", "warnings", "constraint", "value_names", "db"}
READS = re.compile(r'setting\(\s*kwargs,\s*"(\w+)"|kwargs\["(\w+)"\]|kwargs\.get\("(\w+)"'
                   r'|"(\w+)" in kwargs')
INSTANCE_READS = re.compile(r'self\.options\.get\("(\w+)"')
CLASS_READS = re.compile(r"self\.(\w+)\b(?!\()")

IDS = [c.__name__ for c in BUILTINS]


def sources(cls: type) -> str:
    return "".join(inspect.getsource(k) for k in cls.__mro__
                   if k.__module__.startswith("blendsql.ingredients")
                   and k.__module__ != "blendsql.ingredients.base" and k is not Ingredient)


def reads(cls: type) -> set[str]:
    names = {g for groups in READS.findall(sources(cls)) for g in groups if g}
    return names - ENGINE_SUPPLIED


def declared(cls: type[Ingredient], where: str) -> set[str]:
    options = cls.declared_options()
    assert options is not None, f"{cls.__name__} declares no options"
    return {o.name for o in options.values() if getattr(o, where)}


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_declared_query_keywords_are_the_ones_read(cls: type[Ingredient]) -> None:
    engine = ENGINE_QUERY_KWARGS.get(cls.kind, frozenset())
    assert reads(cls) - engine == declared(cls, "query") - engine


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_instance_options_read_directly_are_declared_for_the_constructor(
        cls: type[Ingredient]) -> None:
    assert set(INSTANCE_READS.findall(sources(cls))) <= declared(cls, "init")


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_class_attribute_options_are_the_class_attributes_set(cls: type[Ingredient]) -> None:
    own = {k for klass in cls.__mro__ if issubclass(klass, Ingredient)
           and klass.__module__ != "blendsql.ingredients.base"
           for k, v in vars(klass).items()
           if not k.startswith("_") and not callable(v) and not hasattr(v, "__get__")
           and k not in FRAMEWORK_ATTRIBUTES}
    assert own == declared(cls, "attribute")


# ------------------------------------------------------------ where an option is given


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_a_misspelt_constructor_keyword_is_refused_with_a_hint(cls: type[Ingredient]) -> None:
    with pytest.raises(IngredientOptionError) as e:
        cls(instructoins="be brief")
    assert e.value.option == "instructoins"
    assert "did you mean 'instructions'?" in (e.value.hint or "")
    assert isinstance(e.value, IngredientError) and isinstance(e.value, OptionError)


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_a_wrongly_typed_constructor_keyword_is_refused(cls: type[Ingredient]) -> None:
    with pytest.raises(IngredientOptionError, match=r"instructions=3 \(to the constructor\) "
                       r"must be str, not int"):
        cls(instructions=3)


@pytest.mark.parametrize("cls", BUILTINS, ids=IDS)
def test_a_misspelt_class_attribute_is_refused_when_the_subclass_is_defined(
        cls: type[Ingredient]) -> None:
    with pytest.raises(IngredientOptionError) as e:
        type("Mine", (cls,), {"templat": "{value}"})
    assert "did you mean 'template'?" in (e.value.hint or "")
    with pytest.raises(IngredientOptionError, match="template=7"):
        type("Mine", (cls,), {"template": 7})


def test_an_option_given_where_it_cannot_be_is_refused() -> None:
    with pytest.raises(IngredientOptionError, match="cannot be given to the constructor") as e:
        LLMMap(default_instructions="Answer yes or no.")
    assert e.value.hint == "give it as a class attribute"
    with pytest.raises(IngredientOptionError, match="cannot be given as a class attribute"):
        type("Asked", (LLMMap,), {"question": "Is it red?"})


def test_a_subclass_keeps_constants_and_methods_to_itself() -> None:
    class Terse(LLMMap):
        default_instructions = "Answer in one word."
        MAX_WORDS = 1  # a constant, not an option

        def words(self) -> int:
            return self.MAX_WORDS

    assert Terse().words() == 1


# ------------------------------------------------------------ query keywords


def frame() -> dict[str, pd.DataFrame]:
    return {"w": pd.DataFrame({"x": ["a", "b"]})}


@pytest.mark.parametrize("query, near", [
    ("SELECT {{LLMQA('which?', (SELECT x FROM w), optoins='w::x')}} AS a", "options"),
    ("SELECT x FROM w WHERE {{LLMMap('ok?', w.x, retrun_type='bool')}} = TRUE", "return_type"),
    ("SELECT x FROM w WHERE {{LLMMap('ok?', w.x, instrucions='be brief')}} = TRUE", "instructions"),
    ("SELECT a.x FROM w a JOIN w b ON {{LLMJoin(a.x, b.x, kk=3)}}", "k"),
])
def test_a_misspelt_builtin_keyword_is_refused_before_any_model_call(query: str,
                                                                      near: str) -> None:
    bsql = BlendSQL(frame())  # no model: parsing fails first
    with pytest.raises(ParseError, match="has no keyword argument") as e:
        bsql.execute(query)
    assert f"did you mean {near}=?" in (e.value.hint or "")


def test_a_constructor_only_option_is_no_query_keyword() -> None:
    allowed = accepted_kwargs(LLMMap())
    assert allowed is not None and "cascade" not in allowed and "target" in allowed
    with pytest.raises(ParseError, match="has no keyword argument 'cascade'"):
        BlendSQL(frame()).execute("SELECT {{LLMMap('ok?', w.x, cascade='big')}} AS y FROM w")


def test_a_query_keyword_of_the_wrong_type_is_refused_when_read() -> None:
    bsql = BlendSQL(frame(), model=FunctionModel(lambda r: "yes"), cache=False)
    with pytest.raises(IngredientOptionError, match=r"max_tokens='many' \(in a query\) "
                       "must be int"):
        bsql.execute("SELECT {{LLMMap('ok?', w.x, max_tokens='many')}} AS y FROM w")


# ------------------------------------------------------------ a user's declared option


class Shout(LLMMap):
    """LLMMap with an extra option: a suffix added to every answer."""

    options_spec = (IngredientOption("suffix", (str,), "added to every answer",
                                     attribute=True),)
    suffix = "!"

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        tail = self.setting(kwargs, "suffix", self.suffix)
        return [f"{v}{tail}" for v in super().run(question, values, **kwargs)]


def shout_session() -> BlendSQL:
    return BlendSQL(frame(), ingredients=[Shout, Shout(name="Whisper", suffix="...")],
                    model=FunctionModel(lambda r: "ok", name="ok"), cache=False)


def test_a_subclass_adds_its_option_to_its_parents() -> None:
    allowed = accepted_kwargs(Shout())
    assert allowed is not None and {"suffix", "max_tokens", "options", "prefilter"} <= allowed
    bsql = shout_session()
    df = bsql.execute("SELECT {{Shout('Say?', w.x, suffix='?!', max_tokens=4)}} AS y FROM w").df
    assert list(df["y"]) == ["ok?!", "ok?!"]
    assert list(bsql.execute("SELECT {{Whisper('Say?', w.x)}} AS y FROM w").df["y"]) == \
        ["ok...", "ok..."]
    assert type("Louder", (Shout,), {"suffix": "!!"}).suffix == "!!"


@pytest.mark.parametrize("given", [
    lambda: Shout(sufix="?"),
    lambda: type("Loud", (Shout,), {"sufix": "!!"}),
    lambda: shout_session().execute("SELECT {{Shout('Say?', w.x, sufix='?')}} AS y FROM w"),
], ids=["constructor", "class attribute", "query"])
def test_a_misspelt_user_option_is_refused_wherever_it_is_given(given: Any) -> None:
    with pytest.raises((IngredientOptionError, ParseError)) as e:
        given()
    hint = e.value.hint or ""
    assert "did you mean 'suffix'?" in hint or "did you mean suffix=?" in hint


def test_an_undeclared_ingredient_accepts_any_option() -> None:
    class Free(MapIngredient):
        anything = object()

        def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
            return [kwargs.get("whatever", v) for v in values]

    assert Free.declared_options() is None and accepted_kwargs(Free(color="red")) is None
    df = BlendSQL(frame(), ingredients=[Free]).execute(
        "SELECT {{Free('q', w.x, whatever='z')}} AS y FROM w").df
    assert list(df["y"]) == ["z", "z"]


def test_options_spec_holds_only_declarations() -> None:
    with pytest.raises(IngredientError, match="options_spec holds 'suffix'"):
        type("Bad", (MapIngredient,), {"options_spec": ("suffix",)})


def test_requests_see_a_declared_constructor_option() -> None:
    seen: list[Request] = []
    model = FunctionModel(lambda r: seen.append(r) or "yes", name="seen")
    LLMMap(max_tokens=3).run("ok?", ["a"], model=model)
    assert seen[0].max_tokens == 3
