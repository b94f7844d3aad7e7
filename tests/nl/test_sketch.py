"""Program sketches on a table with linked passages (blendsql.nl.sketch), with fake models."""

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl import sketch
from blendsql.nl.ask import answer_value
from blendsql.nl.parser import EMPTY_RESULT, Parser


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE w (player TEXT, team TEXT, event TEXT, pick INTEGER);
        INSERT INTO w VALUES ('Buster Posey', 'San Francisco Giants', 'Men ''s singles', 5),
                             ('Joe Smith', 'Seinfeld', 'Relay', 12),
                             ('Al Jones', 'Rice Owls', 'Relay', 30);
        CREATE VIRTUAL TABLE documents USING fts5(title, content);
        INSERT INTO documents VALUES
            ('Buster Posey', 'Gerald Dempsey Posey was born in Leesburg, Georgia.'),
            ('Joe Smith', 'Smith grew up in Ohio.'),
            ('Seinfeld (TV series)', 'Kramer lives next door to Jerry.'),
            ('Rice Owls', 'The Owls play in Houston.');
        """
    )
    return c


class Reader:
    """Writes ``conditions`` in turn for condition prompts; answers reader prompts with
    the first line of context that holds ``needle`` (so a test sees what the reader saw)."""

    def __init__(self, conditions, needle="Leesburg"):
        self.conditions = list(conditions)
        self.needle = needle
        self.prompts: list[str] = []

    def __call__(self, req: Request) -> str:
        self.prompts.append(req.prompt)
        if req.prompt.rstrip().endswith("WHERE"):
            return self.conditions.pop(0) if len(self.conditions) > 1 else self.conditions[0]
        return "Leesburg" if self.needle in req.prompt else "unknown"


def _run(conn, conditions, question="Where was the 5th pick born?", **kw):
    fake = Reader(conditions)
    model = FunctionModel(fake, name="fake")
    bsql = BlendSQL(conn, model=model, cache=False)
    parsed = Parser(model, sketch=True, **kw).parse(question, bsql.db.conn, bsql.registry)
    return fake, bsql, parsed


def test_layout_finds_linked_text_columns(conn):
    layout = sketch.passage_layout(conn)
    assert layout is not None
    assert layout.table.name == "w" and layout.documents == "documents"
    # 'Seinfeld' names 'Seinfeld (TV series)'; event cells name no passage; pick is a number
    assert layout.linked == ("player", "team")


def test_no_layout_without_documents_or_links():
    c = sqlite3.connect(":memory:")
    c.executescript("CREATE TABLE w (a TEXT); INSERT INTO w VALUES ('x');")
    assert sketch.passage_layout(c) is None
    c.executescript("CREATE VIRTUAL TABLE documents USING fts5(title, content);"
                    "INSERT INTO documents VALUES ('zzz', 'nothing links here');")
    assert sketch.passage_layout(c) is None


def test_model_writes_only_the_condition_and_reader_sees_the_row_and_its_passages(conn):
    fake, bsql, parsed = _run(conn, [" w.pick = 5;"])
    assert parsed.attempts == [("w.pick = 5", None)]
    assert "LLMQA(" in parsed.program and "w.pick = 5" in parsed.program
    out = bsql.execute(parsed.program)
    assert answer_value(out) == "Leesburg"
    reader = fake.prompts[-1]
    assert "player: Buster Posey" in reader and "Posey was born in Leesburg" in reader
    assert "Smith grew up in Ohio" not in reader and "Joe Smith" not in reader  # other rows stay out
    assert parsed.prompt_tokens > 0


def test_passage_title_with_disambiguation_is_linked(conn):
    fake, bsql, parsed = _run(conn, ["w.player = 'Joe Smith'"], "Who lives next door to Jerry?")
    bsql.execute(parsed.program)
    assert "Kramer lives next door to Jerry" in fake.prompts[-1]


def test_condition_with_a_copied_apostrophe_is_escaped_not_retried(conn):
    fake, bsql, parsed = _run(conn, ["w.event = 'Men 's singles'"])
    assert parsed.attempts == [("w.event = 'Men ''s singles'", None)]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_bad_condition_is_retried_with_the_error(conn):
    fake, bsql, parsed = _run(conn, ["w.nope = 5", "w.pick = 5"])
    assert parsed.attempts[0][1].startswith("SQLite rejected the condition")
    assert parsed.attempts[1] == ("w.pick = 5", None)
    assert "It failed: SQLite rejected the condition" in fake.prompts[1]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_empty_or_broad_condition_falls_back_to_passage_search(conn):
    fake, bsql, parsed = _run(conn, ["w.pick = 99"], "Who was born in Leesburg Georgia?")
    assert parsed.attempts == [("w.pick = 99", EMPTY_RESULT)]
    assert "MATCH" in parsed.program
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"
    assert "player: Buster Posey" in fake.prompts[-1]

    fake, bsql, parsed = _run(conn, ["w.pick > 0"], "Who was born in Leesburg Georgia?", sketch_max_rows=2)
    assert parsed.attempts == [("w.pick > 0", "the condition matches 3 rows")]
    assert "MATCH" in parsed.program


def test_an_ingredient_or_second_statement_in_the_condition_is_rejected(conn):
    with pytest.raises(sqlite3.Error):
        sketch.count_rows(conn, "w", "{{LLMMap('q', 'w::player')}} = TRUE")
    with pytest.raises(sqlite3.Error):
        sketch.count_rows(conn, "w", "1; DROP TABLE w")
    assert conn.execute("SELECT COUNT(*) FROM w").fetchone()[0] == 3


@pytest.mark.parametrize("text, want", [
    (" w.pick = 5;", "w.pick = 5"),
    ("SELECT * FROM w WHERE w.pick = 5", "w.pick = 5"),
    ("w.pick = 5 ORDER BY w.pick LIMIT 1", "w.pick = 5"),
    ("```sql\nw.pick = 5\n```", "w.pick = 5"),
])
def test_clean_condition(text, want):
    assert sketch.clean_condition(text) == want


def test_question_with_quotes_is_a_valid_literal(conn):
    fake, bsql, parsed = _run(conn, ["w.pick = 5"], "Where was the 'Buster' born ?")
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_sketch_is_off_by_default_and_for_a_conversation(conn):
    fake = Reader(["w.pick = 5"])
    model = FunctionModel(lambda r: "SELECT w.player FROM w WHERE w.pick = 5", name="plain")
    bsql = BlendSQL(conn, model=model, cache=False)
    parsed = Parser(model).parse("Who was picked 5th?", bsql.db.conn, bsql.registry)
    assert parsed.program == "SELECT w.player FROM w WHERE w.pick = 5"
    del fake
