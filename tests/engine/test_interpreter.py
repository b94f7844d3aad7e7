"""The interpreter over typed steps (``blendsql.execute.interpreter``).

Why: the engine and ``BlendSQL.plan()`` walk the same steps from one
``next_step``; a step kind without a runner must fail loudly (never be
skipped), and the trace must list the steps in the order they ran.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from sqlglot import exp

from blendsql import BlendSQL
from blendsql.errors import ExecutionError
from blendsql.execute.engine import Executor
from blendsql.execute.explain import _Planner
from blendsql.execute.interpreter import (
    STEP_KINDS,
    ExecStep,
    Interpreter,
    WalkState,
    interpret,
)
from blendsql.grammar import IngredientCall, parse
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.lookup import replace_call

from .conftest import Len, StartsWith

QUERY = ("SELECT id FROM t WHERE {{StartsWith('a', t.city)}} = TRUE "
         "AND {{Len('x', t.name)}} = 2")


def _make_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [
        (i, f"n{i % 7}", ["ab", "abcd", "cd", "q", None][i % 5]) for i in range(40)])
    con.commit()
    con.close()
    return path


class Recording(Interpreter):
    """Runners that only record what they were given (no database, no model)."""

    runners: ClassVar[dict[str, str]] = {k: "run_any" for k in STEP_KINDS}

    def __init__(self, tree: exp.Expression, ready: bool, late: bool) -> None:
        registry = IngredientRegistry([StartsWith(), Len()])
        run = SimpleNamespace(registry=registry, readiness_candidate=self._candidate)
        super().__init__(run)  # type: ignore[arg-type]
        self.prepared_tree, self.ready, self.late = tree, ready, late
        self.ran: list[str] = []
        self.recorded: list[str] = []

    def _candidate(self, call: IngredientCall) -> exp.Expression | None:
        return exp.select(exp.Literal.number(1)) if self.ready else None

    def record(self, state: WalkState, step: ExecStep) -> None:
        self.recorded.append(step.kind)

    def run_any(self, state: WalkState, step: ExecStep) -> None:
        self.ran.append(step.kind)
        if step.kind == "prepare":
            state.replace_tree(self.prepared_tree)
            state.prepared, state.late_pending = True, self.late
        elif step.kind == "call":
            assert step.call is not None and step.condition
            state.replace_tree(replace_call(state.tree, step.call.call_id,
                                            exp.Literal.number(1)))
        elif step.kind == "unordered":
            state.stuck = True
        elif step.kind == "final":
            state.final_done = True
        elif step.kind == "late_map":
            state.late_pending = False


def _tree() -> exp.Expression:
    return parse(QUERY, IngredientRegistry([StartsWith(), Len()]))


def test_the_interpreter_dispatches_every_step_kind_in_order() -> None:
    ready = Recording(_tree(), ready=True, late=True)
    state = interpret(ready, WalkState(exp.select("1")))
    assert ready.ran == ["prepare", "call", "call", "final", "late_map"]
    assert ready.recorded == ready.ran == [s.kind for s in state.steps]
    stuck = Recording(_tree(), ready=False, late=False)
    interpret(stuck, WalkState(exp.select("1")))
    assert stuck.ran == ["prepare", "unordered", "final"]
    assert set(ready.ran) | set(stuck.ran) == set(STEP_KINDS)


def test_an_unknown_step_kind_is_a_clear_error_before_anything_runs() -> None:
    class Odd(Recording):
        def steps(self, state: WalkState) -> Any:
            yield ExecStep("prepare")
            yield ExecStep("teleport")

    it = Odd(_tree(), ready=True, late=False)
    with pytest.raises(ExecutionError, match="teleport") as e:
        interpret(it, WalkState(exp.select("1")))
    assert "runners" in (e.value.hint or "")
    assert it.ran == it.recorded == ["prepare"], "the unknown step was neither traced nor run"


def test_a_kind_without_a_bound_runner_is_an_error_too() -> None:
    class Partial(Recording):
        runners: ClassVar[dict[str, str]] = {"prepare": "run_any"}

    with pytest.raises(ExecutionError, match="'final'"):
        interpret(Partial(exp.select("1"), ready=True, late=False), WalkState(exp.select("1")))


@pytest.mark.parametrize("cls", [Executor, _Planner])
def test_engine_and_planner_bind_a_runner_to_every_kind(cls: type[Interpreter]) -> None:
    assert set(cls.runners) == set(STEP_KINDS)
    assert all(callable(getattr(cls, name, None)) for name in cls.runners.values())


def test_the_trace_lists_the_interpreted_steps_in_order(tmp_path: Path) -> None:
    b = BlendSQL(_make_db(tmp_path / "d.db"), ingredients=[StartsWith, Len])
    s = b.execute(QUERY)
    kinds = [t.kind for t in s.trace]
    assert kinds[0] == "parse"
    steps = [(i, t) for i, t in enumerate(s.trace) if "step" in t.details]
    assert [t.details["step"] for _, t in steps] == ["prepare", "call", "call", "final"]
    assert all(t.kind == "plan" and t.details["condition"] for _, t in steps)
    # each call step precedes its ingredient's work; the final step precedes the final query
    (_, c1), (i2, c2) = steps[1], steps[2]
    ing = [(i, t) for i, t in enumerate(s.trace) if t.kind == "ingredient"]
    assert [t.ingredient for _, t in ing] == [c1.details["call"].strip("{").split("(")[0],
                                             c2.details["call"].strip("{").split("(")[0]]
    assert steps[1][0] < ing[0][0] < i2 < ing[1][0] < steps[3][0]
    assert s.trace[steps[3][0] + 1].summary == "final query"
    assert s.trace[-1].summary == "final query", "the trace still ends with the final query"


def test_plan_and_execution_walk_the_calls_in_the_same_order(tmp_path: Path) -> None:
    b = BlendSQL(_make_db(tmp_path / "d.db"), ingredients=[StartsWith, Len])
    planned = [st.details["call"] for st in b.plan(QUERY).steps if st.kind != "final"]
    ran = [t.details["call"] for t in b.execute(QUERY).trace
           if t.details.get("step") == "call"]
    assert planned == ran and len(ran) == 2


def test_calls_that_cannot_be_ordered_stop_the_run_but_not_the_plan(tmp_path: Path) -> None:
    b = BlendSQL(_make_db(tmp_path / "d.db"), ingredients=[StartsWith, Len])
    executor = Executor.__new__(Executor)  # the runner needs no session to refuse
    with pytest.raises(ExecutionError, match="could not order") as e:
        executor.run_unordered(WalkState(exp.select("1")), ExecStep("unordered"))
    assert e.value.hint
    run = SimpleNamespace(registry=b.registry)
    planner = _Planner(run, QUERY, None)  # type: ignore[arg-type]
    state = WalkState(exp.select("1"))
    planner.plan_unordered(state, ExecStep("unordered"))
    assert state.stuck and "cannot be ordered" in planner.plan.notes[0]
