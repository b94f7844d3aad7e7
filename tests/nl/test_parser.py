"""The NL → BlendSQL parser and ask() flows, with a scripted FunctionModel."""

import re
import sqlite3

import pytest
from nl_backend import BACKEND_NAME, NL_BACKEND  # tests/nl/nl_backend.py

from blendsql import BlendSQL
from blendsql.errors import OptionError
from blendsql.models.base import FunctionModel, Request
from blendsql.models.constraints import Grammar, Text
from blendsql.nl.ask import answer_value, ask, end_to_end_prompt, is_non_answer
from blendsql.nl.parser import Example, Parser, Turn, clean_program, load_examples, validate


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE w (player TEXT, position TEXT, school TEXT, pick INTEGER);
        INSERT INTO w VALUES ('Buster Posey', 'Catcher', 'Florida State', 5),
                             ('Joe Smith', 'Pitcher', 'Georgia', 12),
                             ('Al Jones', 'Pitcher', 'Rice', 30);
        CREATE VIRTUAL TABLE documents USING fts5(title, content);
        INSERT INTO documents VALUES ('Buster Posey', 'Posey was born in Leesburg, Georgia.'),
                                     ('Joe Smith', 'Smith grew up in Ohio.');
        """
    )
    return c


class Script:
    """A model that answers program prompts from a list and anything else with a fixed text."""

    def __init__(self, programs, fallback_text="Leesburg"):
        self.programs = list(programs)
        self.fallback_text = fallback_text
        self.prompts: list[Request] = []

    def __call__(self, req: Request):
        self.prompts.append(req)
        if req.prompt.rstrip().endswith("BlendSQL:"):
            return self.programs.pop(0) if len(self.programs) > 1 else self.programs[0]
        return self.fallback_text


EXAMPLES = [Example("Who was picked 5th?", "SELECT w.player FROM w WHERE w.pick = 5", "CREATE TABLE w (player TEXT, pick INTEGER);")]


def test_shipped_examples_parse_as_blendsql():
    from blendsql.grammar import parse
    from blendsql.ingredients.base import IngredientRegistry
    from blendsql.ingredients.builtin import BUILTINS

    examples = load_examples("hybridqa")
    assert len(examples) >= 4
    for ex in examples:
        parse(ex.program, IngredientRegistry(BUILTINS))


def test_clean_program_strips_fences_and_labels():
    assert clean_program("```sql\nSELECT 1;\n```") == "SELECT 1"
    assert clean_program("BlendSQL: SELECT 1 ;") == "SELECT 1"


def test_validate_reports_unknown_column_and_bad_syntax(conn):
    bsql = BlendSQL(conn)
    assert validate("SELECT w.player FROM w", conn, bsql.registry) is None
    assert "no such column" in validate("SELECT w.nope FROM w", conn, bsql.registry)
    assert validate("SELECT {{LLMMap('q', 'w::player')}} FROM w", conn, bsql.registry) is None
    assert validate("SELEC player FROM", conn, bsql.registry) is not None
    bad_ctx = "SELECT {{LLMQA('q', (SELECT * FROM nowhere))}}"
    assert "no such table" in validate(bad_ctx, conn, bsql.registry)


def test_parser_prompt_has_guide_examples_schema_hints_history(conn):
    script = Script(["SELECT w.player FROM w WHERE w.position = 'Pitcher'"])
    parser = Parser(FunctionModel(script), examples=EXAMPLES)
    bsql = BlendSQL(conn)
    history = [Turn("Who plays catcher?", "SELECT w.player FROM w WHERE w.position = 'Catcher'")]
    result = parser.parse("Which pitchers are there?", conn, bsql.registry, history)
    assert result.ok and result.attempts == [(result.program, None)]
    prompt = script.prompts[0].prompt
    assert "LLMMap" in prompt and "Who was picked 5th?" in prompt
    assert re.search(r'CREATE TABLE "?w"? ', prompt) and "w.position = 'Pitcher'" in prompt  # bridge hint
    assert "Earlier question: Who plays catcher?" in prompt
    assert isinstance(script.prompts[0].constraint, Text)  # free decoding by default


def test_parser_grammar_decodings_constrain_to_this_schema(conn):
    bsql = BlendSQL(conn)
    for decoding, needle in (("grammar", "w.player"), ("permissive", "[pP] [lL] [aA] [yY]")):
        script = Script(["SELECT w.player FROM w"])
        Parser(FunctionModel(script), examples=EXAMPLES, decoding=decoding).parse(
            "List players", conn, bsql.registry)
        constraint = script.prompts[0].constraint
        assert isinstance(constraint, Grammar) and needle in constraint.gbnf
    assert Parser(FunctionModel(lambda r: ""), constrained=True).decoding == "grammar"
    with pytest.raises(OptionError):
        Parser(FunctionModel(lambda r: ""), decoding="strict")


def test_parser_retries_with_the_error_then_succeeds(conn):
    script = Script(["SELECT w.nope FROM w", "SELECT w.player FROM w"])
    parser = Parser(FunctionModel(script), examples=EXAMPLES, max_retries=2)
    result = parser.parse("List players", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT w.player FROM w"
    assert len(result.attempts) == 2 and "no such column" in result.attempts[0][1]
    assert f"It failed: {BACKEND_NAME} rejected the query" in script.prompts[1].prompt


def test_parser_gives_up_after_max_retries(conn):
    script = Script(["SELECT nope FROM w"] * 3)
    parser = Parser(FunctionModel(script), examples=EXAMPLES, max_retries=2, plain_fallback=False)
    result = parser.parse("List players", conn, BlendSQL(conn).registry)
    assert result.program is None and len(result.attempts) == 3


def test_parser_tries_once_without_examples_when_no_attempt_validates(conn):
    script = Script(["SELECT nope FROM w"] * 3 + ["SELECT w.player FROM w", "SELECT w.player FROM w"])
    parser = Parser(FunctionModel(script), examples=EXAMPLES, max_retries=2)
    result = parser.parse("List players", conn, BlendSQL(conn).registry)
    assert result.program == "SELECT w.player FROM w" and len(result.attempts) == 4
    assert "Who was picked 5th?" in script.prompts[0].prompt
    assert "Who was picked 5th?" not in script.prompts[3].prompt
    assert "It failed" not in script.prompts[3].prompt


def test_ask_answers_from_the_program(conn):
    script = Script(["SELECT w.school FROM w WHERE w.pick = 5"])
    bsql = BlendSQL(conn, model=FunctionModel(script), cache=False)
    answer = ask(bsql, "Which school did the 5th pick attend?", parser=Parser(bsql.model, examples=EXAMPLES))
    assert answer.answer == "Florida State" and not answer.fallback_used
    assert answer.program == "SELECT w.school FROM w WHERE w.pick = 5"
    assert answer.smoothie is not None and len(answer.smoothie.df) == 1


def test_ask_falls_back_when_the_program_finds_nothing(conn):
    script = Script(["SELECT w.player FROM w WHERE w.pick = 99"], fallback_text="Leesburg")
    bsql = BlendSQL(conn, model=FunctionModel(script), cache=False)
    answer = ask(bsql, "Where was Buster Posey born?", parser=Parser(bsql.model, examples=EXAMPLES))
    assert answer.fallback_used and answer.answer == "Leesburg"
    e2e = script.prompts[-1].prompt
    assert "Posey was born in Leesburg" in e2e and "Table w:" in e2e  # passages + table


def test_ask_falls_back_when_no_program_parses(conn):
    script = Script(["SELECT nope"] * 3, fallback_text="Ohio")
    bsql = BlendSQL(conn, model=FunctionModel(script), cache=False)
    answer = ask(bsql, "Where did Joe Smith grow up?", parser=Parser(bsql.model, examples=EXAMPLES))
    assert answer.fallback_used and answer.answer == "Ohio" and answer.program is None
    assert answer.error is not None


def test_answer_helpers():
    assert is_non_answer(None) and is_non_answer("I cannot answer that") and not is_non_answer(0)
    assert "Question: q" in end_to_end_prompt(sqlite3.connect(":memory:"), "q")


def test_answer_value_shapes(conn):
    bsql = BlendSQL(conn)
    assert answer_value(bsql.execute("SELECT player FROM w WHERE pick > 100")) is None
    assert answer_value(bsql.execute("SELECT count(*) FROM w")) == 3
    assert answer_value(bsql.execute("SELECT player FROM w WHERE position = 'Pitcher' ORDER BY pick")) == ["Joe Smith", "Al Jones"]


def test_blendsql_ask_method_delegates(conn):
    script = Script(["SELECT w.player FROM w WHERE w.pick = 30"])
    bsql = BlendSQL(conn, model=FunctionModel(script), cache=False)
    answer = bsql.ask("Who was picked 30th?", parser=Parser(bsql.model, examples=EXAMPLES))
    assert answer.answer == "Al Jones" and answer.program.endswith("w.pick = 30")


def test_large_schema_is_cut_to_the_selected_tables():
    """Over the prompt budget, CRUSH4SQL picks the tables the prompt and grammar show."""
    c = sqlite3.connect(":memory:")
    for i in range(40):
        c.execute(f"CREATE TABLE filler_{i} (code_{i} TEXT, amount_{i} INTEGER)")
    c.execute("CREATE TABLE singer (name TEXT, country TEXT, age INTEGER)")
    c.execute("INSERT INTO singer VALUES ('Joe', 'France', 30)")

    def model_fn(req):
        if req.prompt.rstrip().endswith("BlendSQL:"):
            return "SELECT singer.name FROM singer"
        return "singer.name\nsinger.country"  # the hallucinated minimal schema

    parser = Parser(FunctionModel(model_fn), examples=EXAMPLES, schema_budget_chars=500,
                    schema_elements=4)
    names = [t.name for t in parser.relevant_tables("Which singers are from France?", c)]
    assert "singer" in names and len(names) < 10
    bsql = BlendSQL(c)
    result = parser.parse("Which singers are from France?", c, bsql.registry)
    assert result.ok


def test_small_schema_is_shown_whole(conn):
    parser = Parser(FunctionModel(lambda r: ""), examples=EXAMPLES)
    assert sorted(t.name for t in parser.relevant_tables("q", conn)) == ["documents", "w"]


def test_a_program_sqlite_prepares_but_cannot_run_is_fed_back() -> None:
    """FTS5 MATCH under OR across a join passes EXPLAIN and fails at run time: the error
    goes to the retry prompt instead of the program being kept."""
    import sqlite3

    from blendsql.ingredients.base import IngredientRegistry
    from blendsql.models import FunctionModel

    conn = sqlite3.connect(":memory:")
    conn.executescript(
        "CREATE TABLE w(name TEXT, school TEXT);"
        "CREATE VIRTUAL TABLE documents USING fts5(title, content);"
        "INSERT INTO w VALUES ('Bill', 'Hawaii'), ('Ann', 'Ohio');"
        "INSERT INTO documents VALUES ('Hawaii', 'The Rainbow Warriors'), ('Ohio', 'The Buckeyes');")
    bad = ("SELECT w.name FROM w JOIN documents ON w.school = documents.title "
           "WHERE documents.content MATCH 'Rainbow' OR documents.content MATCH 'Warriors'")
    good = ("SELECT w.name FROM w JOIN documents ON w.school = documents.title "
            "WHERE documents MATCH 'Rainbow OR Warriors'")
    answers = iter([bad, good])
    prompts: list[str] = []

    def write(req):  # noqa: ANN001, ANN202
        prompts.append(req.prompt)
        return next(answers)

    result = Parser(FunctionModel(write), examples=[]).parse(
        "Which player went to the school of the Rainbow Warriors?", conn, IngredientRegistry())
    assert result.program == good
    error = result.attempts[0][1] or ""
    assert error and error in prompts[1]
    if NL_BACKEND == "sqlite":  # DuckDB refuses it before running (MATCH on a column)
        assert "unable to use function MATCH" in error
    conn.close()


def test_run_check_separates_the_query_from_time_and_the_database_state() -> None:
    import sqlite3

    from blendsql.ingredients.base import IngredientRegistry
    from blendsql.nl.parser import EMPTY_RESULT, run_check

    conn = sqlite3.connect(":memory:")
    conn.executescript("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1);")
    reg = IngredientRegistry()
    assert run_check("SELECT x FROM t", conn, reg, 5.0) is None
    assert run_check("SELECT x FROM t WHERE x > 5", conn, reg, 5.0) == EMPTY_RESULT
    slow = ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
            "SELECT n FROM c WHERE n < 0")
    assert run_check(slow, conn, reg, 0.2) is None  # out of time: not the query's fault
    conn.close()
