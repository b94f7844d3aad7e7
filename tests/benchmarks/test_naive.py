"""The naive evaluator of benchmarks/naive.py counts one value per product row.

Why these checks: the call-economy benchmark divides the engine's work by
these counts, so they must equal the rows of the FROM/JOIN product (NULLs and
duplicates included, WHERE and LIMIT ignored) - computed here independently
with plain SQL on the fixture database.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.naive import NaiveUnsupported, naive_evaluate, naive_totals  # noqa: E402
from blendsql.ingredients.base import IngredientRegistry, MapIngredient, QAIngredient  # noqa: E402

DB = ROOT / "tests" / "data" / "spider" / "concert_singer" / "concert_singer.sqlite"


class Seen(MapIngredient):
    """Records every value it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[Any] = []

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.values.extend(values)
        return [True for _ in values]


class Asked(QAIngredient):
    """Counts invocations and remembers the context sizes."""

    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[int] = []

    def run(self, question: str | None, context: pd.DataFrame | None,
            options: list[Any] | None, **kwargs: Any) -> Any:
        self.contexts.append(-1 if context is None else len(context))
        return 1


@pytest.fixture()
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(f"file:{DB}?mode=ro", uri=True)
    yield c
    c.close()


def _scalar(conn: sqlite3.Connection, sql: str) -> int:
    return int(conn.execute(sql).fetchone()[0])


def test_map_sees_every_row_ignoring_where_and_limit(conn: sqlite3.Connection) -> None:
    seen = Seen()
    reg = IngredientRegistry([seen])
    calls = naive_evaluate(conn, "SELECT Name FROM singer WHERE Age > 30 AND "
                           "{{Seen('q', singer.Country)}} = TRUE LIMIT 1", reg)
    total = _scalar(conn, "SELECT COUNT(*) FROM singer")
    assert [c.values_passed for c in calls] == [total]
    assert len(seen.values) == total
    # duplicates are passed again: fewer distinct countries than rows
    assert len(set(seen.values)) == _scalar(conn, "SELECT COUNT(DISTINCT Country) FROM singer")
    assert len(set(seen.values)) < len(seen.values)


def test_map_over_join_counts_the_product(conn: sqlite3.Connection) -> None:
    seen = Seen()
    reg = IngredientRegistry([seen])
    calls = naive_evaluate(conn, "SELECT s.Name FROM singer AS s JOIN singer_in_concert AS c "
                           "ON s.Singer_ID = c.Singer_ID WHERE {{Seen('q', s.Name)}} = TRUE", reg)
    joined = _scalar(conn, "SELECT COUNT(*) FROM singer AS s JOIN singer_in_concert AS c "
                     "ON s.Singer_ID = c.Singer_ID")
    assert naive_totals(calls) == {"values_passed": joined, "calls": joined}
    assert len(seen.values) == joined


def test_two_maps_and_subquery_scope(conn: sqlite3.Connection) -> None:
    seen = Seen()
    reg = IngredientRegistry([seen])
    query = ("SELECT Name FROM singer WHERE {{Seen('a', singer.Name)}} = TRUE AND Singer_ID IN "
             "(SELECT Singer_ID FROM singer_in_concert WHERE {{Seen('b', singer_in_concert.concert_ID)}} = TRUE)")
    calls = naive_evaluate(conn, query, reg)
    singers = _scalar(conn, "SELECT COUNT(*) FROM singer")
    sic = _scalar(conn, "SELECT COUNT(*) FROM singer_in_concert")
    assert sorted(c.values_passed for c in calls) == sorted([singers, sic])
    assert len(seen.values) == singers + sic


def test_qa_runs_once_per_row_with_its_context(conn: sqlite3.Connection) -> None:
    asked = Asked()
    reg = IngredientRegistry([asked])
    calls = naive_evaluate(conn, "SELECT Name FROM singer WHERE Age > "
                           "{{Asked('q', (SELECT Age FROM singer WHERE Age > 40))}}", reg)
    singers = _scalar(conn, "SELECT COUNT(*) FROM singer")
    assert naive_totals(calls)["calls"] == singers
    assert asked.contexts == [_scalar(conn, "SELECT COUNT(*) FROM singer WHERE Age > 40")] * singers
    # without FROM: exactly one invocation
    calls = naive_evaluate(conn, "SELECT {{Asked('q')}} AS a", reg)
    assert naive_totals(calls)["calls"] == 1


def test_ingredient_in_derived_table_feeding_outer_is_refused(conn: sqlite3.Connection) -> None:
    reg = IngredientRegistry([Seen()])
    with pytest.raises(NaiveUnsupported):
        naive_evaluate(conn, "SELECT n FROM (SELECT Name AS n FROM singer WHERE "
                       "{{Seen('q', singer.Name)}} = TRUE) AS t WHERE {{Seen('r', t.n)}} = TRUE", reg)


def test_cte_scope_keeps_the_cte_and_drops_its_filter(conn: sqlite3.Connection) -> None:
    seen = Seen()
    reg = IngredientRegistry([seen])
    calls = naive_evaluate(conn, "WITH old AS (SELECT Name, Country FROM singer WHERE Age > 30) "
                           "SELECT Name FROM old WHERE {{Seen('q', old.Country)}} = TRUE LIMIT 1", reg)
    # the CTE's own filter stays (it is the table the call reads); the outer WHERE/LIMIT go
    assert naive_totals(calls)["values_passed"] == _scalar(conn, "SELECT COUNT(*) FROM singer WHERE Age > 30")


def test_benchmark_cases_are_consistent_without_the_engine() -> None:
    """Every Spider case's twin, minimal-set SQL and naive walk run on the fixtures.

    Why: a broken twin or minimal query would make the benchmark report a miss
    that is not the engine's; this catches it without running any engine.
    """
    from benchmarks.call_economy import CASES, SPIDER, fresh_ingredients, minimal_counts

    spider = [c for c in CASES if not c.db.startswith("hybridqa:")]
    assert len(spider) >= 20
    for case in spider:
        path = SPIDER / case.db / f"{case.db}.sqlite"
        c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            assert c.execute(case.twin).fetchall() is not None
            minimal = minimal_counts(case, c)
            naive = naive_totals(naive_evaluate(c, case.sql, IngredientRegistry(fresh_ingredients())))
        finally:
            c.close()
        assert all(0 < m <= naive["values_passed"] for m in minimal), case.id
