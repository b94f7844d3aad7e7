"""Cleaning classes of unparseable model output (as seen on HybridQA) before a retry."""

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel
from blendsql.nl.parser import Parser, clean_program, drop_stray_braces, escape_inner_quotes


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE w (event TEXT, athlete TEXT, mural_by TEXT);
        INSERT INTO w VALUES ('Men ''s heavyweight', 'Ann O''Brien', 'Diego'),
                             ('Relay', 'Bo', 'Frida');
        """
    )
    return c


@pytest.mark.parametrize("text, want", [
    ("w.event = 'Men 's heavyweight'", "w.event = 'Men ''s heavyweight'"),
    ("w.athlete = 'Ann O'Brien' AND w.event = 'Relay'", "w.athlete = 'Ann O''Brien' AND w.event = 'Relay'"),
    ("w.a = 'it''s'", "w.a = 'it''s'"),  # already escaped stays
    ("w.a IN ('x','y') AND w.b='z'", "w.a IN ('x','y') AND w.b='z'"),  # closing quotes stay
    ("w.a = 'Rock 'n Roll'", "w.a = 'Rock ''n Roll'"),
])
def test_escape_inner_quotes(text, want):
    assert escape_inner_quotes(text) == want


def test_stray_brace_after_ingredient_is_dropped_outside_literals():
    prog = "SELECT w.a FROM w WHERE w.b = {{LLMQA('q }}} ?', (SELECT 1), options='w::mural_by')}}}"
    assert clean_program(prog) == (
        "SELECT w.a FROM w WHERE w.b = {{LLMQA('q }}} ?', (SELECT 1), options='w::mural_by')}}")
    assert drop_stray_braces("SELECT '}}}' FROM w") == "SELECT '}}}' FROM w"


def _parse(conn, program):
    calls = []

    def gen(req):
        calls.append(req.prompt)
        return program

    model = FunctionModel(gen, name="fake")
    bsql = BlendSQL(conn, model=model, cache=False)
    return Parser(model, examples=[]).parse("Who won the Men's heavyweight?", bsql.db.conn, bsql.registry), calls


def test_parser_accepts_a_program_with_a_copied_apostrophe_without_a_retry(conn):
    parsed, calls = _parse(conn, "SELECT w.athlete FROM w WHERE w.event = 'Men 's heavyweight'")
    assert parsed.program == "SELECT w.athlete FROM w WHERE w.event = 'Men ''s heavyweight'"
    assert len(calls) == 1


def test_parser_accepts_triple_brace_program_without_a_retry(conn):
    parsed, calls = _parse(conn, "SELECT w.event FROM w WHERE w.mural_by = "
                                 "{{LLMQA('Who painted it?', (SELECT * FROM w), options='w::mural_by')}}}")
    assert parsed.program is not None and parsed.program.endswith("options='w::mural_by')}}")
    assert len(calls) == 1
