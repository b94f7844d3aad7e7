"""The annotated HybridQA few-shot pool (blendsql/nl/examples/hybridqa.json) and its checker.

Every pool program must return its question's gold answer when the ingredient reader
reads its context right (an oracle stands in for the model), and every pool question must
be a dev id: the pool is for few-shot selection, the report split is for scoring.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.hybridqa import DATA, oracle_model, verify_pool  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.db.loaders import hybridqa_to_sqlite  # noqa: E402
from blendsql.eval.metrics import denotation_match  # noqa: E402
from blendsql.nl.ask import answer_value  # noqa: E402
from blendsql.nl.parser import load_examples  # noqa: E402

TEST_DATA = ROOT / "tests" / "data" / "hybridqa"
POOL = ROOT / "blendsql" / "nl" / "examples" / "hybridqa.json"


def _records(path: Path, key: str) -> dict[str, dict]:
    return {r[key]: r for r in map(json.loads, path.open(encoding="utf-8"))}


def test_pool_is_large_and_loads_as_examples():
    examples = load_examples("hybridqa")
    assert len(examples) >= 40
    assert all("{{" in e.program or "SELECT" in e.program for e in examples)
    assert any("{{" not in e.program for e in examples)  # a plain-SQL example too


def test_pool_programs_in_the_test_data_return_gold_with_an_oracle_reader():
    """Runs from a clone: the pool questions whose tables ship in tests/data."""
    questions = _records(TEST_DATA / "questions.jsonl", "question_id")
    tables = _records(TEST_DATA / "tables.jsonl", "table_id")
    pool = json.loads(POOL.read_text(encoding="utf-8"))["examples"]
    here = [e for e in pool if e["id"] in questions]
    assert len(here) >= 2
    for ex in here:
        q = questions[ex["id"]]
        table = tables[q["table_id"]]
        bsql = BlendSQL(hybridqa_to_sqlite(table, ":memory:"), model=oracle_model(q, table), cache=False)
        assert denotation_match(answer_value(bsql.execute(ex["program"])), q["answer"]), ex["id"]


def test_oracle_rejects_a_program_whose_context_misses_the_answer():
    """The check can fail: a context without the gold passage yields 'unknown'."""
    questions = _records(TEST_DATA / "questions.jsonl", "question_id")
    tables = _records(TEST_DATA / "tables.jsonl", "table_id")
    q = questions["00153f694413a536"]  # middle name of the rank-2 player: Jerry (Walter Payton)
    table = tables[q["table_id"]]
    bsql = BlendSQL(hybridqa_to_sqlite(table, ":memory:"), model=oracle_model(q, table), cache=False)
    wrong_row = ("SELECT {{LLMQA('What is the middle name of this player?', (SELECT documents.title, "
                 "documents.content FROM documents JOIN w ON documents.title = w.player WHERE w.rank = 1))}}")
    assert not denotation_match(answer_value(bsql.execute(wrong_row)), q["answer"])


@pytest.mark.skipif(not (DATA / "questions.jsonl").is_file(), reason=f"HybridQA data not at {DATA}")
def test_whole_pool_verifies_on_the_shared_data():
    report = verify_pool(DATA, POOL)
    assert report["all_dev_ids"]
    assert report["ok"] == report["n"] >= 40, [r for r in report["results"] if not r["ok"]]
