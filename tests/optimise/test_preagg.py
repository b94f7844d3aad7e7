"""Pre-aggregation of a map call used as a GROUP BY key (blendsql.plan.preagg)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlglot import exp

from blendsql import BlendSQL
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.preagg import (
    LOOKUP,
    grouped_scope,
    plan_preagg,
    preagg_final,
)

COLUMNS = frozenset({"id", "name", "city", "grp", "val"})


class Len(MapIngredient):
    """Length of the value's text; records every batch it gets."""

    batches: list[list[Any]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        Len.batches.append(list(values))
        return [len(str(v)) for v in values]


class Has(MapIngredient):
    """True where the value's text contains the question."""

    batches: list[list[Any]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        Has.batches.append(list(values))
        return [str(question) in str(v) for v in values]


ROWS = [(i, f"n{i % 13}", [None, "ab", "cd", "xyz", "abcd", "q"][i % 6], i % 4,
         None if i % 7 == 0 else i / 4) for i in range(1, 121)]


def _connect(collate: str = "") -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, city TEXT {collate}, "
                "grp INTEGER, val REAL)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", ROWS)
    con.commit()  # no open transaction: inside one, the partial table is read, then stored
    return con


@pytest.fixture()
def session() -> Any:
    Len.batches, Has.batches = [], []
    with BlendSQL(_connect(), ingredients=[Len, Has], cache=False) as b:
        yield b


def _group_call(tree: exp.Expression) -> IngredientCall:
    """The Len call whose scope groups by it (the last Len call in text order)."""
    calls = [c for c in tree.find_all(IngredientCall) if c.name == "Len"]
    return calls[-1]


def _plan(b: BlendSQL, query: str, pending_ok: bool = False) -> Any:
    tree = b.parse(query)
    call = _group_call(tree)
    return plan_preagg(call, call.call_args[-1], COLUMNS, pending_ok=pending_ok)


@pytest.mark.parametrize("query", [
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t GROUP BY n",
    "SELECT COUNT(*) FROM t GROUP BY {{Len(t.city)}}",
    "SELECT {{Len(t.city)}}, COUNT(*) FROM t GROUP BY 1",
    "SELECT grp, {{Len(t.city)}} AS n, SUM(val) FROM t GROUP BY n, grp",
    "SELECT {{Len(t.city)}} AS n, COUNT(val), TOTAL(val), AVG(val), MIN(name), MAX(id) "
    "FROM t WHERE grp > 0 GROUP BY n HAVING COUNT(*) > 2 ORDER BY 2 DESC, n LIMIT 3 OFFSET 1",
    "SELECT DISTINCT COUNT(*) > 3 FROM t GROUP BY {{Len(t.city)}}",
    "SELECT city, COUNT(*) FROM t GROUP BY {{Len(t.city)}}",  # bare value column
    "SELECT {{Len(t.city)}} AS n, MAX(val) - MIN(val), SUM(val * 2) AS s FROM t "
    "GROUP BY n ORDER BY SUM(val * 2)",
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t JOIN t AS u ON u.id = t.id + 1 GROUP BY n",
])
def test_rule_applies(session: BlendSQL, query: str) -> None:
    assert _plan(session, query) is not None


@pytest.mark.parametrize("query", [
    "SELECT {{Len(t.city)}} FROM t",  # no GROUP BY
    "SELECT {{Len(t.city)}}, COUNT(*) FROM t GROUP BY grp",  # the call is no key
    "SELECT COUNT(*) FROM t GROUP BY {{Len(t.city)}} + 1",  # call inside a key
    "SELECT COUNT(*) FROM t GROUP BY {{Len(t.city || 'x')}}",  # value not a column
    "SELECT {{Len(t.city)}} AS n, COUNT(DISTINCT grp) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, SUM(DISTINCT grp) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, GROUP_CONCAT(name) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FILTER (WHERE grp > 1) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, SUM(COUNT(*)) OVER () FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, json_group_array(name) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, my_agg(name) FROM t GROUP BY n",  # unknown function
    "SELECT {{Len(t.city)}} AS n, name FROM t GROUP BY n",  # bare non-key column
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t GROUP BY n ORDER BY grp",
    "SELECT * FROM t GROUP BY {{Len(t.city)}}",
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t GROUP BY n "
    "HAVING COUNT(*) > (SELECT COUNT(*) FROM t) / 10",  # subquery outside FROM / WHERE
    "SELECT {{Len(t.city)}} AS n, MIN(name COLLATE NOCASE) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS city, COUNT(*) FROM t GROUP BY city",  # source column wins
    "SELECT {{Len(t.city)}} AS n, {{Has('a', t.name)}}, COUNT(*) FROM t GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t WHERE {{Has('a', t.name)}} GROUP BY n",
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t WHERE n > 2 GROUP BY n",  # alias in WHERE
    "SELECT {{Len(t.city)}} AS n, SUM(n) FROM t GROUP BY n",  # alias inside an aggregate
    "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t GROUP BY n ORDER BY grp + 1",
    "SELECT COUNT(*) FROM t GROUP BY {{Len(u.city)}}",  # a column of no source
    "SELECT (SELECT COUNT(*) FROM t GROUP BY {{Len(o.city)}} LIMIT 1) FROM t AS o",
])
def test_rule_refuses(session: BlendSQL, query: str) -> None:
    assert _plan(session, query) is None


def test_pending_where_calls_only_when_allowed(session: BlendSQL) -> None:
    q = "SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t WHERE {{Has('a', t.name)}} GROUP BY n"
    assert _plan(session, q) is None
    assert _plan(session, q, pending_ok=True) is not None
    q2 = "SELECT {{Len(t.city)}} AS n, {{Has('a', t.name)}}, COUNT(*) FROM t GROUP BY n"
    assert _plan(session, q2, pending_ok=True) is None


def test_plan_shape_and_no_mutation(session: BlendSQL) -> None:
    q = ("SELECT {{Len(t.city)}} AS n, COUNT(*), AVG(val) AS a FROM t WHERE grp > 1 "
         "GROUP BY n HAVING COUNT(*) > 1 ORDER BY a LIMIT 2")
    tree = session.parse(q)
    before = tree.sql()
    call = _group_call(tree)
    assert grouped_scope(call) is tree
    plan = plan_preagg(call, call.call_args[-1], COLUMNS)
    assert plan is not None
    inner = plan.inner.sql(dialect="sqlite")
    assert inner == ("SELECT t.city AS __bsql_k0, COUNT(*) AS __bsql_a0, TOTAL(val) AS "
                     "__bsql_a1, COUNT(val) AS __bsql_a2 FROM t WHERE grp > 1 GROUP BY t.city")
    assert plan.columns == ["__bsql_k0", "__bsql_a0", "__bsql_a1", "__bsql_a2"]
    lookup = exp.Anonymous(this="look", expressions=[exp.column("__bsql_k0")])
    out = preagg_final(tree, plan, "p", lookup)
    assert tree.sql() == before, "the rule must not mutate its input"
    sql = out.sql(dialect="sqlite")
    assert LOOKUP not in sql and 'FROM temp."p"' in sql
    assert sql.startswith("SELECT LOOK(__bsql_k0) AS n, SUM(__bsql_a0) AS \"COUNT(*)\", "
                          "(CAST(TOTAL(__bsql_a1) AS REAL) / SUM(__bsql_a2)) AS a")
    assert "GROUP BY LOOK(__bsql_k0)" in sql and "LIMIT 2" in sql
    assert "HAVING SUM(__bsql_a0) > 1" in sql
    assert "COUNT(*)" not in sql.split("FROM")[1]


def _twin(con: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute(sql).fetchall()]


def _cell(v: Any) -> Any:
    """NaN -> None, integral float -> int (pandas widens an INTEGER column with NULLs)."""
    if isinstance(v, float):
        return None if v != v else (int(v) if v.is_integer() else v)
    return v


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(_cell(v) for v in r)
            for r in df.astype(object).itertuples(index=False, name=None)]


