"""spider.py and conversation.py run every mode end to end (a scripted model, fixture databases)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import conversation  # noqa: E402

from benchmarks import protocol, spider  # noqa: E402
from blendsql.models import FunctionModel  # noqa: E402
from blendsql.nl.parser import Example  # noqa: E402

FIXTURES = ROOT / "tests" / "data" / "spider"
ANSWERS = {
    "How many singers are there?": "SELECT count(*) FROM singer",
    "And how many of them are older than 30?": "SELECT count(*) FROM singer WHERE age > 30",
}


def scripted(request) -> str:
    """The gold query of the last question the prompt asks."""
    last = request.prompt.rsplit("Question: ", 1)[-1]
    return next(sql for q, sql in ANSWERS.items() if last.startswith(q))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    db = FIXTURES / "concert_singer" / "concert_singer.sqlite"
    if not db.exists():
        pytest.skip("fixture database missing")
    target = tmp_path / "spider" / "database" / "concert_singer"
    target.mkdir(parents=True)
    (target / "concert_singer.sqlite").symlink_to(db)
    return tmp_path


POOL = [Example("How many dogs are there?", "SELECT count(*) FROM dogs", "dogs(id)", "dog_kennels"),
        Example("How many singers are there?", "SELECT count(*) FROM singer", "", "concert_singer")]


@pytest.mark.parametrize("mode", spider.MODES)
def test_spider_modes_run_and_score(mode: str, data: Path) -> None:
    path = spider.db_path(data, "concert_singer")
    q = {"db_id": "concert_singer", "question": "How many singers are there?",
         "query": "SELECT count(*) FROM singer"}
    pool = spider.question_pool(POOL, q, path, protocol.ResultOracle())
    assert [e.db for e in pool] == ["dog_kennels"]
    out = spider.run_mode(mode, FunctionModel(scripted), pool, path, q["question"], 5.0)
    gold, _ = spider.run_sql(path, q["query"], 5.0)
    assert out["error"] is None, out
    assert spider.same_result(out["rows"], gold, False)


@pytest.mark.parametrize("mode", conversation.MODES)
def test_conversation_modes_run_every_turn(mode: str, data: Path) -> None:
    it = {"database_id": "concert_singer",
          "interaction": [{"utterance": q, "query": sql} for q, sql in ANSWERS.items()]}
    row = conversation.run_interaction(7, it, data, FunctionModel(scripted), False, 1, (mode,), POOL)
    assert row["pool_size"] == 1  # the same-database example is gone
    turns = row["modes"][mode]["turns"]
    assert [t["match"] for t in turns] == [True, True], turns


def test_conversation_summary_pairs_modes_with_the_parser(data: Path) -> None:
    it = {"database_id": "concert_singer",
          "interaction": [{"utterance": q, "query": sql} for q, sql in ANSWERS.items()]}
    row = conversation.run_interaction(7, it, data, FunctionModel(scripted), False, 1,
                                       ("parser", "direct"), POOL)
    summary = conversation.summarize([row])
    assert summary["modes"]["parser"]["question_accuracy"]["correct"] == 2
    assert summary["modes"]["direct"]["parser_vs_this"]["difference"] == 0.0
    assert summary["databases"] == {"concert_singer": 1}


def test_spider_combine_merges_modes_of_one_question_from_several_files(tmp_path: Path) -> None:
    import json

    def mode(match: bool) -> dict:
        return {"pred": "SELECT 1", "error": None, "match": match, "seconds": 1.0, "prompt_tokens": 10,
                "completion_tokens": 2}

    parts = []
    for k, modes in enumerate(({"parser": mode(True), "direct": mode(False)}, {"parser_no_retry": mode(True)})):
        part = tmp_path / f"part{k}.jsonl"
        part.write_text(json.dumps({"id": 5, "db": "d", "question": "q", "gold": "SELECT 1", **modes}) + "\n")
        part.with_suffix(".json").write_text(json.dumps({"split": "report", "command": "c", "n": 1}))
        parts.append(part)
    summary = spider.combine(parts, tmp_path / "all.json")
    assert summary["n"] == 1 and summary["ids"] == [5]
    assert set(summary["modes"]) == {"parser", "direct", "parser_no_retry"}
    assert summary["modes"]["direct"]["parser_vs_this"]["difference"] == 1.0
    assert str(tmp_path) not in summary["command"]
    assert "| parser | 1/1 |" in spider.markdown(summary)


def test_conversation_combine_merges_shards_and_prints_the_table(data: Path, tmp_path: Path) -> None:
    import json

    parts = []
    for k, (idx, db) in enumerate(((7, "concert_singer"), (8, "concert_singer"))):
        it = {"database_id": db,
              "interaction": [{"utterance": q, "query": sql} for q, sql in ANSWERS.items()]}
        row = conversation.run_interaction(idx, it, data, FunctionModel(scripted), False, 1,
                                           ("parser", "direct"), POOL)
        if k == 1:  # the second shard's direct mode misses its first turn
            row["modes"]["direct"]["turns"][0]["match"] = False
        part = tmp_path / f"sparc_{k + 1}.jsonl"
        part.write_text(json.dumps(row) + "\n")
        part.with_suffix(".json").write_text(json.dumps({"model": "m", "command": f"c{k}", "shard": f"{k + 1}/2"}))
        parts.append(part)
    summary = conversation.combine(parts, tmp_path / "sparc.json")
    assert summary["ids"] == [7, 8] and summary["questions"] == 4
    assert [r["shard"] for r in summary["runs"]] == ["1/2", "2/2"]
    assert summary["modes"]["direct"]["question_accuracy"]["correct"] == 3
    assert summary["modes"]["direct"]["parser_vs_this"]["difference"] == 0.25
    assert str(tmp_path) not in summary["command"]
    table = conversation.markdown(json.loads((tmp_path / "sparc.json").read_text()))
    assert "| parser | 4/4 |" in table and "| direct | 3/4 |" in table and "| 1/2 |" in table
