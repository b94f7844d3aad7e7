"""IsPitcher: alias expansion text, and the expanded LLMMap running in a query."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError
from blendsql.models import FunctionModel, Request
from ingredients.is_pitcher import QUESTION, IsPitcher


def test_expansion_text():
    text = IsPitcher().run("w.position")
    assert text == f"{{{{LLMMap('{QUESTION}', w.position, return_type='bool')}}}} = TRUE"
    with pytest.raises(IngredientError):
        IsPitcher().run("a", "b")


def test_in_query_calls_llmmap_once_per_distinct_position():
    from blendsql import BlendSQL

    asked: list[str] = []

    def model(req: Request) -> str:
        value = req.prompt.rsplit("Value: ", 1)[1].split("\n", 1)[0]
        asked.append(value)
        assert QUESTION in req.prompt
        return "true" if value in {"sp", "rp"} else "false"

    w = pd.DataFrame({"name": ["a", "b", "c", "d"], "position": ["sp", "1b", "rp", "sp"]})
    out = BlendSQL({"w": w}, model=FunctionModel(model), ingredients=[IsPitcher],
                   cache=False).execute(
        "SELECT name FROM w WHERE {{IsPitcher(w.position)}} ORDER BY name").df
    assert out["name"].tolist() == ["a", "c", "d"]
    assert sorted(asked) == ["1b", "rp", "sp"]
