"""LLMRank: a semantic top-k by pairwise comparisons (issue 38).

The comparator is deterministic (a FunctionModel that reads both values from
the prompt and answers by a hidden true score), so the differential contract
holds: ``ORDER BY {{LLMRank(...)}} DESC LIMIT k`` returns the same rows as
``ORDER BY score DESC LIMIT k`` on the true score, in the same order.
"""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import IngredientError
from blendsql.ingredients import LLMRank
from blendsql.ingredients.llm_rank import top_k, tournament_calls
from blendsql.models import FunctionModel
from blendsql.models.base import Request

PAIR = re.compile(r"\nA: (.*?)\n\nB: (.*?)\n\nAnswer:", re.S)


def comparator(score: dict[str, float], calls: list[tuple[str, str]] | None = None
               ) -> FunctionModel:
    def answer(req: Request) -> str:
        m = PAIR.search(req.prompt)
        assert m is not None, req.prompt
        a, b = m.group(1), m.group(2)
        if calls is not None:
            calls.append((a, b))
        return "A" if score[a] >= score[b] else "B"

    return FunctionModel(answer, name="comparator")


def table(n: int, seed: int = 0) -> tuple[pd.DataFrame, dict[str, float]]:
    rng = random.Random(seed)
    scores = rng.sample(range(10 * n), n)
    names = [f"item {i}" for i in range(n)]
    return (pd.DataFrame({"name": names, "score": scores}),
            dict(zip(names, map(float, scores), strict=True)))


@pytest.mark.parametrize(("n", "k", "direction"), [(20, 5, "DESC"), (33, 3, "ASC"),
                                                   (9, 9, "DESC"), (12, 1, "DESC")])
def test_same_rows_as_order_by_the_true_score(n, k, direction):
    df, score = table(n, seed=n + k)
    calls: list[tuple[str, str]] = []
    bsql = BlendSQL({"t": df}, model=comparator(score, calls))
    got = bsql.execute(f"SELECT name FROM t ORDER BY {{{{LLMRank('How good is it?', t.name)}}}} "
                       f"{direction} LIMIT {k}")
    want = bsql.execute(f"SELECT name FROM t ORDER BY score {direction} LIMIT {k}")
    assert list(got.df["name"]) == list(want.df["name"])
    assert len(calls) <= tournament_calls(n, k) <= n * (n - 1) // 2
    if k < n // 2:
        assert tournament_calls(n, k) < n * (n - 1) // 2
    assert got.meta.model_calls == len(calls)


def test_without_a_limit_every_value_is_ordered():
    df, score = table(10, seed=3)
    bsql = BlendSQL({"t": df}, model=comparator(score))
    got = bsql.execute("SELECT name FROM t ORDER BY {{LLMRank('How good?', t.name)}} DESC")
    want = bsql.execute("SELECT name FROM t ORDER BY score DESC")
    assert list(got.df["name"]) == list(want.df["name"])


def test_calls_grow_like_n_plus_k_log_n():
    for n in (20, 100, 500):
        items = list(range(n))
        asked: list[int] = []

        def better(pairs, asked=asked):  # type: ignore[no-untyped-def]
            asked.append(len(pairs))
            return [a > b for a, b in pairs]

        assert top_k(items, 5, better) == [n - 1, n - 2, n - 3, n - 4, n - 5]
        assert sum(asked) <= tournament_calls(n, 5) == n - 1 + 4 * (n - 1).bit_length()


def test_the_plan_estimates_the_comparisons():
    df, score = table(20)
    bsql = BlendSQL({"t": df}, model=comparator(score))
    plan = bsql.plan("SELECT name FROM t ORDER BY {{LLMRank('How good?', t.name)}} DESC LIMIT 5")
    step = next(s for s in plan.steps if s.estimate is not None and s.estimate.model_calls.high)
    assert step.estimate.model_calls.high == tournament_calls(20, 5) == 19 + 4 * 5


def test_k_in_the_call_overrides_and_bad_k_is_a_clear_error():
    df, score = table(6)
    ing = LLMRank()
    out = ing.run("How good?", list(df["name"]), model=comparator(score), k=2)
    best = sorted(score, key=lambda v: -score[v])
    assert out[list(df["name"]).index(best[0])] == 6 and out[list(df["name"]).index(best[1])] == 5
    assert sorted(out)[:4] == [0, 0, 0, 0]
    with pytest.raises(IngredientError, match="k=0"):
        ing.run("How good?", list(df["name"]), model=comparator(score), k=0)
