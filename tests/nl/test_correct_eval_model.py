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


@pytest.mark.parametrize("question, wrong, feedback, gold", CASES, ids=["filter", "join"])
def test_feedback_corrects_a_wrong_query(question, wrong, feedback, gold, model):
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    try:
        conv = Conversation(bsql, Parser(model), classify_acts=False)
        seed = Turn(question, "inform_sql", "", program=wrong, question=question)
        seed.smoothie = bsql.execute(wrong)
        conv.history.append(seed)
        turn = conv.correct(feedback)
        assert turn.program is not None, [(c.source, c.program, c.error) for c in turn.candidates]
        got = _rows(turn.result.itertuples(index=False, name=None))
        assert got == _rows(bsql.db.conn.execute(gold).fetchall()), (
            turn.program, [(c.source, c.program, c.error) for c in turn.candidates])
        assert got != _rows(bsql.db.conn.execute(wrong).fetchall())
    finally:
        bsql.close()
