"""LLMMap decisions from the model's probabilities.

Every test uses a FunctionModel whose answer probabilities the test sets
(``Distribution``), so each decision rule (argmax, contextual calibration,
a threshold fitted on labelled examples, label and claim framing, cascades)
is checked exactly.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientError
from blendsql.ingredients import LLMMap
from blendsql.ingredients.decide import (
    CONTENT_FREE,
    cascade_split,
    choose,
    contextual_bias,
    fit_threshold,
    stage_counts,
)
from blendsql.models import Distribution, FunctionModel
from blendsql.models.base import Request
from blendsql.models.constraints import Bool, Choice, Text
from blendsql.retrieval.embeddings import Embedder, normalise_rows

REVIEWS = {"great food": 0.9, "loved it": 0.85, "cold and slow": 0.7, "rude staff": 0.65}
POSITIVE = {"great food", "loved it"}


def value_of(req: Request) -> str:
    return req.prompt.rsplit("Value: ", 1)[1].split("\n")[0]


def yes_sayer(req: Request) -> Distribution:
    """Says 'true' to everything: 0.8 when the value says nothing, REVIEWS otherwise."""
    p = REVIEWS.get(value_of(req), 0.8)
    return Distribution({True: p, False: 1 - p})


def test_scored_map_decides_by_the_highest_probability_and_keeps_it(recorder):
    rec = recorder(lambda r: Distribution({True: 0.3, False: 0.7}) if value_of(r) == "a"
                   else Distribution({True: 0.6, False: 0.4}))
    ing = LLMMap()
    out = ing.run("ok?", ["a", "b", "a"], model=rec.model, constraint=Bool(), scored=True)
    assert out == [False, True, False]
    assert all(r.score for r in rec.requests) and len(rec.requests) == 2
    first, second = ing.last_decisions
    assert (first.answer, first.value) == ("false", False)
    assert first.probability == pytest.approx(0.7) and first.margin == pytest.approx(0.4)
    assert second.probabilities == pytest.approx({"true": 0.6, "false": 0.4})
    assert second.stage == "recorder"


def test_a_choice_map_is_unscored_by_default_and_requests_unchanged(recorder):
    rec = recorder(lambda r: "b")
    ing = LLMMap()
    assert ing.run("which?", ["a"], model=rec.model, constraint=Choice(("a", "b"))) == ["b"]
    assert not rec.requests[0].score and ing.last_decisions == []
    assert "score" not in rec.requests[0].key()


def test_a_yes_no_map_is_scored_by_default_and_a_greedy_backend_is_noted_not_warned(recorder):
    # changed with issue 38: a yes/no map scores both answers by default (decision='auto');
    # a backend that gives one answer keeps it, the trace says so, no warning
    rec = recorder(lambda r: "true")
    ing = LLMMap()
    assert ing.run("ok?", ["a"], model=rec.model, constraint=Bool()) == [True]
    assert rec.requests[0].score
    (d,) = ing.last_decisions
    assert not d.scored and d.note == "the function gave one answer, not a Distribution"
    assert ing.last_errors == []


def test_decision_greedy_keeps_requests_unscored(recorder):
    rec = recorder(lambda r: "true")
    ing = LLMMap()
    assert ing.run("ok?", ["a"], model=rec.model, constraint=Bool(), decision="greedy") == [True]
    assert not rec.requests[0].score and ing.last_decisions == []
    assert "score" not in rec.requests[0].key()


def test_a_backend_that_cannot_score_keeps_its_greedy_answer_and_says_so(recorder):
    rec = recorder(lambda r: "false")
    ing = LLMMap()
    assert ing.run("ok?", ["a"], model=rec.model, constraint=Bool(), scored=True) == [False]
    (d,) = ing.last_decisions
    assert not d.scored and d.probability is None
    assert d.note == "the function gave one answer, not a Distribution"
    assert ing.last_errors == ["LLMMap: 1 of 1 value(s) were not scored (the function gave one "
                               "answer, not a Distribution); their greedy answers were kept"]


def test_contextual_calibration_divides_out_the_yes_prior(recorder):
    plain = LLMMap().run("Is this review positive?", list(REVIEWS),
                         model=recorder(yes_sayer).model, constraint=Bool(), scored=True)
    assert plain == [True] * 4  # the prior for 'yes' decides everything
    rec = recorder(yes_sayer)
    ing = LLMMap()
    out = ing.run("Is this review positive?", list(REVIEWS), model=rec.model,
                  constraint=Bool(), calibrate="contextual")
    assert out == [v in POSITIVE for v in REVIEWS]
    # p / p_cf renormalised: 0.9 / 0.8 vs 0.1 / 0.2 -> 0.9 / 0.8 / (0.9 / 0.8 + 0.1 / 0.2)
    great = ing.last_decisions[0]
    assert great.probability == pytest.approx((0.9 / 0.8) / (0.9 / 0.8 + 0.1 / 0.2))
    assert great.raw == pytest.approx({"true": 0.9, "false": 0.1})
    asked = [value_of(r) for r in rec.requests]
    assert asked[:3] == list(CONTENT_FREE)  # content-free inputs first, once
    ing.run("Is this review positive?", ["loved it"], model=rec.model, constraint=Bool(),
            calibrate="contextual")
    assert [value_of(r) for r in rec.requests[7:]] == ["loved it"]  # the bias was memoised


def test_examples_calibration_fits_a_threshold_on_labelled_examples(recorder):
    probs = {"great food": 0.9, "loved it": 0.85, "cold and slow": 0.7, "rude staff": 0.65,
             "tasty": 0.88, "dirty": 0.72, "fine": 0.83, "bland": 0.75}
    rec = recorder(lambda r: Distribution({True: probs[value_of(r)], False: 1 - probs[value_of(r)]}))
    ing = LLMMap()
    few_shot = [("tasty", True), ("dirty", False)]
    out = ing.run("Is this review positive?", ["great food", "fine", "bland", "rude staff"],
                  model=rec.model, constraint=Bool(), calibrate="examples", few_shot=few_shot)
    # threshold: midway between logit(0.72) and logit(0.88); 0.83 passes, 0.75 does not
    tau = (math.log(0.72 / 0.28) + math.log(0.88 / 0.12)) / 2
    assert out == [True, math.log(0.83 / 0.17) > tau, math.log(0.75 / 0.25) > tau, False]
    assert out == [True, True, False, False]
    # each example is scored with the other examples shown, never itself
    tasty = next(r for r in rec.requests if value_of(r) == "tasty")
    assert "Value: dirty" in tasty.prompt and tasty.prompt.count("tasty") == 1


def test_examples_calibration_needs_both_answers_among_the_examples(recorder):
    rec = recorder(yes_sayer)
    with pytest.raises(IngredientError, match="both answers") as e:
        LLMMap().run("ok?", ["great food"], model=rec.model, constraint=Bool(),
                     calibrate="examples", few_shot=[("a", True), ("b", True)])
    assert e.value.hint


def test_label_framing_asks_a_choice_and_maps_labels_back(recorder):
    rec = recorder(lambda r: Distribution({"POSITIVE": REVIEWS[value_of(r)] - 0.3,
                                           "NEGATIVE": 1.3 - REVIEWS[value_of(r)]}))
    ing = LLMMap()
    out = ing.run("Is this review positive?", list(REVIEWS), model=rec.model, constraint=Bool(),
                  labels=("POSITIVE", "NEGATIVE"), few_shot=[("tasty", True)], scored=True)
    assert out == [True, True, False, False]
    assert rec.requests[0].constraint == Choice(("POSITIVE", "NEGATIVE"))
    assert "Value: tasty\nAnswer: POSITIVE" in rec.prompts[0]
    assert ing.last_decisions[0].answer == "POSITIVE"


def test_label_framing_without_scores_is_a_greedy_choice(recorder):
    rec = recorder(lambda r: "NEGATIVE")
    out = LLMMap().run("Is this review positive?", ["x"], model=rec.model, constraint=Bool(),
                       framing="labels", labels="POSITIVE;NEGATIVE")
    assert out == [False]


def test_claim_framing_states_the_claim(recorder):
    rec = recorder(lambda r: "true")
    LLMMap().run("This review is positive.", ["x"], model=rec.model, constraint=Bool(),
                 framing="claim")
    prompt = rec.prompts[0]
    assert "Claim: This review is positive." in prompt
    assert "Decide whether the claim is true" in prompt
    assert prompt.endswith("Value: x\nIs the claim true for this value?\nAnswer:")


def test_cascade_sends_only_doubtful_values_to_the_second_model(recorder):
    sure = {"a": 0.95, "b": 0.6, "c": 0.02}
    small = recorder(lambda r: Distribution({True: sure[value_of(r)],
                                             False: 1 - sure[value_of(r)]}))
    big_rec = recorder(lambda r: "false")
    big = FunctionModel(big_rec, name="big")
    ing = LLMMap(cascade=big, target=0.9, cascade_sample=0)  # no sample: trust the probabilities
    out = ing.run("ok?", ["a", "b", "c"], model=small.model, constraint=Bool())
    assert out == [True, False, False]
    assert [value_of(r) for r in big_rec.requests] == ["b"]  # a and c were sure enough
    assert [d.stage for d in ing.last_decisions] == ["recorder", "big", "recorder"]
    assert ing.last_decisions[1].note == "the function gave one answer, not a Distribution"


def test_a_fitted_cascade_keeps_only_values_where_the_first_model_agreed_on_the_sample(recorder):
    """40 values; the small model says TRUE to all, surer for higher i; the big model
    says TRUE only from i = 20, so the small model is right exactly where it is surest."""
    values = [f"x{i}" for i in range(40)]
    sure = {v: 0.5 + i / 80 for i, v in enumerate(values)}
    small = recorder(lambda r: Distribution({True: sure[value_of(r)], False: 1 - sure[value_of(r)]}))
    big_rec = recorder(lambda r: Distribution({True: 0.9 if int(value_of(r)[1:]) >= 20 else 0.1,
                                               False: 0.1 if int(value_of(r)[1:]) >= 20 else 0.9}))
    ing = LLMMap(cascade=FunctionModel(big_rec, name="big"), target=0.8, cascade_sample=30)
    out = ing.run("ok?", values, model=small.model, constraint=Bool())
    assert out == [i >= 20 for i in range(40)]  # no value the small model got wrong survives
    decisions = ing.last_decisions
    threshold = decisions[0].threshold
    assert threshold is not None and sure["x20"] - 1e-9 <= threshold < 1
    kept = [v for v, d in zip(values, decisions, strict=True) if d.stage == "recorder"]
    assert kept and all(sure[v] >= threshold - 1e-9 for v in kept)
    sampled = [d for d in decisions if (d.note or "").startswith("cascade sample")]
    assert len(sampled) == 30 and len(big_rec.requests) == 40 - len(kept)
    again = LLMMap(cascade=FunctionModel(big_rec, name="big"), target=0.8, cascade_sample=30)
    again.run("ok?", list(reversed(values)), model=small.model, constraint=Bool())
    assert {d.note for d in again.last_decisions} == {d.note for d in decisions}


def test_a_cascade_without_enough_agreement_sends_every_value_to_the_second_model(recorder):
    small = recorder(lambda r: Distribution({True: 0.99, False: 0.01}))
    big_rec = recorder(lambda r: Distribution({True: 0.2, False: 0.8}))
    ing = LLMMap(cascade=FunctionModel(big_rec, name="big"))  # default sample: >= 16 values
    out = ing.run("ok?", [f"v{i}" for i in range(10)], model=small.model, constraint=Bool())
    assert out == [False] * 10 and len(big_rec.requests) == 10
    assert {d.stage for d in ing.last_decisions} == {"big"}
    assert ing.last_decisions[0].threshold == math.inf


def test_fit_cascade_threshold_takes_the_lowest_probability_the_sample_supports():
    from blendsql.ingredients.decide import fit_cascade_threshold, wilson_lower

    sample = [(0.99, True)] * 20 + [(0.6, False)] * 10
    assert fit_cascade_threshold(sample, 0.9) == 0.99
    assert fit_cascade_threshold(sample, 0.5) == 0.6  # 20 of 30 agree: lower bound 0.55
    assert fit_cascade_threshold([(0.99, True)] * 3, 0.9) == math.inf  # too few to be sure
    assert fit_cascade_threshold([(None, True)] * 30, 0.5) == math.inf  # unscored
    assert fit_cascade_threshold([(0.7, True)] * 20 + [(0.7, False)] * 20, 0.9) == math.inf  # ties
    assert wilson_lower(0, 0) == 0.0 and 0.8 < wilson_lower(20, 20) < 1.0


@pytest.mark.parametrize("bad", [1.5, -1, True, "all"])
def test_a_bad_cascade_sample_is_a_clear_error(recorder, bad):
    ing = LLMMap(cascade=FunctionModel(lambda r: "true", name="big"))
    with pytest.raises(IngredientError, match="cascade_sample="):
        ing.run("ok?", ["a"], model=recorder(lambda r: "true").model, constraint=Bool(),
                cascade_sample=bad)


def test_engine_traces_decisions_and_stages_and_meters_the_cascade():
    def small(req: Request) -> Distribution:
        p = {"sp": 0.97, "rp": 0.55, "1b": 0.01, "c": 0.4}[value_of(req)]
        return Distribution({True: p, False: 1 - p})

    def big(req: Request) -> Distribution:
        return Distribution({True: 0.95 if value_of(req) == "rp" else 0.05, False: 0.5})

    df = pd.DataFrame({"pos": ["sp", "rp", "1b", "c"]})
    ing = LLMMap(cascade=FunctionModel(big, name="big"))
    bsql = BlendSQL({"w": df}, model=FunctionModel(small, name="small"), ingredients=[ing])
    sm = bsql.execute("SELECT pos FROM w WHERE {{LLMMap('Is this a pitcher?', w.pos, "
                      "target=0.9, cascade_sample=0)}} = TRUE ORDER BY pos")
    assert sorted(sm.df["pos"]) == ["rp", "sp"]
    step = next(s for s in sm.trace if s.kind == "ingredient")
    assert step.details["stages"] == {"small": 2, "big": 2}
    assert step.model_calls == 6 and sm.meta.model_calls == 6  # both stages are metered
    assert "decided by small=2, big=2" in step.line()
    conf = sm.confidence("llmmap")
    assert list(conf.columns) == ["ingredient", "value", "answer", "probability", "margin",
                                  "stage", "scored", "note", "threshold", "rule"]
    row = conf.set_index("value").loc["sp"]
    assert row["answer"] is True or row["answer"] == True  # noqa: E712 - numpy bool
    assert row["probability"] == pytest.approx(0.97) and row["margin"] == pytest.approx(0.94)
    assert conf.set_index("value").loc["c", "stage"] == "big"
    assert sm.confidence("other").empty


def test_query_options_reach_the_ingredient_and_are_validated():
    def fn(req: Request) -> Distribution:
        return Distribution({"POSITIVE": 0.2, "NEGATIVE": 0.8})

    bsql = BlendSQL({"r": pd.DataFrame({"t": ["x", "y"]})}, model=FunctionModel(fn))
    sm = bsql.execute("SELECT t FROM r WHERE {{LLMMap('Positive?', r.t, "
                      "labels=('POSITIVE', 'NEGATIVE'), scored=TRUE)}} = FALSE")
    assert sorted(sm.df["t"]) == ["x", "y"]
    assert set(sm.confidence()["answer"]) == {False}
    with pytest.raises(IngredientError, match="calibrate='nope' is not one of") as e:
        bsql.execute("SELECT t FROM r WHERE {{LLMMap('Positive?', r.t, calibrate='nope')}} = TRUE")
    assert "calibrate=" in (e.value.hint or "")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"calibrate": "sometimes"}, "is not one of"),
    ({"framing": "poem"}, "is not one of"),
    ({"framing": "labels"}, "needs the two labels"),
    ({"labels": ("A", "a")}, "two distinct labels"),
    ({"target": 1.5, "scored": True}, "not an accuracy"),
    ({"scored": "yes"}, "scored='yes' (in a query) must be bool or int"),
    ({"scored": 2}, "is not TRUE or FALSE"),
    ({"scored": True, "values_per_prompt": 4}, "cannot be combined"),
    ({"framing": "claim", "values_per_prompt": 4}, "cannot be combined"),
])
def test_bad_decision_options_are_clear_errors(recorder, kwargs, message):
    rec = recorder(lambda r: "true")
    with pytest.raises(IngredientError, match=re.escape(message)) as e:
        LLMMap().run("ok?", ["a"], model=rec.model, constraint=Bool(), **kwargs)
    assert e.value.hint
    assert rec.requests == []


def test_calibration_and_label_framing_need_a_yes_no_or_choice_answer(recorder):
    rec = recorder(lambda r: "x")
    with pytest.raises(IngredientError, match="needs a yes/no or short multiple-choice"):
        LLMMap().run("what?", ["a"], model=rec.model, constraint=Text(), calibrate="contextual")
    with pytest.raises(IngredientError, match="is for a yes/no question"):
        LLMMap().run("what?", ["a"], model=rec.model, constraint=Text(), framing="claim")
    with pytest.raises(IngredientError, match=r"cascade='gpt-4' \(to the constructor\) "
                       "must be Model"):
        LLMMap(cascade="gpt-4")


# ---------------------------------------------------------------- the rules themselves


def test_choose_reports_probability_and_margin_after_bias():
    lp = {"true": math.log(0.6), "false": math.log(0.4)}
    assert choose(lp, {}) == ("true", pytest.approx(0.6), pytest.approx(0.2),
                              pytest.approx({"true": 0.6, "false": 0.4}))
    answer, p, _, _ = choose(lp, {"true": -math.log(3)})  # 0.2 vs 0.4
    assert answer == "false" and p == pytest.approx(2 / 3)
    tie = {"a": 0.0, "b": 0.0}
    assert choose(tie, {})[0] == "a"


def test_contextual_bias_is_minus_log_of_the_mean_content_free_probability():
    cf = [{"true": math.log(0.9), "false": math.log(0.1)},
          {"true": math.log(0.7), "false": math.log(0.3)}]
    assert contextual_bias(cf) == pytest.approx({"true": -math.log(0.8),
                                                 "false": -math.log(0.2)})


def test_fit_threshold_prefers_accuracy_then_the_smallest_change():
    assert fit_threshold([(2.0, True), (1.0, False)]) == pytest.approx(1.5)
    assert fit_threshold([(1.0, True), (-1.0, False)]) == 0.0  # already right: no change
    assert fit_threshold([(1.0, True), (3.0, False)]) == 0.0  # no threshold fixes both


def test_cascade_split_takes_unscored_and_unsure_decisions():
    from blendsql.ingredients.decide import Decision

    ds = [Decision(True, "true", 0.95), Decision(False, "false", 0.6), Decision(True)]
    assert cascade_split(ds, 0.9) == [1, 2]
    assert cascade_split(ds, 0.5) == [2]


def test_scored_llmqa_picks_the_most_probable_option_and_traces_it():
    def fn(req: Request) -> Distribution:
        return Distribution({"Paris": 0.2, "Lyon": 0.7, "Nice": 0.1})

    bsql = BlendSQL({"c": pd.DataFrame({"city": ["Paris", "Lyon", "Nice"]})},
                    model=FunctionModel(fn, name="fn"))
    sm = bsql.execute("SELECT {{LLMQA('Which city is the home of the Bouchons?', "
                      "(SELECT city FROM c), options='c::city', scored=TRUE)}} AS a")
    assert sm.df["a"].iloc[0] == "Lyon"
    conf = sm.confidence("llmqa")
    assert conf["probability"].iloc[0] == pytest.approx(0.7)
    assert conf["margin"].iloc[0] == pytest.approx(0.5)
    assert conf["value"].iloc[0] == "Which city is the home of the Bouchons?"


def test_scored_llmqa_needs_options_or_a_yes_no_answer(recorder):
    from blendsql.ingredients import LLMQA

    with pytest.raises(IngredientError, match="scored=TRUE needs options="):
        LLMQA().run("Who?", None, None, model=recorder(lambda r: "x").model, scored=True)


# ---------------------------------------------------------------- the embedding proxy


class AxisEmbedder(Embedder):
    """'pos-i' near the first axis, 'neg-i' near the second, 'mid-i' on the diagonal;
    the offset ``(i % 5) / 10`` gives each value a different proxy probability."""

    name = "axis"

    def embed(self, texts):
        rows = []
        for t in texts:
            kind, i = t.split("-")
            off = (int(i) % 5) / 10
            rows.append({"pos": [1.0, off], "neg": [off, 1.0], "mid": [1.0, 1.0]}[kind])
        return normalise_rows(np.array(rows))


def truth(value: str) -> bool:
    """TRUE for 'pos-' values and odd 'mid-' ones (the embeddings cannot tell those apart)."""
    kind, i = value.split("-")
    return kind == "pos" or (kind == "mid" and int(i) % 2 == 1)


def truthful(req: Request) -> Distribution:
    """The model: sure of :func:`truth`."""
    p = 0.95 if truth(value_of(req)) else 0.05
    return Distribution({True: p, False: 1 - p})


def test_embedding_proxy_decides_the_values_it_is_sure_of_without_the_model(recorder):
    values = [f"pos-{i}" for i in range(30)] + [f"neg-{i}" for i in range(30)]
    rec = recorder(truthful)
    ing = LLMMap(embedder=AxisEmbedder())
    out = ing.run("ok?", values, model=rec.model, constraint=Bool(), proxy="embedding", target=0.9)
    assert out == [v.startswith("pos") for v in values]
    decisions = ing.last_decisions
    by_proxy = [v for v, d in zip(values, decisions, strict=True) if d.stage == "embedding proxy (axis)"]
    asked = {value_of(r) for r in rec.requests}
    assert len(rec.requests) == 16  # the sample (a tenth, at least 16); the proxy took the rest
    assert len(by_proxy) == 44 and not asked & set(by_proxy)
    sampled = [d for d in decisions if (d.note or "").startswith("proxy sample")]
    assert len(sampled) == 16 and all(d.stage == "recorder" for d in sampled)
    threshold = next(d.threshold for d in decisions if d.stage.startswith("embedding"))
    assert threshold is not None and 0.5 < threshold < 1
    assert all(d.probability >= threshold for d in decisions if d.stage.startswith("embedding"))


def test_embedding_proxy_leaves_values_between_the_answers_to_the_model(recorder):
    values = [f"pos-{i}" for i in range(30)] + [f"neg-{i}" for i in range(30)] + \
        [f"mid-{i}" for i in range(10)]
    rec = recorder(truthful)
    ing = LLMMap(embedder=AxisEmbedder())
    out = ing.run("ok?", values, model=rec.model, constraint=Bool(), proxy="embedding",
                  cascade_sample=20)
    assert out == [truth(v) for v in values]
    asked = {value_of(r) for r in rec.requests}
    assert {f"mid-{i}" for i in range(10)} <= asked  # halfway between: the model decides
    stages = {d.stage for d in ing.last_decisions}
    assert stages == {"recorder", "embedding proxy (axis)"}


@pytest.mark.parametrize("values", [
    [f"pos-{i}" for i in range(40)],  # the sample has one answer: nothing to tell apart
    [f"mid-{i}" for i in range(20)] + [f"neg-{i}" for i in range(20)],
])
def test_embedding_proxy_that_cannot_reach_the_target_sends_every_value_to_the_model(recorder, values):
    def flip(req: Request) -> Distribution:  # answers unrelated to the embeddings
        p = 0.95 if int(value_of(req).split("-")[1]) % 2 else 0.05
        return Distribution({True: p, False: 1 - p})

    rec = recorder(flip if values[0].startswith("mid") else truthful)
    ing = LLMMap(embedder=AxisEmbedder())
    ing.run("ok?", values, model=rec.model, constraint=Bool(), proxy="embedding")
    assert len(rec.requests) == len(values)
    assert {d.stage for d in ing.last_decisions} == {"recorder"}


def test_embedding_proxy_then_a_cascade_for_what_the_model_doubts(recorder):
    values = [f"pos-{i}" for i in range(30)] + [f"neg-{i}" for i in range(30)] + \
        [f"mid-{i}" for i in range(10)]

    def small(req: Request) -> Distribution:  # unsure of the values between the answers
        v = value_of(req)
        p = (0.55 if truth(v) else 0.45) if v.startswith("mid") else (0.95 if truth(v) else 0.05)
        return Distribution({True: p, False: 1 - p})

    big_rec = recorder(lambda r: Distribution({True: 0.1, False: 0.9}))
    ing = LLMMap(embedder=AxisEmbedder(), cascade=FunctionModel(big_rec, name="big"))
    out = ing.run("ok?", values, model=recorder(small).model, constraint=Bool(),
                  proxy="embedding", cascade_sample=0.3, target=0.9)
    counts = stage_counts(ing.last_decisions)
    assert counts.get("embedding proxy (axis)", 0) > 0 and counts.get("big", 0) > 0
    asked_big = {value_of(r) for r in big_rec.requests}
    assert {f"mid-{i}" for i in range(10)} <= asked_big
    assert [o for v, o in zip(values, out, strict=True) if v.startswith("mid")] == [False] * 10


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"proxy": "bm25"}, "proxy='bm25' is not one of"),
    ({"proxy": "embedding", "cascade_sample": 0}, "cascade_sample=0 takes none"),
])
def test_bad_proxy_options_are_clear_errors(recorder, kwargs, message):
    rec = recorder(truthful)
    with pytest.raises(IngredientError, match=re.escape(message)) as e:
        LLMMap(embedder=AxisEmbedder()).run("ok?", ["pos-1"], model=rec.model, constraint=Bool(),
                                            **kwargs)
    assert e.value.hint and rec.requests == []


def test_embedding_proxy_needs_a_yes_no_or_choice_answer(recorder):
    rec = recorder(lambda r: "x")
    with pytest.raises(IngredientError, match="proxy='embedding' needs a yes/no"):
        LLMMap().run("Name?", ["pos-1"], model=rec.model, constraint=Text(), proxy="embedding")


def test_embedding_proxy_from_a_query_uses_the_default_embedder_and_is_traced():
    texts = [f"a wonderful moving film number {i}" for i in range(20)] + \
        [f"a dull tedious mess number {i}" for i in range(20)]

    def fn(req: Request) -> Distribution:
        p = 0.9 if "wonderful" in value_of(req) else 0.1
        return Distribution({True: p, False: 1 - p})

    model = FunctionModel(fn, name="m")
    bsql = BlendSQL({"r": pd.DataFrame({"t": texts})}, model=model)
    sm = bsql.execute("SELECT t FROM r WHERE {{LLMMap('Is this review positive?', r.t, "
                      "proxy='embedding')}} = TRUE")
    assert sorted(sm.df["t"]) == sorted(texts[:20])
    step = next(s for s in sm.trace if s.kind == "ingredient")
    stages = step.details["stages"]
    proxy_stage = next(k for k in stages if k.startswith("embedding proxy ("))
    assert stages["m"] + stages[proxy_stage] == 40 and stages[proxy_stage] > 0
    assert step.model_calls == stages["m"]


def test_embedding_proxy_fit_with_a_single_example_of_an_answer_reaches_no_threshold():
    from blendsql.ingredients.decide import EmbeddingProxy

    # a rare TRUE among FALSE values (a filter with few hits): left out, it cannot be predicted
    vectors = normalise_rows(np.array([[1.0, 0.1 * (i % 5)] for i in range(15)] + [[0.0, 1.0]]))
    answers = ["false"] * 15 + ["true"]
    proxy = EmbeddingProxy.fit("axis", vectors, answers, target=0.9)
    assert proxy.loo_agreed == 15 and proxy.sample == 16
    assert proxy.threshold == math.inf  # 15 of 16: the bound (0.81) is under 0.9
