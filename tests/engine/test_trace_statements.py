"""One traced path to the database: every statement SQLite ran is in the trace.

Ground truth comes from SQLite itself (``Connection.set_trace_callback``),
so a statement issued anywhere (cost scans, schema probes, json collection
probes, pre-aggregation samples, temp objects, cleanup) that skips the trace
makes these tests fail.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import ExecutionError
from blendsql.smoothie import Smoothie

from .conftest import Len, StartsWith


def _make_db(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, city TEXT, val REAL)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [
        (i, f"n{i % 7}", ["ab", "abcd", "cd", "q", "xyz", None][i % 6], i * 1.5)
        for i in range(60)])
    con.commit()
    con.close()


def _traced(s: Smoothie) -> list[str]:
    """Every statement text the trace records, cleanup included."""
    out = [t.sql for t in s.trace if t.sql]
    for t in s.trace:
        out.extend(c["sql"] for c in t.details.get("cleanup", []))
    return [x for x in out if x]


def _norm(sql: str) -> str:
    return " ".join(sql.split())


def _pattern(sql: str) -> re.Pattern[str]:
    """A traced statement as a pattern: SQLite reports bound parameters expanded."""
    parts = re.split(r"\?|:[A-Za-z_][A-Za-z0-9_]*", _norm(sql))
    return re.compile(".*?".join(re.escape(p) for p in parts) + r"\Z", re.S)


def _assert_all_traced(executed: list[str], s: Smoothie) -> None:
    traced = [_pattern(x) for x in _traced(s)]
    missing = [x for x in executed if not any(p.match(_norm(x)) for p in traced)]
    assert not missing, f"statements run but not traced: {missing}"
    assert len(executed) >= 3


QUERIES = [
    # two AND-ed maps: cost scans, json probes, a cascade, a final query
    "SELECT id FROM t WHERE {{StartsWith('a', t.city)}} = TRUE AND {{Len('x', t.name)}} = 2",
    # a GROUP BY key: pre-aggregation (sample, partial table, count)
    "SELECT {{Len('x', t.city)}} AS n, COUNT(*) AS c FROM t GROUP BY n ORDER BY n",
    # LIMIT: the lazy scan
    "SELECT id FROM t WHERE {{StartsWith('a', t.city)}} = TRUE LIMIT 3",
    # a projection and an alias in WHERE
    "SELECT id, {{Len('x', t.city)}} AS l FROM t WHERE l > 2 ORDER BY id",
]


@pytest.mark.parametrize("query", QUERIES)
def test_every_statement_on_a_handed_in_connection_is_traced(tmp_path: Path, query: str) -> None:
    _make_db(tmp_path / "d.db")
    con = sqlite3.connect(tmp_path / "d.db")
    executed: list[str] = []
    con.set_trace_callback(executed.append)
    s = BlendSQL(con, ingredients=[StartsWith, Len]).execute(query)
    con.set_trace_callback(None)
    assert len(s.df) > 0
    _assert_all_traced(executed, s)


@pytest.mark.parametrize("query", QUERIES)
def test_every_statement_on_the_sessions_connection_is_traced(tmp_path: Path, query: str) -> None:
    _make_db(tmp_path / "d.db")
    b = BlendSQL(tmp_path / "d.db", ingredients=[StartsWith, Len])
    executed: list[str] = []
    b.db.conn.set_trace_callback(executed.append)
    s = b.execute(query)
    b.db.conn.set_trace_callback(None)
    _assert_all_traced(executed, s)
    kinds = {t.kind for t in s.trace if t.sql}
    assert "sql" in kinds


def test_cost_scans_and_probes_are_plan_steps_with_rows_and_time(tmp_path: Path) -> None:
    _make_db(tmp_path / "d.db")
    b = BlendSQL(tmp_path / "d.db", ingredients=[StartsWith, Len])
    s = b.execute(QUERIES[0], rules_off={"static_filter"})  # lookups in temp tables
    probes = [t for t in s.trace if t.kind == "plan" and t.sql]
    assert any("cost estimate" in t.summary for t in probes)
    assert all(t.rows_out is not None and t.seconds >= 0 for t in probes)
    assert s.trace[-1].kind == "sql" and s.trace[-1].summary == "final query"
    assert s.trace[-1].details.get("cleanup"), "temp tables dropped after the result"


def test_a_failed_statement_is_traced_with_its_error(tmp_path: Path) -> None:
    _make_db(tmp_path / "d.db")
    b = BlendSQL(tmp_path / "d.db", ingredients=[StartsWith])
    steps: list[Any] = []
    with b.db.session(), b.db.tracing(lambda *a: steps.append(a)):
        with pytest.raises(ExecutionError):
            b.db.execute("SELECT nope FROM t")
    assert steps and steps[0][0] == "SELECT nope FROM t" and steps[0][1] is None
    assert "nope" in steps[0][4]


def test_with_a_budget_the_planning_statements_are_traced_too(tmp_path: Path) -> None:
    """A budget plans the query first (its estimate is checked): those statements count."""
    from blendsql import Budget

    _make_db(tmp_path / "d.db")
    b = BlendSQL(tmp_path / "d.db", ingredients=[StartsWith, Len], budget=Budget(model_calls=5))
    executed: list[str] = []
    b.db.conn.set_trace_callback(executed.append)
    s = b.execute(QUERIES[0])
    b.db.conn.set_trace_callback(None)
    _assert_all_traced(executed, s)
    assert any(t.kind == "plan" and t.summary.startswith("budget check") for t in s.trace)
