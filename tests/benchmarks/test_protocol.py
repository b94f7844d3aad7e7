"""The evaluation protocol (benchmarks/protocol.py): report sets, leak-free pools, statistics."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import protocol  # noqa: E402

SPIDER = ROOT / "tests" / "data" / "spider"


@dataclass(frozen=True)
class Ex:
    question: str
    program: str
    db: str


def test_spread_deals_round_robin_over_every_database() -> None:
    items = [("a", i) for i in range(30)] + [("b", i) for i in range(5)] + [("c", i) for i in range(2)]
    picked = protocol.spread(items, lambda t: t[0], 6, seed=1)
    assert sorted(t[0] for t in picked) == ["a", "a", "b", "b", "c", "c"]
    assert protocol.spread(items, lambda t: t[0], 6, seed=1) == picked  # seeded
    everything = protocol.spread(items, lambda t: t[0], None, seed=1)
    assert sorted(everything) == sorted(items)


def test_spread_groups_stops_at_the_question_count() -> None:
    groups = [("a", 3), ("a", 3), ("b", 2), ("c", 4)]
    picked = protocol.spread_groups(groups, lambda g: g[0], lambda g: g[1], 6, seed=0)
    assert len({g[0] for g in picked}) == len(picked)  # one dialogue per database first
    assert sum(g[1] for g in picked) >= 6 and sum(g[1] for g in picked[:-1]) < 6
    assert picked == protocol.spread_groups(groups, lambda g: g[0], lambda g: g[1], 6, seed=0)


def test_norm_sql_ignores_case_spacing_and_aliases() -> None:
    a = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.id = T2.sid WHERE T2.year > = 2014"
    b = "select singer.name  from singer join concert on singer.id=concert.sid where concert.year>=2014;"
    assert protocol.norm_sql(a) == protocol.norm_sql(b)
    assert protocol.norm_sql("SELECT count(*) AS n FROM singer") == protocol.norm_sql("select COUNT(*) from singer")
    assert protocol.norm_sql("SELECT name FROM singer") != protocol.norm_sql("SELECT age FROM singer")
    # an alias reused in a subquery is that subquery's own; one table in scope needs no qualifier
    reused = "SELECT T1.name FROM a AS T1 WHERE T1.id NOT IN (SELECT T1.id FROM b AS T1)"
    other = "SELECT T1.name FROM a AS T1 WHERE T1.id NOT IN (SELECT T2.id FROM b AS T2)"
    assert protocol.norm_sql(reused) == protocol.norm_sql(other)
    assert protocol.norm_sql("SELECT T1.name FROM singer AS T1") == protocol.norm_sql("SELECT name FROM singer")
    assert protocol.norm_sql("SELECT a.x FROM a JOIN b ON a.id = b.id") != protocol.norm_sql(
        "SELECT b.x FROM a JOIN b ON a.id = b.id")


def test_norm_question_ignores_case_and_punctuation() -> None:
    assert protocol.norm_question("How many singers are on record?") == protocol.norm_question("how many  singers are on RECORD")


def test_leak_free_drops_same_database_question_sql_and_result() -> None:
    path = SPIDER / "concert_singer" / "concert_singer.sqlite"
    if not path.exists():
        pytest.skip("fixture database missing")
    target = protocol.Target("concert_singer", ("How many singers are on record?",),
                             ("SELECT count(*) FROM singer",), path)
    pool = [
        Ex("How many concerts are there?", "SELECT count(*) FROM concert", "concert_singer"),  # same db
        Ex("how many singers are on record", "SELECT count(*) FROM dogs", "dog_kennels"),  # same question
        Ex("Count the singers.", "select COUNT(*)  from singer AS T1", "other_db"),  # same SQL
        Ex("Number of singers?", "SELECT count(singer_id) FROM singer", "other_db"),  # same result
        Ex("How many cars are there?", "SELECT count(*) FROM cars_data", "car_1"),  # fine
    ]
    oracle = protocol.ResultOracle()
    kept = protocol.leak_free(pool, target, oracle)
    assert kept == [pool[-1]]
    reasons = [protocol.leak_reason(e, target, oracle, [oracle.key(path, "SELECT count(*) FROM singer")])
               for e in pool]
    assert reasons == ["same database", "same question", "same SQL", "same result", None]


def test_an_example_without_a_database_counts_as_a_leak() -> None:
    target = protocol.Target("x", ("q",), ("SELECT 1",))
    assert protocol.leak_reason(Ex("other", "SELECT 2", ""), target) == "example without a database id"


def test_prompt_leaks_finds_the_gold_in_the_prompt_text() -> None:
    target = protocol.Target("db1", ("Which singers are older than 30?",), ("SELECT name FROM singer WHERE age > 30",))
    clean = protocol.PromptCheck("t", "1", "schema...\n-- Question: Which singers are older than 30?", [], target,
                                 given=("Which singers are older than 30?",))
    assert protocol.prompt_leaks(clean) == []
    leaky = protocol.PromptCheck("t", "2", "-- Question: which singers are older than 30\n"
                                 "select name from singer where age>30;\n-- Question: Which singers are older than 30?",
                                 [], target, given=("Which singers are older than 30?",))
    found = protocol.prompt_leaks(leaky)
    assert any("question" in f for f in found) and any("gold SQL" in f for f in found)


def test_wilson_and_paired_statistics() -> None:
    lo, hi = protocol.wilson(70, 100)
    assert 0.60 < lo < 0.61 and 0.78 < hi < 0.79
    assert protocol.wilson(0, 0) == (0.0, 0.0)
    a = [True] * 60 + [False] * 40
    b = [True] * 50 + [False] * 50
    p = protocol.paired(a, b)
    assert p["difference"] == 0.1 and p["only_first_right"] == 10 and p["only_second_right"] == 0
    assert p["mcnemar_p"] < 0.01
    assert p["ci95"][0] > 0
    assert protocol.mcnemar_p(5, 5) == 1.0
    with pytest.raises(ValueError):
        protocol.paired([True], [True, False])


def test_command_line_names_the_model_by_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(protocol.MODEL_ENV, "/somewhere/m.gguf")
    cmd = protocol.command_line("spider.py", ["--model", "/somewhere/m.gguf", "--n", "5"])
    assert cmd == "python benchmarks/spider.py --model $BLENDSQL_EVAL_MODEL --n 5"


def test_run_record_names_commit_machine_and_model_without_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    monkeypatch.setenv("BLENDSQL_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    rec = protocol.run_record("spider.py", [], gguf)
    assert rec["model"] == {"file": "m.gguf", "sha256": hashlib.sha256(b"weights").hexdigest()}
    assert set(rec) >= {"commit", "clean_tree", "machine", "date", "command"}
    assert str(tmp_path) not in str(rec)


def test_grouped_in_batches_keeps_each_batch_and_groups_databases() -> None:
    dealt = ["a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3"]
    out = protocol.grouped_in_batches(dealt, lambda s: s[0], 6)
    assert out == ["a1", "a2", "b1", "b2", "c1", "c2", "a3", "b3"]


def test_prompt_leaks_needs_the_whole_gold_statement() -> None:
    target = protocol.Target("db1", ("List every hiring.",), ("SELECT * FROM hiring",))
    header = protocol.PromptCheck("t", "3", "/*\nSELECT * FROM hiring LIMIT 3;\n*/\n-- Question: List every hiring.",
                                  [], target, given=("List every hiring.",))
    assert protocol.prompt_leaks(header) == []
    shown = protocol.PromptCheck("t", "4", "-- Question: all hirings\nSELECT * FROM hiring;\n", [], target)
    assert protocol.prompt_leaks(shown)


def test_prompt_leaks_takes_a_longer_question_for_another_question() -> None:
    target = protocol.Target("db1", ("who won the most times?",), ("SELECT 1",))
    other = protocol.PromptCheck("t", "5", "-- Question: Find the winner who won the most times.\n"
                                 "-- Question: who won the most times?", [], target,
                                 given=("who won the most times?",))
    assert protocol.prompt_leaks(other) == []
    same = protocol.PromptCheck("t", "6", "-- Question: Who won the most times\nSELECT 2;", [], target)
    assert protocol.prompt_leaks(same)


def test_command_line_shows_no_location_of_this_machine(tmp_path: Path) -> None:
    out = tmp_path / "checkout" / "benchmarks" / "results" / "spider_1.jsonl"
    cmd = protocol.command_line("spider.py", ["--out", str(out), f"--data={tmp_path / 'data'}",
                                              f"--model={tmp_path / 'm.gguf'}"])
    assert cmd == ("python benchmarks/spider.py --out benchmarks/results/spider_1.jsonl --data=data "
                   "--model=$BLENDSQL_EVAL_MODEL")


def test_prompt_leaks_finds_gold_sql_on_a_line_of_its_own() -> None:
    target = protocol.Target("db1", ("q?",), ("SELECT count(*) FROM singer",))
    check = protocol.PromptCheck("t", "7", "SQL: SELECT count(*) FROM singer\n\nQuestion: other", [], target)
    assert protocol.prompt_leaks(check)


def test_run_readonly_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert protocol.run_readonly(tmp_path / "missing.sqlite", "SELECT 1", 1.0) is None


def _commit(repo: Path, files: dict[str, str | None], message: str) -> None:
    import subprocess

    for name, text in files.items():
        path = repo / "benchmarks" / "results" / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", message], check=True, capture_output=True)


def test_touched_ids_reads_every_committed_version_withdrawn_runs_included(tmp_path: Path) -> None:
    import json
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    rows = lambda *ids: "".join(json.dumps({"id": i, "x": 1}) + "\n" for i in ids)  # noqa: E731
    _commit(tmp_path, {"spider_1.jsonl": rows(1, 2), "spider_dev.jsonl": rows(50),
                       "sparc_1.jsonl": rows(70)}, "first run")
    _commit(tmp_path, {"spider_1.jsonl": rows(3)}, "a later run replaced its rows")
    _commit(tmp_path, {"spider_old.jsonl": rows(4)}, "a run")
    _commit(tmp_path, {"spider_old.jsonl": None}, "withdrawn")
    (tmp_path / "benchmarks" / "results" / "spider_new.jsonl").write_text(rows(9))  # not committed
    touched = protocol.touched_ids("spider", root=tmp_path)
    assert touched["ids"] == {1, 2, 3, 4}  # dev runs, other benchmarks, uncommitted rows: no
    assert touched["files"] == ["benchmarks/results/spider_1.jsonl",
                                "benchmarks/results/spider_old.jsonl"]
    check = protocol.reuse_check([2, 5, 4, 6], touched)
    assert check["checked"] and check["reused"] == 2 and check["reused_ids"] == [2, 4]
    assert check["items"] == 4 and check["touched_before"] == 4
    resumed = protocol.touched_ids("spider", root=tmp_path,
                                   exclude=[tmp_path / "benchmarks/results/spider_1.jsonl"])
    assert resumed["ids"] == {4}


def test_touched_ids_outside_a_checkout_says_it_could_not_check(tmp_path: Path) -> None:
    touched = protocol.touched_ids("spider", root=tmp_path)
    assert touched["ids"] is None
    assert protocol.reuse_check([1], touched) == {"checked": False, "why": touched["error"]}


def test_untouched_keeps_the_dealt_order_and_refuses_without_history() -> None:
    items = [(i, "db") for i in range(10)]
    touched = {"ids": {0, 2, 3}, "files": [], "versions": 1}
    assert protocol.untouched(items, lambda t: t[0], 4, touched) == [(1, "db"), (4, "db"),
                                                                     (5, "db"), (6, "db")]
    with pytest.raises(SystemExit, match="git history"):
        protocol.untouched(items, lambda t: t[0], 4, {"ids": None, "error": "no git"})
