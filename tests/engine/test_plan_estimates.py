"""BlendSQL.plan: estimates equal the real work, or bound it, on call_economy's suite.

Each benchmark query runs twice: with its deterministic recording
ingredients (values passed), and with the model-backed built-ins
(``LLMMap`` / ``LLMQA``) over a deterministic FunctionModel (model calls).
The plan is made first, and must not call the model.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL, Budget, BudgetExceededError
from blendsql.models.base import FunctionModel, Request
from blendsql.models.constraints import Bool, Choice, Float, Int
from blendsql.plan.steps import Plan

cases_mod = pytest.importorskip("benchmarks.call_economy")
CASES = [c for c in cases_mod.CASES if not c.db.startswith("hybridqa:")]
SPIDER: Path = cases_mod.SPIDER
# a size that depends on an earlier ingredient's outputs is a bound, by design
DEPENDENT = {"cascade_two_maps", "cascade_join_two_maps", "qa_and_map"}


def answer(req: Request) -> Any:
    """A deterministic answer of the right type (by a checksum of the prompt)."""
    h = zlib.crc32((req.prompt or str(req.messages)).encode())
    c = req.constraint
    if isinstance(c, Bool):
        return "true" if h % 3 == 0 else "false"
    if isinstance(c, (Int, Float)):
        return str(h % 40)
    if isinstance(c, Choice):
        return c.options[h % len(c.options)]
    return f"a{h % 7}"


def llm_variant(sql: str) -> str:
    """The case with model-backed built-ins in place of the recording ingredients."""
    return re.sub(r"\{\{CountCtx\(", "{{LLMQA(",
                  re.sub(r"\{\{(IsPrefix|TextLen)\(", "{{LLMMap(", sql))


class NoModel(FunctionModel):
    """Fails if planning ever sends a request."""

    def __init__(self) -> None:
        super().__init__(self._refuse, name="no-model")

    @staticmethod
    def _refuse(req: Request) -> Any:
        raise AssertionError("a plan must not call the model")


def _db(case: Any) -> Path:
    return SPIDER / case.db / f"{case.db}.sqlite"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_estimated_values_match_the_recording_ingredients(case: Any) -> None:
    b = BlendSQL(_db(case), ingredients=cases_mod.fresh_ingredients(), cache=False)
    plan = b.plan(case.sql)
    assert isinstance(plan, Plan)
    actual = b.execute(case.sql).meta.values_passed
    est = plan.total.values
    assert est.contains(actual), f"{case.id}: {est} vs {actual}\n{plan}"
    if not case.limit and case.id not in DEPENDENT:
        assert est.is_exact and est.low == actual, f"{case.id}\n{plan}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_estimated_model_calls_match_a_real_run(case: Any) -> None:
    sql = llm_variant(case.sql)
    planner = BlendSQL(_db(case), model=NoModel(), cache=False)
    plan = planner.plan(sql)
    runner = BlendSQL(_db(case), model=FunctionModel(answer), cache=False)
    actual = runner.execute(sql).meta.model_calls
    est = plan.model_calls
    assert actual > 0
    assert est.high is None or est.high >= actual, f"{case.id}: {est} vs {actual}\n{plan}"
    assert est.low <= actual, f"{case.id}: {est} vs {actual}\n{plan}"
    if not case.limit and case.id not in DEPENDENT:
        assert est.is_exact and est.low == actual, f"{case.id}: {est} vs {actual}\n{plan}"


def test_plan_prints_and_renders() -> None:
    case = next(c for c in CASES if c.id == "cascade_two_maps")
    plan = BlendSQL(_db(case), ingredients=cases_mod.fresh_ingredients()).plan(case.sql)
    text = str(plan)
    assert plan.kinds() == ["call", "call", "final"]
    assert "bound: sees only the rows that earlier ingredient steps pass" in text
    assert "SELECT DISTINCT" in text and "total:" in text
    page = plan._repr_html_()
    assert "bsql-plan" in page and "nothing has run yet" in page
    assert page.count("<tr>") == 1 + len(plan.steps)  # the head, then one row per step
    assert "bound: sees only the rows that earlier ingredient steps pass" in page
    assert "bsql-range" in page  # the dependent step's tokens are drawn as a range
    assert "SELECT DISTINCT" in page and "<script" not in page
    assert any(t.kind == "sql" and t.sql for t in plan.trace), "planning statements are traced"


def test_step_kinds_for_limit_group_and_projection() -> None:
    by_id = {c.id: c for c in CASES}
    kinds = {}
    for cid in ("limit_simple", "select_map_group", "select_map", "qa_context_select"):
        case = by_id[cid]
        b = BlendSQL(_db(case), ingredients=cases_mod.fresh_ingredients())
        kinds[cid] = b.plan(case.sql).kinds()
    assert kinds["limit_simple"] == ["lazy_scan", "final"]
    assert kinds["select_map_group"] == ["grouped_call", "final"]
    assert kinds["select_map"] == ["final", "late_map"]
    assert kinds["qa_context_select"] == ["call", "final"]


def test_over_budget_estimate_raises_before_any_model_call() -> None:
    case = next(c for c in CASES if c.id == "and_filter_city")
    sql = llm_variant(case.sql)
    plan = BlendSQL(_db(case), model=NoModel(), cache=False).plan(sql)
    calls = int(plan.model_calls.low)
    b = BlendSQL(_db(case), model=NoModel(), cache=False)
    with pytest.raises(BudgetExceededError) as info:
        b.execute(sql, budget=Budget(model_calls=calls - 1))
    assert "estimate" in info.value.message and f"{calls} model call(s)" in info.value.message
    assert "[call] call LLMMap" in info.value.message  # the plan is in the message


def test_join_and_qa_estimates_bound_a_real_run() -> None:
    import pandas as pd

    left = pd.DataFrame({"x": ["Red Sox", "Cubs", "Blue Jays", "Mets"]})
    right = pd.DataFrame({"y": ["red sox", "Cubs", "blue-jays"]})
    b = BlendSQL({"a": left, "b": right}, model=FunctionModel(answer), cache=False)
    for q in ["SELECT a.x, b.y FROM a JOIN b ON {{LLMJoin(a.x, b.y)}}",
              "SELECT x FROM a WHERE x = {{LLMQA('which?', (SELECT y FROM b))}}",
              "SELECT x FROM a WHERE x IN {{LLMQA('which?', (SELECT y FROM b))}}"]:
        plan = b.plan(q)
        actual = b.execute(q).meta.model_calls
        assert plan.model_calls.contains(actual), (q, str(plan.model_calls), actual)
    assert str(b.plan("SELECT a.x FROM a JOIN b ON {{LLMJoin(a.x, b.y)}}").model_calls) == "0..4"


def test_a_near_unique_group_key_is_planned_as_a_plain_call() -> None:
    """The engine skips pre-aggregation when a sample is nearly all distinct; the plan
    asks the same question (plan.preagg.decide / near_unique) and says so."""
    import sqlite3

    from tests.engine.conftest import Len

    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, word TEXT)")
    con.executemany("INSERT INTO u VALUES (?, ?)", [(i, f"w{i}") for i in range(3000)])
    q = "SELECT {{Len('n', u.word)}} AS n, COUNT(*) FROM u GROUP BY n"
    b = BlendSQL(con, ingredients=[Len], cache=False)
    plan = b.plan(q)
    assert plan.kinds() == ["call", "final"]
    assert "preaggregate_skipped" in [t.details.get("rule") for t in plan.trace or []]
    assert b.plan(q.replace("FROM u", "FROM u WHERE id < 1500")).kinds() == ["grouped_call",
                                                                             "final"]
    assert b.plan(q, preaggregate=False).kinds() == ["call", "final"]
    s = b.execute(q)
    assert not any(t.details.get("rule") == "preaggregate" for t in s.trace)


def test_a_qa_context_counts_in_the_prompt_token_estimate():
    """The context of an LLMQA call is most of its prompt; the plan runs the context query
    (plain SQL) and sizes it as the call will render it, within ``context_chars``."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE docs (title TEXT, body TEXT)")
    conn.executemany("INSERT INTO docs VALUES (?, ?)",
                     [(f"t{i}", "word " * 60) for i in range(30)])
    model = FunctionModel(lambda req: "t3", name="fake")
    bsql = BlendSQL(conn, model=model, cache=False)
    for budget in (800, 4000):
        query = (f"SELECT {{{{LLMQA('Which title?', (SELECT title, body FROM docs), "
                 f"context_chars={budget})}}}}")
        plan = bsql.plan(query)
        estimated = plan.total.prompt_tokens
        used = bsql.execute(query).meta.prompt_tokens
        assert estimated.high is not None
        assert 0.7 * used <= estimated.low <= 1.4 * used, (budget, estimated, used)


def test_a_slow_qa_context_costs_the_estimate_not_the_plan():
    """The context probe has its own short limit; a probe stopped there must not make
    every later statement of the plan refuse to run."""
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE w (x TEXT)")
    conn.executemany("INSERT INTO w VALUES (?)", [("a",), ("b",)])
    slow = ("(WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3000000) "
            "SELECT n FROM c ORDER BY n DESC)")
    query = (f"SELECT x, CASE WHEN x = 'zzz' THEN {{{{LLMQA('which?', {slow})}}}} ELSE 'n/a' END AS a "
             "FROM w WHERE {{LLMMap('ok?', w.x)}} = TRUE")
    bsql = BlendSQL(conn, model=FunctionModel(lambda req: "true", name="fake"), cache=False)
    plan = bsql.plan(query, timeout=0.3)
    assert any(s.ingredient == "LLMMap" for s in plan.steps)
    qa = next(s for s in plan.steps if s.ingredient == "LLMQA")
    assert qa.estimate.prompt_tokens.low > 0  # sized with the short default, the probe gave up
