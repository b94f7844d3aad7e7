"""The lookup a filter decided in Python becomes: bound values, or a table when there are many.

static_filter stores only the values whose output passes the filter. A few of them
travel as parameters of the final query (``x IN (:v0, :v1, ..)``, ``FALSE`` for none),
more as a temp table (``x IN (SELECT v FROM temp..)``); both give the rows of the
plain-SQL twin under NOT, OR and NULL values, and a run never binds more parameters
than the connection accepts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from blendsql import BlendSQL
from blendsql.plan.static_filter import BOUND_AT_MOST
from tests.engine.conftest import WORLD, StartsWith

TWINS = [
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('A', city.Name)}}",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND substr(Name, 1, 1) = 'A'"),
    # none passes: FALSE, also under NOT and OR
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('Q', city.Name)}}",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND substr(Name, 1, 1) = 'Q'"),
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND NOT ({{StartsWith('A', city.Name)}} "
     "AND {{StartsWith('Q', city.District)}})",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND NOT (substr(Name, 1, 1) = 'A' "
     "AND substr(District, 1, 1) = 'Q')"),
    ("SELECT Name FROM city WHERE CountryCode = 'NLD' AND ({{StartsWith('A', city.Name)}} "
     "OR {{StartsWith('Z', city.District)}})",
     "SELECT Name FROM city WHERE CountryCode = 'NLD' AND (substr(Name, 1, 1) = 'A' "
     "OR substr(District, 1, 1) = 'Z')"),
    # NULL values: IndepYear is NULL for many countries
    ("SELECT Name FROM country WHERE {{StartsWith('19', country.IndepYear)}}",
     "SELECT Name FROM country WHERE substr(CAST(IndepYear AS TEXT), 1, 2) = '19'"),
    # more passing values than are bound: a temp table
    ("SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}}",
     "SELECT Name FROM city WHERE substr(Name, 1, 1) = 'A'"),
]


def _kinds(smoothie) -> list[str]:  # type: ignore[no-untyped-def]
    return [t.kind for t in smoothie.trace]


@pytest.mark.parametrize(("query", "twin"), TWINS)
def test_rows_are_the_twins(query: str, twin: str) -> None:
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        got = sorted(b.execute(query).df["Name"].tolist())
    con = sqlite3.connect(WORLD)
    want = sorted(r[0] for r in con.execute(twin))
    con.close()
    assert got == want


def test_a_few_values_are_bound_and_many_go_to_a_table() -> None:
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        few = b.execute(TWINS[0][0])
        many = b.execute(TWINS[-1][0])
    assert "temp_table" not in _kinds(few) and ":__bsql_v" in (few.trace[-1].sql or "")
    passing = len(set(many.df["Name"]))
    assert passing > BOUND_AT_MOST and "temp_table" in _kinds(many)


def test_a_run_binds_no_more_than_the_connection_accepts(tmp_path: Path) -> None:
    """A handed-in connection with a low parameter limit: the later filters' values go to
    temp tables instead of failing with 'too many SQL variables'."""
    con = sqlite3.connect(WORLD, check_same_thread=False)
    con.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 40)
    q = ("SELECT count(*) FROM country WHERE {{StartsWith('S', country.Name)}} "
         "OR {{StartsWith('M', country.Name)}}")
    b = BlendSQL(con, ingredients=[StartsWith], cache=False)
    s = b.execute(q)
    want = con.execute("SELECT count(*) FROM country WHERE substr(Name, 1, 1) IN ('S', 'M')")
    assert s.df.iloc[0, 0] == want.fetchone()[0]
    final = s.trace[-1].sql or ""
    assert final.count(":__bsql_v") <= 20
    con.close()


def test_a_run_binds_at_most_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each filter's passing values are bound while the run's budget lasts; the next
    filters' go to temp tables, and the rows stay the twin's."""
    import blendsql.plan.static_filter as static_filter

    monkeypatch.setattr(static_filter, "BOUND_PER_RUN", 50)
    letters = "ABCDEFGHLMNPRS"
    ors = " OR ".join(f"{{{{StartsWith('{c}', city.Name)}}}}" for c in letters)
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        s = b.execute(f"SELECT Name FROM city WHERE CountryCode = 'USA' AND ({ors})")
    final = s.trace[-1].sql or ""
    assert 0 < final.count(":__bsql_v") <= 50 and "temp_table" in _kinds(s)
    con = sqlite3.connect(WORLD)
    want = sorted(r[0] for r in con.execute(
        "SELECT Name FROM city WHERE CountryCode = 'USA' AND substr(Name, 1, 1) IN "
        f"({', '.join(repr(c) for c in letters)})"))
    con.close()
    assert sorted(s.df["Name"]) == want
