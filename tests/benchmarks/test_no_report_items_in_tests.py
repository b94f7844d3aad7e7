"""No test uses a report-split item: tests guard behaviour on the tuning split only.

Scans every Python file under ``tests/`` and ``blendsql/`` for the question text of
a Spider dev question outside ``dev_ids.txt`` (normalised, six words or more) and
for the id of a HybridQA report question. Needs the benchmark data (``../shared/data``
or ``$BLENDSQL_BENCH_DATA``); skipped without it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import protocol  # noqa: E402

DATA = protocol.data_dir()


def _sources() -> dict[Path, str]:
    files = [*sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "blendsql").rglob("*.py"))]
    return {p: p.read_text(encoding="utf-8", errors="replace") for p in files}


def test_no_spider_report_question_in_code_or_tests() -> None:
    if not (DATA / "spider" / "dev.json").is_file():
        pytest.skip(f"Spider data not found (${protocol.DATA_ENV} or ../shared/data)")
    raw = json.loads((DATA / "spider" / "dev.json").read_text())
    dev = {int(x) for x in (DATA / "spider" / "dev_ids.txt").read_text().split()}
    dev_questions = {protocol.norm_question(raw[i]["question"]) for i in dev}
    report = {protocol.norm_question(q["question"]) for i, q in enumerate(raw) if i not in dev}
    report = {q for q in report if len(q.split()) >= 6 and q not in dev_questions}
    found = []
    for path, text in _sources().items():
        words = f" {protocol.norm_question(text)} "
        found += [f"{path.relative_to(ROOT)}: {q!r}" for q in report if f" {q} " in words]
    assert not found, "report-split questions in code or tests:\n" + "\n".join(found[:20])


def test_no_hybridqa_report_id_in_code_or_tests() -> None:
    if not (DATA / "hybridqa" / "questions.jsonl").is_file():
        pytest.skip(f"HybridQA data not found (${protocol.DATA_ENV} or ../shared/data)")
    dev = set((DATA / "hybridqa" / "dev_ids.txt").read_text().split())
    ids = set()
    for line in (DATA / "hybridqa" / "questions.jsonl").open(encoding="utf-8"):
        qid = json.loads(line)["question_id"]
        if qid not in dev:
            ids.add(qid)
    found = [f"{path.relative_to(ROOT)}: {m}" for path, text in _sources().items()
             for m in set(re.findall(r"\b[0-9a-f]{16}\b", text)) if m in ids]
    assert not found, "HybridQA report ids in code or tests:\n" + "\n".join(found)
