"""Lazy evaluation under LIMIT: same rows as the full plan, fewer values passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from blendsql.grammar import IngredientCall
from blendsql.plan.lazy import lazy_plan, limit_of
from blendsql.plan.lookup import filter_atom

from .helpers import MARK, Has, plain, rows, session

TWIN_HAS = "instr(lower({col}), lower('{q}')) > 0"


def both(db: Path, query: str, **opts: object) -> tuple[object, object, Has, Has]:
    """Run ``query`` with lazy evaluation and without; return both smoothies + recorders."""
    lazy_ing, full_ing = Has(), Has()
    with session(db, lazy_ing, **opts) as s:
        lazy = s.execute(query)
    with session(db, full_ing, lazy=False, **opts) as s:
        full = s.execute(query)
    return lazy, full, lazy_ing, full_ing


def lazy_steps(smoothie: object) -> list[object]:
    return [t for t in smoothie.trace if t.kind == "plan" and t.details.get("rule") == "lazy"]


@pytest.mark.parametrize("query,twin", [
    ("SELECT id, name FROM restaurants WHERE {{Has('candlelit', reviews)}} LIMIT 3",
     f"SELECT id, name FROM restaurants WHERE {TWIN_HAS.format(col='reviews', q=MARK)} LIMIT 3"),
    ("SELECT id FROM restaurants WHERE rating > 2 AND {{Has('candlelit', reviews)}} = TRUE "
     "LIMIT 4 OFFSET 2",
     f"SELECT id FROM restaurants WHERE rating > 2 AND {TWIN_HAS.format(col='reviews', q=MARK)} "
     "LIMIT 4 OFFSET 2"),
    ("SELECT id, rating FROM restaurants WHERE {{Has('candlelit', reviews)}} "
     "ORDER BY rating DESC, id LIMIT 5",
     f"SELECT id, rating FROM restaurants WHERE {TWIN_HAS.format(col='reviews', q=MARK)} "
     "ORDER BY rating DESC, id LIMIT 5"),
    ("SELECT r.id, o.owner FROM restaurants r JOIN owners o ON o.rid = r.id "
     "WHERE {{Has('candlelit', r.reviews)}} ORDER BY r.id LIMIT 2",
     "SELECT r.id, o.owner FROM restaurants r JOIN owners o ON o.rid = r.id "
     f"WHERE {TWIN_HAS.format(col='r.reviews', q=MARK)} ORDER BY r.id LIMIT 2"),
    ("SELECT name AS n FROM restaurants WHERE {{Has('Moon', name)}} ORDER BY n LIMIT 3",
     f"SELECT name AS n FROM restaurants WHERE {TWIN_HAS.format(col='name', q='Moon')} "
     "ORDER BY n LIMIT 3"),
])
def test_lazy_same_rows_fewer_values(rdb: Path, query: str, twin: str) -> None:
    lazy, full, li, fi = both(rdb, query)
    want = plain(rdb, twin)
    assert rows(lazy.df) == want == rows(full.df)
    assert lazy.meta.values_passed < full.meta.values_passed
    assert set(li.passed) <= set(fi.passed)
    assert len(li.passed) == len(set(li.passed)), "a value was passed twice"
    step = lazy_steps(lazy)
    assert len(step) == 1 and step[0].details["computed"] == len(li.passed)
    assert not lazy_steps(full)


def test_limit_beyond_matches_computes_everything(rdb: Path) -> None:
    q = "SELECT id FROM restaurants WHERE {{Has('candlelit', reviews)}} LIMIT 500"
    lazy, full, li, fi = both(rdb, q)
    assert rows(lazy.df) == rows(full.df) == plain(
        rdb, f"SELECT id FROM restaurants WHERE {TWIN_HAS.format(col='reviews', q=MARK)} LIMIT 500")
    assert sorted(li.passed) == sorted(fi.passed)


def test_limit_zero_passes_nothing(rdb: Path) -> None:
    lazy, full, li, _ = both(rdb, "SELECT id FROM restaurants WHERE {{Has('x', name)}} LIMIT 0")
    assert rows(lazy.df) == rows(full.df) == []
    assert li.passed == []


def test_null_passing_atom(rdb: Path) -> None:
    """``{{Has(..)}} IS NULL`` is TRUE for NULL inputs (never passed): they qualify."""
    q = "SELECT id FROM restaurants WHERE {{Has('1', note)}} IS NULL LIMIT 3"
    lazy, full, li, fi = both(rdb, q)
    assert rows(lazy.df) == rows(full.df) == plain(
        rdb, "SELECT id FROM restaurants WHERE note IS NULL LIMIT 3")
    assert len(li.passed) < len(fi.passed)


def test_two_filters_cascade_then_lazy(rdb: Path) -> None:
    """The first filter is computed in full, the last one lazily, same rows."""
    q = ("SELECT id FROM restaurants WHERE {{Has('Moon', name)}} AND "
         "{{Has('candlelit', reviews)}} LIMIT 2")
    lazy, full, li, fi = both(rdb, q)
    twin = (f"SELECT id FROM restaurants WHERE {TWIN_HAS.format(col='name', q='Moon')} AND "
            f"{TWIN_HAS.format(col='reviews', q=MARK)} LIMIT 2")
    assert rows(lazy.df) == rows(full.df) == plain(rdb, twin)
    assert lazy.meta.values_passed < full.meta.values_passed
    assert len(lazy_steps(lazy)) == 1


@pytest.mark.parametrize("query", [
    # the ingredient decides the order / grouping / distinctness: no early stop
    "SELECT id FROM restaurants ORDER BY {{Has('candlelit', reviews)}} DESC, id LIMIT 3",
    "SELECT DISTINCT cuisine FROM restaurants WHERE {{Has('candlelit', reviews)}} LIMIT 2",
    "SELECT cuisine, COUNT(*) FROM restaurants WHERE {{Has('candlelit', reviews)}} "
    "GROUP BY cuisine LIMIT 2",
    "SELECT COUNT(*) FROM restaurants WHERE {{Has('candlelit', reviews)}} LIMIT 1",
    # under OR the atom is not a conjunct
    "SELECT id FROM restaurants WHERE {{Has('candlelit', reviews)}} OR id = 5 LIMIT 3",
    # under NOT with a NULL output passing: an uncomputed value would pass
    "SELECT id FROM restaurants WHERE {{Has('candlelit', reviews)}} IS NOT TRUE LIMIT 3",
    # no LIMIT at all
    "SELECT id FROM restaurants WHERE {{Has('candlelit', reviews)}}",
])
def test_not_applied_where_meaning_would_change(rdb: Path, query: str) -> None:
    lazy, full, li, fi = both(rdb, query)
    assert sorted(rows(lazy.df)) == sorted(rows(full.df))
    assert sorted(li.passed) == sorted(fi.passed)
    assert not lazy_steps(lazy)


def test_negative_filter_lazy(rdb: Path) -> None:
    """``NOT {{M(x)}}``: a NULL (uncomputed) output fails it, so it stops early too."""
    lazy, full, li, fi = both(rdb, "SELECT id FROM restaurants WHERE NOT "
                                   "{{Has('candlelit', reviews)}} LIMIT 3")
    assert rows(lazy.df) == rows(full.df)
    assert len(li.passed) < len(fi.passed)
    assert lazy_steps(lazy)


def test_bare_answer_lazy(rdb: Path) -> None:
    """SUQL's bare ANSWER over a JSON array of reviews, stopping early under LIMIT."""
    q = "SELECT id, name FROM restaurants WHERE ANSWER(reviews, 'is it romantic?') = 'yes' LIMIT 3"
    with session(rdb) as s:
        lazy = s.execute(q)
    with session(rdb, lazy=False) as s:
        full = s.execute(q)
    want = plain(rdb, f"SELECT id, name FROM restaurants WHERE "
                      f"{TWIN_HAS.format(col='reviews', q=MARK)} LIMIT 3")
    assert rows(lazy.df) == rows(full.df) == want
    assert lazy.meta.model_calls < full.meta.model_calls
    assert lazy.meta.values_passed < full.meta.values_passed


