"""Misuse and limits end in a clear error and leave the session (and the user's data)
as they were: use after close, unencodable or malformed query text, time limits hit
inside planning probes or a user's transaction, row calls in UPDATE / DELETE,
misspelt keywords of the call itself. Each test names the class of input it covers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ExecutionError

from .conftest import Len, StartsWith

INGREDIENTS = [StartsWith, Len]
MAP_QUERY = "SELECT Name FROM city WHERE {{StartsWith('K', city.Name)}} = TRUE"


@pytest.mark.parametrize("use", [
    lambda b: b.execute(MAP_QUERY),
    lambda b: b.execute("SELECT COUNT(*) FROM city"),
    lambda b: b.plan(MAP_QUERY),
    lambda b: b.db.tables(),
], ids=["map", "plain", "plan", "tables"])
def test_a_closed_session_is_a_clear_error(world: Path, use: object) -> None:
    """After close() every use is our ExecutionError with a hint, never sqlite3's raw
    ProgrammingError (which a map query would meet while registering a collector)."""
    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False)
    b.close()
    with pytest.raises(ExecutionError, match="closed") as info:
        use(b)  # type: ignore[operator]
    assert info.value.hint
    b.close()  # closing twice is harmless


def test_a_closed_dataframe_session_is_a_clear_error() -> None:
    import pandas as pd

    b = BlendSQL({"t": pd.DataFrame({"a": ["x1", "y2"]})}, ingredients=INGREDIENTS, cache=False)
    b.close()
    with pytest.raises(BlendSQLError, match="closed"):
        b.execute("SELECT a FROM t WHERE {{StartsWith('x', t.a)}} = TRUE")


@pytest.mark.parametrize("query", [
    "SELECT '\ud800'",
    "SELECT Name FROM city WHERE Name = '\udcff' AND {{StartsWith('K', city.Name)}} = TRUE",
    "SELECT Name, '\ud800' FROM city WHERE {{StartsWith('K', city.Name)}} = TRUE LIMIT 1",
], ids=["plain", "filter", "projection"])
def test_unencodable_query_text_is_not_blamed_on_params(world: Path, query: str) -> None:
    """A lone surrogate in the query text: the message names the text, not "check the
    values passed as params" to a user who passed none."""
    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False)
    with pytest.raises(ExecutionError) as info:
        b.execute(query)
    assert "query text" in info.value.message
    assert "params" not in (info.value.hint or "")


@pytest.mark.parametrize("query", [
    "{{Pick('x')}} AS a", "{{Pick('x')}} a", "{{Pick('x')}}[0]", "(SELECT {{Pick('x')}})",
    "1 AS a", "*",
])
def test_a_bare_aliased_call_is_a_parse_error(world: Path, query: str) -> None:
    """Only a lone call means SELECT <call>; an aliased or parenthesised one is not a
    statement, refused by the parser before SQLite could fail on engine names
    ("near :__bsql_qa..._0")."""
    from blendsql.errors import ParseError

    from .conftest import PickMax

    b = BlendSQL(str(world), ingredients=[*INGREDIENTS, PickMax("Pick")], cache=False)
    with pytest.raises(ParseError) as info:
        b.execute(query)
    assert "__bsql" not in str(info.value)


ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "


@pytest.mark.parametrize("query", [
    # a map whose values come from an endless subquery: cost probe, then collection
    "SELECT Name FROM city WHERE ID IN (" + ENDLESS + "SELECT x FROM c) "
    "AND {{StartsWith('K', city.Name)}} = TRUE",
    # two filters over an endless source: a cost probe per call, then the run
    ENDLESS + "SELECT x FROM c WHERE {{StartsWith('1', c.x)}} = TRUE "
    "AND {{StartsWith('11', c.x)}} = TRUE LIMIT 3",
], ids=["subquery", "two-filters"])
def test_one_statement_at_the_time_limit_ends_the_query(world: Path, query: str) -> None:
    """The ``timeout`` is hit once per query: a planning probe that recovers from its own
    failures does not swallow the timeout and start the next endless statement (which
    would make a query take two or three times its limit)."""
    from blendsql.errors import QueryTimeoutError

    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False, timeout=0.3)
    started: list[str] = []
    b.db.conn.set_trace_callback(lambda sql: started.append(sql) if "RECURSIVE" in
                                 sql.upper() else None)
    with pytest.raises(QueryTimeoutError):
        b.execute(query)
    assert len(started) == 1, started
    # the next query of the session is not affected
    rows = b.execute("SELECT Name FROM city WHERE {{StartsWith('Kab', city.Name)}} = TRUE").df
    assert sorted(rows["Name"]) == ["Kabankalan", "Kabul", "Kabwe"]


@pytest.mark.parametrize("query", [
    "SELECT Name, {{Len('n', city.Name)}}, {{Len('n', city.Name)}} FROM city WHERE ID < 3",
    "SELECT Name, {{Len('n', city.Name)}}, {{Len('n', city.Name)}} FROM city WHERE ID < 3 AND 0",
    "SELECT Name, {{StartsWith('K', city.Name)}}, {{StartsWith('K', city.Name)}} FROM city "
    "WHERE ID < 3",
], ids=["map", "map-empty", "bool-map"])
def test_the_same_call_twice_names_both_columns_alike(world: Path, query: str) -> None:
    """SQLite names `SELECT f(x), f(x)` columns alike; so is the second identical call's
    column (not after its replacement, `Name`), whether or not rows came back."""
    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False)
    df = b.execute(query).df
    call = query[query.index("{{"):query.index("}}") + 2]
    assert list(df.columns) == ["Name", call, call]


