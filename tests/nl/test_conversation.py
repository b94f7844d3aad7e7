"""Conversation flows with a scripted FunctionModel (answers keyed on the prompt)."""

from __future__ import annotations

import io
import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl import Conversation, Parser
from blendsql.nl.acts import ACTS, classify_act, shortcut_act
from blendsql.nl.conversation import chat
from blendsql.nl.parser import Example
from blendsql.nl.respond import candidate_columns, summarise_result

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

    def __init__(self, acts=None, programs=None, corrections=None) -> None:
        self.acts = acts or {}
        self.programs = programs or {}
        self.corrections = corrections or {}
        self.requests: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.requests.append(req)
        p = req.prompt.rstrip()
        if p.endswith("Act:"):
            return self.acts.get(last_line(p, "Turn:"), "inform_sql")
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
    q1, q2 = "How many wins did the Giants have in 2009?", "What about in 2010?"
    p1 = "SELECT games.wins FROM games WHERE games.team = 'Giants' AND games.season = 2009"
    p2 = "SELECT games.wins FROM games WHERE games.team = 'Giants' AND games.season = 2010"
    s = Script(programs={q1: p1, q2: p2})
    conv = make_conv(s)
    assert conv.ask(q1).answer == 88
    turn = conv.ask(q2)
    assert turn.act == "infer_sql" or turn.act == "inform_sql"
    assert turn.answer == 92
    second_prompt = [r.prompt for r in s.requests if r.prompt.rstrip().endswith("BlendSQL:")][1]
    assert f"Earlier question: {q1}" in second_prompt
    assert f"Earlier query: {p1};" in second_prompt
    assert second_prompt.index("Earlier question") < second_prompt.rindex(f"Question: {q2}")


def test_ambiguous_turn_asks_which_column_and_the_answer_resolves_it():
    q = "Show me the best teams"
    combined = f"{q} (I mean the most wins)"
    s = Script(acts={q: "ambiguous"},
               programs={combined: "SELECT games.team FROM games ORDER BY games.wins DESC LIMIT 1"})
    conv = make_conv(s)
    t1 = conv.ask(q)
    assert t1.act == "ambiguous" and t1.program is None and t1.needs_clarification
    assert t1.response.endswith("?")
    assert t1.options and all(o.startswith("games.") for o in t1.options)
    assert any(o in t1.response for o in t1.options)
    assert conv.pending is t1
    t2 = conv.ask("the most wins")
    assert conv.pending is None
    assert t2.question == combined
    assert t2.answer == "Giants"
    assert "Giants" in t2.response


def test_clarification_affirm_picks_the_offered_column():
    q = "List teams by their record"
    s = Script(acts={q: "ambiguous"}, programs={})
    conv = make_conv(s)
    t1 = conv.ask(q)
    combined = f"{q} (I mean {t1.options[0]})"
    s.programs[combined] = "SELECT games.team FROM games WHERE games.season = 2009 ORDER BY games.wins DESC"
    t2 = conv.ask("yes")
    assert t2.question == combined
    assert t2.answer == ["Giants", "Cubs"]


def test_candidate_columns_follow_the_utterance_words():
    cols = candidate_columns(make_conn(), "how many losses did each coach have")
    assert cols[:2] == ["games.coach", "games.losses"] or cols[:2] == ["games.losses", "games.coach"]


def test_unrelated_turn_gets_polite_reply_naming_tables_without_a_query():
    q = "What's the weather in Paris?"
    s = Script(acts={q: "not_related"})
    turn = make_conv(s).ask(q)
    assert turn.act == "not_related" and turn.program is None
    assert "games (team, season, wins, losses, ...)" in turn.response
    assert s.kinds() == ["Act:"]  # no parse was attempted


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
    from blendsql.nl.respond import schema_mentions

    assert set(schema_mentions(make_conn(), "which coaches had most losses")) == {"games.losses", "games.coach"}
    assert schema_mentions(make_conn(), "what's the weather in Paris") == []
