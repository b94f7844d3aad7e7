"""Typed answers obey the constraint like text answers; ``None`` is a warned-about NULL.

A ``FunctionModel`` returning 42 for ``options=('Europe','Asia')`` is refused like
the text ``'42'`` would be, and a ``None`` answer becomes NULL with a warning in the
trace.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.ingredients.builtin import LLMQA, LLMMap
from blendsql.models.base import FunctionModel, Model, Request, Response, check_value
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Date,
    Float,
    Grammar,
    Int,
    JsonSchema,
    ListOf,
    Regex,
    Text,
)

# (constraint, typed answers that must be accepted -> stored value, answers that must be refused)
CASES: list[tuple[Constraint, list[tuple[Any, Any]], list[Any]]] = [
    (Choice(("Europe", "Asia")), [("Asia", "Asia"), ("europe", "Europe")],
     [42, 4.2, True, ["Asia"], {"a": 1}, "Mars"]),
    (Choice(("1", "2", "true")), [(2, "2"), (np.int64(1), "1"), (1.0, "1"), (True, "true")],
     [3, 2.5, False]),
    (Choice(("Yes", "No")), [(True, "Yes"), (np.bool_(False), "No"), ("yes", "Yes")],
     [1, "maybe"]),
    (Bool(), [(True, True), (np.bool_(False), False), (1, True), ("no", False)],
     [2, 0.5, "maybe", [True], float("nan")]),
    (Int(), [(7, 7), (np.int32(-3), -3), (4.0, 4), (decimal.Decimal("12"), 12), ("1,200", 1200)],
     [True, 2.5, float("inf"), "many", [1], None]),
    (Float(), [(2.5, 2.5), (3, 3.0), (np.float32(0.5), 0.5), (decimal.Decimal("0.25"), 0.25)],
     [False, float("nan"), float("inf"), "nan", "inf", "-inf", 10**400, {"x": 1}]),
    (Date(), [(dt.date(2024, 5, 1), "2024-05-01"), (dt.datetime(2024, 5, 1), "2024-05-01"),
              ("2024-05-01", "2024-05-01")],
     [dt.datetime(2024, 5, 1, 13, 30), 20240501, "May 1st"]),
    (Regex(r"[A-Z]{2}"), [("CA", "CA")], ["California", 12, True]),
    (ListOf(Int(), max_len=2), [([1, 2], [1, 2]), ((3,), [3]), ("[4]", [4])],
     [[1, 2, 3], ["x"], 5, {"a": 1}, [True]]),
    (ListOf(Choice(("a", "b"))), [(["a", "b"], ["a", "b"])], [["c"], [1]]),
    (JsonSchema.of({"type": "object"}), [({"a": 1}, {"a": 1}), ([1], [1])],
     [{1, 2}, {"x": float("nan")}, object()]),
    (Grammar("root ::= \"x\""), [("x", "x")], [1, None]),
    (Text(), [(42, 42), (2.5, 2.5), ("hi", "hi")], [[1, 2], {"a": 1}, float("nan"), object()]),
]


@pytest.mark.parametrize(("constraint", "good", "bad"), CASES,
                         ids=[type(c[0]).__name__ + str(i) for i, c in enumerate(CASES)])
def test_functionmodel_typed_answers_are_checked_for_every_constraint(constraint, good, bad):
    for answer, expected in good:
        [resp] = FunctionModel(lambda r, a=answer: a).generate([Request("q", constraint=constraint)])
        assert resp.error is None, (answer, resp.error)
        assert resp.value == expected and type(resp.value) is type(expected), (answer, resp.value)
    for answer in bad:
        [resp] = FunctionModel(lambda r, a=answer: a).generate([Request("q", constraint=constraint)])
        assert resp.value is None and resp.error, (constraint, answer, resp)


def test_check_value_none_is_no_answer():
    value, err = check_value(None, Bool())
    assert value is None and "no answer" in (err or "")


def _world() -> pd.DataFrame:
    return pd.DataFrame({"country": ["France", "Japan"], "continent": ["Europe", "Asia"]})


def test_typed_answer_outside_the_options_is_null_with_a_trace_warning():
    bsql = BlendSQL({"w": _world()}, model=FunctionModel(lambda r: 42))
    sm = bsql.execute("SELECT country, {{LLMMap('Which continent?', w.country, "
                      "options=('Europe', 'Asia'))}} AS c FROM w ORDER BY country")
    assert sm.df["c"].isna().all()
    warnings = [s.summary for s in sm.trace if s.kind == "warning"]
    assert len(warnings) == 2 and all("42" in w for w in warnings)


def test_typed_answer_inside_the_options_is_kept():
    bsql = BlendSQL({"w": _world()}, model=FunctionModel(
        lambda r: "Asia" if "Japan" in r.prompt[-80:] else "Europe"))
    sm = bsql.execute("SELECT country, {{LLMMap('Which continent?', w.country, "
                      "options=('Europe', 'Asia'))}} AS c FROM w ORDER BY country")
    assert sm.df["c"].tolist() == ["Europe", "Asia"]
    assert not [s for s in sm.trace if s.kind == "warning"]


def test_none_answer_is_null_with_a_trace_warning():
    bsql = BlendSQL({"w": _world()}, model=FunctionModel(lambda r: None))
    sm = bsql.execute("SELECT country, {{LLMMap('Is it big?', w.country)}} = TRUE AS b FROM w")
    assert sm.df["b"].isna().all()
    warnings = [s.summary for s in sm.trace if s.kind == "warning"]
    assert len(warnings) == 2 and all("no answer" in w for w in warnings)


def test_qa_typed_answer_is_checked_too():
    bsql = BlendSQL({"w": _world()}, model=FunctionModel(lambda r: 3.5))
    sm = bsql.execute("SELECT {{LLMQA('How many?', return_type='int')}} AS n")
    assert sm.df["n"].isna().all()
    assert any("3.5" in s.summary for s in sm.trace if s.kind == "warning")


class _RawModel(Model):
    """A custom backend that puts a value straight into ``Response.value``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def generate(self, requests):
        return [Response(repr(self.value), self.value) for _ in requests]


@pytest.mark.parametrize(("value", "ok"), [(42, False), ("Mars", False), ("Asia", True), (None, False)])
def test_custom_backend_values_are_checked_by_the_ingredient(value, ok):
    warnings: list[str] = []
    out = LLMMap().run("Continent?", ["Japan"], model=_RawModel(value),
                       options=["Europe", "Asia"], warnings=warnings)
    assert out == (["Asia"] if ok else [None])
    assert bool(warnings) is (not ok)


def test_qa_custom_backend_bool_is_checked():
    warnings: list[str] = []
    out = LLMQA().run("Is it?", None, None, model=_RawModel(7), constraint=Bool(), warnings=warnings)
    assert out is None and warnings and "7" in warnings[0]