def _used(s: Any) -> bool:
    return any(t.details.get("rule") == "preaggregate" for t in s.trace)


def test_engine_one_scan_and_values_once(session: BlendSQL) -> None:
    con = _connect()
    s = session.execute("SELECT {{Len(t.city)}} AS n, COUNT(*) AS c, AVG(val) AS a "
                        "FROM t GROUP BY n ORDER BY n")
    want = [tuple(_cell(v) for v in r) for r in _twin(
        con, "SELECT length(city) AS n, COUNT(*) AS c, AVG(val) AS a FROM t GROUP BY n ORDER BY n")]
    assert _rows(s.df) == want
    assert _used(s)
    assert len(Len.batches) == 1, "one map run"
    assert sorted(Len.batches[0]) == ["ab", "abcd", "cd", "q", "xyz"]  # distinct non-NULL
    sqls = [t.summary for t in s.trace if t.kind == "sql"]
    assert sqls == ["partial aggregates by the value of Len",
                    "values of Len in the partial rows", "final query"]
    assert [t.rows_out for t in s.trace if t.kind == "sql"][:2] == [6, 5]
    assert s.meta.values_passed == 5
    left = session.db.execute("SELECT name FROM sqlite_temp_master")[1]  # type: ignore[attr-defined]
    assert left == [], "temp tables are dropped after the run"


