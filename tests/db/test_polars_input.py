"""polars DataFrames as input (through an in-memory DuckDB), with or without pyarrow."""

from __future__ import annotations

import sys

import pytest

from blendsql import BlendSQL
from blendsql.ingredients import MapIngredient

pl = pytest.importorskip("polars", reason="pip install polars (in the 'test' extra)")


class Up(MapIngredient):
    def run(self, question, values, **kwargs):
        return [str(v).upper() for v in values]


def frame():
    return pl.DataFrame({"name": ["ann", "bob", "cy"], "team": ["red", "blue", "red"],
                         "n": [1, 2, 3]})


@pytest.mark.parametrize("arrow", [True, False], ids=["pyarrow-if-installed", "no-pyarrow"])
def test_a_polars_frame_and_a_dict_of_them_answer_like_sql(monkeypatch, arrow):
    if not arrow:  # the user has polars but not pyarrow: import pyarrow fails
        monkeypatch.setitem(sys.modules, "pyarrow", None)
    one = BlendSQL(frame(), ingredients=[Up]).execute(
        "SELECT name, n, {{Up('x', df.name)}} AS u FROM df WHERE team = 'red' ORDER BY n").df
    assert one.to_dict("list") == {"name": ["ann", "cy"], "n": [1, 3], "u": ["ANN", "CY"]}
    many = BlendSQL({"people": frame(), "teams": pl.DataFrame({"team": ["red"], "size": [9]})},
                    ingredients=[Up])
    sm = many.execute("SELECT p.name, t.size FROM people p JOIN teams t ON p.team = t.team "
                      "WHERE {{Up('x', p.name)}} = 'CY'")
    assert sm.df.to_dict("list") == {"name": ["cy"], "size": [9]}
    assert type(many.db).__name__ == "DuckDBDatabase"
    assert sm.meta.values_passed == 2  # only the names the join lets through
