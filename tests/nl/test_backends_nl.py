"""The plain-language layer on SQLite, DuckDB and PostgreSQL, through the one traced path.

The same small database (a table of draft picks and an FTS5 documents table)
is copied to DuckDB and to the PostgreSQL server the tests start
(``blendsql.db.transfer``); a scripted FunctionModel writes the programs, so
every check is deterministic and needs no model weights. On each backend:
the prompt shows the schema, rows, vocabularies and bridge hints; programs
are validated (dry run, names repaired, empty results, values checked),
executed, explained and corrected; the fallback reads tables and passages;
and every statement the layer runs is in the trace.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.base import FunctionModel, Request
from blendsql.models.scoring import Distribution
from blendsql.nl import Conversation, Parser
from blendsql.nl.ask import end_to_end_prompt
from blendsql.nl.explain import explain
from blendsql.nl.grounding import UNRELATED_ANCHORS
from blendsql.nl.parser import EMPTY_RESULT, run_check, validate
from blendsql.nl.repair import value_mismatch
from blendsql.nl.serialize import list_tables
from blendsql.nl.source import NL_ORIGIN

BACKENDS = ("sqlite", "duckdb", "postgres")
SCHEMA = """
CREATE TABLE w (player TEXT, position TEXT, school TEXT, pick INTEGER);
INSERT INTO w VALUES ('Buster Posey', 'Catcher', 'Florida State', 5),
                     ('Joe Smith', 'Pitcher', 'Georgia', 12),
                     ('Al Jones', 'Pitcher', 'Rice', 30);
CREATE VIRTUAL TABLE documents USING fts5(title, content);
INSERT INTO documents VALUES ('Buster Posey', 'Posey was born in Leesburg, Georgia.'),
                             ('Joe Smith', 'Smith grew up in Ohio.');
