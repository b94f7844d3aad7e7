"""Every pair again with the call-saving rules switched off, compared with them on.

Lazy evaluation under LIMIT and cost ordering of predicates must not change
the rows (ARCHITECTURE.md: optimisations only reduce work); lazy evaluation
must never pass more values than the full plan (its values are a subset of
the same candidate query's).
"""

from __future__ import annotations

import pytest

from blendsql import BlendSQL

from .common import assert_same_rows, db_path, df_rows
from .ingredients import fresh_ingredients
from .pairs import PAIRS, Pair

LIMIT_PAIRS = [pytest.param(p, id=p.id) for p in PAIRS if "LIMIT" in p.query.upper()]
ALL_PAIRS = [pytest.param(p, id=p.id) for p in PAIRS]


def _run(pair: Pair, **options: object) -> tuple[object, dict[str, object]]:
    ingredients = fresh_ingredients()
    with BlendSQL(str(db_path(pair.db)), ingredients=list(ingredients.values()),
                  cache=False, **options) as s:
        out = s.execute(pair.query, params=list(pair.params) if pair.params else None)
    return out, ingredients


@pytest.mark.parametrize("pair", LIMIT_PAIRS)
def test_lazy_same_rows_no_more_values(pair: Pair) -> None:
    on, ing_on = _run(pair, cost_order=False)
    off, ing_off = _run(pair, lazy=False, cost_order=False)
    ordered = pair.order == "exact"
    if pair.order == "sample":
        assert len(on.df) == len(off.df)
    else:
        assert_same_rows(df_rows(on.df), df_rows(off.df), ordered, pair.id)
    assert on.meta.values_passed <= off.meta.values_passed
    for name, rec in ing_on.items():
        got = {repr(v) for v in rec.passed()}
        full = {repr(v) for v in ing_off[name].passed()}
        assert got <= full, name


@pytest.mark.parametrize("pair", ALL_PAIRS)
def test_cost_order_same_rows(pair: Pair) -> None:
    on, _ = _run(pair, lazy=False)
    off, _ = _run(pair, lazy=False, cost_order=False)
    if pair.order == "sample":
        assert len(on.df) == len(off.df)
    else:
        assert_same_rows(df_rows(on.df), df_rows(off.df), pair.order == "exact", pair.id)


def test_lazy_pairs_stop_early() -> None:
    """The lazy pairs added for this rule actually pass fewer values than the full plan."""
    ids = {"lazy_limit_scan_order", "lazy_limit_offset_plain_first", "lazy_limit_plain_order_by",
           "lazy_limit_join_scope", "lazy_limit_after_cascade"}
    for pair in PAIRS:
        if pair.id in ids:
            on, _ = _run(pair)
            off, _ = _run(pair, lazy=False)
            assert on.meta.values_passed < off.meta.values_passed, pair.id


@pytest.mark.parametrize("rule", ["late_maps", "preaggregate"])
@pytest.mark.parametrize("pair", ALL_PAIRS)
def test_rule_same_rows_no_more_values(pair: Pair, rule: str) -> None:
    """Projection-only maps computed after SQL (``late_maps``) and pre-aggregation of
    GROUP BY map keys (``preaggregate``): same rows and columns, never more values."""
    on, ing_on = _run(pair, lazy=False)
    off, ing_off = _run(pair, lazy=False, **{rule: False})
    if pair.order == "sample":
        assert len(on.df) == len(off.df)
    else:
        assert_same_rows(df_rows(on.df), df_rows(off.df), pair.order == "exact", pair.id)
    assert list(on.df.columns) == list(off.df.columns), pair.id
    assert on.meta.values_passed <= off.meta.values_passed, pair.id
    for name, rec in ing_on.items():
        got = {repr(v) for v in rec.passed()}
        full = {repr(v) for v in ing_off[name].passed()}
        assert got <= full, name


def test_preaggregate_pairs_use_the_rule() -> None:
    """The pre-aggregation pairs do take the rule (and the off switch does turn it off)."""
    refused = {"preagg_refused_group_concat_count_distinct"}
    for pair in PAIRS:
        if not pair.id.startswith("preagg_"):
            continue
        on, _ = _run(pair)
        off, _ = _run(pair, preaggregate=False)
        used = [t for t in on.trace if t.details.get("rule") == "preaggregate"]
        assert bool(used) == (pair.id not in refused), pair.id
        assert not [t for t in off.trace if t.details.get("rule") == "preaggregate"], pair.id
