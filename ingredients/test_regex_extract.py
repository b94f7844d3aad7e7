"""RegexExtract: groups, whole matches, NULL on no match, bad patterns."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError
from ingredients.regex_extract import RegexExtract

NOTES = ["born 1970 in Ohio", "no year", "from 1985 to 1990"]


def test_group_and_whole_match():
    assert RegexExtract().run("([0-9]{4})", NOTES) == ["1970", None, "1985"]
    assert RegexExtract().run("[A-Z][a-z]+", NOTES) == ["Ohio", None, None]


def test_bad_or_missing_pattern():
    with pytest.raises(IngredientError) as info:
        RegexExtract().run("([0-9]", NOTES)
    assert info.value.hint
    with pytest.raises(IngredientError):
        RegexExtract().run(None, NOTES)


def test_in_query():
    from blendsql import BlendSQL

    db = {"p": pd.DataFrame({"name": ["a", "b", "c", "d"], "notes": NOTES + [None]})}
    out = BlendSQL(db, ingredients=[RegexExtract]).execute(
        "SELECT name, {{RegexExtract('([0-9]{4})', p.notes)}} AS year FROM p ORDER BY name").df
    years = out["year"].tolist()
    assert years[0] == "1970" and years[2] == "1985"
    assert pd.isna(years[1])  # no match -> NULL
    assert pd.isna(years[3])  # NULL in, NULL out