"""


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nl_backends") / "draft.sqlite"
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def duck_file(sqlite_file: Path) -> Path:
    pytest.importorskip("duckdb")
    from blendsql.db.transfer import sqlite_to_duckdb

    return Path(sqlite_to_duckdb(sqlite_file, sqlite_file.with_suffix(".duckdb")))


@pytest.fixture(scope="module")
def pg_url(sqlite_file: Path, postgres_server: Any) -> str:
    from blendsql.db.transfer import sqlite_to_postgres

    url = str(postgres_server.create_db("nl_backends"))
    sqlite_to_postgres(sqlite_file, url)
    return url


@pytest.fixture(params=BACKENDS)
def source(request: pytest.FixtureRequest) -> Any:
    """What BlendSQL opens for the draft database on one backend."""
    name = str(request.param)
    if name == "sqlite":
        return str(request.getfixturevalue("sqlite_file"))
    if name == "duckdb":
        return str(request.getfixturevalue("duck_file"))
    return request.getfixturevalue("pg_url")


class Script:
    """Programs for parser prompts (in order, the last repeated), corrections for
    correction prompts, ``fallback`` for anything else; every prompt is kept."""

    def __init__(self, programs: list[str], corrections: tuple[str, ...] = (),
                 fallback: str = "Leesburg") -> None:
        self.programs, self.corrections = list(programs), list(corrections)
        self.fallback = fallback
        self.prompts: list[str] = []

    def __call__(self, req: Request) -> str:
        self.prompts.append(req.prompt)
        tail = req.prompt.rstrip()
        if tail.endswith("BlendSQL:"):
            return self.programs.pop(0) if len(self.programs) > 1 else self.programs[0]
        if tail.endswith("Corrected query:") and self.corrections:
            return self.corrections.pop(0)
        return self.fallback


def session(source: Any, script: Callable[[Request], str]) -> BlendSQL:
    return BlendSQL(source, model=FunctionModel(script), cache=False)


def nl_steps(trace: list[Any]) -> list[Any]:
    return [s for s in trace if s.details.get("source") == NL_ORIGIN]


def test_the_schema_reads_the_same_tables_on_every_backend(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    tables = {t.name: t for t in list_tables(bsql)}
    assert set(tables) == {"w", "documents"}
    assert tables["w"].columns == ("player", "position", "school", "pick")
    assert not tables["w"].is_documents and tables["documents"].is_documents
    assert "TEXT" in tables["w"].type_of("player") or "CHAR" in tables["w"].type_of("player")
    assert "INT" in tables["w"].type_of("pick")


def test_the_prompt_shows_schema_rows_values_and_hints(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    prompt = Parser(FunctionModel(Script(["SELECT 1"])), examples=[]).first_prompt(
        "Which pitcher went to Georgia?", bsql, bsql.registry)
    assert re.search(r'CREATE TABLE "?w"?', prompt)
    assert "Buster Posey | Catcher | Florida State | 5" in prompt
    assert "-- w.position takes the values: 'Catcher', 'Pitcher'" in prompt or (
        "-- w.position takes the values: 'Pitcher', 'Catcher'" in prompt)
    assert "'georgia' in the question may refer to w.school = 'Georgia'" in prompt
    assert "Posey was born" not in prompt  # passages are withheld from the schema


def test_ask_runs_the_program_and_traces_every_statement(source: Any) -> None:
    bsql = session(source, Script(["SELECT w.player FROM w WHERE w.pick = 5"]))
    answer = bsql.ask("Who was picked 5th?")
    assert answer.answer == "Buster Posey" and not answer.fallback_used
    ours = nl_steps(answer.trace)
    assert ours and all(s.kind == "sql" and s.sql and s.seconds >= 0 for s in ours)
    assert any(s.sql.lstrip().upper().startswith("EXPLAIN") for s in ours)  # the dry run
    assert answer.smoothie is not None
    assert answer.trace[-len(answer.smoothie.trace):] == answer.smoothie.trace


def test_validate_speaks_one_language_of_missing_names(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    assert validate("SELECT w.player FROM w", bsql, bsql.registry) is None
    assert "no such column: " in (validate("SELECT w.nope FROM w", bsql, bsql.registry) or "")
    assert "no such table: " in (validate("SELECT * FROM nowhere", bsql, bsql.registry) or "")
    assert validate("SELECT {{LLMMap('q', 'w::player')}} FROM w", bsql, bsql.registry) is None


def test_a_misspelt_column_is_repaired_without_the_model(source: Any) -> None:
    script = Script(["SELECT w.playr FROM w WHERE w.pick = 12"])
    bsql = session(source, script)
    result = Parser(FunctionModel(script), examples=[]).parse("Who was picked 12th?", bsql,
                                                              bsql.registry)
    assert result.program == "SELECT w.player FROM w WHERE w.pick = 12"
    assert result.repairs == 1 and len(script.prompts) == 1


def test_run_check_sees_empty_results_and_keeps_to_its_time_limit(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    reg = IngredientRegistry()
    assert run_check("SELECT player FROM w", bsql, reg, 5.0) is None
    assert run_check("SELECT player FROM w WHERE pick > 100", bsql, reg, 5.0) == EMPTY_RESULT
    slow = ("WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) "
            "SELECT n FROM c WHERE n < 0")
    assert run_check(slow, bsql, reg, 0.3) is None  # out of time: not the query's fault
    # the time limit was this check's only: the session runs queries again afterwards
    assert bsql.execute("SELECT COUNT(*) AS n FROM w").df["n"].tolist() == [3]


def test_a_value_in_another_case_is_reported(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    found = value_mismatch("SELECT player FROM w WHERE school = 'georgia'", bsql, bsql.registry,
                           list_tables(bsql))
    assert found == "'georgia' is not a value of w.school; it is written 'Georgia' there."


def test_the_fallback_reads_the_table_and_the_passages(source: Any) -> None:
    script = Script(["SELECT w.player FROM w WHERE w.pick = 99"])
    bsql = session(source, script)
    answer = bsql.ask("Where was Buster Posey born?")
    assert answer.fallback_used and answer.answer == "Leesburg"
    prompt = script.prompts[-1]
    assert "Table w:" in prompt and "Buster Posey" in prompt
    assert "Passage: Buster Posey | Posey was born in Leesburg" in prompt
    stages = {s.details["stage"] for s in nl_steps(answer.trace)}
    assert stages == {"parse", "fallback"}
    assert prompt == end_to_end_prompt(bsql, "Where was Buster Posey born?", rank_rows=True,
                                       table_chars=1000, passage_chars=400, k=3,
                                       rank_sentences=True)


def test_conversation_explain_and_correction(source: Any) -> None:
    script = Script(["SELECT w.player FROM w WHERE w.position = 'Pitcher' ORDER BY w.pick"],
                    corrections=("SELECT w.player FROM w WHERE w.position = 'Catcher'",))
    bsql = session(source, script)
    conv = Conversation(bsql, Parser(FunctionModel(script), examples=[]), classify_acts=False,
                        correction_sources=("edit",))
    turn = conv.ask("Which players are pitchers?")
    assert turn.answer == ["Joe Smith", "Al Jones"]
    assert nl_steps(turn.trace) and turn.smoothie is not None
    assert any("pitcher" in line.lower() for line in explain(turn.program or ""))
    fixed = conv.correct("I meant catchers")
    assert fixed.program == "SELECT w.player FROM w WHERE w.position = 'Catcher'"
    assert fixed.answer == "Buster Posey"
    assert {s.details["stage"] for s in nl_steps(fixed.trace)} == {"correct"}


def test_a_sketch_where_rows_have_a_rowid(source: Any) -> None:
    """HybridQA sketches name rows by rowid (PostgreSQL's ctid stands in for it)."""
    from blendsql.nl import sketch

    def model(req: Request) -> str:
        return "SELECT * FROM w WHERE w.pick = 5" if req.prompt.rstrip().endswith("SQL:") else (
            "Leesburg")

    bsql = session(source, model)
    layout = sketch.passage_layout(bsql)
    assert layout is not None and layout.linked == ("player",)
    parsed = Parser(FunctionModel(model), sketch=True).parse(
        "Where was the player picked 5th born?", bsql, bsql.registry)
    assert parsed.attempts == [("SELECT * FROM w WHERE w.pick = 5", None)]
    assert bsql.execute(parsed.program or "").df.iloc[0, 0] == "Leesburg"


def test_a_failing_read_is_a_blendsql_error(source: Any) -> None:
    bsql = BlendSQL(source, cache=False)
    with pytest.raises(BlendSQLError):
        bsql.db.sample_rows("nowhere", 2)


@pytest.mark.sqlite_only("SQLite's own trace callback; this file checks the other backends itself")
def test_every_statement_sqlite_ran_for_a_question_is_in_the_trace(sqlite_file: Path) -> None:
    """Ground truth from SQLite itself (``set_trace_callback``), as for the engine."""
    script = Script(["SELECT w.player FROM w WHERE w.pick = 99"])
    bsql = session(str(sqlite_file), script)
    ran: list[str] = []
    bsql.db.conn.set_trace_callback(ran.append)
    try:
        answer = bsql.ask("Where was Buster Posey born?")
    finally:
        bsql.db.conn.set_trace_callback(None)
    traced = [_pattern(s.sql) for s in answer.trace if s.sql]
    for s in answer.trace:
        traced += [_pattern(c["sql"]) for c in s.details.get("cleanup", [])]
    # "-- ..." lines are SQLite's own sub-statements of a traced one (an FTS5 table's
    # shadow tables, a table-valued PRAGMA), not statements anybody issued
    issued = [x for x in ran if not x.startswith("-- ")]
    missing = [x for x in issued if not any(p.match(_norm(x)) for p in traced)]
    assert not missing, f"statements run but not traced: {missing}"
    assert len(issued) >= 10 and answer.fallback_used


def _norm(sql: str) -> str:
    return " ".join(sql.split())


def _pattern(sql: str) -> re.Pattern[str]:
    """A traced statement as a pattern: SQLite reports bound parameters expanded."""
    parts = re.split(r"\?|:[A-Za-z_][A-Za-z0-9_]*", _norm(sql))
    return re.compile(".*?".join(re.escape(p) for p in parts) + r"\Z", re.S)


LEAGUE = """
CREATE TABLE w (player TEXT, position TEXT, pick INTEGER);
INSERT INTO w VALUES ('Buster Posey', 'Catcher', 5), ('Joe Smith', 'Pitcher', 12), ('Al Jones', 'Pitcher', 30);
CREATE TABLE team (name TEXT, wins INTEGER, payroll REAL);
INSERT INTO team VALUES ('Giants', 92, 98.6), ('Cubs', 75, 146.6), ('Rays', 96, 71.9);
"""


@pytest.fixture(scope="module")
def league_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("nl_league") / "league.sqlite"
    con = sqlite3.connect(path)
    con.executescript(LEAGUE)
    con.commit()
    con.close()
    return {"sqlite": path}


@pytest.fixture(params=BACKENDS)
def league(request: pytest.FixtureRequest, league_files: dict[str, Any]) -> Any:
    """The league database on one backend (copied from SQLite once per module)."""
    name, path = str(request.param), league_files["sqlite"]
    if name not in league_files:
        if name == "duckdb":
            pytest.importorskip("duckdb")
            from blendsql.db.transfer import sqlite_to_duckdb

            league_files[name] = str(sqlite_to_duckdb(path, path.with_suffix(".duckdb")))
        else:
            from blendsql.db.transfer import sqlite_to_postgres

            url = str(request.getfixturevalue("postgres_server").create_db("nl_league"))
            sqlite_to_postgres(path, url)
            league_files[name] = url
    return str(league_files[name])


def test_a_conversation_answers_asks_back_and_declines(league: Any) -> None:
    """Relevance, a follow-up ranked over the previous rows, a clarifying question from the
    schema's measures and its answer, and a refusal: the same on every backend, every
    statement of the layer traced."""
    def model(req: Request) -> Any:
        tail = req.prompt.rstrip()
        if tail.endswith("Answerable:"):
            q = tail.splitlines()[-2].removeprefix("Question: ")
            no = 0.9 if q in UNRELATED_ANCHORS or "weather" in q else 0.1
            return Distribution({"yes": 1 - no, "no": no})
        if tail.endswith("Act:"):
            return "not_related"
        assert tail.endswith("BlendSQL:"), tail[-200:]
        if "(ranked by team.payroll)" in tail:
            return "SELECT team.name FROM team ORDER BY team.payroll DESC LIMIT 1"
        return "SELECT w.player FROM w WHERE w.position = 'Pitcher'"

    conv = Conversation(BlendSQL(league, model=FunctionModel(model), cache=False))
    assert conv.ask("Which players are pitchers?").answer == ["Joe Smith", "Al Jones"]
    best = conv.ask("Which one is the best?")  # pick is the one measure of w
    assert best.source == "follow-up ranking" and best.answer == "Al Jones"
    assert nl_steps(best.trace)
    ask_back = conv.ask("Which team is the biggest?")
    assert ask_back.act == "ambiguous" and ask_back.options == ["team.wins", "team.payroll"]
    assert "team.wins (Rays first)" in ask_back.response and "team.payroll (Cubs first)" in ask_back.response
    assert nl_steps(ask_back.trace)
    assert conv.ask("the second").answer == "Cubs"
    weather = conv.ask("What is the weather tomorrow in Paris?")
    assert weather.act == "not_related" and weather.program is None and "sure" in (weather.reason or "")
