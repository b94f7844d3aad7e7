"""spider.py and conversation.py run every mode end to end (a scripted model, fixture databases)."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import conversation  # noqa: E402

from benchmarks import protocol, spider  # noqa: E402
from blendsql.models import FunctionModel  # noqa: E402
from blendsql.models.cache import ENV_CACHE_DIR  # noqa: E402
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
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))  # parser_duckdb's copies land here
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
    parser = summary["modes"]["parser"]
    assert (parser["first_turn_accuracy"]["n"], parser["dependent_turn_accuracy"]["n"]) == (1, 1)


def test_turn_position_accuracy_splits_first_from_dependent_turns() -> None:
    got = conversation.turn_position_accuracy(
        [[{"match": True}, {"match": False}, {"match": False}], [{"match": False}, {"match": True}], []])
    assert (got["first_turn_accuracy"]["correct"], got["first_turn_accuracy"]["n"]) == (1, 2)
    assert (got["dependent_turn_accuracy"]["correct"], got["dependent_turn_accuracy"]["n"]) == (1, 3)


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


def test_conversation_combine_adds_an_ablation_run_on_one_shard(data: Path, tmp_path: Path) -> None:
    import json

    parts = []
    for k, (idx, modes) in enumerate(((7, ("parser", "direct")), (8, ("parser", "direct")),
                                      (7, ("parser_no_retry",)))):
        it = {"database_id": "concert_singer",
              "interaction": [{"utterance": q, "query": sql} for q, sql in ANSWERS.items()]}
        row = conversation.run_interaction(idx, it, data, FunctionModel(scripted), False, 1, modes, POOL)
        if k == 1:
            row["modes"]["direct"]["turns"][0]["match"] = False
        if k == 2:
            row["modes"]["parser_no_retry"]["turns"][1]["match"] = False
        part = tmp_path / f"part_{k}.jsonl"
        part.write_text(json.dumps(row) + "\n")
        part.with_suffix(".json").write_text(json.dumps({"model": "m", "command": f"c{k}"}))
        parts.append(part)
    summary = conversation.combine(parts, tmp_path / "all.json")
    assert summary["ids"] == [7, 8] and summary["questions"] == 4  # the parser's turns at top level
    assert summary["modes"]["direct"]["parser_vs_this"]["n"] == 4  # both interactions
    ablation = summary["modes"]["parser_no_retry"]
    assert ablation["question_accuracy"]["n"] == 2 and ablation["parser_vs_this"]["n"] == 2
    assert ablation["parser_vs_this"]["difference"] == 0.5


# ---------------------------------------------------------------- parser_duckdb

TINY = {  # report questions on a database made here; the second one's gold sorts
    "How many singers are older than 30?": "SELECT count(*) FROM singer WHERE age > 30",
    "List the names of the singers from youngest to oldest.": "SELECT name FROM singer ORDER BY age",
}


def scripted_tiny(request) -> str:
    last = request.prompt.rsplit("Question: ", 1)[-1]
    return next((sql for q, sql in TINY.items() if last.startswith(q)), "")


def tiny_spider(root: Path) -> Path:
    """A one-database Spider folder (dev.json, no dev ids, database/tiny/tiny.sqlite)."""
    folder = root / "spider" / "database" / "tiny"
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "tiny.sqlite")
    conn.executescript("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER);"
                       "INSERT INTO singer VALUES (1, 'Ann', 25), (2, 'Bo', 41), (3, 'Cy', 33);")
    conn.commit()
    conn.close()
    (root / "spider" / "dev.json").write_text(json.dumps(
        [{"db_id": "tiny", "question": q, "query": sql} for q, sql in TINY.items()]))
    (root / "spider" / "dev_ids.txt").write_text("\n")
    return folder / "tiny.sqlite"


def test_spider_parser_duckdb_runs_on_the_cached_copy_and_scores_against_sqlite_gold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))
    path = tiny_spider(tmp_path / "data")
    question, gold_sql = next(iter(TINY.items()))
    gold, _ = spider.run_sql(path, gold_sql, 5.0)

    def run() -> dict:
        return spider.run_mode("parser_duckdb", FunctionModel(scripted_tiny), [], path, question, 5.0)

    out = run()
    copies = list((tmp_path / "cache" / spider.DUCKDB_COPIES).iterdir())
    assert [c.suffix for c in copies] == [".duckdb"]  # one copy, no temporary left behind
    assert out["error"] is None, out
    assert out["pred"] == gold_sql
    assert out["duckdb_copy"] == f"${ENV_CACHE_DIR}/{spider.DUCKDB_COPIES}/{copies[0].name}"
    assert spider.same_result(out["rows"], gold, False) and gold == [(2.0,)]

    # the program runs on the copy, which is reused: change the copy only, the answer changes
    conn = duckdb.connect(str(copies[0]))
    conn.execute("UPDATE singer SET age = 50 WHERE name = 'Ann'")
    conn.close()
    assert run()["rows"] == [(3.0,)]
    # a SQLite file newer than its copy rebuilds it
    later = copies[0].stat().st_mtime + 10
    os.utime(path, (later, later))
    assert run()["rows"] == gold
    assert list((tmp_path / "cache" / spider.DUCKDB_COPIES).iterdir()) == copies


def spider_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modes: str) -> tuple[list[dict], dict]:
    """``spider.main`` on the tiny database with the scripted model in place of LlamaCpp."""
    import blendsql.models

    monkeypatch.setenv(ENV_CACHE_DIR, str(tmp_path / "cache"))
    monkeypatch.setattr(blendsql.models, "LlamaCpp", lambda *a, **k: FunctionModel(scripted_tiny))
    tiny_spider(tmp_path / "data")
    gguf = tmp_path / "scripted.gguf"
    gguf.write_bytes(b"not a model")
    out = tmp_path / "results" / "spider_duckdb_1.jsonl"
    assert spider.main(["--data", str(tmp_path / "data"), "--model", str(gguf), "--n", "2",
                        "--modes", modes, "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return rows, json.loads(out.with_suffix(".json").read_text())


def test_spider_run_pairs_parser_duckdb_with_parser_and_records_backends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, summary = spider_run(tmp_path, monkeypatch, "parser,parser_duckdb")
    assert len(rows) == 2
    for row in rows:
        assert row["parser"]["backend"] == "sqlite" and row["parser_duckdb"]["backend"] == "duckdb"
        assert row["parser"]["match"] and row["parser_duckdb"]["match"], row
        assert row["parser_duckdb"]["duckdb_copy"].startswith(f"${ENV_CACHE_DIR}/{spider.DUCKDB_COPIES}/")
    assert len(list((tmp_path / "cache" / spider.DUCKDB_COPIES).glob("tiny-*.duckdb"))) == 1
    assert summary["duckdb_copies"] == f"${ENV_CACHE_DIR}/{spider.DUCKDB_COPIES}"
    modes = summary["modes"]
    assert (modes["parser"]["backend"], modes["parser_duckdb"]["backend"]) == ("sqlite", "duckdb")
    assert modes["parser_duckdb"]["correct"] == 2 and len(modes["parser_duckdb"]["ci95"]) == 2
    vs = modes["parser_duckdb"]["parser_vs_this"]
    assert vs["n"] == 2 and vs["difference"] == 0.0 and "mcnemar_p" in vs
    assert "| parser_duckdb | 2/2 |" in spider.markdown(summary)
    out = tmp_path / "results" / "spider_duckdb_1.jsonl"  # --combine keeps all of it
    combined = spider.combine([out], tmp_path / "results" / "spider_duckdb.json")
    assert combined["modes"] == modes and combined["duckdb_copies"] == summary["duckdb_copies"]


def test_spider_parser_duckdb_reports_a_failed_copy_in_its_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(sqlite_path, duckdb_path):
        Path(duckdb_path).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(spider, "sqlite_to_duckdb", broken)
    rows, summary = spider_run(tmp_path, monkeypatch, "parser,parser_duckdb")
    assert len(rows) == 2
    for row in rows:
        assert row["parser"]["match"]
        r = row["parser_duckdb"]
        assert not r["match"] and r["backend"] == "duckdb", r
        assert r["error"] == "DuckDB copy of tiny.sqlite failed: OSError: disk full"
    assert list((tmp_path / "cache" / spider.DUCKDB_COPIES).iterdir()) == []  # nothing half-built kept
    assert summary["modes"]["parser_duckdb"]["executed"] == 0.0
