"""benchmarks/splash.py through the evaluation protocol (``benchmarks/protocol.py``).

Why: SPLASH test items are Spider dev questions, so a few-shot pool that is not
filtered per item shows an item its own question and gold SQL; a report set of
the first ids covers a few databases; and "correction beats re-parse" needs the
two scored on the same items, by a metric that says which query is right.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import splash  # noqa: E402 - the benchmark script, imported by path

from benchmarks import protocol  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.nl.correct import CorrectionExample  # noqa: E402
from blendsql.nl.parser import Example  # noqa: E402

PETS = ROOT / "tests" / "data" / "spider" / "pets_1" / "pets_1.sqlite"
SCHEMA = {"singer": ["singer_id", "name", "age", "country"], "concert": ["concert_id", "singer_id", "year"]}

# ---------------------------------------------------------------- exact-set match

SAME = [
    # aliases resolved, keywords and spacing ignored
    ("SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id",
     "select singer.name  from singer join concert on singer.singer_id=concert.singer_id"),
    # an unqualified column finds its table in the schema
    ("SELECT T2.name FROM concert AS T1 JOIN singer AS T2 ON T1.singer_id = T2.singer_id",
     "SELECT name FROM singer JOIN concert ON singer.singer_id = concert.singer_id"),
    # values ignored (strings in either quote, numbers, negative numbers, LIMIT's number)
    ("SELECT name FROM singer WHERE country = \"France\" AND age > -1",
     "SELECT name FROM singer WHERE country = 'USA' AND age > 30"),
    ("SELECT name FROM singer ORDER BY age LIMIT 1", "SELECT name FROM singer ORDER BY age ASC LIMIT 3"),
    # sets: select items, conjuncts in any order; SPLASH's tokenised operators
    ("SELECT name, age FROM singer WHERE age > 20 AND country = 'x'",
     "SELECT age, name FROM singer WHERE country = 'y' AND age > 3"),
    ("SELECT Count ( * ) FROM singer WHERE age > = 3", "SELECT count(*) FROM singer WHERE age >= 4"),
    # a column alias in ORDER BY is the aliased expression
    ("SELECT country, count(*) AS c FROM singer GROUP BY country ORDER BY c DESC",
     "SELECT country, count(*) FROM singer GROUP BY country ORDER BY count(*) DESC"),
    # nested queries by their components, set operations by operator and sides
    ("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM concert WHERE year = 1)",
     "SELECT name FROM singer WHERE singer_id IN (SELECT T.singer_id FROM concert AS T WHERE T.year = 2)"),
    ("SELECT name FROM singer UNION SELECT name FROM singer WHERE age > 1",
     "SELECT name FROM singer UNION SELECT name FROM singer WHERE age > 5"),
]

DIFFERENT = [
    ("SELECT name FROM singer", "SELECT age FROM singer"),  # another column
    ("SELECT name FROM singer WHERE age > 20", "SELECT name FROM singer WHERE age < 20"),  # condition
    ("SELECT name FROM singer WHERE age > 20", "SELECT name FROM singer"),  # a condition left out
    ("SELECT name FROM singer ORDER BY age", "SELECT name FROM singer ORDER BY age DESC"),  # direction
    ("SELECT name FROM singer ORDER BY age, name", "SELECT name FROM singer ORDER BY name, age"),  # order
    ("SELECT name FROM singer ORDER BY age LIMIT 1", "SELECT name FROM singer ORDER BY age"),  # limit
    ("SELECT DISTINCT name FROM singer", "SELECT name FROM singer"),
    ("SELECT country FROM singer GROUP BY country", "SELECT country FROM singer"),
    ("SELECT name FROM singer", "SELECT name FROM singer JOIN concert ON singer.singer_id = concert.singer_id"),
    ("SELECT name FROM singer UNION SELECT name FROM singer",
     "SELECT name FROM singer INTERSECT SELECT name FROM singer"),
    ("SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM concert)",
     "SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)"),
    ("SELEC name FRM singer", "SELECT name FROM singer"),  # no parse: no match
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_exact_set_match_ignores_values_aliases_and_spelling(a: str, b: str) -> None:
    assert splash.exact_set_match(a, b, SCHEMA) and splash.exact_set_match(b, a, SCHEMA)


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_exact_set_match_tells_other_queries_apart(a: str, b: str) -> None:
    assert not splash.exact_set_match(a, b, SCHEMA) and not splash.exact_set_match(b, a, SCHEMA)


def test_exact_set_match_without_a_schema_and_without_a_prediction() -> None:
    assert splash.exact_set_match("SELECT T1.name FROM singer AS T1 WHERE T1.country = \"x\"",
                                  "SELECT name FROM singer WHERE country = 'y'")
    assert not splash.exact_set_match(None, "SELECT name FROM singer")
    assert not splash.exact_set_match("", "SELECT name FROM singer")


# ---------------------------------------------------------------- the report set


def _split_dir(tmp_path: Path, sizes: dict[str, int]) -> Path:
    items = [{"db_id": db, "question": f"q{k} on {db}", "feedback": "f", "gold_parse": "SELECT 1",
              "predicted_parse_with_values": "SELECT 2"} for db, n in sizes.items() for k in range(n)]
    (tmp_path / "splash").mkdir(parents=True, exist_ok=True)
    (tmp_path / "splash" / "test.json").write_text(json.dumps(items))
    return tmp_path


def test_report_set_spreads_over_every_database(tmp_path: Path) -> None:
    data = _split_dir(tmp_path, {"a": 8, "b": 3, "c": 1, "d": 2})
    picked = splash.report_set(data, "test", 4, seed=0)
    assert {it["db_id"] for _, it in picked} == {"a", "b", "c", "d"}  # n >= databases: each once
    six = splash.report_set(data, "test", 6, seed=0)
    assert protocol.database_counts(it["db_id"] for _, it in six) in ({"a": 2, "b": 2, "c": 1, "d": 1},
                                                                       {"a": 2, "d": 2, "b": 1, "c": 1},
                                                                       {"b": 2, "d": 2, "a": 1, "c": 1})
    assert splash.report_set(data, "test", 6, seed=0) == six  # seeded
    assert len(splash.report_set(data, "test", None)) == 14
    assert len({i for i, _ in splash.report_set(data, "test", 100)}) == 14  # no item twice
    # the first ids are not the report set: database a fills the file's first 8 ids
    assert [i for i, _ in picked] != list(range(4))


def test_shards_partition_the_report_set_and_run_grouped_by_database(tmp_path: Path) -> None:
    data = _split_dir(tmp_path, {"a": 5, "b": 4, "c": 3})
    items = splash.report_set(data, "test", 9, seed=1)
    one, two = protocol.shard_of(items, "1/2"), protocol.shard_of(items, "2/2")
    assert sorted(i for i, _ in one + two) == sorted(i for i, _ in items) and not {i for i, _ in one} & {
        i for i, _ in two}
    ordered = splash.in_database_order(one)
    dbs = [it["db_id"] for _, it in ordered]
    assert dbs == sorted(dbs, key=dbs.index)  # each database's items together
    with pytest.raises(SystemExit):
        protocol.shard_of(items, "3/2")


# ---------------------------------------------------------------- per-item pools

ITEM = {"db_id": "pets_1", "question": "How many students are there?",
        "feedback": "count the students instead", "gold_parse": "SELECT count(*) FROM Student",
        "predicted_parse_with_values": "SELECT Count ( * ) FROM Pets"}


def _pets(tmp_path: Path) -> Path:
    db_dir = tmp_path / "spider" / "database" / "pets_1"
    db_dir.mkdir(parents=True)
    (db_dir / "pets_1.sqlite").write_bytes(PETS.read_bytes())
    return tmp_path


SPIDER_POOL = [
    Example("How many pets are there?", "SELECT count(*) FROM Pets", db="pets_1", id="own-db"),
    Example("how many STUDENTS are there", "SELECT count(*) FROM singer", db="concert_singer", id="same-question"),
    Example("Count the people.", "SELECT count(*) FROM student AS T1", db="other", id="same-sql"),
    Example("Number of enrolled people?", "SELECT count(*) FROM Student WHERE 1 = 1", db="other2",
            id="same-result"),
    Example("What are the names of all singers?", "SELECT name FROM singer", db="concert_singer", id="clean"),
]

CORRECTIONS = [
    (CorrectionExample("How many pets?", "SELECT 1", "f", "SELECT count(*) FROM Pets"), "pets_1"),
    (CorrectionExample("How many students are there ?", "SELECT 1", "f", "SELECT 2"), "school"),
    (CorrectionExample("Count them.", "SELECT 1", "f", "select COUNT(*) from student"), "school"),
    (CorrectionExample("Count them again.", "SELECT count(*) FROM Student", "f", "SELECT 3"), "school"),
    (CorrectionExample("List the singers.", "SELECT age FROM singer", "use the name",
                       "SELECT name FROM singer"), "concert_singer"),
]


def test_the_item_pools_drop_its_database_question_sql_and_result(tmp_path: Path) -> None:
    data = _pets(tmp_path)
    spool, cpool = splash.item_pools(ITEM, data, SPIDER_POOL, CORRECTIONS, protocol.ResultOracle())
    assert [e.id for e in spool] == ["clean"]
    assert [ex.question for ex, _ in cpool] == ["List the singers."]  # wrong or corrected query = gold: out
    # without the result oracle the result twin stays (its SQL is another)
    spool, _ = splash.item_pools(ITEM, data, SPIDER_POOL, CORRECTIONS, None)
    assert [e.id for e in spool] == ["same-result", "clean"]


def test_run_item_shows_only_the_leak_free_examples(tmp_path: Path) -> None:
    data = _pets(tmp_path)
    prompts: list[str] = []

    def answer(req: Request) -> str:
        prompts.append(req.prompt)
        return "SELECT count(*) FROM Student"

    row = splash.run_item(3, ITEM, data, FunctionModel(answer), True, retries=0, spider_pool=SPIDER_POOL,
                          n_examples=3, sources=("fresh", "edit"), corrections=CORRECTIONS)
    text = "\n".join(prompts)
    assert "What are the names of all singers?" in text and "List the singers." in text
    for leaking in ("How many pets are there?", "how many STUDENTS are there", "Count the people.",
                    "Number of enrolled people?", "How many pets?", "Count them."):
        assert leaking not in text
    assert row["spider_pool"] == 1 and row["correction_pool"] == 1
    assert row["e2e_match"] and row["e2e_exact"] and not row["wrong_exact"]
    assert {c["source"]: (c["match"], c["exact"]) for c in row["candidates"]} == {
        "fresh": (True, True), "edit": (True, True)}


# ---------------------------------------------------------------- scores


def _row(i: int, fresh: bool, edit: bool, already: bool = False, exact: bool | None = None) -> dict[str, Any]:
    """A recorded row: the fresh and edit candidates' outcomes (distinct results)."""
    ex = {"fresh": fresh if exact is None else exact, "edit": edit if exact is None else exact}

    def cand(source: str, right: bool) -> dict[str, Any]:
        return {"source": source, "program": f"SELECT '{source}'", "error": None, "rows": 1,
                "repeats_rejected": False, "unchanged": False, "chosen": False, "seconds": 1.0,
                "match": right, "exact": ex[source], "result": f"{source}{i}", "order": None, "sort": None}

    return {"i": i, "db": "d", "wrong_already_right": already, "wrong_exact": False,
            "wrong_key": {"result": f"wrong{i}", "order": None, "sort": None},
            "e2e_match": fresh, "e2e_exact": ex["fresh"], "corrected": "x", "diff": "+ x", "gold_error": None,
            "correction_seconds": 2.0, "e2e_seconds": 1.0, "correction_match": fresh or edit,
            "candidates": [cand("fresh", fresh), cand("edit", edit)]}


