"""The plain-language pipeline on the embedded model over real HybridQA dev tables.

This checks that the pipeline completes and reports — parse (under the grammar),
execute or fall back, answer, tokens — not accuracy: the 135M model is demo-grade.
"""

import json
from pathlib import Path

import pytest

from blendsql import BlendSQL
from blendsql.db.loaders import hybridqa_to_sqlite
from blendsql.grammar import parse
from blendsql.nl.ask import Answer
from blendsql.nl.parser import Parser

DATA = Path(__file__).parents[1] / "data" / "hybridqa"


@pytest.fixture(scope="module")
def model():
    from blendsql.models import LlamaCpp

    return LlamaCpp()


def cases(n=2):
    tables = {t["table_id"]: t for t in map(json.loads, (DATA / "tables.jsonl").open())}
    qs = [q for q in map(json.loads, (DATA / "questions.jsonl").open()) if q["table_id"] in tables]
    return [(q, tables[q["table_id"]]) for q in qs[:n]]


@pytest.mark.model
@pytest.mark.parametrize("case", cases(1), ids=lambda c: c[0]["question_id"])
def test_ask_completes_and_reports(case, model):
    q, table = case
    bsql = BlendSQL(hybridqa_to_sqlite(table, ":memory:"), model=model, cache=False)
    answer = bsql.ask(q["question"], parser=Parser(model, max_retries=0))
    assert isinstance(answer, Answer)
    assert answer.attempts, "the parser made at least one attempt"
    for program, error in answer.attempts:
        if error is None:  # a validated program parses with our grammar
            parse(program, bsql.registry)
    assert answer.program is not None or answer.fallback_used
    assert answer.answer is not None  # from the program or the end-to-end fallback
    assert answer.prompt_tokens > 0
