"""The progress hook: progress(ingredient, done, total) as model requests finish."""

import pandas as pd

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel


def test_progress_reports_chunks_up_to_the_total():
    calls = []
    df = pd.DataFrame({"x": [str(i) for i in range(20)]})
    bsql = BlendSQL({"w": df}, model=FunctionModel(lambda r: "true"),
                    progress=lambda name, done, total: calls.append((name, done, total)))
    sm = bsql.execute("SELECT x FROM w WHERE {{LLMMap('odd?', w.x)}} = TRUE")
    assert len(sm.df) == 20
    assert calls == [("LLMMap", 8, 20), ("LLMMap", 16, 20), ("LLMMap", 20, 20)]


def test_without_progress_the_batch_is_not_split():
    sizes = []

    class Recording(FunctionModel):
        def generate(self, requests):
            sizes.append(len(requests))
            return super().generate(requests)

    df = pd.DataFrame({"x": [str(i) for i in range(20)]})
    BlendSQL({"w": df}, model=Recording(lambda r: "true")).execute(
        "SELECT x FROM w WHERE {{LLMMap('odd?', w.x)}} = TRUE")
    assert sizes == [20]
