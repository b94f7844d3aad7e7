"""StartsWith: run() directly and inside a query."""

from __future__ import annotations

import pandas as pd

from ingredients.starts_with import StartsWith

CITIES = ["New York", "Newark", "Boston", "new haven"]


def test_run():
    assert StartsWith().run("New", CITIES) == [True, True, False, False]
    assert StartsWith().run(None, ["a"]) == [True]


def test_in_query_matches_plain_sql():
    from blendsql import BlendSQL

    db = {"c": pd.DataFrame({"city": CITIES + [None]})}
    bsql = BlendSQL(db, ingredients=[StartsWith])
    got = bsql.execute("SELECT city FROM c WHERE {{StartsWith('New', c.city)}} = TRUE "
                       "ORDER BY city").df
    want = bsql.execute("SELECT city FROM c WHERE city LIKE 'New%' AND substr(city, 1, 3) = 'New' "
                        "ORDER BY city").df
    assert got["city"].tolist() == want["city"].tolist() == ["New York", "Newark"]
