"""Conversation flows with a scripted FunctionModel (answers keyed on the prompt)."""

from __future__ import annotations

import io
import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.models.scoring import Distribution
from blendsql.nl import Conversation, Parser
from blendsql.nl.acts import ACTS, classify_act, shortcut_act
from blendsql.nl.conversation import chat
from blendsql.nl.grounding import UNRELATED_ANCHORS, measure_ambiguity
from blendsql.nl.parser import Example
from blendsql.nl.respond import summarise_result

EXAMPLES = [Example("Who was picked 5th?", "SELECT w.player FROM w WHERE w.pick = 5",
                    "CREATE TABLE w (player TEXT, pick INTEGER);")]


def make_conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript(
        """
        CREATE TABLE games (team TEXT, season INTEGER, wins INTEGER, losses INTEGER, coach TEXT);
        INSERT INTO games VALUES ('Giants', 2009, 88, 74, 'Bochy'), ('Giants', 2010, 92, 70, 'Bochy'),
                                 ('Cubs', 2010, 75, 87, 'Piniella'), ('Cubs', 2009, 83, 78, 'Piniella');
        """
    )
    return c


def last_line(prompt: str, label: str) -> str:
    """The text after the LAST line that starts with ``label`` (few-shot lines come first)."""
    lines = [ln.removeprefix("-- ") for ln in prompt.splitlines()]
    lines = [ln for ln in lines if ln.startswith(label)]
    return lines[-1][len(label):].strip() if lines else ""


class Script:
    """Acts, programs and corrections looked up by the turn / question / feedback in the prompt."""

    def __init__(self, acts=None, programs=None, corrections=None, unanswerable=None,
                 default_unanswerable=0.2, anchor_unanswerable=0.1) -> None:
        self.acts = acts or {}
        # the model's P("no") to "can these tables answer it?", by question; the schema's
        # anchors get 0.1 and the unrelated anchors 0.9 unless given
        self.unanswerable = {**dict.fromkeys(UNRELATED_ANCHORS, 0.9), **(unanswerable or {})}
        self.default_unanswerable = default_unanswerable
        self.anchor_unanswerable = anchor_unanswerable
        self.programs = programs or {}
        self.corrections = corrections or {}
        self.requests: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.requests.append(req)
        p = req.prompt.rstrip()
        if p.endswith("Act:"):
            return self.acts.get(last_line(p, "Turn:"), "inform_sql")
        if p.endswith("Answerable:"):
            q = last_line(p, "Question:")
            no = self.unanswerable.get(q, self.anchor_unanswerable if q.startswith("How many entries are in the") else self.default_unanswerable)
            return Distribution({"yes": 1 - no, "no": no})
        if p.endswith("Corrected query:"):
            return self.corrections[last_line(p, "Feedback:")]
        if p.endswith("BlendSQL:"):
            return self.programs[last_line(p, "Question:")]
        raise AssertionError(f"unexpected prompt: {p[-200:]}")

    def kinds(self) -> list[str]:
        return [r.prompt.rstrip().rsplit("\n", 1)[-1] for r in self.requests]


def make_conv(script: Script, **kw) -> Conversation:
    model = FunctionModel(script)
    bsql = BlendSQL(make_conn(), model=model, cache=False)
    return Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1), **kw)


def test_question_is_answered_with_what_was_searched_and_found():
    s = Script(programs={"Which teams won more than 85 games in 2010?":
                         "SELECT games.team FROM games WHERE games.wins > 85 AND games.season = 2010"})
    conv = make_conv(s)
    turn = conv.ask("Which teams won more than 85 games in 2010?")
    assert turn.act == "inform_sql"
    assert turn.answer == "Giants"
    assert "searched the table games for rows where" in turn.response
    assert "wins is greater than 85" in turn.response and "Giants" in turn.response
    assert list(turn.result["team"]) == ["Giants"]
    assert conv.history == [turn]


def test_empty_result_says_nothing_found_and_invents_no_value():
    q = "Which teams won more than 100 games?"
    s = Script(programs={q: "SELECT games.team FROM games WHERE games.wins > 100"})
    turn = make_conv(s).ask(q)
    assert turn.program is not None and turn.result is not None and turn.result.empty
    assert turn.answer is None
    assert "found nothing" in turn.response
    for team in ("Giants", "Cubs"):
        assert team not in turn.response


