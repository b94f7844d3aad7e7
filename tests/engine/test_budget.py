"""Budgets: a query stops with BudgetExceededError at a limit, never a partial result.

The model is a deterministic FunctionModel that counts the requests it
actually answered, so each test also checks that nothing past the limit
was sent.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import blendsql
from blendsql import BlendSQL, Budget, BudgetExceededError, Prices
from blendsql.errors import BlendSQLError, OptionError
from blendsql.models.base import FunctionModel, Request

N_CITIES = 12


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "b.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, city TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"city number {i}") for i in range(N_CITIES)])
    con.commit()
    con.close()
    return path


class Counting:
    """A model answering 'true' for even city numbers; records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.asked.append(req)
        text = req.prompt or str(req.messages)
        digits = [int(w) for w in text.replace(".", " ").split() if w.isdigit()]
        return "true" if digits and digits[-1] % 2 == 0 else "false"


QUERY = "SELECT id FROM t WHERE {{LLMMap('Is the number even?', t.city)}} = TRUE"


def _session(db: Path, fn: Counting, **options: Any) -> BlendSQL:
    return BlendSQL(db, model=FunctionModel(fn), cache=False, **options)


def test_unlimited_budget_runs_and_counts(db: Path) -> None:
    fn = Counting()
    s = _session(db, fn, budget=Budget()).execute(QUERY)
    assert sorted(s.df["id"]) == list(range(0, N_CITIES, 2))
    assert s.meta.model_calls == len(fn.asked) == N_CITIES


def test_model_calls_limit_stops_before_sending(db: Path) -> None:
    fn = Counting()
    b = _session(db, fn)
    with pytest.raises(BudgetExceededError) as info:
        b.execute(QUERY, budget=Budget(model_calls=5))
    e = info.value
    assert isinstance(e, BlendSQLError) and e.limit == "model_calls" and e.allowed == 5
    assert e.amount >= N_CITIES
    assert "model_calls" in e.message and "5" in e.message
    assert len(fn.asked) <= 5, "no request past the limit was sent"
    # the same session without a budget still runs (the option was per execute)
    assert len(b.execute(QUERY).df) == N_CITIES // 2


def test_prompt_tokens_limit(db: Path) -> None:
    fn = Counting()
    free = _session(db, fn).execute(QUERY)
    tokens = free.meta.prompt_tokens
    assert tokens > 0
    fn2 = Counting()
    with pytest.raises(BudgetExceededError) as info:
        _session(db, fn2, budget=Budget(prompt_tokens=tokens - 1)).execute(QUERY)
    assert info.value.limit == "prompt_tokens" and info.value.amount >= tokens
    assert "prompt_tokens" in info.value.message
    assert fn2.asked == []
    # exactly enough is enough
    ok = _session(db, Counting(), budget=Budget(prompt_tokens=tokens)).execute(QUERY)
    assert ok.meta.prompt_tokens == tokens


def test_dollars_limit_uses_the_models_prices(db: Path) -> None:
    fn = Counting()
    model = FunctionModel(fn)
    model.prices = Prices(prompt=0.001, completion=0.002)  # type: ignore[attr-defined]
    free = BlendSQL(db, model=model, cache=False).execute(QUERY)
    spent = 0.001 * free.meta.prompt_tokens + 0.002 * free.meta.completion_tokens
    fn.asked.clear()
    with pytest.raises(BudgetExceededError) as info:
        BlendSQL(db, model=model, cache=False, budget=Budget(dollars=spent / 2)).execute(QUERY)
    assert info.value.limit == "dollars" and info.value.amount > spent / 2
    assert "dollars" in info.value.message
    assert fn.asked == []


def test_dollar_limit_without_prices_is_refused(db: Path) -> None:
    fn = Counting()
    with pytest.raises(BudgetExceededError, match="declares no prices"):
        _session(db, fn, budget=Budget(dollars=1.0)).execute(QUERY)
    assert fn.asked == []


def test_budget_option_is_typed(db: Path) -> None:
    with pytest.raises(OptionError, match="budget"):
        BlendSQL(db, budget={"model_calls": 3})
    with pytest.raises(OptionError, match="did you mean 'budget'"):
        BlendSQL(db, budgett=Budget())
    with pytest.raises(ValueError):
        Budget(model_calls=-1)
    assert blendsql.Budget is Budget
