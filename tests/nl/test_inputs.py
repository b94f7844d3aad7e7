"""What users hand to the plain-language layer is checked first: clear errors, never
an ``AttributeError`` from deep inside, and no answer to an empty question."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from blendsql import BlendSQL
from blendsql.errors import OptionError, QueryTypeError
from blendsql.models.base import FunctionModel
from blendsql.nl import Conversation, Parser, explain
from blendsql.nl.ask import ask
from blendsql.nl.conversation import Turn

PETS = Path(__file__).resolve().parents[1] / "data" / "spider" / "pets_1" / "pets_1.sqlite"
QUERY = "SELECT COUNT(*) FROM Pets"


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, req) -> str:
        self.calls += 1
        return QUERY


@pytest.fixture
def session():
    fn = Counting()
    model = FunctionModel(fn)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    yield bsql, model, fn
    bsql.close()


@pytest.mark.parametrize("bad", [None, 3, b"How many pets?", ["How many pets?"]])
def test_a_question_that_is_not_text_is_refused_before_any_model_call(session, bad):
    bsql, model, fn = session
    with pytest.raises(OptionError, match="question must be a str"):
        ask(bsql, bad)
    with pytest.raises(OptionError, match="question must be a str"):
        Parser(model).parse(bad, bsql.db.conn, bsql.registry)
    with pytest.raises(OptionError, match="utterance must be a str"):
        Conversation(bsql, Parser(model), classify_acts=False).ask(bad)
    assert fn.calls == 0


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_an_empty_question_is_not_answered(session, blank):
    bsql, model, fn = session
    with pytest.raises(OptionError, match="question is empty"):
        bsql.ask(blank)
    turn = Conversation(bsql, Parser(model), classify_acts=False).ask(blank)  # a chat replies
    assert turn.program is None and turn.response
    assert fn.calls == 0


def test_correct_checks_its_feedback_and_retries(session):
    bsql, model, fn = session
    conv = Conversation(bsql, Parser(model), classify_acts=False)
    conv.history.append(Turn("How many pets?", "inform_sql", "", program=QUERY, question="How many pets?"))
    for kwargs, needle in [({"feedback": None}, "feedback must be a str"), ({"feedback": " "}, "feedback is empty"),
                           ({"feedback": "x", "retries": -1}, "retries must be an int"),
                           ({"feedback": "x", "retries": True}, "retries must be an int")]:
        with pytest.raises(OptionError, match=needle):
            conv.correct(**kwargs)
    assert fn.calls == 0


@pytest.mark.parametrize("kwargs, name", [
    ({"n_examples": -1}, "n_examples"), ({"max_retries": 1.5}, "max_retries"),
    ({"max_tokens": 0}, "max_tokens"), ({"query_seconds": 0}, "query_seconds"),
    ({"query_seconds": float("nan")}, "query_seconds"), ({"decoding": "strict"}, "decoding"),
    ({"schema_budget_chars": "6000"}, "schema_budget_chars"), ({"sketch_max_rows": 0}, "sketch_max_rows"),
])
def test_parser_options_are_validated(kwargs, name):
    with pytest.raises(OptionError) as info:
        Parser(FunctionModel(lambda r: QUERY), **kwargs)
    assert info.value.option == name


@pytest.mark.parametrize("bad", [None, "gpt-4", object()])
def test_a_parser_needs_a_model(bad):
    with pytest.raises(OptionError, match="model must be a blendsql model"):
        Parser(bad)


@pytest.mark.parametrize("bad", [None, 3, b"SELECT 1"])
def test_explain_refuses_what_is_not_a_query(bad):
    with pytest.raises(QueryTypeError):
        explain(bad)
