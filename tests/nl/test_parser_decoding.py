"""Parser decoding, validation and few-shot retrieval, with scripted models (no GGUF needed)."""

import re
import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.fewshot import BM25, ExampleIndex, identifiers, tokens
from blendsql.nl.parser import (
    EMPTY_RESULT,
    Example,
    Parser,
    clean_program,
    load_examples,
    validate,
)
from blendsql.nl.serialize import list_tables
from blendsql.nl.sql_grammar import build_permissive_grammar


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE singer (Singer_ID INTEGER, Name TEXT, Country TEXT, Age INTEGER);
        INSERT INTO singer VALUES (1, 'Joe Sharp', 'Netherlands', 52), (2, 'Timbaland', 'United States', 32),
                                  (3, 'Justin Brown', 'France', 29), (4, 'Rose White', 'France', 41);
        CREATE TABLE concert (concert_ID INTEGER, Name TEXT, Year TEXT, Singer_ID INTEGER);
        INSERT INTO concert VALUES (1, 'Auditions', '2014', 1), (2, 'Super bootcamp', '2014', 2),
                                   (3, 'Home Visits', '2015', 3);
        """
    )
    return c


POOL = [
    Example("How many singers are there?", "SELECT count(*) FROM singer"),
    Example("What is the average age of singers from France?",
            "SELECT avg(Age) FROM singer WHERE Country = 'France'"),
    Example("How many dogs are there?", "SELECT count(*) FROM Dogs", "Dogs(dog_id, name)"),
    Example("How many singers are on record?", "SELECT  COUNT(*) FROM singer"),  # near-duplicate program
    Example("Show the names of concerts held in 2014.", "SELECT Name FROM concert WHERE Year = '2014'"),
]


class Programs:
    """A model answering parser prompts from a list (the last one repeats)."""

    def __init__(self, *programs: str) -> None:
        self.programs = list(programs)
        self.requests: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.requests.append(req)
        return self.programs.pop(0) if len(self.programs) > 1 else self.programs[0]


# ---------------------------------------------------------------- few-shot retrieval


def test_tokens_drop_stop_words_and_plural_s():
    assert tokens("How many singers are there?") == ["singer"]
    assert tokens("the class of glass") == ["class", "glass"]


def test_bm25_prefers_rare_shared_words():
    bm = BM25([["singer", "age"], ["dog", "age"], ["singer", "country"]])
    s = bm.scores(["country"])
    assert s[2] > 0 and s[0] == 0 and s[1] == 0


def test_index_prefers_examples_on_this_schema():
    index = ExampleIndex(POOL)
    names = {"singer", "singer_id", "name", "country", "age", "concert", "concert_id", "year"}
    chosen = index.select("How many dogs are there?", 1)
    assert chosen[0].program.startswith("SELECT count(*) FROM Dogs")  # no schema given: wording
    chosen = index.select("How many dogs are there?", 1, names)
    assert "Dogs" not in chosen[0].program  # its table is not here
    chosen = index.select("How many singers are in the list?", 2, names)
    assert all("singer" in e.program for e in chosen)


def test_index_returns_best_last_and_skips_duplicate_programs():
    index = ExampleIndex(POOL)
    chosen = index.select("How many singers are on record?", 3, {"singer"})
    programs = [" ".join(e.program.lower().split()) for e in chosen]
    assert len(set(programs)) == len(programs)
    assert chosen[-1].question == "How many singers are on record?"
    assert index.select("anything", 0) == [] and ExampleIndex([]).select("q", 3) == []


def test_identifiers_skip_sql_words_and_strings():
    assert identifiers("SELECT T1.Name FROM singer AS T1 WHERE Country = 'France'") == {
        "name", "singer", "country"}


def test_shipped_pool_holds_spider_dev_id_examples():
    pool = load_examples("spider")
    assert len(pool) >= 40
    assert all(e.program.upper().startswith(("SELECT", "WITH")) for e in pool)
    assert all(e.schema for e in pool)


def test_prompt_shows_retrieved_examples_after_the_schema(conn):
    model = Programs("SELECT count(*) FROM singer")
    parser = Parser(FunctionModel(model), examples=POOL, n_examples=2)
    result = parser.parse("How many singers are from France?", conn, BlendSQL(conn).registry)
    assert result.ok
    prompt = model.requests[0].prompt
    assert re.search(r'CREATE TABLE "?singer"? ', prompt).start() < prompt.index("Examples of questions")
    assert prompt.index("Examples of questions") < prompt.rindex("Question: How many singers are from France?")
    assert "Dogs(dog_id, name)" not in prompt  # an off-schema example was not chosen


def test_off_schema_example_is_shown_with_its_schema(conn):
    model = Programs("SELECT count(*) FROM singer")
    parser = Parser(FunctionModel(model), examples=[POOL[2]], n_examples=1)
    parser.parse("How many singers are there?", conn, BlendSQL(conn).registry)
    assert "on the tables Dogs(dog_id, name)" in model.requests[0].prompt


def test_prompt_prefix_is_shared_between_questions_on_one_database(conn):
    model = Programs("SELECT count(*) FROM singer")
    parser = Parser(FunctionModel(model), examples=POOL, n_examples=2)
    reg = BlendSQL(conn).registry
    parser.parse("How many singers are there?", conn, reg)
    parser.parse("Show the names of concerts held in 2015.", conn, reg)
    a, b = (r.prompt for r in model.requests)
    schema_end = a.index("Examples of questions")
    assert a[:schema_end] == b[:schema_end]


def test_plain_guide_when_no_ingredient_is_registered(conn):
    from blendsql.ingredients.base import IngredientRegistry

    model = Programs("SELECT count(*) FROM singer")
    Parser(FunctionModel(model), examples=POOL).parse("How many singers?", conn, IngredientRegistry())
    assert "LLMMap" not in model.requests[0].prompt


# ---------------------------------------------------------------- cleaning and validation


@pytest.mark.parametrize("text, expected", [
    ("```sql\nSELECT Name FROM singer;\n```\nThis query lists names.", "SELECT Name FROM singer"),
    ("To answer, run:\nSELECT Name FROM singer", "SELECT Name FROM singer"),
    ("SELECT Name FROM singer; SELECT 1;", "SELECT Name FROM singer"),
    ("SELECT 'a;b' FROM singer;", "SELECT 'a;b' FROM singer"),
    ("```sql\nSELECT count(*) FROM singer", "SELECT count(*) FROM singer"),  # unclosed fence
    ("BlendSQL: SELECT 1 ;", "SELECT 1"),
])
def test_clean_program_finds_the_query(text, expected):
    assert clean_program(text) == expected


def test_validate_rejects_non_queries_and_qa_compared_with_true(conn):
    reg = BlendSQL(conn).registry
    assert validate("DELETE FROM singer", conn, reg) is not None
    assert conn.execute("SELECT count(*) FROM singer").fetchone()[0] == 4
    bad = "SELECT Name FROM singer WHERE {{LLMQA('Which singer is oldest?', options='singer::Name')}} = TRUE"
    assert "not TRUE/FALSE" in validate(bad, conn, reg)
    good = "SELECT Name FROM singer WHERE Name = {{LLMQA('Which singer is oldest?', options='singer::Name')}}"
    assert validate(good, conn, reg) is None


def test_validate_accepts_the_sqlite_spider_gold_uses(conn):
    reg = BlendSQL(conn).registry
    for q in (
        "SELECT T1.Name FROM singer AS T1 JOIN concert AS T2 ON T1.Singer_ID = T2.Singer_ID",
        "select name from singer where age > (select avg(age) from singer)",
        "SELECT Name FROM singer WHERE Singer_ID NOT IN (SELECT Singer_ID FROM concert)",
        "SELECT Name FROM singer WHERE Age BETWEEN 30 AND 50 ORDER BY Age DESC, Name ASC",
        "SELECT Country FROM singer INTERSECT SELECT Country FROM singer WHERE Age > 40",
        "SELECT max(Age) - min(Age) FROM singer",
    ):
        assert validate(q, conn, reg) is None, q


def test_empty_result_is_fed_back_then_fixed(conn):
    model = Programs("SELECT Name FROM singer WHERE Country = 'france'",
                     "SELECT Name FROM singer WHERE Country = 'France'")
    parser = Parser(FunctionModel(model), examples=POOL, max_retries=2)
    result = parser.parse("Which singers are French?", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT Name FROM singer WHERE Country = 'France'"
    assert result.attempts[0][1] == EMPTY_RESULT
    assert "returned no rows" in model.requests[1].prompt


def test_empty_result_is_kept_when_the_model_insists(conn):
    model = Programs("SELECT Name FROM singer WHERE Age > 90")
    parser = Parser(FunctionModel(model), examples=POOL, max_retries=2)
    result = parser.parse("Which singers are older than 90?", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT Name FROM singer WHERE Age > 90"
    assert len(result.attempts) == 2  # asked once more, same answer: no third call


def test_empty_check_can_be_switched_off(conn):
    model = Programs("SELECT Name FROM singer WHERE Age > 90")
    parser = Parser(FunctionModel(model), examples=POOL, check_empty=False)
    result = parser.parse("Which singers are older than 90?", conn, BlendSQL(conn).registry)
    assert result.ok and len(result.attempts) == 1


def test_empty_check_leaves_the_connection_as_it_was(conn):
    calls = []
    conn.set_progress_handler(lambda: calls.append(1) or 0, 1)
    model = Programs("SELECT Name FROM singer WHERE Age > 90")
    Parser(FunctionModel(model), examples=POOL, max_retries=0).parse("q?", conn, BlendSQL(conn).registry)
    before = len(calls)
    conn.execute("SELECT count(*) FROM singer").fetchone()
    assert len(calls) > before  # the user's progress handler still runs
    assert not conn.in_transaction


# ---------------------------------------------------------------- permissive grammar


def test_permissive_grammar_names_and_shapes(conn):
    g = build_permissive_grammar(list_tables(conn))
    rules = dict(line.split(" ::= ", 1) for line in g.strip().splitlines())
    assert rules["start"].startswith("([sS] [eE] [lL] [eE] [cC] [tT] | [wW]")
    assert '"\\"Singer_ID\\""' in rules["name"]  # double-quoted names
    assert "[sS] [iI] [nN] [gG] [eE] [rR]" in rules["name"]  # any case
    assert "alias" in rules["qualified"] and "[tT] [0-9]" == rules["alias"]
    assert "LLMMap" in rules["ingredient"]
    assert "LLMMap" not in build_permissive_grammar(list_tables(conn), ())


def test_examples_on_tables_this_database_lacks_come_last():
    """Regression (Spider 13): a same-worded example reading ``song`` led the model to
    write ``FROM song`` on a database without it, three attempts running."""
    pool = [Example("Show the names of singers that have more than one song.",
                    "SELECT T1.Name FROM singer AS T1 JOIN song AS T2 ON T1.Singer_ID = T2.Singer_ID "
                    "GROUP BY T1.Name HAVING COUNT(*) > 1"),
            Example("What is the average age of all singers?", "SELECT avg(Age) FROM singer")]
    names = {"singer", "name", "age", "song_name", "concert"}
    chosen = ExampleIndex(pool).select("What are all the song names by singers?", 2, names)
    assert chosen[-1].program == "SELECT avg(Age) FROM singer"  # best (nearest the question) last


def test_a_repeated_failing_program_is_retried_with_sampling(conn):
    model = Programs("SELECT Name FROM song", "SELECT Name FROM song", "SELECT Name FROM singer")
    parser = Parser(FunctionModel(model), examples=POOL, max_retries=2)
    result = parser.parse("List the singers", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT Name FROM singer"
    assert [r.temperature for r in model.requests] == [0.0, 0.0, pytest.approx(0.7)]
