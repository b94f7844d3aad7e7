"""Aggregates nested in another or put in WHERE: caught on the tree, worded with the
right shape, and fed back to the retry prompt (a scripted model)."""

import sqlite3

import pytest
import sqlglot

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.aggregate_checks import aggregate_misuse, group_ranking
from blendsql.nl.parser import Parser, Turn, validate


def tree(sql: str):
    return sqlglot.parse_one(sql, read="sqlite")


@pytest.mark.parametrize("sql, needle", [
    ("SELECT kind FROM t GROUP BY kind ORDER BY MAX(COUNT(*)) DESC", "cannot hold another: MAX(COUNT(*))"),
    ("SELECT MIN(SUM(cost)) FROM t GROUP BY kind", "cannot hold another: MIN(SUM(cost))"),
    ("SELECT kind FROM t GROUP BY kind HAVING COUNT(*) = MAX(COUNT(*))", "cannot hold another"),
    ("SELECT kind FROM t WHERE COUNT(*) > 1 GROUP BY kind", "cannot be in WHERE: COUNT(*)"),
    ("SELECT kind FROM t WHERE cost > 1 AND SUM(cost) > 10 GROUP BY kind", "cannot be in WHERE: SUM(cost)"),
    # a follow-up that kept the ranking and dropped the earlier query's GROUP BY
    ("SELECT kind, cost FROM t ORDER BY COUNT(*) DESC LIMIT 1", "ORDER BY COUNT(*) ranks groups, but the query has no GROUP BY"),
])
def test_misplaced_aggregates_are_named_with_the_right_shape(sql, needle):
    message = aggregate_misuse(tree(sql))
    assert message is not None and needle in message
    assert "ORDER BY the aggregate" in message
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (kind TEXT, cost REAL)")
    with pytest.raises(sqlite3.OperationalError, match="aggregate"):
        conn.execute(sql)  # SQLite refuses them too


@pytest.mark.parametrize("sql", [
    "SELECT kind, COUNT(*) FROM t GROUP BY kind ORDER BY COUNT(*) DESC LIMIT 1",
    "SELECT kind FROM t GROUP BY kind HAVING SUM(cost) > 10",
    "SELECT kind FROM t WHERE cost > (SELECT AVG(cost) FROM t)",  # the subquery's own scope
    "SELECT kind FROM t WHERE kind IN (SELECT kind FROM t GROUP BY kind HAVING COUNT(*) > 1)",
    "SELECT kind, SUM(COUNT(*)) OVER () FROM t GROUP BY kind",  # an aggregate under a window
    "SELECT MAX(c) FROM (SELECT COUNT(*) AS c FROM t GROUP BY kind)",
    "SELECT COUNT(*) FROM t ORDER BY COUNT(*)",  # an aggregate query of one group
    "SELECT kind, SUM(cost) FROM t ORDER BY SUM(cost)",
    "SELECT kind FROM t ORDER BY (SELECT COUNT(*) FROM t)",  # the subquery's own aggregate
    "SELECT kind FROM t ORDER BY SUM(cost) OVER ()",
])
def test_valid_aggregates_pass(sql):
    assert aggregate_misuse(tree(sql)) is None
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (kind TEXT, cost REAL)")
    conn.execute(sql)  # SQLite agrees they are valid


def treatments() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.executescript("""
        CREATE TABLE treatments (kind TEXT, cost REAL);
        INSERT INTO treatments VALUES ('wash', 5), ('wash', 7), ('cut', 3), ('vax', 20);
        """)
    return c


def test_validate_reports_the_shape_before_the_database_does():
    c = treatments()
    error = validate("SELECT kind FROM treatments GROUP BY kind ORDER BY MIN(SUM(cost)) LIMIT 1", c,
                     BlendSQL(c).registry)
    assert error is not None and "cannot hold another: MIN(SUM(cost))" in error


def test_the_retry_prompt_of_a_follow_up_says_how_to_rank_groups():
    c = treatments()
    wrong = "SELECT kind FROM treatments GROUP BY kind ORDER BY MIN(SUM(cost)) LIMIT 1"
    right = "SELECT kind FROM treatments GROUP BY kind ORDER BY SUM(cost) ASC LIMIT 1"
    answers = [wrong, right]
    seen: list[Request] = []

    def model(req: Request) -> str:
        seen.append(req)
        return answers.pop(0)

    parser = Parser(FunctionModel(model), examples=[], max_retries=1)
    earlier = [Turn("Total cost of each kind?", "SELECT kind, SUM(cost) FROM treatments GROUP BY kind")]
    result = parser.parse("Which one costs the least in total?", c, BlendSQL(c).registry, earlier)
    assert result.program == right
    retry = seen[1].prompt
    assert f"A previous attempt was: {wrong}" in retry and "ORDER BY the aggregate DESC (or ASC) LIMIT 1" in retry


def test_a_ranking_without_groups_is_grouped_by_its_selected_columns_without_a_model_call():
    c = treatments()
    ranked = "SELECT kind FROM treatments ORDER BY SUM(cost) ASC LIMIT 1"
    seen: list[Request] = []

    def model(req: Request) -> str:
        seen.append(req)
        return ranked

    parser = Parser(FunctionModel(model), examples=[], max_retries=1)
    earlier = [Turn("Total cost of each kind?", "SELECT kind, SUM(cost) FROM treatments GROUP BY kind")]
    result = parser.parse("Which one costs the least in total?", c, BlendSQL(c).registry, earlier)
    assert result.program == "SELECT kind FROM treatments GROUP BY kind ORDER BY SUM(cost) ASC LIMIT 1"
    assert len(seen) == 1 and result.repaired == [(ranked, result.program)]
    assert c.execute(result.program).fetchall() == [("cut",)]


@pytest.mark.parametrize("sql", [
    "SELECT kind FROM t GROUP BY kind ORDER BY COUNT(*)",  # grouped already
    "SELECT kind || 'x' FROM t ORDER BY COUNT(*)",  # not a column: left to the retry
    "SELECT kind FROM t ORDER BY cost",
    "SELECT FROM WHERE",
])
def test_group_ranking_leaves_other_programs(sql):
    assert group_ranking(sql) is None


@pytest.mark.parametrize("text", [
    'CREATE TABLE "country" ("Code" text, "CountryCode',  # an identifier never closed
    "SELECT 'unclosed FROM t ORDER BY COUNT(*)",
    "",
    "not sql at all ((",
])
def test_group_ranking_leaves_text_that_does_not_parse_alone(text: str) -> None:
    assert group_ranking(text) is None
