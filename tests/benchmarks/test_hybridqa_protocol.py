"""benchmarks/hybridqa.py through benchmarks/protocol.py: the report set dealt over tables,
spent ids skipped, a leak-free few-shot pool per question, the leak check and the summary.

Runs from a clone: a data folder is built in a temporary directory from tests/data/hybridqa
(no dev ids, so the pool's own questions and tables are among the items); the check on
the shared data is skipped when it is absent.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import hybridqa, protocol  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.nl.parser import Example, load_examples  # noqa: E402

TEST_DATA = ROOT / "tests" / "data" / "hybridqa"


def _write_questions(data: Path, questions: list[dict], dev: list[str] = ()) -> Path:
    data.mkdir(parents=True, exist_ok=True)
    (data / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (data / "dev_ids.txt").write_text("\n".join(dev) + "\n")
    return data


def _q(qid: str, table: str, question: str = "") -> dict:
    return {"question_id": qid, "table_id": table, "question": question or f"question {qid}?", "answer": "a"}


@pytest.fixture
def clone_data(tmp_path: Path) -> Path:
    """tests/data/hybridqa as a benchmark data folder: 7 questions on 4 tables, no dev ids."""
    data = tmp_path / "hybridqa"
    data.mkdir()
    for name in ("questions.jsonl", "tables.jsonl"):
        shutil.copy(TEST_DATA / name, data / name)
    (data / "dev_ids.txt").write_text("\n")
    (tmp_path / "results").mkdir()
    return data


# ---------------------------------------------------------------- the report set


def test_report_set_is_dealt_round_robin_over_tables_without_dev_ids(tmp_path):
    qs = [_q(f"big{i}", "big") for i in range(10)] + [_q("s1", "small1"), _q("s2", "small2"),
                                                     _q("dev1", "dev_table")]
    data = _write_questions(tmp_path / "hybridqa", qs, dev=["dev1"])
    rs = hybridqa.report_set(data, n=3, seed=0, results=tmp_path / "results")
    assert sorted(q["table_id"] for q in rs.items) == ["big", "small1", "small2"]  # not the first 3 of the file
    four = hybridqa.report_set(data, n=4, seed=0, results=tmp_path / "results").items
    assert four[:3] == rs.items and four[3]["table_id"] == "big"
    every = hybridqa.report_set(data, n=None, seed=0, results=tmp_path / "results").items
    assert len(every) == 12 and "dev1" not in {q["question_id"] for q in every}
    assert [q["question_id"] for q in hybridqa.report_set(data, n=None, seed=1, results=tmp_path).items] \
        != [q["question_id"] for q in every]  # the seed changes the deal
    dev = hybridqa.report_set(data, split="dev", n=None, results=tmp_path / "results").items
    assert [q["question_id"] for q in dev] == ["dev1"]


def test_shards_split_the_set_without_overlap():
    items = list(range(7))
    parts = [protocol.shard_of(items, f"{k}/3") for k in (1, 2, 3)]
    assert sorted(x for p in parts for x in p) == items
    with pytest.raises(SystemExit):
        protocol.shard_of(items, "4/3")


def test_fresh_ids_skip_ids_of_earlier_results_files(tmp_path):
    qs = [_q(f"t{i}", f"table{i}") for i in range(6)]
    data = _write_questions(tmp_path / "hybridqa", qs)
    results = tmp_path / "results"
    results.mkdir()
    key = hybridqa.report_set_key("report", 5, 0, True)
    (results / "hybridqa_old.jsonl").write_text(
        json.dumps({"question_id": "t0"}) + "\n" + json.dumps({"question_id": "t1"}) + "\n"
        + '{"question_id": "t5", "gold"')  # a line a running shard is still writing
    (results / "hybridqa_v2.jsonl").write_text(json.dumps({"question_id": "t1"}) + "\n")
    (results / "hybridqa_now.jsonl").write_text(json.dumps({"question_id": "t2", "report_set": key}) + "\n")
    (results / "spider.jsonl").write_text(json.dumps({"question_id": "t3"}) + "\n")
    rs = hybridqa.report_set(data, n=5, seed=0, fresh_ids=True, results=results)
    ids = {q["question_id"] for q in rs.items}
    assert ids == {"t2", "t3", "t4", "t5"}  # t2: written for this same set (a resumed run or a shard)
    assert rs.skipped_record() == {"count": 2, "by_file": {"hybridqa_old.jsonl": 2, "hybridqa_v2.jsonl": 1}}
    other_seed = hybridqa.report_set(data, n=5, seed=1, fresh_ids=True, results=results)
    assert "t2" not in {q["question_id"] for q in other_seed.items}  # spent for any other set
    stale = hybridqa.report_set(data, n=5, seed=0, fresh_ids=False, results=results)
    assert len(stale.items) == 5 and stale.skipped == {}


# ---------------------------------------------------------------- the few-shot pool


def test_pool_drops_examples_on_the_same_table_or_with_the_same_question():
    pool = [Example("Who won in 1990?", "SELECT 1", db="own_table", id="a"),
            Example("  WHO scored the most goals ?", "SELECT 2", db="other", id="b"),
            Example("Which city hosts the final?", "SELECT 3", db="other", id="c"),
            Example("Which river is longest?", "SELECT 4", db="", id="d")]  # no db: cannot be checked
    q = _q("x", "own_table", "Who scored the most goals?")
    assert [e.id for e in hybridqa.question_pool(pool, q)] == ["c"]
    assert hybridqa.target_of(q) == protocol.Target("own_table", ("Who scored the most goals?",), (), None)


def test_shipped_pool_never_reaches_its_own_tables_or_questions():
    pool = load_examples("hybridqa")
    assert all(e.db for e in pool)
    for ex in pool[:10]:
        same_table = hybridqa.question_pool(pool, _q("x", ex.db, "An unrelated question about nothing?"))
        assert ex.db not in {e.db for e in same_table} and len(same_table) < len(pool)
        same_question = hybridqa.question_pool(pool, _q("y", "a table of no example", ex.question.upper()))
        assert ex not in same_question


# ---------------------------------------------------------------- the leak check


def test_leak_check_finds_the_unfiltered_pool_and_none_with_the_filter(clone_data):
    results = clone_data.parent / "results"
    plain = hybridqa.leak_checks(clone_data, n=7, sketch=False, results=results)
    assert len(plain) == 7 and all(c.shown for c in plain)
    assert all(e.db != c.target.db for c in plain for e in c.shown)
    assert [msg for c in plain for msg in protocol.prompt_leaks(c)] == []
    whole = hybridqa.leak_checks(clone_data, n=7, sketch=False, filtered=False, results=results)
    assert any("same database" in m or "same question" in m for c in whole for m in protocol.prompt_leaks(c))
    sketched = hybridqa.leak_checks(clone_data, n=7, results=results)  # the run's default: the sketch path
    assert all(c.shown == [] and "SQL:" in c.prompt and "Answer:" in c.prompt for c in sketched)
    assert [msg for c in sketched for msg in protocol.prompt_leaks(c)] == []


@pytest.mark.skipif(not (hybridqa.DATA / "questions.jsonl").is_file(),
                    reason=f"HybridQA benchmark data not found at {hybridqa.DATA}")
def test_leak_check_on_the_report_set_of_the_shared_data():
    for sketch in (True, False):
        checks = hybridqa.leak_checks(hybridqa.DATA, n=150, seed=0, sketch=sketch)
        assert len(checks) == 150 and len({c.item for c in checks}) == 150
        assert [m for c in checks for m in protocol.prompt_leaks(c)] == []


# ---------------------------------------------------------------- a run, end to end (fake model)


def _fake_model(calls: list[str]) -> FunctionModel:
    def gen(req: Request) -> str:
        calls.append(req.prompt)
        if req.prompt.rstrip().endswith(("SQL:", "BlendSQL:")):
            return "SELECT * FROM w LIMIT 1"
        return "unknown"

    return FunctionModel(gen, name="fake")


def test_sharded_run_resumes_and_combines_with_paired_modes(clone_data, monkeypatch):
    results = clone_data.parent / "results"
    monkeypatch.setattr(hybridqa, "RESULTS", results)
    calls: list[str] = []
    monkeypatch.setattr(hybridqa, "make_model", lambda args, path: (_fake_model(calls), "fake"))
    outs = [results / f"hybridqa_report_{k}.jsonl" for k in (1, 2)]
    for k, out in enumerate(outs, 1):
        assert hybridqa.main(["--data", str(clone_data), "--n", "7", "--shard", f"{k}/2", "--out", str(out)]) == 0
    rows = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    assert len(rows) == 7 and len({r["question_id"] for r in rows}) == 7  # shard 2 did not skip shard 1's ids
    pool_size = len(load_examples("hybridqa"))
    assert all(r["report_set"] == "hybridqa report n=7 seed=0 fresh-ids" for r in rows)
    assert all(r["pool_size"] + r["pool_removed"] == pool_size for r in rows)
    assert any(r["pool_removed"] for r in rows)  # the pool's own tables are among these items
    n_calls = len(calls)
    assert hybridqa.main(["--data", str(clone_data), "--n", "7", "--shard", "1/2", "--out", str(outs[0])]) == 0
    assert len(calls) == n_calls  # resumed: nothing to run
    summary = json.loads(outs[0].with_suffix(".summary.json").read_text())
    assert summary["n"] == summary["chosen"] == 4 and summary["shard"] == "1/2"
    assert summary["skipped_spent_ids"]["count"] == 0 and summary["commit"]
    assert summary["command"].startswith("python benchmarks/hybridqa.py --data")
    combined = hybridqa.combine(outs, results / "hybridqa_report.jsonl")
    assert combined["n"] == 7 and sorted(combined["ids"]) == sorted(r["question_id"] for r in rows)
    assert sum(combined["tables"].values()) == 7 and len(combined["tables"]) == 4
    modes = combined["modes"]
    assert set(modes) >= {"blendsql_fallback", "blendsql", "end_to_end"} and modes["same_run"] == 7
    assert modes["blendsql_fallback"]["vs_end_to_end"]["n"] == 7 and len(modes["blendsql"]["ci95"]) == 2
    assert "prompt_tokens" in combined["end_to_end"] and "f1" in combined["blendsql"]
    # a later report set (another seed) counts all of these ids as spent
    later = hybridqa.report_set(clone_data, n=7, seed=1, results=results)
    assert later.items == [] and later.skipped_record()["count"] == 7
