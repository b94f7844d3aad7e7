"""Cost ordering does a bounded amount of work per call, whatever the number of calls.

Counts, not seconds (the machine is shared): with n AND-ed ingredient filters each
call's candidate query is built a constant number of times and each call's cost is
estimated once, not once per remaining call at every step (which is ~n^2 estimates).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import blendsql.execute.optimise as optimise
import blendsql.execute.steps as steps
import blendsql.plan.relax as relax
from blendsql import BlendSQL
from blendsql.db.database import Database
from blendsql.ingredients.base import MapIngredient

N = 40


class Has(MapIngredient):
    """Model-free: True unless the value contains the question's last character."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(question)[-1] not in str(v) for v in values]


class Costly(Has):
    needs_model = True  # ranked by prompt tokens, like a model call


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                    [(i, f"a{i * 7 % 101}", f"b{i * 13 % 97}") for i in range(300)])
    con.commit()
    con.close()
    return path


def _count(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    counter = [0]
    original = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return counter


@pytest.mark.parametrize("ing", [Has, Costly])
def test_many_filters_estimate_each_call_once(db: Path, monkeypatch: pytest.MonkeyPatch,
                                              ing: type[Has]) -> None:
    estimates = _count(monkeypatch, optimise, "estimate")
    candidates = _count(monkeypatch, steps, "map_candidate")  # the step runners build candidates
    relaxed = _count(monkeypatch, relax, "predicate_atom")
    statements = _count(monkeypatch, Database, "execute")
    preds = " AND ".join(f"{{{{{ing.__name__}('q{i % 10}{i}', t.{'ab'[i % 2]})}}}}"
                         for i in range(N))
    with BlendSQL(str(db), ingredients=[ing], cache=False) as s:
        out = s.execute(f"SELECT id FROM t WHERE {preds}")
    con = sqlite3.connect(db)
    want = {r[0] for r in con.execute("SELECT id, a, b FROM t")
            if all(str(i)[-1] not in (r[1] if i % 2 == 0 else r[2]) for i in range(N))}
    con.close()
    assert set(out.df["id"]) == want
    assert estimates[0] <= N  # before: ~N^2 / 2 = 820
    assert candidates[0] <= 3 * N  # readiness + estimate + compute; before ~N^2 / 2
    # relaxing one candidate touches each other call once (before: a tree walk each)
    assert relaxed[0] <= 3 * N * N
    assert statements[0] <= 6 * N  # an estimate, candidate checks, a temp table per call
