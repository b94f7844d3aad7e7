"""Under LIMIT the lazy scan streams rows, so an endless source works.

``WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)`` has no end;
plain SQLite with a Python function answers ``... WHERE sw('1', x) LIMIT 3`` at once,
and so must the engine: the lazy walk reads rows only until the limit is met, for
positive and negative (``NOT {{M(x)}}``) filters alike. A session time limit makes a
walk that reads every row fail instead of hanging the suite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from tests.differential.ingredients import Length, StartsWith

WORLD = Path(__file__).resolve().parents[1] / "data" / "spider" / "world_1" / "world_1.sqlite"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
TIME_LIMIT = 60  # seconds; only to turn a hang into a failure


def _twin(sql: str) -> list[tuple]:
    con = sqlite3.connect(":memory:")
    con.create_function("sw", 2, lambda p, v: None if v is None else str(v).startswith(p))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("query, twin", [
    ("SELECT x FROM c WHERE {{StartsWith('1', c.x)}} = TRUE LIMIT 3",
     "SELECT x FROM c WHERE sw('1', x) = TRUE LIMIT 3"),
    ("SELECT x FROM c WHERE {{StartsWith('1', c.x)}} LIMIT 3 OFFSET 2",
     "SELECT x FROM c WHERE sw('1', x) LIMIT 3 OFFSET 2"),
    ("SELECT x FROM c WHERE x % 2 = 1 AND {{StartsWith('1', x)}} LIMIT 3",
     "SELECT x FROM c WHERE x % 2 = 1 AND sw('1', x) LIMIT 3"),
    ("SELECT x, {{StartsWith('1', c.x)}} AS s FROM c "
     "WHERE {{StartsWith('1', c.x)}} = TRUE LIMIT 3",
     "SELECT x, sw('1', x) FROM c WHERE sw('1', x) LIMIT 3"),
    ("SELECT x FROM c WHERE NOT {{StartsWith('1', c.x)}} LIMIT 3",
     "SELECT x FROM c WHERE NOT sw('1', x) LIMIT 3"),
    ("SELECT x FROM c WHERE {{StartsWith('1', c.x)}} = FALSE LIMIT 3",
     "SELECT x FROM c WHERE sw('1', x) = FALSE LIMIT 3"),
    ("SELECT x FROM c WHERE {{Length(c.x)}} = 3 LIMIT 4",
     "SELECT x FROM c WHERE length(x) = 3 LIMIT 4"),
    ("SELECT * FROM (SELECT x FROM c WHERE {{StartsWith('2', c.x)}} LIMIT 3)",
     "SELECT * FROM (SELECT x FROM c WHERE sw('2', x) LIMIT 3)"),
    ("SELECT x FROM c AS cc WHERE {{StartsWith('3', cc.x)}} LIMIT 2",
     "SELECT x FROM c AS cc WHERE sw('3', cc.x) LIMIT 2"),
])
def test_endless_recursive_cte_under_limit(query: str, twin: str) -> None:
    ing = {"StartsWith": StartsWith(), "Length": Length()}
    with BlendSQL(str(WORLD), ingredients=list(ing.values()), cache=False) as s:
        out = s.execute(ENDLESS + query, timeout=TIME_LIMIT)
    assert [tuple(r) for r in out.df.itertuples(index=False)] == _twin(ENDLESS + twin)
    passed = [v for i in ing.values() for v in i.passed()]
    assert len(passed) < 1000  # a few batches, not the source


def test_later_cte_over_endless_source() -> None:
    query = (ENDLESS.rstrip() + ", d AS (SELECT x FROM c) "
             "SELECT x FROM d WHERE {{StartsWith('1', d.x)}} LIMIT 3")
    with BlendSQL(str(WORLD), ingredients=[StartsWith], cache=False) as s:
        out = s.execute(query, timeout=TIME_LIMIT)
    assert list(out.df["x"]) == [1, 10, 11]


def test_negative_filter_is_lazy_on_a_table() -> None:
    """``NOT {{M(x)}}`` under LIMIT passes fewer values than the full plan, same rows."""
    query = "SELECT Name FROM city WHERE NOT {{StartsWith('A', city.Name)}} LIMIT 5"
    results: dict[bool, Any] = {}
    for lazy in (True, False):
        ing = StartsWith()
        with BlendSQL(str(WORLD), ingredients=[ing], cache=False, lazy=lazy) as s:
            out = s.execute(query)
        results[lazy] = (list(out.df["Name"]), len(ing.passed()))
    assert results[True][0] == results[False][0]
    assert results[True][1] < results[False][1]


def test_null_passing_negative_filter_is_not_lazy() -> None:
    """``{{M(x)}} IS NOT TRUE`` holds for a NULL output: an uncomputed value would pass,
    so the filter is computed in full (same rows as without lazy evaluation)."""
    query = "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} IS NOT TRUE LIMIT 5"
    rows = []
    for lazy in (True, False):
        with BlendSQL(str(WORLD), ingredients=[StartsWith], cache=False, lazy=lazy) as s:
            rows.append(list(s.execute(query).df["Name"]))
    assert rows[0] == rows[1]


LABEL_PAIRS = ("SELECT r1.reviewId AS a, r2.reviewId AS b FROM reviews AS r1 JOIN reviews AS r2 "
               "ON r1.id = r2.id AND r1.reviewId < r2.reviewId WHERE r1.id = 'm' AND "
               "{{LLMMap('Sentiment?', r1.reviewText, options=('POSITIVE', 'NEGATIVE'))}} = "
               "{{LLMMap('Sentiment?', r2.reviewText, options=('POSITIVE', 'NEGATIVE'))}}")


@pytest.mark.parametrize("tail", [" ORDER BY a, b LIMIT 3", " LIMIT 3", " LIMIT 2 OFFSET 1"])
def test_a_filter_comparing_two_maps_under_limit_gives_the_twins_rows(tail):
    """A map whose condition compares it with an earlier map's output (a self-join on the
    label) under LIMIT: the earlier step's lookup decides the condition's shape only when it
    has run, so the plan does not promise a lazy scan there, and the rows are the plain
    twin's (issue 40's walker once planned a lazy scan it could not apply)."""
    import sqlite3

    import pandas as pd

    from blendsql import BlendSQL
    from blendsql.models import FunctionModel

    texts = [f"review {i} {'good' if i % 3 else 'bad'}" for i in range(8)]
    df = pd.DataFrame({"id": ["m"] * 8, "reviewId": list(range(8)), "reviewText": texts})

    def label(req):
        return "POSITIVE" if "good" in req.prompt.rsplit("Value:", 1)[-1] else "NEGATIVE"

    sm = BlendSQL({"reviews": df}, model=FunctionModel(label)).execute(LABEL_PAIRS + tail)
    con = sqlite3.connect(":memory:")
    df.assign(label=["POSITIVE" if "good" in t else "NEGATIVE" for t in texts]).to_sql(
        "reviews", con, index=False)
    twin = ("SELECT r1.reviewId AS a, r2.reviewId AS b FROM reviews AS r1 JOIN reviews AS r2 "
            "ON r1.id = r2.id AND r1.reviewId < r2.reviewId WHERE r1.id = 'm' AND "
            "r1.label = r2.label")
    every = {tuple(r) for r in con.execute(twin).fetchall()}
    got = [tuple(r) for r in sm.df.itertuples(index=False)]
    if "ORDER BY" in tail:
        assert got == con.execute(twin + tail).fetchall()
    else:  # no ORDER BY: any rows of the twin, as many as it gives
        assert set(got) <= every and len(got) == len(con.execute(twin + tail).fetchall())
