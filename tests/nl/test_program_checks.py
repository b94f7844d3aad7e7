"""Type checks of ingredient outputs in their context (e.g. an LLMQA answer drawn from a
column compared with TRUE, which never holds: a shape small models write on HybridQA).

Each misuse must be rejected by ``validate`` with a message that names the right shape,
so the parser's retry can repair it; correct shapes must pass untouched.
"""

from __future__ import annotations

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.grammar import parse
from blendsql.nl.parser import validate
from blendsql.nl.program_checks import ingredient_type_errors


@pytest.fixture()
def db():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE w (name TEXT, nationality TEXT, year INTEGER)")
    conn.execute("CREATE VIRTUAL TABLE documents USING fts5(title, content)")
    return conn, BlendSQL(conn).registry


DOCS = "(SELECT * FROM documents WHERE documents MATCH 'born')"


@pytest.mark.parametrize("program", [
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} = TRUE",
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} IS TRUE",
    f"SELECT w.name FROM w WHERE FALSE = ({{{{LLMQA('Who?', {DOCS}, options='w::name')}}}})",
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} = 'true'",
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} != 'FALSE'",
    f"SELECT w.name FROM w WHERE w.year > 1990 AND <<LLMQA('Who?', {DOCS}, options=w.name)>> = TRUE",
])
def test_qa_compared_with_a_truth_value_is_rejected_with_the_column_shape(db, program):
    conn, reg = db
    error = validate(program, conn, reg)
    assert error is not None and "not TRUE/FALSE" in error
    assert "w.name = {{LLMQA(...)}}" in error


@pytest.mark.parametrize("program", [
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}}",
    f"SELECT w.name FROM w WHERE w.year = 1990 AND ({{{{LLMQA('Who?', {DOCS})}}}})",
    f"SELECT w.name FROM w WHERE NOT {{{{LLMQA('Who?', {DOCS})}}}} OR w.year = 2",
    f"SELECT CASE WHEN {{{{LLMQA('Who?', {DOCS})}}}} THEN 1 ELSE 0 END FROM w",
])
def test_qa_used_as_a_condition_is_rejected(db, program):
    conn, reg = db
    error = validate(program, conn, reg)
    assert error is not None and "not a condition" in error


def test_qa_options_from_another_column_than_the_compared_one(db):
    conn, reg = db
    program = f"SELECT w.year FROM w WHERE w.nationality = {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}}"
    error = validate(program, conn, reg)
    assert error is not None and "options='w::nationality'" in error
    flipped = f"SELECT w.year FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options=w.name)}}}} = w.nationality"
    assert "options='w::nationality'" in (validate(flipped, conn, reg) or "")


def test_qa_with_column_options_compared_with_a_constant(db):
    conn, reg = db
    program = f"SELECT w.year FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} = 'Bob'"
    error = validate(program, conn, reg)
    assert error is not None and "w.name = {{LLMQA(...)}}" in error and "'Bob'" in error


@pytest.mark.parametrize("program", [
    f"SELECT w.year FROM w WHERE w.name = {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}}",
    f"SELECT w.year FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} = w.name",
    f"SELECT {{{{LLMQA('Where was he born?', {DOCS})}}}}",
    f"SELECT w.name FROM w WHERE {{{{LLMQA('Did it rain?', {DOCS})}}}} = 'Yes'",
    "SELECT w.name FROM w WHERE {{LLMMap('Is this a pitcher?', 'w::name')}} = TRUE",
    "SELECT w.name FROM w WHERE {{LLMMap('Is this a pitcher?', 'w::name')}}",
    "SELECT w.name FROM w WHERE w.year = (SELECT MAX(year) FROM w)",
])
def test_right_shapes_pass(db, program):
    conn, reg = db
    assert validate(program, conn, reg) is None


def test_checks_read_only_the_tree(db):
    """No database or model: the checks run on a parsed tree alone."""
    _, reg = db
    tree = parse(f"SELECT 1 FROM w WHERE {{{{LLMQA('Who?', {DOCS}, options='w::name')}}}} = TRUE", reg)
    assert ingredient_type_errors(tree) is not None
