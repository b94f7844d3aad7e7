"""Every differential pair: the plan's value estimate bounds what the engine passed.

``BlendSQL.plan`` runs the engine's order and candidate queries without
calling any ingredient; the values it estimates must contain the values the
real run passed (equal when the estimate is exact), on every pair the
engine runs. Exactness is also required for most pairs, so a planner that
gave up (``0..?``) everywhere would fail.
"""

from __future__ import annotations

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError

from .common import db_path, fresh_ingredients
from .pairs import PAIRS, Pair


@pytest.mark.parametrize("pair", [pytest.param(p, id=p.id) for p in PAIRS])
def test_plan_bounds_the_values_passed(pair: Pair) -> None:
    params = list(pair.params) if pair.params else None
    plan = BlendSQL(str(db_path(pair.db)), ingredients=list(fresh_ingredients().values())
                    ).plan(pair.query, params=params)
    try:
        s = BlendSQL(str(db_path(pair.db)), ingredients=list(fresh_ingredients().values())
                     ).execute(pair.query, params=params)
    except BlendSQLError:
        pytest.skip("the engine refuses this pair (tested elsewhere)")
    est = plan.total.values
    assert est.contains(s.meta.values_passed), f"{est} vs {s.meta.values_passed}\n{plan}"
    if est.is_exact:
        assert est.low == s.meta.values_passed


def test_most_estimates_are_exact() -> None:
    exact = 0
    for pair in PAIRS:
        b = BlendSQL(str(db_path(pair.db)), ingredients=list(fresh_ingredients().values()))
        try:
            plan = b.plan(pair.query, params=list(pair.params) if pair.params else None)
        except BlendSQLError:
            continue
        exact += plan.total.values.is_exact
    assert exact >= 0.7 * len(PAIRS), f"{exact} of {len(PAIRS)} exact"