def test_edit_fresh_and_combined_are_scored_on_the_same_items_and_paired() -> None:
    rows = [_row(0, True, False), _row(1, False, True), _row(2, False, True), _row(3, False, False),
            _row(4, True, True, already=True), _row(5, False, True, exact=False)]
    flags = splash.item_flags(rows[1])
    assert flags["execution"] == {"edit": True, "fresh": False, "combined": False}  # tie: fresh first
    s = splash.scores(rows)
    ex = s["all"]["execution"]
    assert (ex["fresh"]["correct"], ex["edit"]["correct"], ex["combined"]["correct"]) == (2, 4, 2)
    assert ex["edit"]["ci95"] == list(protocol.wilson(4, 6))
    assert ex["edit_vs_fresh"]["only_first_right"] == 3 and ex["edit_vs_fresh"]["only_second_right"] == 1
    where = ex["edit_vs_fresh_where_fresh_wrong"]
    assert where["n"] == 4 and where["edit"]["correct"] == 3
    assert s["all"]["exact_set"]["edit"]["correct"] == 3  # item 5: right rows, other query
    assert s["without_wrong_already_right"]["items"] == 5
    assert s["without_wrong_already_right"]["execution"]["fresh"]["correct"] == 1
    assert s["wrong_already_right"] == {"items": 1, "ids": [4]}
    summary = splash.summarize(rows)
    assert summary["right_by_sources"]["edit"] == 4 and summary["candidates"]["edit"]["exact"] == 3


