"""A subquery column that exists only in the outer query is a validation error, not a silent match."""

from __future__ import annotations

import sqlite3

import pytest
from sqlglot import parse_one

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.column_checks import outer_column_in_subquery
from blendsql.nl.parser import Parser, validate


@pytest.fixture()
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.executescript("""
        CREATE TABLE w (name TEXT, school TEXT, pick INTEGER);
        CREATE TABLE programs (program TEXT, college TEXT, id INTEGER);
        INSERT INTO w VALUES ('a', 'Duke', 1), ('b', 'Rice', 2), ('c', NULL, 3);
        INSERT INTO programs VALUES ('law', 'Duke', 1);
    """)
    return c


ACCIDENTAL = [
    "SELECT name FROM w WHERE w.school IN (SELECT school FROM programs WHERE program = 'law')",
    "SELECT name FROM w WHERE school = (SELECT max(college) FROM programs WHERE program = name)",
    "SELECT name FROM w WHERE EXISTS (SELECT 1 FROM programs WHERE college = 'Duke' AND pick > id)",
    "SELECT name FROM w WHERE pick > (SELECT count(*) FROM programs WHERE college = school)",
]
MEANT = [
    "SELECT name FROM w WHERE w.school IN (SELECT college FROM programs WHERE program = 'law')",
    "SELECT name FROM w WHERE EXISTS (SELECT 1 FROM programs AS p WHERE p.college = w.school)",
    "SELECT name FROM w WHERE school IN (SELECT college AS c FROM programs ORDER BY c)",
    "SELECT name FROM w WHERE school IN (SELECT school FROM w WHERE pick > 1)",
    "SELECT name FROM (SELECT name, school FROM w) AS t WHERE school = 'Duke'",
    "WITH t AS (SELECT school FROM w) SELECT name FROM w WHERE school IN (SELECT school FROM t)",
    "SELECT name FROM w UNION SELECT program FROM programs",
    "SELECT name FROM w WHERE school IN (SELECT college FROM programs GROUP BY college HAVING count(*) > 0)",
]


@pytest.mark.parametrize("sql", ACCIDENTAL)
def test_an_outer_column_read_inside_a_subquery_is_found(conn, sql):
    # SQLite runs it without complaint: that is the trap
    conn.execute(sql).fetchall()
    found = outer_column_in_subquery(parse_one(sql, read="sqlite"), conn)
    assert found is not None and "is not a column of programs" in found
    assert "college" in found and "program" in found  # the inner table's real columns


@pytest.mark.parametrize("sql", MEANT)
def test_columns_of_the_subquery_or_a_deliberate_correlation_pass(conn, sql):
    assert outer_column_in_subquery(parse_one(sql, read="sqlite"), conn) is None


def test_validate_reports_it_and_the_parser_retries_with_it(conn):
    reg = BlendSQL(conn).registry
    assert "is not a column of programs" in (validate(ACCIDENTAL[0], conn, reg) or "")
    assert validate(MEANT[0], conn, reg) is None
    prompts: list[str] = []

    def gen(req: Request) -> str:
        prompts.append(req.prompt)
        return ACCIDENTAL[0] if len(prompts) == 1 else MEANT[0]

    result = Parser(FunctionModel(gen), examples=[], max_retries=1).parse(
        "Which players went to a school with a law program?", conn, reg)
    assert result.program == MEANT[0]
    assert "is not a column of programs" in prompts[1]


@pytest.mark.sqlite_only("FTS5's hidden columns and an ATTACHed SQLite file")
def test_hidden_generated_and_attached_columns_count_as_the_subquerys_own(conn, tmp_path):
    conn.executescript("""
        CREATE VIRTUAL TABLE documents USING fts5(title, content);
        INSERT INTO documents VALUES ('Duke', 'a school');
        CREATE TABLE g (a INTEGER, b INTEGER, total INTEGER GENERATED ALWAYS AS (a + b));
        ALTER TABLE w ADD COLUMN rank INTEGER;
        ALTER TABLE w ADD COLUMN total INTEGER;
    """)
    other = tmp_path / "aux.db"
    aux = sqlite3.connect(other)
    aux.execute("CREATE TABLE programs (school TEXT)")
    aux.commit()
    aux.close()
    conn.execute(f"ATTACH DATABASE '{other}' AS aux")
    fine = [
        "SELECT name FROM w WHERE school IN (SELECT title FROM documents WHERE documents MATCH 'Duke' "
        "ORDER BY rank LIMIT 1)",
        "SELECT name FROM w WHERE pick IN (SELECT total FROM g)",
        "SELECT name FROM w WHERE school IN (SELECT school FROM aux.programs)",
    ]
    for sql in fine:
        conn.execute(sql).fetchall()
        assert outer_column_in_subquery(parse_one(sql, read="sqlite"), conn) is None, sql
    # the attached table is read as itself, not as main's table of the same name
    wrong = "SELECT name FROM w WHERE school IN (SELECT school FROM main.programs)"
    assert "is not a column of programs" in (outer_column_in_subquery(parse_one(wrong, read="sqlite"), conn) or "")
