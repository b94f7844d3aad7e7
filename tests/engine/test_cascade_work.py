"""The work an AND cascade of n ingredient filters does per filter, and that the
shortcuts taking it out never change the rows or the values an ingredient sees:

- calls whose candidate queries are the same text share one counting statement;
- a table's size for JSON collection is probed once per run;
- once a one-table candidate of a scope had no row, later candidates of that scope
  run no statement (their WHERE only gets stronger), but a candidate that left out
  rows the WHERE decides (an OR around the call) proves nothing for the others;
- a cost_order decision lists at most ``TRACED_COSTS`` other costs in its summary.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.order import TRACED_COSTS


class Has(MapIngredient):
    """True unless the value contains the question's last character; records its inputs."""

    seen: list[list[Any]] = []

    def run(self, question: Any, values: list[Any], **kwargs: Any) -> list[Any]:
        type(self).seen.append(list(values))
        return [str(question)[-1] not in str(v) for v in values]


class Tag(MapIngredient):
    """The value with a prefix; records its inputs."""

    seen: list[list[Any]] = []

    def run(self, question: Any, values: list[Any], **kwargs: Any) -> list[Any]:
        type(self).seen.append(list(values))
        return [f"tag:{v}" for v in values]


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT, k INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)",
                    [(i, f"a{i * 7 % 101}", f"b{i * 13 % 97}", 1) for i in range(300)])
    con.commit()
    con.close()
    return path


def _filters(n: int) -> str:
    preds = " AND ".join(f"{{{{Has('q{i // 2}', t.{'ab'[i % 2]})}}}}" for i in range(n))
    return f"SELECT id FROM t WHERE {preds}"


def _want(db: Path, n: int) -> set[int]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT id, a, b FROM t").fetchall()
    con.close()
    return {r[0] for r in rows
            if all(str(i // 2)[-1] not in (r[1] if i % 2 == 0 else r[2]) for i in range(n))}


def test_cascade_rows_values_and_statements(db: Path) -> None:
    n = 30
    Has.seen = []
    with BlendSQL(str(db), ingredients=[Has], cache=False) as s:
        out = s.execute(_filters(n))
    assert set(out.df["id"]) == _want(db, n)
    trace = out.trace
    counting = [t for t in trace if t.summary.startswith("cost estimate for") and t.sql]
    reused = [t for t in trace if t.summary.startswith("cost estimate for") and not t.sql]
    assert len(counting) == 2 and len(reused) == n - 2  # two columns, one count each
    # the table's size is tested inside each collecting statement: no probe statement
    assert not [t for t in trace if "table size" in t.summary]
    skipped = [t for t in trace if "no statement" in t.summary]
    run = [t for t in trace if t.summary.startswith("candidate values for") and t.sql]
    assert len(skipped) + len(run) == n and skipped  # the rows run out before the last filter
    assert all(t.rows_out == 0 for t in skipped)
    first_skip = trace.index(skipped[0])
    assert any(t.rows_out == 0 for t in run if trace.index(t) < first_skip)
    # every ingredient call got exactly the values its (skipped or run) candidate had
    assert sum(len(v) for v in Has.seen) == out.meta.values_passed


def test_skipping_empty_candidates_passes_the_same_values(db: Path) -> None:
    """The same cascade with cost ordering off (text order) and on: same rows; and each
    run's values equal those of a run where every candidate statement is executed."""
    n = 24
    from blendsql.execute import steps

    original = steps.StepRunner.cascade_values

    def no_skip(self: Any, call: Any, value: Any) -> list[Any]:
        self.state.tree.empty_scopes.clear()  # nothing known empty: every statement runs
        return original(self, call, value)

    results = []
    for skip in (True, False):
        Has.seen = []
        if not skip:
            steps.StepRunner.cascade_values = no_skip  # type: ignore[method-assign]
        try:
            with BlendSQL(str(db), ingredients=[Has], cache=False) as s:
                out = s.execute(_filters(n))
        finally:
            steps.StepRunner.cascade_values = original  # type: ignore[method-assign]
        results.append((sorted(out.df["id"]), [sorted(v) for v in Has.seen],
                        out.meta.values_passed))
    assert results[0] == results[1]


def test_a_candidate_without_decided_rows_proves_nothing(db: Path) -> None:
    """``WHERE k = 1 OR {{Has(..)}}``: every row is kept whatever Has says, so Has's
    candidate leaves them all out and has no row; Tag in the SELECT list must still
    see every value of the kept rows."""
    Tag.seen, Has.seen = [], []
    q = "SELECT id, {{Tag('x', t.a)}} AS g FROM t WHERE k = 1 OR {{Has('q1', t.b)}}"
    with BlendSQL(str(db), ingredients=[Has, Tag], cache=False) as s:
        out = s.execute(q)
    con = sqlite3.connect(db)
    want = {(i, f"tag:{a}") for i, a in con.execute("SELECT id, a FROM t")}
    con.close()
    assert set(map(tuple, out.df[["id", "g"]].itertuples(index=False))) == want
    assert Has.seen == []  # no value needed
    assert sorted(Tag.seen[0]) == sorted({g[len("tag:"):] for _, g in want})
    assert not any("no statement" in t.summary for t in out.trace)


def test_cost_order_summary_lists_a_bounded_number_of_costs(db: Path) -> None:
    n = TRACED_COSTS + 6
    with BlendSQL(str(db), ingredients=[Has], cache=False) as s:
        out = s.execute(_filters(n))
    first = next(t for t in out.trace if t.details.get("rule") == "cost_order")
    assert len(first.details["costs"]) == n - 1
    assert f"... ({n - 1 - TRACED_COSTS} more in details['costs'])" in first.summary
    assert first.summary.count(", ") == TRACED_COSTS
