"""Any output an ingredient or model returns is stored, never a raw error.

Integers beyond SQLite's 64-bit range (which a bound parameter refuses with
``OverflowError`` and a registered function with ``DataError: string or blob too
big``), NaN, Decimal, numpy scalars, sets and dicts each have a defined storage.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import sqlite3
from typing import Any

import numpy as np
import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient
from blendsql.models.base import FunctionModel
from blendsql.plan.values import lossy_notes, outputs_to_sqlite, to_sqlite

ODD_VALUES: list[Any] = [
    2**63, -(2**63) - 1, 2**64 + 1, 10**400, -(10**400), 2**63 - 1, -(2**63),
    float("inf"), float("-inf"), float("nan"), decimal.Decimal("1.5"), decimal.Decimal("1e30"),
    decimal.Decimal("NaN"), decimal.Decimal("0.1"), np.uint64(2**64 - 1), np.int64(5),
    np.float32(0.5), np.float64("nan"), np.bool_(True), np.longdouble(1.5), {"a": 1, 2: {3, 1}},
    {1, 2, 3}, frozenset({"b", "a"}), ({"x"}, 2), [float("nan"), 2**70], {(1, 2): "t"},
    dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5), 1 + 2j, bytearray(b"ab"),
    pd.Timestamp("2024-01-02"), pd.NA, object(), np.array([1, 2**63 - 1]), np.zeros((2, 2)),
    pd.Series([1.5, None]),
]


@pytest.mark.parametrize("v", ODD_VALUES, ids=[f"{type(v).__name__}{i}" for i, v in enumerate(ODD_VALUES)])
def test_every_value_can_be_bound_and_stored(v):
    stored = to_sqlite(v)
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (v)")
    con.execute("INSERT INTO t VALUES (?)", (stored,))  # never OverflowError / InterfaceError
    con.create_function("f", 0, lambda: stored)
    con.execute("SELECT f()").fetchall()  # never 'string or blob too big'
    assert outputs_to_sqlite([v, "x"])[0] == stored or (stored != stored)


def test_big_integers_become_real_like_sqlite_literals():
    con = sqlite3.connect(":memory:")
    literal = con.execute("SELECT 18446744073709551617").fetchone()[0]
    assert to_sqlite(2**64 + 1) == literal == 2.0**64
    assert to_sqlite(10**400) == math.inf and to_sqlite(-(10**400)) == -math.inf
    assert to_sqlite(2**63 - 1) == 2**63 - 1 and type(to_sqlite(2**63 - 1)) is int


def test_arrays_are_json_lists():
    assert json.loads(to_sqlite(np.array([[1, 2], [3, 4]]))) == [[1, 2], [3, 4]]
    assert json.loads(to_sqlite(pd.Series([1.5, float("nan")]))) == [1.5, None]


def test_containers_are_deterministic_valid_json():
    assert to_sqlite({1, 3, 2}) == "[1, 2, 3]"
    assert json.loads(to_sqlite({"a": {3, 1}, 2: [float("nan")]})) == {"a": [1, 3], "2": [None]}
    assert json.loads(to_sqlite([2**70])) == [2**70]  # JSON text keeps the digits


def test_lossy_conversions_are_noted_and_exact_ones_are_not():
    assert lossy_notes(["a", True, None, 3, 2.5, 2**63 - 1, decimal.Decimal("0.1")]) == []
    notes = lossy_notes([2**64 + 1, float("nan"), decimal.Decimal("0.1000000000000000000001")])
    assert len(notes) == 3
    assert "64-bit" in notes[0] and "NULL" in notes[1] and "Decimal" in notes[2]
    assert lossy_notes([{"k": 2**64}]) and lossy_notes([2**64 + i for i in range(9)])


class Huge(MapIngredient):
    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [2**64 + len(str(v)) if v != "b" else 7 for v in values]


class HugeQA(QAIngredient):
    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        return 10**30


class HugeJoin(JoinIngredient):
    def run(self, left_values: list, right_values: list, **kwargs: Any) -> dict:
        return {v: (2**70 if v == "p" else right_values[0]) for v in left_values}


def test_map_ingredient_big_integers_are_stored_with_a_trace_warning():
    df = pd.DataFrame({"x": ["a", "b", "cc"]})
    sm = BlendSQL({"w": df}, ingredients=[Huge]).execute(
        "SELECT x, {{Huge('n', w.x)}} AS n FROM w ORDER BY x")
    assert sm.df["n"].tolist() == [2.0**64, 7, 2.0**64]
    warnings = [s.summary for s in sm.trace if s.kind == "warning"]
    assert warnings and all("64-bit" in w for w in warnings)


def test_map_big_integers_in_a_filter_and_qa_parameters():
    df = pd.DataFrame({"x": ["a", "b"]})
    b = BlendSQL({"w": df}, ingredients=[Huge, HugeQA])
    sm = b.execute("SELECT x FROM w WHERE {{Huge('n', w.x)}} > 100")
    assert sm.df["x"].tolist() == ["a"]
    sm = b.execute("SELECT {{HugeQA('q')}} AS n")
    assert sm.df["n"].tolist() == [1e30]
    assert any("64-bit" in s.summary for s in sm.trace if s.kind == "warning")


def test_join_values_beyond_int64_are_stored_with_a_warning():
    left = pd.DataFrame({"k": ["p", "q"]})
    right = pd.DataFrame({"v": ["z"]})
    sm = BlendSQL({"l": left, "r": right}, ingredients=[HugeJoin]).execute(
        "SELECT l.k, r.v FROM l JOIN {{HugeJoin(left_on='l::k', right_on='r::v')}} ORDER BY l.k")
    assert sm.df.values.tolist() == [["q", "z"]]
    assert any("64-bit" in s.summary for s in sm.trace if s.kind == "warning")


def test_model_answer_beyond_int64_is_stored_with_a_warning():
    df = pd.DataFrame({"x": ["a"]})
    b = BlendSQL({"w": df}, model=FunctionModel(lambda r: "99999999999999999999999"))
    sm = b.execute("SELECT {{LLMMap('How many?', w.x, return_type='int')}} AS n FROM w")
    assert sm.df["n"].tolist() == [1e23]
    assert any("64-bit" in s.summary for s in sm.trace if s.kind == "warning")
