"""The plan is the program: ``execute(q)`` runs the steps ``plan(q)`` returned, call for call.

Each query below exercises one kind of step or strategy (a map filter, a
cascade, a QA, a join, a lazy scan under LIMIT, pre-aggregation, a GROUP BY map
waiting for its WHERE filter, a late map). On every backend: the plan's typed
steps are the ones the run measured, in the same order with the same strategy;
``run(plan(q))`` returns the rows of ``execute(q)`` and of the plain-SQL twin;
after a run every step carries its actual figures (EXPLAIN ANALYZE), and each
actual count of values lies within the step's estimated bound.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.execute import engine, walk
from blendsql.plan import steps as plan_steps
from blendsql.plan.steps import CallStep, MapCall, Plan, Step, Strategy

from .common import df_rows, multiset, run_sql, target
from .ingredients import fresh_ingredients

DB = "world_1"

#: (id, BlendSQL query, plain-SQL twin, the step kinds its plan has on SQLite; another
#: backend may keep the plain strategy where it cannot tell collations apart)
QUERIES = [
    ("map_filter", "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} "
     "AND Population > 1000000",
     "SELECT Name FROM city WHERE substr(Name, 1, 1) = 'A' AND Population > 1000000",
     ["call", "final"]),
    ("cascade", "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} "
     "AND {{Length('n', city.District)}} > 8",
     "SELECT Name FROM city WHERE substr(Name, 1, 1) = 'A' AND length(District) > 8",
     ["call", "call", "final"]),
    ("qa", "SELECT Name FROM country WHERE Population > "
     "{{CountRows('q', (SELECT * FROM city WHERE CountryCode = 'NLD'))}} * 1000000",
     "SELECT Name FROM country WHERE Population > (SELECT COUNT(*) FROM city "
     "WHERE CountryCode = 'NLD') * 1000000",
     ["call", "final"]),
    ("join", "SELECT city.Name, country.Name FROM city JOIN country "
     "ON {{LowerJoin(city.CountryCode, country.Code)}} WHERE city.Population > 5000000",
     "SELECT city.Name, country.Name FROM city JOIN country "
     "ON lower(trim(city.CountryCode)) = lower(trim(country.Code)) "
     "WHERE city.Population > 5000000",
     ["call", "final"]),
    ("lazy_limit", "SELECT Name FROM city WHERE {{StartsWith('B', city.Name)}} "
     "ORDER BY ID LIMIT 3",
     "SELECT Name FROM city WHERE substr(Name, 1, 1) = 'B' ORDER BY ID LIMIT 3",
     ["lazy_scan", "final"]),
    ("preagg", "SELECT {{Length('n', city.CountryCode)}} AS l, COUNT(*) FROM city GROUP BY l",
     "SELECT length(CountryCode) AS l, COUNT(*) FROM city GROUP BY l",
     ["grouped_call", "final"]),
    ("preagg_after_filter", "SELECT {{Length('n', city.District)}} AS l, COUNT(*) FROM city "
     "WHERE {{StartsWith('A', city.Name)}} GROUP BY l",
     "SELECT length(District) AS l, COUNT(*) FROM city WHERE substr(Name, 1, 1) = 'A' "
     "GROUP BY l",
     ["call", "grouped_call", "final"]),
    ("late_map", "SELECT Name, {{Length('x', city.Name)}} AS u FROM city "
     "WHERE Population > 5000000",
     "SELECT Name, length(Name) AS u FROM city WHERE Population > 5000000",
     ["final", "late_map"]),
]


def _session(backend: str) -> BlendSQL:
    return BlendSQL(target(DB, backend), ingredients=list(fresh_ingredients().values()))


def _shape(plan: Plan) -> list[tuple[Any, ...]]:
    """What a plan decided, step by step: the type, the call, the strategy."""
    return [(type(s), getattr(s, "call", None), getattr(s, "strategy", None))
            for s in plan.steps]


def test_plan_and_run_share_the_step_types() -> None:
    """The walk makes, and the engine runs, the same step classes of ``plan.steps``;
    nothing else interprets steps (the dry-run planner and the string-keyed
    interpreter are gone)."""
    for module in (walk, engine):
        used = {name for name, obj in vars(module).items()
                if inspect.isclass(obj) and issubclass(obj, Step)}
        assert used, module.__name__
        assert all(getattr(plan_steps, name) is getattr(module, name) for name in used)
    run_source = inspect.getsource(engine.run_plan)
    for cls in (CallStep, plan_steps.Unordered, plan_steps.FinalQuery, plan_steps.LateMap):
        assert f"case {cls.__name__}()" in run_source
    assert "getattr" not in run_source
    for gone in ("blendsql.execute.explain", "blendsql.execute.interpreter"):
        with pytest.raises(ModuleNotFoundError):
            __import__(gone)


def test_a_step_type_the_engine_does_not_know_fails_loudly(tmp_path: Any) -> None:
    class Teleport(Step):
        @property
        def kind(self) -> str:
            return "teleport"

    b = _session("sqlite")
    plan = b.plan("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}}")
    plan.steps.insert(0, Teleport("teleport"))
    from blendsql.errors import ExecutionError

    with pytest.raises(ExecutionError, match="no runner for the plan step Teleport"):
        b.run(plan)


@pytest.mark.parametrize("qid, query, twin, kinds", QUERIES, ids=[q[0] for q in QUERIES])
def test_execute_runs_the_steps_plan_returned(backend: str, qid: str, query: str, twin: str,
                                              kinds: list[str]) -> None:
    want, _ = run_sql(DB, twin, backend=backend)  # before the session (Spark: one view name)
    b = _session(backend)
    try:
        planned = b.plan(query)
        assert planned.kinds() == kinds or (
            backend != "sqlite" and [k.replace("grouped_", "") for k in kinds]
            == planned.kinds()), str(planned)
        ran = b.execute(query)
        assert ran.plan is not None
        assert _shape(ran.plan) == _shape(planned), f"{planned}\n---\n{ran.plan}"
        # the trace lists the steps as they ran, each before its work
        traced = [t for t in ran.trace if "step" in t.details]
        assert [t.details.get("call") for t in traced] == [
            getattr(s, "call", None) for s in planned.steps]
        strategies = [t.details.get("strategy") for t in traced if t.details["step"] == "call"]
        assert strategies == [s.strategy.name.lower() if isinstance(s, MapCall) else None
                              for s in planned.steps if isinstance(s, CallStep)]
        # the plan runs as it is, twice, with the rows of execute and of the twin
        ordered = "ORDER BY" in query
        for got in (ran, b.run(planned), b.run(planned)):
            rows = df_rows(got.df)
            assert (rows == want) if ordered else (multiset(rows) == multiset(want)), qid
    finally:
        b.close()


@pytest.mark.parametrize("qid, query, twin, kinds", QUERIES, ids=[q[0] for q in QUERIES])
def test_explain_analyze_puts_estimate_and_actual_side_by_side(
        backend: str, qid: str, query: str, twin: str, kinds: list[str]) -> None:
    b = _session(backend)
    try:
        plan = b.plan(query)
        assert not plan.analyzed and "actual:" not in str(plan)
        smoothie = b.run(plan)
        assert smoothie.plan is plan and plan.analyzed
        for step in plan.steps:
            assert step.actual is not None, step
            assert step.actual.seconds >= 0
            if isinstance(step, CallStep) or step.kind == "late_map":
                assert step.estimate.values.contains(step.actual.values), (
                    f"{qid}: {step.summary}: estimate {step.estimate.values}, "
                    f"actual {step.actual.values}\n{plan}")
                assert step.actual.model_calls == 0  # deterministic ingredients
        final = next(s for s in plan.steps if s.kind == "final")
        assert final.actual is not None
        if "late_map" not in kinds:
            assert final.actual.rows == len(smoothie.df)
        text = str(plan)
        assert text.startswith("plan (analyzed) for")
        assert text.count("      actual: values=") == len(plan.steps)
        assert "\nactual: values=" in text  # the run's totals
        page = plan._repr_html_()
        assert "bsql-actual" in page and "nothing has run yet" not in page
        # execute's own plan is measured too (not estimated without a budget)
        ran = b.execute(query)
        assert ran.plan is not None and ran.plan.analyzed and not ran.plan.estimated
        assert "total: not estimated" in str(ran.plan)
    finally:
        b.close()


def test_a_plan_that_execute_ran_cannot_run_again() -> None:
    b = _session("sqlite")
    s = b.execute("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}}")
    from blendsql.errors import ExecutionError

    assert s.plan is not None
    with pytest.raises(ExecutionError, match="has run already") as e:
        b.run(s.plan)
    assert e.value.hint


def test_a_budget_prices_the_plan_that_runs() -> None:
    from blendsql.budget import Budget

    b = _session("sqlite")
    q = "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} AND Population > 1000000"
    s = b.execute(q, budget=Budget(model_calls=10))
    assert s.plan is not None and s.plan.estimated and s.plan.analyzed
    checks = [t for t in s.trace if t.summary.startswith("budget check")]
    assert len(checks) == 1 and checks[0].details["plan"].startswith("plan for")
    assert MapCall in {type(st) for st in s.plan.steps}
    assert all(st.strategy is Strategy.PLAIN for st in s.plan.steps if isinstance(st, MapCall))
