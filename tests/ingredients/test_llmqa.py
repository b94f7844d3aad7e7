"""LLMQA and LLMValidate: context serialisation, budgets, constraints, errors."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError
from blendsql.ingredients import LLMQA, LLMValidate
from blendsql.models.constraints import Bool, Choice, Int, ListOf, Text

DOCS = pd.DataFrame({
    "title": ["Sydney", "Lithgow", "Bathurst"],
    "content": [
        "Sydney is the capital of New South Wales. " * 40,
        "Lithgow is a city about 120 miles west of Sydney.",
        "Bathurst lies 200 km west of Sydney.",
    ],
})


def test_context_and_question_in_prompt_options_choice(recorder):
    rec = recorder(lambda r: "lithgow")
    out = LLMQA().run("Which city is 120 miles west of Sydney?", DOCS,
                      ["Sydney", "Lithgow", "Bathurst"], model=rec.model)
    prompt = rec.prompts[0]
    assert out == "Lithgow"  # case-insensitive choice, canonical spelling returned
    assert rec.requests[0].constraint == Choice(("Sydney", "Lithgow", "Bathurst"))
    assert "title | content" in prompt
    assert "Lithgow | Lithgow is a city about 120 miles west of Sydney." in prompt
    assert prompt.index("Lithgow is a city") < prompt.index("Which city is 120")


def test_long_passages_truncated_to_budget(recorder):
    rec = recorder(lambda r: "x")
    LLMQA().run("q?", DOCS, None, model=rec.model, context_chars=600)
    prompt = rec.prompts[0]
    assert "..." in prompt
    assert prompt.count("Sydney is the capital") < 40
    assert len(prompt) < 600 + 400  # budget + fixed instructions


def test_rows_past_budget_are_counted(recorder):
    rec = recorder(lambda r: "x")
    big = pd.DataFrame({"n": range(1000), "word": ["alpha beta gamma"] * 1000})
    LLMQA().run("How many?", big, None, model=rec.model, context_chars=1000)
    prompt = rec.prompts[0]
    shown = sum(1 for line in prompt.splitlines() if line.endswith("| alpha beta gamma"))
    assert 0 < shown < 1000
    assert f"({1000 - shown} more rows not shown)" in prompt


def test_typed_options_and_return_type_and_inferred(recorder):
    rec = recorder(lambda r: "1998")
    assert LLMQA().run("Year?", None, [1996, 1998], model=rec.model) == 1998
    assert LLMQA().run("Year?", None, None, model=rec.model, return_type="int") == 1998
    assert LLMQA().run("Year?", None, None, model=rec.model, constraint=Int()) == 1998
    assert [r.constraint for r in rec.requests] == [Choice(("1996", "1998")), Int(), Int()]


def test_options_beat_inferred_constraint(recorder):
    rec = recorder(lambda r: "b")
    LLMQA().run("q?", None, ["a", "b"], model=rec.model, constraint=Bool())
    assert rec.requests[0].constraint == Choice(("a", "b"))


def test_list_constraint_for_in(recorder):
    rec = recorder(lambda r: '["Lithgow", "Bathurst"]')
    out = LLMQA().run("Cities west of Sydney?", DOCS, None, model=rec.model,
                      constraint=ListOf(Text()))
    assert out == ["Lithgow", "Bathurst"]
    assert rec.requests[0].max_tokens >= 128


def test_unparseable_is_none_with_warning(recorder):
    rec = recorder(lambda r: "Perth")
    sink: list[str] = []
    out = LLMQA().run("q?", DOCS, ["Sydney", "Lithgow"], model=rec.model, warnings=sink)
    assert out is None
    assert sink and "Perth" in sink[0]


def test_string_context_and_few_shot(recorder):
    rec = recorder(lambda r: "Paris")
    out = LLMQA(few_shot=[("Capital of Italy?", "Rome")]).run(
        "Capital of France?", "France's capital is Paris.", None, model=rec.model)
    prompt = rec.prompts[0]
    assert out == "Paris"
    assert "France's capital is Paris." in prompt
    assert prompt.index("Capital of Italy?") < prompt.index("Capital of France?")


def test_missing_question_or_model_raises(recorder):
    with pytest.raises(IngredientError):
        LLMQA().run(None, DOCS, None, model=recorder(lambda r: "x").model)
    with pytest.raises(IngredientError):
        LLMQA().run("q?", DOCS, None)


def test_validate_bool(recorder):
    rec = recorder(lambda r: "True" if "120 miles" in r.prompt else "false")
    ok = LLMValidate().run("Lithgow is west of Sydney", DOCS, None, model=rec.model)
    no = LLMValidate().run("Perth is west of Sydney", DOCS.iloc[[0]], None, model=rec.model)
    assert ok is True and no is False
    assert all(r.constraint == Bool() for r in rec.requests)
    assert "Statement: Lithgow is west of Sydney" in rec.prompts[0]


def test_validate_unparseable_none(recorder):
    rec = recorder(lambda r: "perhaps")
    sink: list[str] = []
    assert LLMValidate().run("s", None, None, model=rec.model, warnings=sink) is None
    assert len(sink) == 1