def test_summary_and_answer_anywhere(rdb: Path) -> None:
    """Bare calls in SELECT, inside functions and ORDER BY run like braced ones."""
    q = ("SELECT id, UPPER(ANSWER(reviews, 'is it romantic?')) AS a, LENGTH(SUMMARY(reviews)) > 0 "
         "FROM restaurants WHERE id <= 40 ORDER BY UPPER(ANSWER(reviews, 'is it romantic?')) DESC, "
         "id LIMIT 2")
    with session(rdb) as s:
        out = s.execute(q)
    assert rows(out.df) == [(37, "YES", 1), (1, "NO", 1)]


# ------------------------------------------------------------------ plan unit tests


def _call(tree: object) -> IngredientCall:
    return next(tree.find_all(IngredientCall))  # type: ignore[attr-defined]


@pytest.mark.parametrize("query,expect", [
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} LIMIT 5", (5, 5)),
    ("SELECT a FROM t WHERE b = 1 AND ({{Has('q', t.x)}} = TRUE) LIMIT 5 OFFSET 3", (5, 8)),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} LIMIT :n", None),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} OR b LIMIT 5", None),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}}", None),
    ("SELECT MAX(a) FROM t WHERE {{Has('q', t.x)}} LIMIT 5", None),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} AND {{Has('r', t.y)}} LIMIT 5", None),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} ORDER BY {{Has('r', t.y)}} LIMIT 5", None),
    ("SELECT a FROM t WHERE {{Has('q', t.x)}} ORDER BY a LIMIT 5", (5, 5)),
])
def test_lazy_plan_rule(query: str, expect: tuple[int, int] | None) -> None:
    from blendsql.grammar import parse
    from blendsql.ingredients.base import IngredientRegistry

    tree = parse(query, IngredientRegistry([Has]))
    call = _call(tree)
    plan = lazy_plan(call, call.call_args[1], filter_atom(call))
    if expect is None:
        assert plan is None
    else:
        assert plan is not None and (plan.limit, plan.needed) == expect
        assert plan.rows.find(IngredientCall) is None
        assert plan.rows.args.get("limit") is None and not plan.rows.args.get("distinct")


