"""Program sketches on a table with linked passages (blendsql.nl.sketch), with fake models."""

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.errors import ExecutionError
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
        if req.prompt.rstrip().endswith("SQL:"):
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
    fake, bsql, parsed = _run(conn, ["```sql\nSELECT w.team FROM w WHERE w.pick = 5;\n```"])
    assert parsed.attempts == [("SELECT w.team FROM w WHERE w.pick = 5", None)]
    assert "LLMQA(" in parsed.program and "w.pick = 5" in parsed.program
    out = bsql.execute(parsed.program)
    assert answer_value(out) == "Leesburg"
    reader = fake.prompts[-1]
    assert "player: Buster Posey" in reader and "Posey was born in Leesburg" in reader
    assert "Smith grew up in Ohio" not in reader and "Joe Smith" not in reader  # other rows stay out
    assert parsed.prompt_tokens > 0


def test_passage_title_with_disambiguation_is_linked(conn):
    fake, bsql, parsed = _run(conn, ["SELECT w.team FROM w WHERE w.player = 'Joe Smith'"],
                              "Who lives next door to Jerry?")
    bsql.execute(parsed.program)
    assert "Kramer lives next door to Jerry" in fake.prompts[-1]


def test_condition_with_a_copied_apostrophe_is_escaped_not_retried(conn):
    fake, bsql, parsed = _run(conn, ["SELECT w.player FROM w WHERE w.event = 'Men 's singles'"])
    assert parsed.attempts == [("SELECT w.player FROM w WHERE w.event = 'Men ''s singles'", None)]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_bad_condition_is_retried_with_the_error(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.nope = 5", "SELECT * FROM w WHERE w.pick = 5"])
    assert "no such column" in parsed.attempts[0][1]
    assert parsed.attempts[1] == ("SELECT * FROM w WHERE w.pick = 5", None)
    assert "It failed: no such column" in fake.prompts[1]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_empty_or_broad_condition_falls_back_to_passage_search(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.pick = 99"], "Who was born in Leesburg Georgia?")
    assert parsed.attempts == [("SELECT * FROM w WHERE w.pick = 99", EMPTY_RESULT)]
    assert "MATCH" in parsed.program
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"
    assert "player: Buster Posey" in fake.prompts[-1]

    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.pick > 5"], "Leesburg Georgia birthplace?",
                              sketch_max_rows=1)
    assert parsed.attempts == [("SELECT * FROM w WHERE w.pick > 5", "the query selects 2 rows")]
    assert "MATCH" in parsed.program  # none of the two rows' passages match: search them all

    fake, bsql, parsed = _run(conn, ["SELECT COUNT(*) FROM w"], "Who was born in Leesburg Georgia?")
    assert parsed.attempts[-1][1] == "the query selects every row"
    assert "MATCH" in parsed.program and len(parsed.attempts) == 2  # one retry, then search


def test_broad_selection_is_narrowed_by_searching_its_rows_passages(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.pick > 1"], "Which player grew up Ohio?",
                              sketch_max_rows=1)
    assert parsed.attempts == [("SELECT * FROM w WHERE w.pick > 1", None)]
    assert "w.pick > 1" in parsed.program and "MATCH" in parsed.program
    bsql.execute(parsed.program)
    assert "player: Joe Smith" in fake.prompts[-1] and "player: Buster Posey" not in fake.prompts[-1]


def test_order_by_limit_selects_the_row_unless_the_query_aggregates(conn):
    layout = sketch.passage_layout(conn)
    cond = sketch.row_filter(layout, "SELECT player FROM w ORDER BY pick DESC LIMIT 1")
    assert [r[0] for r in conn.execute(f"SELECT player FROM w WHERE {cond}")] == ["Al Jones"]
    cond = sketch.row_filter(layout, "SELECT COUNT(*) FROM w WHERE event = 'Relay' ORDER BY 1 LIMIT 1")
    assert conn.execute(f"SELECT COUNT(*) FROM w WHERE {cond}").fetchone()[0] == 2
    with pytest.raises(sketch.SketchError, match="only table w"):
        sketch.row_filter(layout, "SELECT * FROM w JOIN documents ON 1 WHERE w.pick = 5")


def test_conditions_with_a_guessed_value_are_dropped_when_nothing_matches(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.pick = 5 AND w.team = 'Atlanta'"])
    assert parsed.attempts[-1][1] is None
    assert "Atlanta" not in parsed.program and "pick" in parsed.program
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_an_ingredient_or_second_statement_in_the_condition_is_rejected(conn):
    layout = sketch.passage_layout(conn)
    with pytest.raises(sketch.SketchError):
        sketch.row_filter(layout, "SELECT * FROM w WHERE {{LLMMap('q', 'w::player')}} = TRUE")
    with pytest.raises(ExecutionError):
        sketch.count_rows(conn, "w", "{{LLMMap('q', 'w::player')}} = TRUE")
    with pytest.raises(ExecutionError):
        sketch.count_rows(conn, "w", "1; DROP TABLE w")
    assert conn.execute("SELECT COUNT(*) FROM w").fetchone()[0] == 3


def test_question_with_quotes_is_a_valid_literal(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.pick = 5"], "Where was the 'Buster' born ?")
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_sketch_is_off_by_default(conn):
    model = FunctionModel(lambda r: "SELECT w.player FROM w WHERE w.pick = 5", name="plain")
    bsql = BlendSQL(conn, model=model, cache=False)
    parsed = Parser(model).parse("Who was picked 5th?", bsql.db.conn, bsql.registry)
    assert parsed.program == "SELECT w.player FROM w WHERE w.pick = 5"


def test_cells_link_to_titles_written_differently():
    c = sqlite3.connect(":memory:")
    c.executescript(
        """
        CREATE TABLE w (club TEXT, town TEXT, pos TEXT);
        INSERT INTO w VALUES ('Vojvodina', 'Somerset , New Jersey', 'GK');
        CREATE VIRTUAL TABLE documents USING fts5(title, content);
        INSERT INTO documents VALUES ('FK Vojvodina', 'A club from Novi Sad.'),
            ('Somerset, New Jersey', 'A community in Franklin Township.'),
            ('Goalkeeper (association football)', 'Guards the goal.');
        """
    )
    layout = sketch.passage_layout(c)
    assert layout is not None and layout.linked == ("club", "town")  # 'GK' is too short to search for
    program = sketch.build_program(layout, "Where is the town?", "w.club = 'Vojvodina'")
    seen = []
    bsql = BlendSQL(c, model=FunctionModel(lambda r: seen.append(r.prompt) or "x", name="f"), cache=False)
    bsql.execute(program)
    assert "Novi Sad" in seen[-1] and "Franklin Township" in seen[-1] and "Guards the goal" not in seen[-1]


def test_wrong_column_name_is_repaired_without_a_model_call(conn):
    fake, bsql, parsed = _run(conn, ["SELECT w.team FROM w WHERE w.picks = 5"])
    assert len(fake.prompts) == 1
    assert parsed.attempts == [("SELECT w.team FROM w WHERE w.pick = 5", None)]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"


def test_name_error_retry_lists_the_real_columns(conn):
    fake, bsql, parsed = _run(conn, ["SELECT * FROM w WHERE w.zzzz = 5", "SELECT * FROM w WHERE w.pick = 5"])
    assert "player" in parsed.attempts[0][1] and "pick" in parsed.attempts[0][1]


def test_table_title_from_the_loader_is_shown_to_both_prompts():
    from blendsql.db.loaders import hybridqa_to_sqlite

    record = {"table_id": "t", "title": "Grammy Award for Best Jazz Vocal", "section_title": "1980s",
              "header": ["Year", "Performer"], "rows": [["1982", "Mark Murphy"], ["1983", "Al Jarreau"]],
              "passages": {"/wiki/Mark_Murphy": "Mark Murphy was an American jazz singer."}}
    c = hybridqa_to_sqlite(record, ":memory:")
    fake = Reader(["SELECT * FROM w WHERE w.year = 1982"], needle="jazz singer")
    model = FunctionModel(fake, name="fake")
    bsql = BlendSQL(c, model=model, cache=False)
    parsed = Parser(model, sketch=True).parse("Who won in 1982?", bsql.db.conn, bsql.registry)
    bsql.execute(parsed.program)
    assert "Grammy Award for Best Jazz Vocal — 1980s" in fake.prompts[0]
    assert "Table: Grammy Award for Best Jazz Vocal — 1980s" in fake.prompts[-1]
    assert "Mark Murphy was an American jazz singer" in fake.prompts[-1]


def test_abstaining_reader_is_a_non_answer_so_ask_falls_back(conn):
    from blendsql.nl.ask import ask

    def gen(req: Request) -> str:
        if req.prompt.rstrip().endswith("SQL:"):
            return "SELECT * FROM w WHERE w.pick = 30"
        if "reply: unknown" in req.prompt:  # the sketch's reader, on rows without the answer
            return "unknown"
        return "Leesburg"  # end-to-end over the whole table

    model = FunctionModel(gen, name="fake")
    bsql = BlendSQL(conn, model=model, cache=False)
    out = ask(bsql, "Where was the 5th pick born?", parser=Parser(model, sketch=True, sketch_abstain=True))
    assert "reply: unknown" in out.program
    assert out.fallback_used and out.answer == "Leesburg"


def test_query_cut_off_inside_a_literal_is_an_error_for_the_retry_not_a_crash(conn):
    cut = "SELECT w.player FROM w WHERE w.team IN ('Seinfeld', 'Rice Ow"
    layout = sketch.passage_layout(conn)
    with pytest.raises(sketch.SketchError, match="does not parse"):
        sketch.row_filter(layout, cut)
    assert sketch.relax(conn, layout, cut) is None
    fake, bsql, parsed = _run(conn, [cut, "SELECT * FROM w WHERE w.pick = 5"])
    assert "does not parse" in parsed.attempts[0][1]
    assert answer_value(bsql.execute(parsed.program)) == "Leesburg"
