"""One precedence for a call's output constraint, in the engine and in the LLM ingredients.

The engine (building ``constraint=``) and ``LLMMap`` / ``LLMQA`` (re-reading their
keywords) follow one order, ``blendsql.models.constraints.constraint_source``: a call
giving both ``options=`` and ``return_type=`` reaches a custom ingredient and ``LLMMap``
under the same constraint.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from blendsql import BlendSQL
from blendsql.ingredients._llm import resolve_constraint
from blendsql.ingredients.base import MapIngredient
from blendsql.models.constraints import Choice, Int


class Record(MapIngredient):
    """Returns the first allowed value; remembers the constraint it was given."""

    seen: list[Any] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        Record.seen.append(kwargs.get("constraint"))
        return ["x" for _ in values]


def test_options_beat_return_type_for_any_ingredient() -> None:
    Record.seen = []
    db = {"t": pd.DataFrame({"a": ["p", "q"]})}
    with BlendSQL(db, ingredients=[Record], cache=False) as b:
        b.execute("SELECT {{Record('q', t.a, options=('x', 'y'), return_type='int')}} FROM t")
    assert Record.seen == [Choice(("x", "y"))]  # before: Int()


def test_the_llm_ingredients_use_the_same_order() -> None:
    got, _ = resolve_constraint(options=["x", "y"], return_type="int", inferred=None)
    assert got == Choice(("x", "y"))
    got, _ = resolve_constraint(options=None, return_type="int", inferred=Choice(("a",)))
    assert got == Int()


def test_constraint_source_order() -> None:
    from blendsql.models.constraints import constraint_source

    assert constraint_source(True, "int", Int()) == "options"
    assert constraint_source(False, "int", Int()) == "return_type"
    assert constraint_source(False, None, Int()) == "inferred"
    assert constraint_source(False, None, None) == "none"


def test_semicolon_options_mean_the_same_for_qa_and_map() -> None:
    """``options='yes;no'`` is two options (BlendSQL's convention) for every kind of call.

    'yes;no' is two options for a QA call as for a map call, never the single answer
    'yes;no'.
    """
    from blendsql.models.base import FunctionModel, Request

    seen: list[Any] = []

    def fn(req: Request) -> Any:
        seen.append(req.constraint)
        return "yes"

    db = {"t": pd.DataFrame({"a": ["p", "q"]})}
    with BlendSQL(db, model=FunctionModel(fn), cache=False) as b:
        qa = b.execute("SELECT <<LLMQA('Which?', options='yes;no')>>").df.iloc[0, 0]
        b.execute("SELECT {{LLMMap('Which?', t.a, options='yes;no')}} FROM t")
    assert seen and all(c == Choice(("yes", "no")) for c in seen), seen
    assert qa == "yes"