def test_a_run_without_the_edit_source_scores_no_edit() -> None:
    row = _row(0, True, False)
    row["candidates"] = [c for c in row["candidates"] if c["source"] == "fresh"]
    assert splash.item_flags(row)["execution"] == {"edit": None, "fresh": True, "combined": None}
    assert set(splash.metric_scores([row], "execution")) == {"fresh"}


# ---------------------------------------------------------------- the leak check (needs the data)


def test_leak_checks_build_the_real_prompts_without_leaks() -> None:
    data = protocol.data_dir()
    if not (data / "splash" / "test.json").is_file() or not (data / "spider" / "database").is_dir():
        pytest.skip(f"benchmark data not found (splash/, spider/ under ${protocol.DATA_ENV} or ../shared/data)")
    checks = splash.leak_checks(data, n=4)
    assert len(checks) == 4 and len({c.target.db for c in checks}) == 4
    oracle = protocol.ResultOracle()
    for c in checks:
        assert "Corrected query:" in c.prompt and "-- Question:" in c.prompt
        assert any(isinstance(e, Example) for e in c.shown)
        assert any(isinstance(e, splash.ShownCorrection) for e in c.shown)
        assert protocol.prompt_leaks(c, oracle) == []


def test_combine_merges_shards_into_one_summary(tmp_path: Path) -> None:
    parts = []
    for k, rows in enumerate(([_row(0, True, False), _row(1, False, True)], [_row(2, False, False)])):
        part = tmp_path / f"splash_{k + 1}.jsonl"
        part.write_text("".join(json.dumps(r) + "\n" for r in rows))
        part.with_suffix(".json").write_text(json.dumps({"command": f"python benchmarks/splash.py --shard {k + 1}/2",
                                                         "split": "test", "seed": 0, "requested_n": 3}))
        parts.append(part)
    summary = splash.combine(parts, tmp_path / "splash.json")
    assert summary["ids"] == [0, 1, 2] and summary["databases"] == {"d": 3} and summary["n"] == 3
    assert summary["scores"]["all"]["execution"]["edit"]["correct"] == 1
    assert len(summary["runs"]) == 2 and str(tmp_path) not in summary["command"]
    assert json.loads((tmp_path / "splash.json").read_text())["ids"] == [0, 1, 2]


