"""Projection-only map calls are computed on the final rows (blendsql.plan.project)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pandas as pd
import pytest
from sqlglot import exp

from blendsql import BlendSQL
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.project import name_call_columns, projection_calls


class Flag(MapIngredient):
    """Deterministic bool map that records every batch it gets."""

    batches: list[list[Any]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        Flag.batches.append(list(values))
        return [str(v).startswith(str(question)) for v in values]


@pytest.fixture()
def session() -> Any:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                    [(i, None if i % 7 == 0 else f"{'ab'[i % 2]}{i % 5}", i % 3)
                     for i in range(1, 41)])
    Flag.batches = []
    with BlendSQL(con, ingredients=[Flag], cache=False) as b:
        yield b


def _deferred(b: BlendSQL, query: str) -> list[int]:
    tree = b.parse(query)

    def value_of(c: IngredientCall) -> exp.Expression:
        return c.call_args[1]

    return [i for i, _ in projection_calls(tree, lambda c: True, value_of)]


@pytest.mark.parametrize(("query", "indexes"), [
    ("SELECT id, {{Flag('a', t.name)}} FROM t", [1]),
    ("SELECT {{Flag('a', t.name)}} AS f, id FROM t WHERE grp = 1 LIMIT 3", [0]),
    ("SELECT DISTINCT {{Flag('a', t.name)}} FROM t", []),  # DISTINCT over outputs
    ("SELECT {{Flag('a', t.name)}} AS f FROM t ORDER BY f", []),  # alias reused
    ("SELECT {{Flag('a', t.name)}} AS f FROM t WHERE f = 1", []),  # alias reused
    ("SELECT {{Flag('a', t.name)}} FROM t ORDER BY 1", []),  # ordinal
    ("SELECT {{Flag('a', t.name)}}, COUNT(*) FROM t GROUP BY 1", []),  # ordinal
    ("SELECT NOT {{Flag('a', t.name)}} FROM t", []),  # not a whole column
    ("SELECT {{Flag('a', t.name)}} FROM t UNION SELECT 1", []),  # compound
    ("SELECT {{Flag((SELECT {{Flag('a', t.name)}} FROM t LIMIT 1), t.name)}} FROM t", []),
])
def test_which_projections_are_deferred(session: BlendSQL, query: str,
                                        indexes: list[int]) -> None:
    assert _deferred(session, query) == indexes


def test_result_columns_are_named_by_the_call_text(session: BlendSQL) -> None:
    q = "SELECT id, {{Flag('a', t.name)}}, NOT {{Flag('b', t.name)}} FROM t ORDER BY 1"
    first = session.execute(q).df.columns.tolist()
    assert first == session.execute(q).df.columns.tolist()
    assert first == ["id", "{{Flag('a', t.name)}}", "NOT {{Flag('b', t.name)}}"]
    tree = session.parse(q)
    assert name_call_columns(tree, str) is not tree
    assert "Flag" in tree.sql(), "the rule must not mutate its input"


def test_only_result_values_reach_the_ingredient(session: BlendSQL) -> None:
    s = session.execute("SELECT id, {{Flag('a', t.name)}} AS f FROM t "
                        "WHERE grp = 1 ORDER BY id LIMIT 4")
    assert s.df["id"].tolist() == [1, 4, 7, 10]
    assert Flag.batches == [["b1", "a4", "a0"]], "distinct non-NULL result values only"
    f = s.df["f"].tolist()
    assert f[:2] + f[3:] == [0, 1, 1] and pd.isna(f[2]), "bools read back as 0 / 1"
    assert [st.kind for st in s.trace].count("sql") == 1


def test_null_values_map_to_null_and_match_the_lookup_plan(session: BlendSQL) -> None:
    q = "SELECT id, {{Flag('a', t.name)}} AS f FROM t ORDER BY id"
    late = session.execute(q)
    early = session.execute(q, late_maps=False)
    assert late.df.equals(early.df)
    assert late.df.loc[late.df["id"] == 7, "f"].isna().all()
    assert None not in Flag.batches[0]


def test_repeated_runs_reuse_the_static_plan(session: BlendSQL) -> None:
    q = "SELECT id, {{Flag('a', t.name)}} AS f FROM t WHERE grp = 2 ORDER BY id"
    first, second = session.execute(q), session.execute(q)
    assert first.df.equals(second.df)
    sqls = [[st.sql for st in s.trace if st.kind == "sql"] for s in (first, second)]
    assert sqls[0] == sqls[1] and len(sqls[0]) == 1
    assert Flag.batches[0] == Flag.batches[1], "the ingredient still runs every time"
    tree = session.parse(q).copy()  # a copied tree plans afresh and agrees
    assert session.execute(tree).df.equals(first.df)


def test_user_trees_are_never_memoised(session: BlendSQL) -> None:
    """``parse`` hands out a copy, and a tree the user passes is planned afresh each
    run, so changing it in place between runs changes the result."""
    q = "SELECT id, {{Flag('a', t.name)}} AS f FROM t WHERE grp = 2 ORDER BY id"
    tree = session.parse(q)
    assert tree is not session.parse(q)
    before = session.execute(tree).df
    where = tree.find(exp.Where)
    assert where is not None
    where.replace(exp.Where(this=exp.condition("grp = 0")))
    after = session.execute(tree).df
    assert after["id"].tolist() == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39]
    assert not after.equals(before)
    assert session.execute(q).df.equals(before), "the session's cached parse is untouched"