def test_engine_option_off_keeps_rows_and_columns(session: BlendSQL) -> None:
    q = ("SELECT {{Len(t.city)}} AS n, SUM(val), TOTAL(val), MIN(name), COUNT(*) "
         "FROM t GROUP BY n HAVING SUM(val) > 10")
    on = session.execute(q)
    off = session.execute(q, preaggregate=False)
    assert _used(on) and not _used(off)
    assert sorted(map(repr, _rows(on.df))) == sorted(map(repr, _rows(off.df)))
    assert list(on.df.columns) == list(off.df.columns)


def test_engine_where_ingredient_first_then_rule(session: BlendSQL) -> None:
    s = session.execute("SELECT {{Len(t.city)}} AS n, COUNT(*) FROM t "
                        "WHERE {{Has('1', t.name)}} GROUP BY n")
    assert _used(s)
    con = _connect()
    want = _twin(con, "SELECT length(city) AS n, COUNT(*) FROM t "
                 "WHERE instr(name, '1') > 0 GROUP BY n")
    assert sorted(map(repr, _rows(s.df))) == sorted(map(repr, want))
    seen = {r[0] for r in con.execute("SELECT city FROM t WHERE instr(name, '1') > 0 "
                                      "AND city IS NOT NULL")}
    assert {v for b in Len.batches for v in b} == seen, "the map sees the filtered rows only"


def test_engine_refuses_with_a_collation() -> None:
    """A NOCASE value column would merge 'AB' with 'ab' before the map: the rule stays off."""
    con = _connect("COLLATE NOCASE")
    con.executemany("INSERT INTO t VALUES (?, 'z', 'AB', 0, 1.0)", [(i,) for i in range(500, 504)])
    with BlendSQL(con, ingredients=[Has], cache=False) as b:
        s = b.execute("SELECT {{Has('A', t.city)}} AS n, COUNT(*) FROM t GROUP BY n")
    assert not _used(s)
    want = _twin(con, "SELECT instr(city, 'A') > 0 AS n, COUNT(*) FROM t GROUP BY n")
    assert sorted(map(repr, _rows(s.df))) == sorted(map(repr, want))


def test_engine_skips_near_unique_values() -> None:
    """Grouping by the map of a (nearly) unique column: the partial table would be as
    large as the input, so today's plan runs; the rows are the same."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE u (id INTEGER PRIMARY KEY, word TEXT)")
    con.executemany("INSERT INTO u VALUES (?, ?)", [(i, f"w{i}") for i in range(3000)])
    Len.batches = []
    q = "SELECT {{Len(u.word)}} AS n, COUNT(*) FROM u GROUP BY n"
    with BlendSQL(con, ingredients=[Len], cache=False) as b:
        s = b.execute(q)
        small = b.execute(q.replace("FROM u", "FROM u WHERE id < 1500"))
    assert not _used(s)
    assert any(t.details.get("rule") == "preaggregate_skipped" for t in s.trace)
    assert sorted(_rows(s.df)) == sorted(_twin(con, q.replace("{{Len(u.word)}}", "length(word)")))
    assert _used(small), "an input smaller than the sample is always pre-aggregated"
