"""FuzzyJoin: thresholds, normalisation, and the join in a query."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError, IngredientOptionError
from ingredients.fuzzy_join import FuzzyJoin

LEFT = ["apple inc", "Microsoft  Corporation", "Oracle"]
RIGHT = ["Apple Inc.", "Microsoft Corp", "Alphabet"]


def test_threshold_controls_matches():
    strict = FuzzyJoin().run(LEFT, RIGHT)
    loose = FuzzyJoin(threshold=50).run(LEFT, RIGHT)
    assert strict["apple inc"] == "Apple Inc."
    assert "Oracle" not in strict
    assert set(strict) <= set(loose)
    assert loose["Microsoft  Corporation"] == "Microsoft Corp"
    assert FuzzyJoin().run(LEFT, RIGHT, threshold=100) == {}


def test_bad_threshold():
    with pytest.raises(IngredientOptionError, match="threshold='high'"):
        FuzzyJoin().run(LEFT, RIGHT, threshold="high")
    with pytest.raises(IngredientError, match="not a score"):
        FuzzyJoin(threshold=120).run(LEFT, RIGHT)


def test_a_misspelt_option_is_refused_where_it_is_given():
    with pytest.raises(IngredientOptionError, match="'treshold'") as e:
        FuzzyJoin(treshold=90)
    assert "did you mean 'threshold'?" in (e.value.hint or "")
    with pytest.raises(IngredientOptionError, match="default_threshold='strict'"):
        type("Strict", (FuzzyJoin,), {"default_threshold": "strict"})


def test_in_query():
    from blendsql import BlendSQL

    db = {"a": pd.DataFrame({"co": LEFT}), "b": pd.DataFrame({"nm": RIGHT, "id": [1, 2, 3]})}
    out = BlendSQL(db, ingredients=[FuzzyJoin]).execute(
        "SELECT a.co, b.id FROM a JOIN b ON {{FuzzyJoin(a.co, b.nm, threshold=80)}} "
        "ORDER BY b.id").df
    expected = FuzzyJoin().run(LEFT, RIGHT, threshold=80)
    assert list(zip(out["co"], out["id"], strict=True)) == [
        (left, RIGHT.index(right) + 1) for left, right in
        sorted(expected.items(), key=lambda kv: RIGHT.index(kv[1]))]
    assert len(out) == 2