def test_context_dependent_parse_sees_history_in_prompt():
    # (a bare "what about in 2010?" is resolved without the parser: a number ellipsis)
    q1, q2 = "How many wins did the Giants have in 2009?", "And how many losses did they have in 2010?"
    p1 = "SELECT games.wins FROM games WHERE games.team = 'Giants' AND games.season = 2009"
    p2 = "SELECT games.losses FROM games WHERE games.team = 'Giants' AND games.season = 2010"
    s = Script(programs={q1: p1, q2: p2})
    conv = make_conv(s)
    assert conv.ask(q1).answer == 88
    turn = conv.ask(q2)
    assert turn.act == "infer_sql" or turn.act == "inform_sql"
    assert turn.program == p2 and turn.source == "parser"
    second_prompt = [r.prompt for r in s.requests if r.prompt.rstrip().endswith("BlendSQL:")][1]
    assert f"Earlier question: {q1}" in second_prompt
    assert f"Earlier query: {p1};" in second_prompt
    assert second_prompt.index("Earlier question") < second_prompt.rindex(f"Question: {q2}")


def test_vague_ranking_asks_which_measure_and_the_answer_resolves_it():
    q = "Show me the best games"
    combined = f"{q} (ranked by games.wins)"
    s = Script(programs={combined: "SELECT games.team FROM games ORDER BY games.wins DESC LIMIT 1"})
    conv = make_conv(s)
    t1 = conv.ask(q)
    assert t1.act == "ambiguous" and t1.program is None and t1.needs_clarification
    assert t1.response.endswith("?")
    # each measure of games, with the team it puts first: they differ, so the turn is ambiguous
    assert t1.options == ["games.season", "games.wins", "games.losses"]
    assert "games.losses (Cubs first)" in t1.response and "games.wins (Giants first)" in t1.response
    assert conv.pending is t1
    assert "BlendSQL:" not in s.kinds()  # nothing parsed before the user says which
    t2 = conv.ask("the wins")
    assert conv.pending is None
    assert t2.question == combined
    assert t2.answer == "Giants"


def test_clarification_affirm_or_ordinal_picks_an_offered_reading():
    q = "Which games were the worst ones ever played?"  # more than the ranking: the parser writes it
    s = Script(programs={f"{q} (ranked by games.season)": "SELECT games.team FROM games WHERE games.season = 2009",
                         f"{q} (ranked by games.losses)": "SELECT games.team FROM games ORDER BY games.losses LIMIT 1"})
    conv = make_conv(s)
    assert conv.ask(q).options[0] == "games.season"
    assert conv.ask("yes").answer == ["Giants", "Cubs"]
    conv.ask(q)
    assert conv.ask("the third one").answer == "Giants"


def test_no_clarification_when_a_column_is_named_or_the_readings_agree():
    conn = make_conn()
    assert measure_ambiguity(conn, "Which team has the most wins?") == []
    assert measure_ambiguity(conn, "Show the games of the Cubs") == []  # no ranking word
    conn.execute("CREATE TABLE coach (name TEXT, age INTEGER, titles INTEGER)")
    conn.execute("INSERT INTO coach VALUES ('Bochy', 60, 3), ('Piniella', 70, 1)")
    conn.execute("CREATE TABLE team (id INTEGER, name TEXT, coach_rank INTEGER)")
    conn.execute("INSERT INTO team VALUES (1, 'Giants', 2), (2, 'Cubs', 1)")
    assert measure_ambiguity(conn, "Who is the biggest coach?") != []  # age and titles disagree
    conn.execute("UPDATE coach SET titles = 4 WHERE name = 'Piniella'")
    assert measure_ambiguity(conn, "Who is the biggest coach?") == []  # both put Piniella first
    # a follow-up's subject is the earlier query's table
    assert [r.column for r in measure_ambiguity(conn, "which one is the best?", ["games"])] == [
        "season", "wins", "losses"]


def test_vague_follow_up_ranks_the_previous_rows_by_their_one_measure():
    q1, q2 = "Which coaches are listed?", "Which one is the biggest?"
    s = Script(programs={q1: "SELECT coach.name FROM coach WHERE coach.name <> 'Nobody'"})
    conn = make_conn()
    conn.execute("CREATE TABLE coach (name TEXT, age INTEGER, team_id INTEGER)")
    conn.executemany("INSERT INTO coach VALUES (?, ?, ?)", [("Bochy", 60, 1), ("Piniella", 70, 2), ("Nobody", 99, 1)])
    conn.execute("CREATE TABLE team (id INTEGER, name TEXT)")
    conn.executemany("INSERT INTO team VALUES (?, ?)", [(1, "Giants"), (2, "Cubs")])
    model = FunctionModel(s)
    conv = Conversation(BlendSQL(conn, model=model, cache=False), Parser(model, examples=EXAMPLES, n_examples=1))
    conv.ask(q1)
    turn = conv.ask(q2)  # age is the one measure (team_id is a key)
    assert turn.source == "follow-up ranking" and turn.answer == "Piniella"  # 'Nobody' was filtered out
    assert "BlendSQL:" not in s.kinds()[1:]