def test_a_timed_out_query_does_not_refuse_the_next_one_in_an_outer_session(
        world: Path) -> None:
    """ask() and Conversation hold the session around several queries: a query that hit
    its time limit must not make the next query (e.g. the fallback) fail at once."""
    from blendsql.errors import QueryTimeoutError

    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False, timeout=0.3)
    with b.db.session():
        with pytest.raises(QueryTimeoutError):
            b.execute(ENDLESS + "SELECT COUNT(*) FROM c")
        assert b.execute("SELECT COUNT(*) FROM city").df.iloc[0, 0] == 4079
        assert len(b.execute(MAP_QUERY + " LIMIT 2").df) == 2


@pytest.mark.parametrize("query", [
    "DELETE FROM city WHERE {{StartsWith('Kab', Name)}}",
    "UPDATE city SET Population = 0 WHERE {{StartsWith('Kab', city.Name)}} = TRUE",
    "UPDATE city SET Population = {{Len('n', Name)}} WHERE ID < 3",
])
@pytest.mark.parametrize("how", ["execute", "plan"])
def test_a_row_call_directly_in_update_or_delete_is_a_clear_error(
        world: Path, query: str, how: str) -> None:
    """A map call straight in UPDATE / DELETE is an IngredientError whose hint is the
    subquery form (not "no such column: Name in SELECT DISTINCT Name", text the user
    never wrote), and nothing is written."""
    import sqlite3

    from blendsql.errors import IngredientError

    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False, allow_writes=True)
    with pytest.raises(IngredientError) as info:
        getattr(b, how)(query)
    assert "SELECT" in (info.value.hint or "")
    b.close()
    con = sqlite3.connect(world)
    assert con.execute("SELECT COUNT(*), SUM(Population) FROM city").fetchone() == (
        4079, 1429559884)


def test_the_subquery_form_of_a_row_call_in_delete_works(world: Path) -> None:
    import sqlite3

    b = BlendSQL(str(world), ingredients=INGREDIENTS, cache=False, allow_writes=True)
    b.execute("DELETE FROM city WHERE ID IN "
              "(SELECT ID FROM city WHERE {{StartsWith('Kab', city.Name)}} = TRUE)")
    b.close()
    assert sqlite3.connect(world).execute(
        "SELECT COUNT(*) FROM city WHERE Name LIKE 'Kab%'").fetchone() == (0,)


@pytest.mark.parametrize(("call", "near"), [
    (lambda p: BlendSQL(p, allow_write=True), "allow_writes"),
    (lambda p: BlendSQL(p, ingredient=[]), "ingredients"),
    (lambda p: BlendSQL(p).execute("SELECT ?", param=[1]), "params"),
    (lambda p: BlendSQL(p).plan("SELECT ?", param=[1]), "params"),
], ids=["allow_write", "ingredient", "execute-param", "plan-param"])
def test_a_misspelt_keyword_of_the_call_is_suggested(world: Path, call: object,
                                                      near: str) -> None:
    """`BlendSQL(db, allow_write=True)` is an unknown option whose hint names the call's
    own keyword the user meant, not only the list of options."""
    from blendsql.errors import OptionError

    with pytest.raises(OptionError) as info:
        call(str(world))  # type: ignore[operator]
    assert f"did you mean {near!r}" in (info.value.hint or "")


GROUPED_SLOW = ("WITH RECURSIVE c(x, y) AS (SELECT 1, 1 UNION ALL SELECT x + 1, (x + 1) % 7 "
                "FROM c WHERE x < 30000000) "
                "SELECT {{StartsWith('1', c.y)}} AS k, COUNT(*) FROM c GROUP BY k")


def test_a_timeout_never_rolls_back_the_users_pending_writes(world: Path) -> None:
    """A GROUP BY a map call fills a partial table (CREATE TEMP TABLE AS SELECT over the
    user's rows); interrupted at the time limit inside the user's open transaction, it
    must not make SQLite roll back the whole transaction: the user's pending UPDATE
    stays."""
    import sqlite3

    from blendsql.errors import QueryTimeoutError

    con = sqlite3.connect(world)
    con.execute("UPDATE city SET Population = 0 WHERE ID = 1")
    b = BlendSQL(con, ingredients=INGREDIENTS, cache=False, timeout=1)
    with pytest.raises(QueryTimeoutError):
        b.execute(GROUPED_SLOW)
    assert con.in_transaction
    assert con.execute("SELECT Population FROM city WHERE ID = 1").fetchone() == (0,)
    con.commit()


def test_grouping_by_a_call_inside_the_users_transaction_gives_the_same_rows(
        world: Path) -> None:
    import sqlite3

    query = ("SELECT {{Len('n', city.CountryCode)}} AS k, COUNT(*) AS n, SUM(Population) "
             "FROM city GROUP BY k ORDER BY k")
    con = sqlite3.connect(world)
    outside = BlendSQL(con, ingredients=INGREDIENTS, cache=False).execute(query)
    con.execute("UPDATE city SET Population = 0 WHERE ID = 1")
    inside = BlendSQL(con, ingredients=INGREDIENTS, cache=False).execute(query)
    assert con.in_transaction and con.total_changes == 1
    assert outside.df["n"].tolist() == inside.df["n"].tolist()
    assert any("pre-aggregation" in s.summary for s in inside.trace)
    con.rollback()