def test_the_prompt_check_finds_what_an_unfiltered_pool_shows(tmp_path: Path) -> None:
    data = _pets(tmp_path)
    model = FunctionModel(lambda req: "")
    oracle = protocol.ResultOracle()
    spool, cpool = splash.item_pools(ITEM, data, SPIDER_POOL, CORRECTIONS, oracle)
    clean = splash.item_prompt_check(7, ITEM, data, spool, cpool, model)
    assert clean.item == "test 7" and clean.given[:3] == (ITEM["question"], "SELECT Count ( * ) FROM Pets",
                                                          ITEM["feedback"])
    assert protocol.prompt_leaks(clean, oracle) == []
    leaky = splash.item_prompt_check(7, ITEM, data, SPIDER_POOL, CORRECTIONS, model)
    reasons = protocol.prompt_leaks(leaky, oracle)
    assert any("same database" in r for r in reasons) and any("same SQL" in r for r in reasons)
    # no pool example: the fixed worked correction, on its own (SPLASH dev) database
    fixed = splash.item_prompt_check(7, ITEM, data, spool, [], model)
    assert {e.db for e in fixed.shown if isinstance(e, splash.ShownCorrection)} == {splash.DEFAULT_EXAMPLE_DB}
    assert protocol.prompt_leaks(fixed, oracle) == []