def test_vague_follow_up_with_several_measures_asks_back_over_the_previous_rows():
    q1 = "Which games were played in 2010?"
    s = Script(programs={q1: "SELECT games.team FROM games WHERE games.season = 2010"})
    conv = make_conv(s)
    conv.ask(q1)
    turn = conv.ask("Which one is the best?")
    assert turn.act == "ambiguous"
    assert "games.wins (Giants first)" in turn.response and "games.losses (Cubs first)" in turn.response
    assert "games.season (Cubs first)" in turn.response  # a tie in 2010, broken by name
    answer = conv.ask("losses")
    assert answer.answer == "Cubs" and answer.source == "follow-up ranking"
    assert "BlendSQL:" not in s.kinds()[1:]  # only the first question was parsed


def test_unrelated_turn_is_refused_when_the_model_is_sure():
    q = "What's the weather in Paris?"
    s = Script(acts={q: "not_related"}, unanswerable={q: 0.85})
    turn = make_conv(s).ask(q)
    assert turn.act == "not_related" and turn.program is None
    assert "games (team, season, wins, losses, ...)" in turn.response
    assert "sure" in turn.reason
    assert "BlendSQL:" not in s.kinds()  # no parse was attempted


def test_a_turn_naming_nothing_is_parsed_only_when_the_model_is_sure():
    """No word of it names anything in ``games``: answered below the sure threshold
    (halfway from the highest schema anchor, 0.1, to the threshold, 0.5), declined above it."""
    q = "Who did best in the year Obama was elected?"
    program = "SELECT games.team FROM games WHERE games.season = 2009 ORDER BY games.wins DESC LIMIT 1"
    s = Script(acts={q: "not_related"}, unanswerable={q: 0.2}, programs={q: program})
    turn = make_conv(s).ask(q)
    assert turn.act == "inform_sql" and turn.answer == "Giants"
    assert "the model is sure it is answerable" in turn.reason
    s = Script(acts={q: "not_related"}, unanswerable={q: 0.45}, programs={q: program})
    turn = make_conv(s).ask(q)
    assert turn.act == "not_related" and turn.program is None
    assert "none of its words names anything in these tables" in turn.reason
    assert "answered only below 0.30" in turn.reason


def test_uninformative_model_refuses_only_turns_naming_nothing():
    """A model whose probabilities do not tell the schema's anchors from unrelated ones
    (here 0.5 for everything) is not asked: a turn naming a column is answered, one
    naming nothing in the database is refused."""
    named, unnamed = "How many losses in total?", "What is the weather tomorrow in Paris?"
    unrelated = dict.fromkeys(UNRELATED_ANCHORS, 0.5)
    s = Script(unanswerable=unrelated, default_unanswerable=0.5, anchor_unanswerable=0.5,
               programs={named: "SELECT SUM(games.losses) FROM games"})
    conv = make_conv(s)
    assert conv.ask(named).answer == 309
    turn = conv.ask(unnamed)
    assert turn.program is None and turn.act in ("not_related", "cannot_answer", "cannot_understand")
    assert "cannot judge" in turn.reason


def test_follow_up_is_parsed_without_asking_the_model_about_relevance():
    q1, q2 = "Which teams played in 2010?", "And which of those had a coach older than 70?"
    s = Script(programs={q1: "SELECT games.team FROM games WHERE games.season = 2010",
                         q2: "SELECT games.team FROM games WHERE games.season = 2010 AND games.coach = 'X'"})
    conv = make_conv(s)
    conv.ask(q1)
    turn = conv.ask(q2)
    assert turn.act == "infer_sql" and turn.program is not None
    assert "Answerable:" not in s.kinds()


def test_greeting_thanks_goodbye_are_shortcuts_without_a_model_call():
    s = Script()
    conv = make_conv(s)
    acts = [conv.ask(u).act for u in ("Hello!", "thanks a lot", "Thank you.", "bye")]
    assert acts == ["greeting", "thank_you", "thank_you", "goodbye"]
    assert s.requests == []
    assert all(t.program is None and t.response for t in conv.history)


