"""A follow-up turn's parser prompt: the tables the last earlier query read always shown,
the schema chosen with the question it follows, the examples on its own words."""

import re
import sqlite3

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.parser import Example, Parser, Turn


def prompts_of(parser_fn):
    seen: list[Request] = []

    def model(req: Request) -> str:
        seen.append(req)
        if req.prompt.rstrip().endswith("BlendSQL:"):
            return parser_fn(req.prompt)
        return ""

    return model, seen


def singers() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.executescript("""
        CREATE TABLE singer (name TEXT, citizenship TEXT, birth_year INTEGER);
        INSERT INTO singer VALUES ('Ann', 'France', 1950), ('Bo', 'Chile', 1960), ('Cy', 'France', 1970);
        CREATE TABLE song (title TEXT, singer TEXT, sales REAL);
        INSERT INTO song VALUES ('Hey', 'Ann', 10.0);
        """)
    return c


def big_schema() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    for i in range(40):
        c.execute(f"CREATE TABLE filler_{i} (code_{i} TEXT, amount_{i} INTEGER)")
    c.execute("CREATE TABLE Orchestra (name TEXT, founded INTEGER, record_company TEXT)")
    c.execute("INSERT INTO Orchestra VALUES ('LSO', 1904, 'Decca')")
    return c


def test_over_the_budget_the_tables_the_last_query_read_stay_in_the_follow_ups_schema():
    """The schema selector picks on the follow-up's words ("Limit it to one" names no
    table); the table the follow-up edits is shown anyway."""
    c = big_schema()

    selector_prompts: list[str] = []

    def model_fn(req: Request) -> str:
        if req.prompt.rstrip().endswith("BlendSQL:"):
            return "SELECT name FROM Orchestra LIMIT 1"
        selector_prompts.append(req.prompt)
        return "filler_3.code_3"  # the selector's pick: nothing about orchestras

    parser = Parser(FunctionModel(model_fn), examples=[], schema_budget_chars=500, schema_elements=2)
    registry = BlendSQL(c).registry
    alone = parser.context("Limit it to one.", c, registry)
    assert "Orchestra" not in [t.name for t in alone.tables]
    earlier = [Turn("Which orchestras are there?", "SELECT name FROM orchestra ORDER BY founded")]
    ctx = parser.context("Limit it to one.", c, registry, history=earlier)
    assert "Orchestra" in [t.name for t in ctx.tables] and len(ctx.tables) < 10
    # the selector read the question the follow-up follows, the first time it did not
    assert "Which orchestras are there?" in selector_prompts[-1]
    assert "Which orchestras are there?" not in selector_prompts[0]
    assert re.search(r'CREATE TABLE "?Orchestra"? ', parser.first_prompt("Limit it to one.", c, registry, earlier))
    # an earlier turn without a query keeps nothing
    no_query = parser.context("Limit it to one.", c, registry, history=[Turn("Hi", None)])
    assert "Orchestra" not in [t.name for t in no_query.tables]


def test_follow_up_examples_are_chosen_on_its_own_words():
    c = singers()
    pool = [Example("How many songs sold over a million copies?", "SELECT COUNT(*) FROM song WHERE sales > 1e6"),
            Example("Which singer was born first?", "SELECT name FROM singer ORDER BY birth_year LIMIT 1")]
    parser = Parser(FunctionModel(lambda r: ""), examples=pool, n_examples=1)
    registry = BlendSQL(c).registry
    earlier = [Turn("Which singer was born first?", "SELECT name FROM singer ORDER BY birth_year LIMIT 1")]
    # on both questions' words the earlier one would win (singer, born, first)
    assert parser.context("And songs?", c, registry, history=earlier).examples == [pool[0]]
