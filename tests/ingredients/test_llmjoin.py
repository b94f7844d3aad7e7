"""LLMJoin: exact matches settle without the model; rapidfuzz shortlists the rest."""

from __future__ import annotations

import pytest

from blendsql.errors import IngredientError
from blendsql.ingredients import LLMJoin
from blendsql.models.constraints import Choice

RIGHT = ["United Kingdom", "France", "Germany", "Spain", "United States", "Japan"]


def candidates_in(prompt: str) -> list[str]:
    block = prompt.split("Candidates:\n", 1)[1].split("\n\n", 1)[0]
    return [line[2:] for line in block.splitlines()]


def test_exact_matches_need_no_model(recorder):
    rec = recorder(lambda r: pytest.fail("model must not be called"))
    out = LLMJoin().run(["france", "  GERMANY ", "Japan"], RIGHT, model=rec.model)
    assert out == {"france": "France", "  GERMANY ": "Germany", "Japan": "Japan"}
    assert rec.batches == 0


def test_only_unmatched_values_reach_the_model_with_shortlist(recorder):
    rec = recorder(lambda r: "United Kingdom")
    out = LLMJoin().run(["France", "Untied Kingdm"], RIGHT, model=rec.model, k=2)
    assert out == {"France": "France", "Untied Kingdm": "United Kingdom"}
    assert len(rec.requests) == 1
    prompt = rec.prompts[0]
    assert prompt.rstrip().endswith("Value: Untied Kingdm\nAnswer:")
    shown = candidates_in(prompt)
    assert len(shown) == 2 and shown[0] == "United Kingdom"
    assert "Japan" not in shown
    assert rec.requests[0].constraint == Choice((*shown, "none"))


def test_k_none_shows_all(recorder):
    rec = recorder(lambda r: "none")
    LLMJoin(k=None).run(["Nippon"], RIGHT, model=rec.model)
    assert sorted(candidates_in(rec.prompts[0])) == sorted(RIGHT)


def test_none_answer_joins_nothing(recorder):
    rec = recorder(lambda r: "none")
    assert LLMJoin().run(["Atlantis"], RIGHT, model=rec.model) == {}


def test_none_option_renamed_when_a_candidate_is_none(recorder):
    rec = recorder(lambda r: "none of these")
    out = LLMJoin().run(["nothing"], ["None", "Some"], model=rec.model)
    assert out == {}
    assert "none of these" in rec.requests[0].constraint.options
    assert "None" in rec.requests[0].constraint.options


def test_typed_right_values_and_question(recorder):
    rec = recorder(lambda r: "1998")
    out = LLMJoin().run(["the 98 season"], [1996, 1998, 2000], "Match seasons to years",
                        model=rec.model)
    assert out == {"the 98 season": 1998}
    assert "Task: Match seasons to years" in rec.prompts[0]


def test_unparseable_choice_dropped_with_warning(recorder):
    rec = recorder(lambda r: "Atlantis")
    sink: list[str] = []
    assert LLMJoin().run(["Atlantys"], RIGHT, model=rec.model, warnings=sink) == {}
    assert len(sink) == 1


def test_one_batch_for_all_pending(recorder):
    rec = recorder(lambda r: "none")
    LLMJoin().run(["a1", "b2", "c3", "France"], RIGHT, model=rec.model)
    assert rec.batches == 1 and len(rec.requests) == 3


def test_needs_model():
    with pytest.raises(IngredientError):
        LLMJoin().run(["x"], ["y"])


def test_right_values_with_stray_spaces_come_back_verbatim(recorder):
    rec = recorder(lambda r: "Bee Hive")
    out = LLMJoin().run(["bee-hive"], ["A ", " Bee   Hive ", "C"], model=rec.model)
    assert out == {"bee-hive": " Bee   Hive "}
    assert "Bee Hive" in rec.requests[0].constraint.options


def test_last_errors_reset_each_run(recorder):
    ing = LLMJoin()
    ing.run(["Atlantys"], RIGHT, model=recorder(lambda r: "Atlantis").model)
    assert len(ing.last_errors) == 1
    ing.run(["France"], RIGHT, model=recorder(lambda r: "none").model)  # exact: no model call
    assert ing.last_errors == []
