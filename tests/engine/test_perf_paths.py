"""The engine's fast paths agree with SQLite: Python-decided filter atoms and
the hash-set collector for candidate values."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlglot import exp

from blendsql.execute.collect import Collector, collectable
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.static_filter import passing_values

OUTPUT_SETS: list[list[Any]] = [
    [True, False, None, 1, 0, 2, -1, 0.5, 0.0],
    ["CA", "ca", "", None, "b", "CA "],
    [1, "1", 1.0, None, "x"],  # mixed kinds: must be left to SQLite
]
ATOMS = ["{c}", "{c} = TRUE", "{c} = FALSE", "{c} = 1", "{c} <> 0", "{c} > 0.5",
         "0 < {c}", "{c} <= -1", "{c} = 'CA'", "{c} < 'b'", "'b' >= {c}", "{c} = -1"]


def _atom(template: str) -> tuple[exp.Expression, IngredientCall]:
    call = IngredientCall(this=exp.to_identifier("M"))
    if template == "{c}":
        return call, call
    left, op, right = template.split(" ")
    side = {"{c}": call}
    lhs = side.get(left) or exp.maybe_parse(left, dialect="sqlite")
    rhs = side.get(right) or exp.maybe_parse(right, dialect="sqlite")
    ops = {"=": exp.EQ, "<>": exp.NEQ, ">": exp.GT, ">=": exp.GTE, "<": exp.LT, "<=": exp.LTE}
    node: Any = ops[op](this=lhs, expression=rhs)
    return node, call


@pytest.mark.parametrize("outputs", OUTPUT_SETS)
@pytest.mark.parametrize("template", ATOMS)
def test_python_decision_matches_sqlite(outputs: list[Any], template: str) -> None:
    atom, call = _atom(template)
    values = list(range(len(outputs)))
    got = passing_values(atom, call, values, outputs)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE m (k, v)")
    con.executemany("INSERT INTO m VALUES (?, ?)", list(zip(values, outputs, strict=True)))
    cond = template.format(c="v")
    want = [r[0] for r in con.execute(f"SELECT k FROM m WHERE {cond} ORDER BY k")]
    if got is None:
        assert any(type(o) is str for o in outputs) or template.count("'")
    else:
        assert sorted(got) == want, (template, outputs)


def test_mixed_kinds_go_to_sqlite() -> None:
    atom, call = _atom("{c} = 1")
    assert passing_values(atom, call, [1, 2], ["1", 1]) is None


def test_collector_matches_distinct() -> None:
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a, b)")
    rows = [(i % 7 if i % 5 else None, f"x{i % 3}") for i in range(100)] + [(1.0, "y")]
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    cand: exp.Expression = exp.maybe_parse("SELECT DISTINCT t.a FROM t WHERE t.b <> 'x1'",
                                           dialect="sqlite")
    assert isinstance(cand, exp.Select) and collectable(cand)
    want = {r[0] for r in con.execute(cand.sql(dialect="sqlite")) if r[0] is not None}
    with Collector(con) as col:
        con.execute(col.rewrite(cand).sql(dialect="sqlite")).fetchall()
        got = col.values()
    assert len(got) == len(set(got)) and set(got) == want
    with pytest.raises(sqlite3.OperationalError):  # the function is gone afterwards
        con.execute(f"SELECT {col.name}(1)")


@pytest.mark.parametrize("sql", [
    "SELECT DISTINCT t.a FROM t GROUP BY t.b",
    "SELECT DISTINCT MAX(t.a) FROM t",
    "SELECT t.a FROM t",
    "SELECT DISTINCT t.a FROM t LIMIT 3",
    "SELECT DISTINCT t.a, t.b FROM t",
])
def test_not_collectable(sql: str) -> None:
    assert not collectable(exp.maybe_parse(sql, dialect="sqlite"))


def _typed_db() -> sqlite3.Connection:
    """Columns of every affinity, holding every storage class SQLite lets them keep."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (s TEXT, v VARCHAR(10), n INTEGER, r REAL, u, b TEXT)")
    rows = [("a\"b", "x", 1, 0.1 + 0.2, 1.5, "p"), ("é😀", "y", 2, 1.0, "1", b"\x00\x01"),
            (None, None, None, None, None, None), ("a\"b", 3, 1, 0.3, 1, "p"),
            ("\x00z", 0.1 + 0.2, 9223372036854775807, -0.0, "z", "q")]
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.execute("CREATE VIEW w AS SELECT s FROM t")
    return con


@pytest.mark.parametrize(("col", "table", "json_path"), [
    ("s", "t", True), ("v", "t", True), ("n", "t", True),
    ("b", "t", False),  # a BLOB: the aggregate fails
    ("r", "t", False), ("u", "t", False),  # a REAL comes back as a float: not exact
    ("s", "w", False),  # a view: its size is unknown
])
def test_json_collection_matches_distinct(col: str, table: str, json_path: bool) -> None:
    """Values, their classes and order are those of DISTINCT on every path; JSON is kept
    only when it returned them exactly (text and integers), else they are collected."""
    from blendsql import BlendSQL
    from blendsql.execute.collect import json_candidate, json_values, sized_json_text

    con = _typed_db()
    sql = f"SELECT DISTINCT {table}.{col} FROM {table} WHERE {table}.{col} IS NOT NULL"
    cand = exp.maybe_parse(sql, dialect="sqlite")
    assert isinstance(cand, exp.Select)
    as_json = json_candidate(cand)
    assert as_json is not None
    decoded = None
    try:
        text = con.execute(sized_json_text(cand, as_json)).fetchone()[0]
    except sqlite3.OperationalError:
        text = None  # the aggregate failed (a BLOB)
    if text is not None:  # None: not a table of at most JSON_MAX_ROWS rows (a view)
        decoded = json_values(text)
    assert (decoded is not None) is json_path
    want = [r[0] for r in con.execute(sql)]
    if decoded is not None:
        assert list(map(repr, decoded)) == list(map(repr, want))
    seen: list[list[Any]] = []

    class Echo(MapIngredient):
        def run(self, question: Any, values: list, **kwargs: Any) -> list:
            seen.append(list(values))
            return list(values)

    with BlendSQL(con, ingredients=[Echo], cache=False, late_maps=False) as b:
        s = b.execute(f"SELECT {{{{Echo({table}.{col})}}}} FROM {table}")
    assert list(map(repr, seen[0])) == list(map(repr, want)), "same values, classes, order"
    assert len(s.df) == 5


def test_a_table_without_rowid_is_tried_as_json_once_per_run(tmp_path: Path) -> None:
    """The JSON statement fails on a WITHOUT ROWID table (no rowid to size it by); the
    run remembers it, so a second call on that table collects row by row at once."""
    from blendsql import BlendSQL
    from tests.engine.conftest import StartsWith

    db = tmp_path / "w.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE k (name TEXT PRIMARY KEY, kind TEXT) WITHOUT ROWID")
    con.executemany("INSERT INTO k VALUES (?, ?)", [("ab", "x"), ("ac", "y"), ("b", "x")])
    con.commit()
    con.close()
    with BlendSQL(db, ingredients=[StartsWith], cache=False) as b:
        s = b.execute("SELECT name FROM k WHERE {{StartsWith('a', k.name)}} "
                      "AND {{StartsWith('x', k.kind)}}")
    assert s.df["name"].tolist() == ["ab"]
    failed = [t for t in s.trace if t.details.get("error")]
    assert len(failed) == 1 and "rowid" in failed[0].details["error"]
