"""A run is composed of small parts sharing one typed state, not an inheritance chain."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.execute import run as run_module
from blendsql.execute.evaluate import Evaluator, Sharing
from blendsql.execute.run import Run
from blendsql.execute.session import Decisions, Session
from blendsql.execute.steps import Ordering, StepRunner
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.state import CostState, RunState, TreeState, TreeTexts

PARTS = (Session, Decisions, Evaluator, Sharing, Ordering, StepRunner)


class Has(MapIngredient):
    """Model-free: True when the value contains the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(question) in str(v) for v in values]


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                    [(i, f"a{i % 7}", f"b{i % 5}") for i in range(40)])
    con.commit()
    con.close()
    return path


def test_run_and_its_parts_inherit_nothing() -> None:
    for cls in (Run, *PARTS):
        assert cls.__mro__ == (cls, object), cls


def test_the_state_is_typed_dataclasses() -> None:
    state = RunState()
    assert isinstance(state.costs, CostState) and isinstance(state.tree, TreeState)
    assert isinstance(state.tree.now, TreeTexts)
    for cls in (RunState, CostState, TreeState, TreeTexts):
        assert dataclasses.is_dataclass(cls)
        assert all(f.type != "Any" for f in dataclasses.fields(cls)), cls


def test_the_parts_share_the_runs_state(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two filters, cost-ordered: both calls' estimates are in the run's one state, the
    rule names applied were set on it and are cleared after, and every part sees it."""
    runs: list[Run] = []
    original = run_module.Run.__init__

    def keep(self: Run, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        runs.append(self)

    monkeypatch.setattr(run_module.Run, "__init__", keep)
    with BlendSQL(str(db), ingredients=[Has]) as s:
        out = s.execute("SELECT id FROM t WHERE {{Has('1', t.a)}} AND {{Has('2', t.b)}}")
    assert sorted(out.df["id"]) == [i for i in range(40) if i % 7 == 1 and i % 5 == 2]
    run = runs[-1]
    assert run.session.state is run.state and run.decisions.state is run.state
    assert run.steps.state is run.state
    assert len(run.state.costs.estimates) == 2  # each call's cost estimated once
    assert run.state.rule_name == ""  # no rule is being applied after the run
    assert any(t.details.get("rule") == "cost_order" for t in out.trace)
