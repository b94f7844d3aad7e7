"""LLMMap: prompts (value last, shared prefix), constraint choice, errors."""

from __future__ import annotations

import pytest

from blendsql.errors import IngredientError
from blendsql.ingredients import BUILTINS, IngredientRegistry, LLMMap
from blendsql.models.constraints import Bool, Choice, Date, Float, Int, ListOf, Text

POSITIONS = ["sp", "1b", "rp", "c"]


def test_prompt_has_question_and_value_last(recorder):
    rec = recorder(lambda r: "false")
    LLMMap().run("Is this a pitcher?", POSITIONS, model=rec.model, constraint=Bool())
    assert len(rec.prompts) == len(POSITIONS)
    for value, prompt in zip(POSITIONS, rec.prompts, strict=True):
        assert "Is this a pitcher?" in prompt
        assert prompt.rstrip().endswith(f"Value: {value}\nAnswer:")
        assert prompt.index("Is this a pitcher?") < prompt.rindex(value)


def test_prompts_share_prefix_up_to_the_value(recorder):
    """llama.cpp prefix caching needs every prompt identical until the value."""
    rec = recorder(lambda r: "x")
    LLMMap().run("What league?", ["alpha", "beta", "gamma"], model=rec.model,
                 few_shot=[("delta", "NL")], example_outputs=["AL", "NL"])
    prefixes = {p[: p.rindex("Value:")] for p in rec.prompts}
    assert len(prefixes) == 1
    (prefix,) = prefixes
    assert "delta" in prefix and "NL" in prefix and "Example answers: AL; NL" in prefix


def test_one_request_per_distinct_value_and_outputs_parallel(recorder):
    rec = recorder(lambda r: r.prompt.rsplit("Value: ", 1)[1].split("\n")[0].upper())
    out = LLMMap().run("Upper?", ["a", "b", "a", "c", "b"], model=rec.model)
    assert out == ["A", "B", "A", "C", "B"]
    assert len(rec.requests) == 3
    assert rec.batches == 1  # one generate() call for the whole map


def test_options_make_a_choice_and_map_back_to_type(recorder):
    rec = recorder(lambda r: "2")
    out = LLMMap().run("How many?", ["x"], model=rec.model, options=[1, 2, 3])
    assert rec.requests[0].constraint == Choice(("1", "2", "3"))
    assert out == [2] and isinstance(out[0], int)
    assert "1; 2; 3" in rec.prompts[0]


def test_semicolon_option_string(recorder):
    rec = recorder(lambda r: "no")
    out = LLMMap().run("Pitcher?", ["sp"], model=rec.model, options="yes;no")
    assert rec.requests[0].constraint == Choice(("yes", "no"))
    assert out == ["no"]


@pytest.mark.parametrize(
    ("return_type", "expected", "answer", "value"),
    [("int", Int(), "42", 42), ("bool", Bool(), "yes", True), ("float", Float(), "1.5", 1.5),
     ("date", Date(), "2020-01-02", "2020-01-02"), (int, Int(), "7", 7),
     ("list[str]", ListOf(Text()), '["a", "b"]', ["a", "b"])],
)
def test_return_type(recorder, return_type, expected, answer, value):
    rec = recorder(lambda r: answer)
    out = LLMMap().run("q?", ["v"], model=rec.model, return_type=return_type)
    assert rec.requests[0].constraint == expected
    assert out == [value]


def test_inferred_constraint_used(recorder):
    rec = recorder(lambda r: "true")
    out = LLMMap().run("Pitcher?", ["sp"], model=rec.model, constraint=Bool())
    assert rec.requests[0].constraint == Bool()
    assert rec.requests[0].max_tokens <= 8
    assert out == [True]


def test_explicit_beats_inferred(recorder):
    rec = recorder(lambda r: "3")
    LLMMap().run("q?", ["v"], model=rec.model, constraint=Bool(), return_type="int")
    LLMMap().run("q?", ["v"], model=rec.model, constraint=Bool(), options=["3", "4"])
    assert rec.requests[0].constraint == Int()
    assert rec.requests[1].constraint == Choice(("3", "4"))


