"""The CRUSH benchmark's hallucination cache: re-scoring must not re-run the model.

Why: generating one hallucinated schema with the evaluation model takes
seconds on a loaded CPU, and tuning the selection re-scores the same
questions many times; a stale answer (other model, other prompt) must never
be reused, and the bird tuning split must stay disjoint from the report split.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.schema_retrieval import HallucinationCache, is_bird_dev  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402


def _counting_model(answer: str) -> tuple[FunctionModel, list[Request]]:
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return answer

    return FunctionModel(fn, name="fixed"), seen


def test_second_run_reads_the_file_instead_of_the_model(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    model, seen = _counting_model("- pets.weight\npets.pet_type\n")
    first = HallucinationCache(path, model, "m1")
    assert first.get("How heavy are cats?") == ["pets.weight", "pets.pet_type"]
    assert first.get("How heavy are cats?") == ["pets.weight", "pets.pet_type"]
    assert len(seen) == 1 and first.generated == 1
    again = HallucinationCache(path, model, "m1")
    assert again.get("How heavy are cats?") == ["pets.weight", "pets.pet_type"]
    assert len(seen) == 1 and again.generated == 0
    assert again.mean_seconds([{"question": "How heavy are cats?"}]) is not None


def test_other_model_or_question_is_generated_afresh(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    model, seen = _counting_model("pets.weight\n")
    HallucinationCache(path, model, "m1").get("How heavy are cats?")
    other = HallucinationCache(path, model, "m2")
    other.get("How heavy are cats?")
    other.get("How old are cats?")
    assert len(seen) == 3
    assert len(path.read_text().splitlines()) == 3


def test_no_model_means_no_hallucination(tmp_path: Path) -> None:
    assert HallucinationCache(tmp_path / "h.jsonl", None, "none").get("q") == []


def test_bird_dev_split_is_every_tenth_question() -> None:
    assert [i for i in range(25) if is_bird_dev(i)] == [0, 10, 20]


def test_paired_comparison_counts_and_interval() -> None:
    from benchmarks.schema_retrieval import paired

    out = paired([1.0, 0.5, 1.0, 1.0], [0.5, 0.5, 1.0, 0.0])
    assert (out["wins"], out["ties"], out["losses"]) == (2, 2, 0)
    assert out["mean_diff"] == 0.375
    lo, hi = out["ci95"]
    assert 0.0 <= lo <= out["mean_diff"] <= hi <= 1.0
