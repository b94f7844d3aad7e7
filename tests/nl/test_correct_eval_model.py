"""Correction from feedback with the evaluation model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M).

Runs only when the GGUF is present (see ``eval_model.py``); skipped otherwise.
The questions, wrong queries and feedback are written for this fixture
database (not SPLASH items): each wrong query runs and returns a wrong
result, and the feedback says what to change in the user's words. Guards
what ``benchmarks/splash.py`` measures: a correction that returns the right
rows, chosen from the candidates without repeating the rejected result.
Slow (a minute or more per case on a loaded 2-core machine).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from eval_model import MARKS, MODEL_PATH  # noqa: E402 - tests/nl/eval_model.py

from blendsql import BlendSQL
from blendsql.nl import Conversation, Parser
from blendsql.nl.conversation import Turn

PETS = Path(__file__).parents[1] / "data" / "spider" / "pets_1" / "pets_1.sqlite"
pytestmark = MARKS

# (question, wrong query, feedback, gold query)
CASES = [
    ("What is the average weight of the dogs?", "SELECT avg(weight) FROM Pets",
     "you need to keep only the pets whose type is dog",
     "SELECT avg(weight) FROM Pets WHERE PetType = 'dog'"),
    ("How many students have a pet?", "SELECT count(*) FROM Student",
     "count only the students that appear in the has pet table",
     "SELECT count(DISTINCT StuID) FROM Has_Pet"),
]


@pytest.fixture(scope="module")
def model():
    from blendsql.models import LlamaCpp

    return LlamaCpp(MODEL_PATH, n_ctx=4096, n_threads=1, timeout=900)


def _rows(rows) -> Counter:
    return Counter(tuple(round(v, 4) if isinstance(v, float) else v for v in r) for r in rows)


def _corrected(question, wrong, feedback, gold, model, sources=None):
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    try:
        kw = {} if sources is None else {"correction_sources": sources}
        conv = Conversation(bsql, Parser(model), classify_acts=False, **kw)
        seed = Turn(question, "inform_sql", "", program=wrong, question=question)
        seed.smoothie = bsql.execute(wrong)
        conv.history.append(seed)
        turn = conv.correct(feedback)
        assert turn.program is not None, [(c.source, c.program, c.error) for c in turn.candidates]
        got = _rows(turn.result.itertuples(index=False, name=None))
        truth = sqlite3.connect(PETS)  # SQLite's answers (the session may be on a copy)
        try:
            assert got == _rows(truth.execute(gold).fetchall()), (
                turn.program, [(c.source, c.program, c.error) for c in turn.candidates])
            assert got != _rows(truth.execute(wrong).fetchall())
        finally:
            truth.close()
    finally:
        bsql.close()


@pytest.mark.parametrize("question, wrong, feedback, gold", CASES, ids=["filter", "join"])
def test_the_edit_follows_the_feedback(question, wrong, feedback, gold, model):
    """The edit alone: what a conversation uses to correct its own parser's query."""
    _corrected(question, wrong, feedback, gold, model, sources=("edit",))


def test_the_default_order_corrects_a_query_written_elsewhere(model):
    """Default sources (fresh parse, then edit). Not the join case: there the fresh
    parse writes a different wrong query (``count(*) FROM has_pet`` counts a student
    with two pets twice) and, first in order, wins the disagreement with the edit; the
    order was chosen on SPLASH dev, where it is right more often (see
    ``conversation.DEFAULT_CORRECTION_SOURCES``)."""
    _corrected(*CASES[0], model)