def test_limit_of_requires_integers() -> None:
    from sqlglot import parse_one

    assert limit_of(parse_one("SELECT 1 LIMIT 3 OFFSET 2")) == (3, 2)
    assert limit_of(parse_one("SELECT 1 LIMIT 3")) == (3, 0)
    assert limit_of(parse_one("SELECT 1")) is None
    assert limit_of(parse_one("SELECT 1 LIMIT 1 + 1")) is None


def test_next_batch_size() -> None:
    from blendsql.plan.lazy import next_batch_size

    assert next_batch_size(4, 4, 0, 3) == 8  # nothing qualified yet: double
    assert next_batch_size(8, 20, 2, 3) == 11  # 10 values per row, 1 row to go (+10 %)
    assert next_batch_size(8, 5, 5, 6) >= 1


def test_answer_over_plain_string_column(rdb: Path) -> None:
    """A column holding one string (not a JSON array) works the same way."""
    q = ("SELECT id FROM restaurants WHERE id IN (36, 37, 38) AND "
         "ANSWER(json_extract(reviews, '$[3]'), 'is it romantic?') = 'yes'")
    with session(rdb) as s:
        out = s.execute(q)
    assert rows(out.df) == [(37,)]
    assert out.meta.values_passed == 1  # rows 36/38 have no 4th review: NULL, never passed
