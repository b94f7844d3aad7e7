"""An answer that cannot be parsed becomes NULL, with a warning in the trace."""

import pandas as pd

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel


def test_unparseable_map_answer_is_null_with_trace_warning():
    df = pd.DataFrame({"name": ["Ann", "Bob"], "position": ["Pitcher", "Catcher"]})
    # the model answers free text that is not a boolean for Bob
    model = FunctionModel(lambda req: "true" if "Pitcher" in req.prompt[-60:] else "perhaps")
    bsql = BlendSQL({"w": df}, model=model)
    sm = bsql.execute(
        "SELECT name, {{LLMMap('Is this a pitcher?', w.position, return_type='bool')}} AS p "
        "FROM w ORDER BY name"
    )
    assert sm.df["p"].tolist()[0] in (1, True)
    assert pd.isna(sm.df["p"].tolist()[1])
    warnings = [s for s in sm.trace if s.kind == "warning"]
    assert len(warnings) == 1 and "LLMMap" in warnings[0].summary
    assert "perhaps" in warnings[0].summary


def test_functionmodel_is_not_cached_across_sessions_by_default():
    df = pd.DataFrame({"x": ["a"]})
    q = "SELECT {{LLMMap('Upper?', w.x)}} AS y FROM w"
    first = BlendSQL({"w": df}, model=FunctionModel(lambda r: "one")).execute(q)
    second = BlendSQL({"w": df}, model=FunctionModel(lambda r: "two")).execute(q)
    assert first.df["y"].tolist() == ["one"] and second.df["y"].tolist() == ["two"]
    assert second.meta.cache_hits == 0
