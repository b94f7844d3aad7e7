"""The engine's hot path, by counts: tree copies per query, planning work per filter.

No timings here (the machine is shared); ``benchmarks/hot_path.py`` and
``benchmarks/many_filters.py`` record the seconds.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.hot_path import counting_copies  # noqa: E402 - the benchmark's own counters
from benchmarks.many_filters import counting_builds  # noqa: E402

WORLD = Path(__file__).resolve().parents[1] / "data" / "spider" / "world_1" / "world_1.sqlite"
ONE_MAP = ("SELECT Name FROM city WHERE CountryCode = 'NLD' "
           "AND {{StartsWith('A', city.Name)}} = TRUE")


class StartsWith(MapIngredient):
    """True where the value starts with the question."""

    def run(self, question: Any, values: list[Any], **kwargs: Any) -> list[Any]:
        return [str(v).startswith(str(question)) for v in values]


class Has(MapIngredient):
    """True unless the value contains the question's last character."""

    def run(self, question: Any, values: list[Any], **kwargs: Any) -> list[Any]:
        return [str(question)[-1] not in str(v) for v in values]


def test_one_map_query_copies_its_tree_once() -> None:
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        b.execute(ONE_MAP)  # warm: the parse and the prepared tree are cached
        with counting_copies() as counts:
            s = b.execute(ONE_MAP)
    assert len(s.df) == 6
    assert counts["trees"] == 1, counts
    assert counts["copies"] <= 6, counts  # the tree, FROM / WHERE parts of the candidate, values


def test_tree_copies_do_not_grow_with_calls() -> None:
    """Each computed call replaces its lookup in place: one tree copy for any number."""
    preds = " AND ".join(f"{{{{StartsWith('{c}', city.Name)}}}} = FALSE" for c in "ABCDE")
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        b.execute(f"SELECT COUNT(*) FROM city WHERE {preds}")
        with counting_copies() as counts:
            b.execute(f"SELECT COUNT(*) FROM city WHERE {preds}")
    assert counts["trees"] == 1, counts


@pytest.fixture(scope="module")
def filters_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("filters") / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, c0 TEXT, c1 TEXT, c2 TEXT, c3 TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)",
                    [(i, *(f"v{(i * (7 + k)) % 997}" for k in range(4))) for i in range(300)])
    con.commit()
    con.close()
    return path


def _filters(n: int) -> str:
    preds = " AND ".join(f"{{{{Has('q{i % 10}', t.c{i % 4})}}}}" for i in range(n))
    return f"SELECT id FROM t WHERE {preds}"


def _planning_counts(db: Path, n: int) -> tuple[int, int, int]:
    with BlendSQL(db, ingredients=[Has], cache=False) as b, counting_builds() as builds, \
            counting_copies() as copies:
        s = b.execute(_filters(n))
    costs = sum(1 for t in s.trace if t.summary.startswith("cost estimate for"))
    return builds[0], costs, copies["trees"]


def test_planning_work_per_filter_is_constant(filters_db: Path) -> None:
    """Candidate builds and cost estimates per AND-ed filter do not grow with n."""
    per_filter = {}
    for n in (4, 8, 16, 32):
        builds, costs, trees = _planning_counts(filters_db, n)
        per_filter[n] = (builds / n, costs / n)
        assert trees == 1, (n, trees)
    assert len(set(per_filter.values())) == 1, per_filter
    assert per_filter[4][0] <= 3 and per_filter[4][1] <= 1, per_filter
