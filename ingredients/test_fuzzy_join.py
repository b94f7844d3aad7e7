"""FuzzyJoin: thresholds, normalisation, and the join in a query."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql.errors import IngredientError
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
    with pytest.raises(IngredientError):
        FuzzyJoin().run(LEFT, RIGHT, threshold="high")


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