@pytest.mark.parametrize(("text", "act"), [
    ("hi", "greeting"), ("Good morning", "greeting"), ("thanks!", "thank_you"), ("Goodbye.", "goodbye"),
    ("yes", "affirm"), ("nope", "negate"), ("hi, how many teams are there?", None),
    ("thanks, now show the coaches", None), ("", "cannot_understand"),
])
def test_shortcut_patterns(text, act):
    assert shortcut_act(text) == act


def test_model_act_is_a_constrained_choice():
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return "cannot_answer"

    act = classify_act(FunctionModel(fn), "What is each coach's salary?", "games (team, coach)")
    assert act == "cannot_answer"
    assert set(seen[0].constraint.options) == set(ACTS)


def test_model_social_act_on_a_question_is_overruled():
    q = "How many teams are there?"
    s = Script(acts={q: "greeting"}, programs={q: "SELECT COUNT(DISTINCT games.team) FROM games"})
    turn = make_conv(s).ask(q)
    assert turn.act == "inform_sql" and turn.answer == 2


def test_unparseable_question_is_reported_not_answered():
    q = "Which teams won?"
    s = Script(programs={q: "SELECT games.nonexistent FROM games"})
    turn = make_conv(s).ask(q)
    assert turn.program is None and turn.error
    assert "could not write a valid query" in turn.response


def test_no_acts_mode_skips_the_model_choice():
    q = "How many seasons?"
    s = Script(programs={q: "SELECT COUNT(DISTINCT games.season) FROM games"})
    turn = make_conv(s, classify_acts=False).ask(q)
    assert turn.answer == 2 and "Act:" not in s.kinds()


def test_chat_repl_with_streams():
    q = "How many wins did the Cubs have in 2010?"
    s = Script(programs={q: "SELECT games.wins FROM games WHERE games.team = 'Cubs' AND games.season = 2010"},
               corrections={"use 2009 instead":
                            "SELECT games.wins FROM games WHERE games.team = 'Cubs' AND games.season = 2009"})
    conv = make_conv(s)
    inp = io.StringIO(f"hello\n{q}\n:explain\n:correct use 2009 instead\n:bogus\n:quit\nnever read\n")
    out = io.StringIO()
    handled = chat(conv, inp, out, prompt="")
    text = out.getvalue()
    assert handled == 2
    assert "bot: Hello!" in text
    assert "The answer is 75." in text
    assert "1. Start from the table games." in text
    assert "The answer is 83." in text and "+ 2009" in text
    assert "unknown command :bogus" in text
    assert len(conv.history) == 3  # greeting, question, correction


def test_summarise_result_lists_first_values_and_count():
    s = BlendSQL(make_conn(), cache=False).execute("SELECT team, season FROM games ORDER BY season, team")
    text = summarise_result(s)
    assert text.startswith("I found 4 rows (team, season)")
    assert "Cubs; 2009" in text


@pytest.mark.model
def test_embedded_model_completes_one_turn():
    """Integration only (not accuracy): the embedded SmolLM2 handles one turn end to end."""
    from blendsql.models import LlamaCpp

    model = LlamaCpp()
    bsql = BlendSQL(make_conn(), model=model, cache=False)
    conv = Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1, max_retries=0, max_tokens=60))
    turn = conv.ask("Which team won the most games in 2010?")
    assert isinstance(turn.response, str) and turn.response
    assert turn.act in ACTS
    assert conv.history == [turn]
    if turn.program is None:
        assert turn.error or turn.act not in ("inform_sql", "infer_sql")


def test_model_not_related_on_a_turn_naming_schema_columns_is_overruled():
    q = "List each coach and their wins"
    s = Script(acts={q: "not_related"}, programs={q: "SELECT DISTINCT games.coach FROM games"})
    turn = make_conv(s).ask(q)
    assert turn.act == "inform_sql" and turn.answer == ["Bochy", "Piniella"]


def test_schema_mentions():
    from blendsql.nl.grounding import schema_mentions

    assert set(schema_mentions(make_conn(), "which coaches had most losses")) == {"games.losses", "games.coach"}
    assert schema_mentions(make_conn(), "what's the weather in Paris") == []


@pytest.mark.parametrize(("column", "names_a_row"), [
    ("StuID", True), ("country_code", True), ("Code2", True), ("IndepYear", True), ("room_no", True),
    ("Paid", False), ("Humidity", False), ("Population", False), ("SurfaceArea", False)])
def test_ids_codes_and_years_are_not_measures_by_their_last_word(column, names_a_row):
    from blendsql.nl.grounding import _names_a_row

    assert _names_a_row(column) is names_a_row
