"""The default yes/no decision (issue 38): a threshold found in the batch, not 0.5.

A scripted model gives each value a log-odds of "yes" that separates positives
from negatives, plus a constant shift the same for every value (a model's habit
of answering "yes", or "no"). The argmax of a shifted model answers almost
everything one way; the default decision must still separate the values, where
positives are rare (5%) and where they are half (50%).
"""

from __future__ import annotations

from statistics import NormalDist

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientError
from blendsql.ingredients import LLMMap
from blendsql.ingredients.decide import SPLIT_MIN_VALUES, batch_threshold, sigmoid
from blendsql.models import Distribution, FunctionModel
from blendsql.models.base import Request
from blendsql.models.constraints import Bool


def value_of(req: Request) -> str:
    return req.prompt.rsplit("Value: ", 1)[1].split("\n")[0]


def batch(n: int, positives: int) -> dict[str, bool]:
    """``n`` values named v00.., the first ``positives`` of them positive."""
    return {f"v{i:03d}": i < positives for i in range(n)}


def scripted(truth: dict[str, bool], shift: float, gap: float = 4.0) -> FunctionModel:
    """P(yes) = sigmoid(+-gap/2 + shift + a small deterministic jitter per value)."""
    def answer(req: Request) -> Distribution:
        v = value_of(req)
        jitter = ((int(v[1:]) * 37) % 11 - 5) / 10  # in [-0.5, 0.5]
        p = sigmoid((gap / 2 if truth[v] else -gap / 2) + shift + jitter)
        return Distribution({True: p, False: 1 - p})

    return FunctionModel(answer, name="scripted")


@pytest.mark.parametrize("positives", [3, 30])  # 5% and 50% of 60
@pytest.mark.parametrize("shift", [-4.0, 0.0, 4.0, 8.0])
def test_a_shifted_model_still_separates_the_values_under_the_default(positives, shift):
    truth = batch(60, positives)
    ing = LLMMap()
    out = ing.run("Is this positive?", list(truth), model=scripted(truth, shift),
                  constraint=Bool())
    assert out == list(truth.values())
    d = ing.last_decisions[0]
    assert d.rule == "split" and d.threshold is not None


@pytest.mark.parametrize("positives", [3, 30])
def test_the_argmax_of_a_yes_leaning_model_does_not(positives):
    truth = batch(60, positives)
    out = LLMMap().run("Is this positive?", list(truth), model=scripted(truth, 4.0),
                       constraint=Bool(), decision="argmax")
    assert out == [True] * 60  # what the rule above fixes


def test_the_threshold_moves_with_the_shift():
    xs = [2.0] * 3 + [-2.0] * 57
    base = batch_threshold(xs)
    for shift in (-5.0, 3.0, 11.0):
        moved = batch_threshold([x + shift for x in xs])
        assert moved.rule == "split" and moved.groups == base.groups == (3, 57)
        assert moved.log_odds == pytest.approx(base.log_odds + shift)


def test_a_small_batch_falls_back_to_the_more_probable_answer_and_says_why():
    found = batch_threshold([3.0, 2.5, -1.0])
    assert found.rule == "argmax" and found.log_odds == 0.0
    assert f"fewer than {SPLIT_MIN_VALUES}" in found.why


def test_one_group_falls_back_to_the_more_probable_answer():
    xs = [NormalDist(1.5, 1.0).inv_cdf((i + 0.5) / 60) for i in range(60)]  # one group
    found = batch_threshold(xs)
    assert found.rule == "argmax" and "one group" in found.why
    assert batch_threshold([1.0] * 20).rule == "argmax"


def test_the_trace_shows_each_values_probability_and_the_threshold():
    truth = batch(20, 4)
    df = pd.DataFrame({"v": list(truth)})
    bsql = BlendSQL({"t": df}, model=scripted(truth, 3.0))
    sm = bsql.execute("SELECT v FROM t WHERE {{LLMMap('Is this positive?', t.v)}} = TRUE "
                      "ORDER BY v")
    assert list(sm.df["v"]) == [v for v, pos in truth.items() if pos]
    conf = sm.confidence("LLMMap")
    assert len(conf) == 20 and conf["scored"].all()
    assert conf["rule"].eq("split").all() and conf["threshold"].nunique() == 1
    threshold = float(conf["threshold"].iloc[0])
    yes = conf.apply(lambda r: r["probability"] if r["answer"] == "true"
                     else 1 - r["probability"], axis=1)
    assert ((yes > threshold) == conf["answer"].eq("true")).all()


def test_label_framing_is_decided_the_same_way():
    truth = batch(40, 2)

    def answer(req: Request) -> Distribution:
        v = value_of(req)
        p = sigmoid((2.0 if truth[v] else -2.0) + 5.0)
        return Distribution({"POSITIVE": p, "NEGATIVE": 1 - p})

    out = LLMMap().run("Is this positive?", list(truth), model=FunctionModel(answer),
                       constraint=Bool(), framing="labels", labels=("POSITIVE", "NEGATIVE"))
    assert out == list(truth.values())


def test_a_misspelt_decision_is_a_clear_error():
    truth = batch(2, 1)
    with pytest.raises(IngredientError, match="decision='split'") as e:
        LLMMap().run("ok?", list(truth), model=scripted(truth, 0.0), constraint=Bool(),
                     decision="split")
    assert "auto, argmax" in e.value.message and "greedy" in (e.value.hint or "")


def test_a_score_read_as_an_expectation_over_the_scored_options():
    from blendsql.models.constraints import Choice

    probs = {"a": {"4": 0.6, "5": 0.4}, "b": {"4": 0.9, "3": 0.1}, "c": {"1": 1.0}}

    def answer(req: Request) -> Distribution:
        return Distribution(probs[value_of(req)])

    ing = LLMMap()
    out = ing.run("Score 1-5", ["a", "b", "c"], model=FunctionModel(answer),
                  constraint=Choice(("1", "2", "3", "4", "5")), decision="expected")
    assert out == pytest.approx([4.4, 3.9, 1.0])
    assert [d.answer for d in ing.last_decisions] == ["4", "4", "1"]  # the argmax, traced
    assert {d.rule for d in ing.last_decisions} == {"expected"}
    with pytest.raises(IngredientError, match="not numbers"):
        ing.run("Which?", ["a"], model=FunctionModel(lambda r: Distribution({"x": 1.0})),
                constraint=Choice(("x", "y")), decision="expected")
    with pytest.raises(IngredientError, match="TRUE / FALSE"):
        ing.run("ok?", ["a"], model=FunctionModel(lambda r: True), constraint=Bool(),
                decision="expected")
