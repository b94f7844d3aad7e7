"""SUQL's ANSWER(text, question) and SUMMARY(text) over strings and JSON arrays."""

from __future__ import annotations

import json

import pytest

from blendsql.errors import IngredientError
from blendsql.ingredients import ANSWER, SUMMARY
from blendsql.models.constraints import Bool, Choice, Text

REVIEWS = json.dumps([
    "Great place for kids, they have a play corner.",
    "Too noisy on weekends.",
    "The pasta was cold.",
])


def test_answer_binds_text_first_question_second():
    assert ANSWER().bind(["reviews_col", "Is it good for kids?"], {}) == (1, 0)
    with pytest.raises(IngredientError):
        ANSWER().bind(["reviews_col"], {})
    assert SUMMARY().bind(["reviews_col"], {}) == (None, 0)
    with pytest.raises(IngredientError):
        SUMMARY().bind(["a", "b"], {})


def test_answer_over_json_list_of_reviews(recorder):
    rec = recorder(lambda r: "Yes, there is a play corner." if "play corner" in r.prompt else "No")
    out = ANSWER().run("Is it good for kids?", [REVIEWS, "Adults only, no children."],
                       model=rec.model)
    assert out == ["Yes, there is a play corner.", "No"]
    first = rec.prompts[0]
    assert "- Great place for kids, they have a play corner." in first
    assert "- Too noisy on weekends." in first and "- The pasta was cold." in first
    assert '["' not in first  # the JSON array is rendered as documents, not raw JSON
    assert first.index("Is it good for kids?") < first.index("Great place")
    assert "Adults only, no children." in rec.prompts[1]


def test_answer_python_list_and_plain_text_same_prompt(recorder):
    rec = recorder(lambda r: "ok")
    ANSWER().run("q?", [json.loads(REVIEWS), REVIEWS], model=rec.model)
    assert len(rec.requests) == 1  # same documents -> one distinct prompt


def test_answer_empty_text_is_null_without_call(recorder):
    rec = recorder(lambda r: "x")
    assert ANSWER().run("q?", ["", "[]", None], model=rec.model) == [None, None, None]
    assert rec.batches == 0


def test_answer_uses_inferred_and_explicit_constraints(recorder):
    rec = recorder(lambda r: "Yes")
    assert ANSWER().run("Kids?", [REVIEWS], model=rec.model, constraint=Bool()) == [True]
    assert ANSWER().run("Kids?", [REVIEWS], model=rec.model, options=["Yes", "No"],
                        constraint=Bool()) == ["Yes"]
    assert rec.requests[0].constraint == Bool()
    assert rec.requests[1].constraint == Choice(("Yes", "No"))


def test_answer_free_text_keeps_multiline(recorder):
    rec = recorder(lambda r: "Yes.\nThey have a play corner.")
    assert ANSWER().run("Kids?", [REVIEWS], model=rec.model) == [
        "Yes.\nThey have a play corner."]
    assert rec.requests[0].constraint == Text()


def test_answer_unparseable_none(recorder):
    rec = recorder(lambda r: "unclear")
    sink: list[str] = []
    out = ANSWER().run("Kids?", [REVIEWS], model=rec.model, constraint=Bool(), warnings=sink)
    assert out == [None] and len(sink) == 1


def test_many_long_reviews_fit_budget(recorder):
    rec = recorder(lambda r: "x")
    many = json.dumps([f"review {i}: " + "word " * 200 for i in range(50)])
    ANSWER().run("q?", [many], model=rec.model, text_chars=2000)
    prompt = rec.prompts[0]
    assert len(prompt) < 2000 + 600
    assert "more documents not shown" in prompt


def test_summary(recorder):
    rec = recorder(lambda r: "Kid-friendly but noisy; food can be cold.")
    out = SUMMARY().run(None, [REVIEWS, "Short text."], model=rec.model, constraint=Bool())
    assert out == ["Kid-friendly but noisy; food can be cold."] * 2
    assert all(r.constraint == Text() for r in rec.requests)
    assert rec.prompts[0].rstrip().endswith("Summary:")
    assert "- Too noisy on weekends." in rec.prompts[0]


def test_suql_need_model():
    with pytest.raises(IngredientError):
        SUMMARY().run(None, ["t"])
    with pytest.raises(IngredientError):
        ANSWER().run("q", ["t"], model=None)


@pytest.mark.parametrize(("examples", "options"), [
    (["Yes"], ("Yes", "No")), ("no", ("yes", "no")), (["YES", "no"], ("YES", "NO"))])
def test_answer_compared_with_yes_is_a_yes_no_choice(recorder, examples, options):
    rec = recorder(lambda r: options[0])
    out = ANSWER().run("Kids?", [REVIEWS], model=rec.model, example_outputs=examples)
    assert rec.requests[0].constraint == Choice(options)
    assert out == [options[0]]


def test_other_example_outputs_keep_free_text(recorder):
    rec = recorder(lambda r: "Italian")
    ANSWER().run("Cuisine?", [REVIEWS], model=rec.model, example_outputs=["Mexican"])
    assert rec.requests[0].constraint == Text()
    assert "Example answers: Mexican" in rec.prompts[0]


def test_yes_no_examples_beat_plain_inferred_text_but_not_real_constraints(recorder):
    rec = recorder(lambda r: "Yes")
    ANSWER().run("Kids?", [REVIEWS], model=rec.model, example_outputs=["Yes"],
                 constraint=Text())
    ANSWER().run("Kids?", [REVIEWS], model=rec.model, example_outputs=["Yes"],
                 constraint=Bool())
    assert [r.constraint for r in rec.requests] == [Choice(("Yes", "No")), Bool()]