def test_default_is_short_single_line_text(recorder):
    rec = recorder(lambda r: '  "Atlanta"\nbecause it is in Georgia')
    out = LLMMap().run("Which city?", ["ATL"], model=rec.model)
    req = rec.requests[0]
    assert req.constraint == Text()
    assert req.max_tokens <= 64 and "\n" in req.stop
    assert out == ["Atlanta"]


def test_unparseable_becomes_none_with_warning(recorder):
    rec = recorder(lambda r: "maybe" if "rp" in r.prompt else "true")
    sink: list[str] = []
    ing = LLMMap()
    out = ing.run("Pitcher?", ["sp", "rp"], model=rec.model, constraint=Bool(), warnings=sink)
    assert out == [True, None]
    assert len(sink) == 1 and "maybe" in sink[0]
    assert ing.last_errors == [f"LLMMap: {sink[0]}"]  # the sink is named by the engine


def test_configured_instance_question_few_shot_instructions(recorder):
    rec = recorder(lambda r: "true")
    ing = LLMMap(name="IsPitcher", question="Is this position a pitcher?",
                 few_shot=[("sp", True), {"value": "1b", "answer": False}],
                 instructions="You are a baseball expert.", return_type="bool")
    assert ing.name == "IsPitcher"
    out = ing.run(None, ["rp"], model=rec.model)
    prompt = rec.prompts[0]
    assert out == [True]
    assert prompt.startswith("You are a baseball expert.")
    assert "Is this position a pitcher?" in prompt
    assert "Value: sp\nAnswer: true" in prompt and "Value: 1b\nAnswer: false" in prompt
    assert prompt.index("Value: 1b") < prompt.index("Value: rp")


def test_query_kwarg_beats_instance_option(recorder):
    rec = recorder(lambda r: "5")
    LLMMap(return_type="bool").run("q?", ["v"], model=rec.model, return_type="int")
    assert rec.requests[0].constraint == Int()


def test_context_table_in_prefix(recorder):
    import pandas as pd

    rec = recorder(lambda r: "x")
    ctx = pd.DataFrame({"team": ["Braves"], "city": ["Atlanta"]})
    LLMMap().run("City?", ["ATL"], model=rec.model, context=ctx)
    prompt = rec.prompts[0]
    assert "Braves | Atlanta" in prompt
    assert prompt.index("Braves") < prompt.index("Value: ATL")


def test_long_value_truncated(recorder):
    rec = recorder(lambda r: "x")
    LLMMap().run("Topic?", ["w" * 10_000], model=rec.model, value_chars=500)
    assert len(rec.prompts[0]) < 1200


def test_bad_few_shot_and_missing_question_raise(recorder):
    rec = recorder(lambda r: "x")
    with pytest.raises(IngredientError):
        LLMMap().run("q?", ["v"], model=rec.model, few_shot=["just a string"])
    with pytest.raises(IngredientError):
        LLMMap().run(None, ["v"], model=rec.model)


def test_no_model_raises_with_hint():
    with pytest.raises(IngredientError) as info:
        LLMMap().run("q?", ["v"], model=None)
    assert info.value.hint and "model=" in info.value.hint


def test_empty_values_no_call(recorder):
    rec = recorder(lambda r: "x")
    assert LLMMap().run("q?", [], model=rec.model) == []
    assert rec.batches == 0


def test_builtins_need_a_model_and_register():
    reg = IngredientRegistry(BUILTINS)
    assert sorted(n.lower() for n in reg.names()) == sorted(
        ["llmmap", "llmqa", "llmjoin", "llmvalidate", "llmrank", "answer", "summary"])
    assert all(cls.needs_model for cls in BUILTINS)
    assert reg.get("llmmap").kind == "map" and reg.get("LLMJoin").kind == "join"


def test_options_with_spaces_map_back_to_original(recorder):
    rec = recorder(lambda r: "New York")
    out = LLMMap().run("City?", ["NYC"], model=rec.model, options=["New  York ", "Boston"])
    assert rec.requests[0].constraint == Choice(("New York", "Boston"))
    assert out == ["New  York "]
