"""DateRange: periods, validation (nothing but one predicate can come out), queries."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError
from ingredients.date_range import DateRange, period_bounds, quote_column


def test_periods():
    assert period_bounds("1998") == ("1998-01-01", "1998-12-31")
    assert period_bounds("2000-02") == ("2000-02-01", "2000-02-29")
    assert period_bounds("1999-02") == ("1999-02-01", "1999-02-28")
    assert period_bounds("1998-07-04") == ("1998-07-04", "1998-07-04")


def test_run_text():
    assert DateRange().run("g.date", "1998") == \
        "\"g\".\"date\" BETWEEN '1998-01-01' AND '1998-12-31'"
    assert DateRange().run("date", "1998-11", "1999") == \
        "\"date\" BETWEEN '1998-11-01' AND '1999-12-31'"


@pytest.mark.parametrize("bad", ["date; DROP TABLE g", "a.b.c", "1x", "x' OR '1"])
def test_bad_columns_refused(bad):
    with pytest.raises(IngredientError):
        quote_column(bad)


@pytest.mark.parametrize("args", [("d", "98"), ("d", "1998-13"), ("d", "1999", "1998"),
                                  ("d",), (["1998-01-01"], "1998")])
def test_bad_arguments_refused(args):
    with pytest.raises(IngredientError):
        DateRange().run(*args)


def test_in_query_equals_plain_between():
    from blendsql import BlendSQL

    g = pd.DataFrame({"id": [1, 2, 3, 4],
                      "date": ["1998-01-02", "1999-05-01", "1998-12-31", "2000-01-01"]})
    bsql = BlendSQL({"g": g}, ingredients=[DateRange])
    got = bsql.execute("SELECT id FROM g WHERE {{DateRange('g.date', '1998')}} ORDER BY id").df
    want = bsql.execute("SELECT id FROM g WHERE date BETWEEN '1998-01-01' AND '1998-12-31' "
                        "ORDER BY id").df
    assert got["id"].tolist() == want["id"].tolist() == [1, 3]
