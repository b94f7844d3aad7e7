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


def test_ingredient_warning_names_the_call_once_and_stays_off_stderr(capfd) -> None:
    """The trace names the call once (not 'LLMQA: LLMQA: ...'), and an unparseable
    answer is not also printed on stderr by logging's last-resort handler."""
    from blendsql import BlendSQL
    from blendsql.models import FunctionModel

    b = BlendSQL({"t": __import__("pandas").DataFrame({"a": [1]})},
                 model=FunctionModel(lambda r: 42))
    s = b.execute("SELECT {{LLMQA('Where?', options=('Europe','Asia'))}} AS a")
    warns = [t.summary for t in s.trace if t.kind == "warning"]
    assert warns and all(w.startswith("LLMQA: ") and "LLMQA: LLMQA" not in w for w in warns)
    assert "42" not in capfd.readouterr().err
