"""benchmarks/hybridqa.py run_one with the sketch parser, end-to-end reuse and skipping (fake model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.hybridqa import run_one, summarize  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.nl.parser import Parser  # noqa: E402

TEST_DATA = ROOT / "tests" / "data" / "hybridqa"


def _first() -> tuple[dict, dict]:
    q = json.loads((TEST_DATA / "questions.jsonl").open().readline())
    for line in (TEST_DATA / "tables.jsonl").open():
        t = json.loads(line)
        if t["table_id"] == q["table_id"]:
            return q, t
    raise LookupError(q["table_id"])


def _model(calls: list[str]) -> FunctionModel:
    def gen(req: Request) -> str:
        calls.append(req.prompt)
        if req.prompt.rstrip().endswith("SQL:"):
            return "SELECT * FROM w LIMIT 1"
        return "unknown"

    return FunctionModel(gen, name="fake")


def _old_e2e(right: bool) -> dict:
    """An end-to-end row of an earlier run, at 900 prompt tokens."""
    return {"end_to_end": {"pred": "x", "acc": right, "em": right, "f1": float(right), "prompt_tokens": 900},
            "end_to_end_seconds": 12.5}


def test_reused_end_to_end_row_is_copied_and_counted_in_the_fallback():
    q, t = _first()
    old = _old_e2e(True)
    calls: list[str] = []
    model = _model(calls)
    row = run_one(q, t, model, Parser(model, sketch=True, sketch_abstain=True), e2e=old, fallback="paper")
    assert row["e2e_reused"] and row["end_to_end"] == old["end_to_end"]
    assert not any(p.startswith("Table w:") for p in calls)  # no end-to-end prompt was sent
    assert row["fallback_used"] and row["blendsql_fallback"]["acc"] is True
    assert row["blendsql_fallback"]["prompt_tokens"] == row["blendsql"]["prompt_tokens"] + 900
    assert summarize([row])["end_to_end_reused"] == 1


def test_skipped_end_to_end_is_marked():
    q, t = _first()
    calls: list[str] = []
    model = _model(calls)
    row = run_one(q, t, model, Parser(model, sketch=True), skip_e2e=True)
    assert row["e2e_skipped"] and row["end_to_end"]["prompt_tokens"] == 0
    assert summarize([row])["end_to_end_skipped"] == 1


def test_compact_fallback_is_its_own_call_and_its_tokens_are_counted():
    q, t = _first()
    calls: list[str] = []
    model = _model(calls)
    row = run_one(q, t, model, Parser(model, sketch=True, sketch_abstain=True), e2e=_old_e2e(False))
    fallback_prompts = [p for p in calls if p.startswith("Table w:")]
    assert len(fallback_prompts) == 1 and row["fallback_used"] and row["fallback_mode"] == "compact"
    assert row["blendsql_fallback"]["prompt_tokens"] == (row["blendsql"]["prompt_tokens"]
                                                        + row["fallback"]["prompt_tokens"])
    assert summarize([row])["fallback_alone"]["n"] == 1


def test_reused_program_stage_is_not_parsed_again():
    q, t = _first()
    earlier = {"program": "SELECT 1", "parsed": True, "attempts": 1, "tried": [["SELECT 1", None]],
               "executed": True, "blendsql": {"pred": q["answer"], "acc": True, "em": True, "f1": 1.0,
                                              "prompt_tokens": 321}, "blendsql_seconds": 3.0}
    calls: list[str] = []
    model = _model(calls)
    row = run_one(q, t, model, Parser(model, sketch=True), skip_e2e=True, program=earlier)
    assert calls == [] and row["program_reused"] and row["blendsql"] == earlier["blendsql"]
    assert not row["fallback_used"] and row["blendsql_fallback"]["prompt_tokens"] == 321
    none = dict(earlier, blendsql=dict(earlier["blendsql"], pred="unknown", acc=False))
    row = run_one(q, t, model, Parser(model, sketch=True), skip_e2e=True, program=none)
    assert row["fallback_used"] and len(calls) == 1  # only the fallback prompt
