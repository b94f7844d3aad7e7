"""Predicate ordering: plain predicates first, then ingredient predicates by cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from blendsql.plan.order import estimate, tokens_per_value

from .helpers import CheapHas, CostlyHas, plain, rows, session

LONG = "candlelit " + "please read every review very carefully before answering " * 4


def test_estimate_is_values_times_tokens() -> None:
    e = estimate(10, 40, 120.0)
    assert e.cost == pytest.approx(10 * tokens_per_value(40, 120.0))
    free_10, free_5 = estimate(10, 40, 120.0, needs_model=False), estimate(5, 40, 120.0, needs_model=False)
    assert free_5.cost < free_10.cost < estimate(1, 0, 0.0).cost  # never outranks a model call
    assert tokens_per_value(400, 0) > tokens_per_value(4, 0)


def test_cheaper_predicate_runs_first_and_narrows_the_costly_one(rdb: Path) -> None:
    """Written costly-first; the cheap one (short names, short question) is computed first
    and the costly one sees only rows that passed it (a cascade)."""
    costly, cheap = CostlyHas(), CheapHas()
    q = (f"SELECT id FROM restaurants WHERE id <= 300 AND {{{{CostlyHas('{LONG}', reviews)}}}} "
         "AND {{CheapHas('Moon', name)}}")
    with session(rdb, costly, cheap) as s:
        out = s.execute(q)
    order = [t.ingredient for t in out.trace if t.kind == "ingredient"]
    assert order == ["CheapHas", "CostlyHas"]
    moon = plain(rdb, "SELECT reviews FROM restaurants WHERE id <= 300 AND "
                      "instr(lower(name), 'moon') > 0")
    assert sorted(costly.passed) == sorted({r[0] for r in moon})
    assert len(cheap.passed) == 300
    twin = plain(rdb, "SELECT id FROM restaurants WHERE id <= 300 AND "
                      "instr(lower(reviews), 'candlelit please') > 0 AND "
                      "instr(lower(name), 'moon') > 0")
    assert sorted(rows(out.df)) == sorted(twin)


def test_cost_ordering_spares_the_costly_ingredient(rdb: Path) -> None:
    """Text order would pass 300 long reviews to the costly ingredient; cost order far
    fewer. (The total count of values may grow -- 300 short names go to the cheap one --
    which is the point: the estimate weighs values by prompt tokens.)"""
    q = ("SELECT id FROM restaurants WHERE id <= 300 AND {{CostlyHas('candlelit', reviews)}} "
         "AND {{CheapHas('Moon', name)}}")
    costly, cheap = CostlyHas(), CheapHas()
    with session(rdb, costly, cheap) as s:
        ordered = s.execute(q)
    costly2, cheap2 = CostlyHas(), CheapHas()
    with session(rdb, costly2, cheap2, cost_order=False) as s:
        textual = s.execute(q)
    assert sorted(rows(ordered.df)) == sorted(rows(textual.df))
    assert len(costly2.passed) == 300
    assert len(costly.passed) < len(costly2.passed)
    def tokens(names: list, reviews: list) -> float:
        return sum(tokens_per_value(4, len(str(v))) for v in names) + sum(
            tokens_per_value(9, len(str(v))) for v in reviews)

    assert tokens(cheap.passed, costly.passed) < tokens(cheap2.passed, costly2.passed)


def test_cascade_across_tables(rdb: Path) -> None:
    """The cheap predicate on owners runs first; the costly one on restaurants then sees
    only reviews of joined rows whose owner passed."""
    costly, cheap = CostlyHas(), CheapHas()
    q = (f"SELECT r.id FROM restaurants r JOIN owners o ON o.rid = r.id "
         f"WHERE {{{{CostlyHas('{LONG}', r.reviews)}}}} AND {{{{CheapHas('owner3', o.owner)}}}}")
    with session(rdb, costly, cheap) as s:
        out = s.execute(q)
    assert [t.ingredient for t in out.trace if t.kind == "ingredient"] == ["CheapHas", "CostlyHas"]
    want = plain(rdb, "SELECT r.reviews FROM restaurants r JOIN owners o ON o.rid = r.id "
                      "WHERE o.owner = 'owner3'")
    assert sorted(costly.passed) == sorted({w[0] for w in want})
    assert rows(out.df) == []  # LONG never occurs in a review


def test_a_side_lookup_of_preaggregation_leaves_no_cost_in_the_next_decision() -> None:
    """Pre-aggregation asks which WHERE call comes first by the same costs, without
    recording them: each cost_order decision lists only the calls it compared."""
    from blendsql import BlendSQL
    from tests.engine.conftest import WORLD, Len, StartsWith

    q = ("SELECT {{Len('x', country.Continent)}} AS k, count(*) FROM country WHERE "
         "{{StartsWith('A', country.Name)}} AND {{StartsWith('E', country.Region)}} GROUP BY k")
    with BlendSQL(WORLD, ingredients=[StartsWith, Len], cache=False) as b:
        s = b.execute(q)
    decisions = [t.summary for t in s.trace if t.details.get("rule") == "cost_order"]
    # step 2 compares the three calls; pre-aggregation then computes the cheaper WHERE
    # call first (its own choice), and step 3 compares the two left
    assert len(decisions) == 2, decisions
    assert "2 other ready call(s)" in decisions[0] and "1 other ready call(s)" in decisions[1]
