"""One precedence for a call's output constraint, in the engine and in the LLM ingredients.

Before: the engine built ``constraint=`` with ``return_type=`` first, while
``LLMMap`` / ``LLMQA`` re-read their keywords with ``options=`` first, so a
call giving both reached a custom ingredient as ``Int()`` and ``LLMMap`` as
a choice. Both now follow ``blendsql.models.constraints.constraint_source``.
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
