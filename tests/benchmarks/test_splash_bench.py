"""benchmarks/splash.py: run order of the chosen items and of the two calls of one item.

Why: the benchmark's cost is prompt evaluation. The correction prompt opens
with the parser prompt's guide and schema, so the fresh parse must run first
within an item (its prompt warms the model's cache), and grouping items by
database must not change which items are scored.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import splash  # noqa: E402 - the benchmark script, imported by path

from blendsql.models.base import FunctionModel, Request  # noqa: E402

PETS = ROOT / "tests" / "data" / "spider" / "pets_1" / "pets_1.sqlite"


def test_database_order_keeps_the_items_and_groups_them():
    items: list[tuple[int, dict[str, Any]]] = [
        (0, {"db_id": "a"}), (9, {"db_id": "b"}), (18, {"db_id": "a"}), (27, {"db_id": "c"}),
        (36, {"db_id": "b"}), (45, {"db_id": "a"})]
    out = splash.in_database_order(items)
    assert sorted(i for i, _ in out) == sorted(i for i, _ in items)
    assert [i for i, _ in out] == [0, 18, 45, 9, 36, 27]  # first-seen database order, stable inside
    assert splash.in_database_order([]) == []


ITEM = {"db_id": "pets_1", "question": "How many pets are owned by students?",
        "feedback": "count the students instead", "gold_parse": "SELECT count(*) FROM Student",
        "predicted_parse_with_values": "SELECT Count ( * ) FROM Pets WHERE weight > 100"}


def _spider_dir(tmp_path: Path) -> None:
    """A Spider data folder holding only pets_1."""
    db_dir = tmp_path / "spider" / "database" / "pets_1"
    db_dir.mkdir(parents=True)
    (db_dir / "pets_1.sqlite").write_bytes(PETS.read_bytes())


def test_the_correction_candidates_share_the_opening_and_the_fresh_one_is_the_baseline(tmp_path: Path):
    _spider_dir(tmp_path)
    prompts: list[str] = []

    def answer(req: Request) -> str:
        prompts.append(req.prompt)
        if req.prompt.rstrip().endswith("Corrected query:") or "The user says it is wrong" in req.prompt:
            return "SELECT COUNT(*) FROM Student"
        return "SELECT COUNT(*) FROM Pets"

    row = splash.run_item(0, ITEM, tmp_path, FunctionModel(answer), True, retries=0,
                          spider_pool=[], n_examples=1, sources=("guided", "fresh", "edit"))
    kinds = ["fix" if p.rstrip().endswith("Corrected query:") else
             "guided" if "The user says it is wrong" in p else "fresh" for p in prompts]
    assert kinds == ["guided", "fresh", "fix"]  # the fresh parse is written once, inside the correction
    schema_start = prompts[0].index("CREATE TABLE")
    assert all(p[: schema_start + 200] == prompts[0][: schema_start + 200] for p in prompts)
    assert row["e2e_match"] is False and row["e2e_pred"] == "SELECT COUNT(*) FROM Pets"
    assert row["correction_match"] is True  # guided and edit agree on the students' count
    by_source = {c["source"]: c for c in row["candidates"]}
    assert by_source["guided"]["match"] and by_source["edit"]["match"] and not by_source["fresh"]["match"]
    assert [c["chosen"] for c in row["candidates"]] == [True, False, False]
    summary = splash.summarize([row])
    assert summary["end_to_end_acc"] == 0.0 and summary["candidates"]["guided"]["match"] == 1


def test_without_a_fresh_candidate_the_baseline_is_parsed_first(tmp_path: Path):
    _spider_dir(tmp_path)
    prompts: list[str] = []

    def answer(req: Request) -> str:
        prompts.append(req.prompt)
        return "SELECT COUNT(*) FROM Student" if req.prompt.rstrip().endswith("Corrected query:") \
            else "SELECT COUNT(*) FROM Pets"

    row = splash.run_item(0, ITEM, tmp_path, FunctionModel(answer), True, retries=0,
                          spider_pool=[], n_examples=1, sources=("edit",))
    assert row["correction_match"] is True and row["e2e_match"] is False
    kinds = ["fix" if p.rstrip().endswith("Corrected query:") else "parse" for p in prompts]
    assert kinds == ["parse", "fix"]


def test_policy_table_replays_the_choice_from_recorded_candidates():
    def cand(source, result, match, repeats=False, error=None):
        return {"source": source, "program": f"SELECT '{source}'", "error": error, "rows": 1,
                "repeats_rejected": repeats, "unchanged": False, "chosen": False, "seconds": 1.0,
                "match": match, "result": result}

    rows = [
        # guided and edit agree on a wrong result, fresh is right alone
        {"candidates": [cand("guided", "a", False), cand("fresh", "b", True), cand("edit", "a", False)]},
        # guided repeats the rejected result; edit is right
        {"candidates": [cand("guided", None, False, repeats=True), cand("fresh", None, False, error="x"),
                        cand("edit", "c", True)]},
    ]
    table = splash.policy_table(rows)
    assert table["guided"] == 0 and table["fresh"] == 1 and table["edit"] == 1
    assert table["guided,fresh,edit"] == 1  # vote: a (2) beats b (1) on the first item
    assert table["fresh,edit"] == 2 and table["fresh,guided"] == 1


def test_rekey_keys_recorded_queries_as_the_conversation_does_now(tmp_path: Path):
    """A candidate that re-sorts the rejected rows is a new answer in the replay too."""
    _spider_dir(tmp_path)
    wrong = "SELECT PetID FROM Pets ORDER BY PetID"

    def cand(source, program, match):
        return {"source": source, "program": program, "error": None, "rows": 3, "repeats_rejected": True,
                "unchanged": False, "chosen": False, "seconds": 1.0, "match": match, "result": "old"}

    rows = [{"db": "pets_1", "wrong": wrong, "candidates": [
        cand("fresh", "SELECT PetID FROM Pets ORDER BY PetID DESC", True),
        cand("edit", "SELECT PetID FROM Pets", False)]}]
    assert splash.policy_table(rows)["edit,fresh"] == 0  # as recorded: both repeat; the first of them
    assert splash.rekey(rows, tmp_path) == 3
    fresh, edit = rows[0]["candidates"]
    assert fresh["result"] == edit["result"] == rows[0]["wrong_key"]["result"]
    assert fresh["order"] and rows[0]["wrong_key"]["order"] != fresh["order"] and edit["order"] is None
    assert fresh["sort"] == "ORDER BY PetID DESC" and rows[0]["wrong_key"]["sort"] == "ORDER BY PetID"
    table = splash.policy_table(rows)
    assert table["fresh,edit"] == 1 and table["edit,fresh"] == 1  # the unsorted edit repeats; fresh is new
