"""benchmarks/endpoint_scaling.py at tiny sizes: its checks hold and its JSON has its shape.

No timing is asserted (the machine may be busy): only that the answers are right,
each value reached the fake servers once, the slot limits held, and that the
results file carries the run record and every number ``python -m benchmarks
endpoint-scaling`` reads from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import endpoint_scaling as es  # noqa: E402
from benchmarks import published  # noqa: E402

TINY = ["--rows", "200", "--distinct", "50", "--endpoints", "1", "2", "4", "--slots", "2",
        "--latency", "0.002", "--timeout", "20", "--baseline-values", "20", "--profile", "10",
        "--executors"]  # no Spark rows here: they start their own session (a subprocess's job)


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("es") / "endpoint_scaling.json"
    rec = es.main([*TINY, "--out", str(out)])
    assert rec is not None
    on_disk: dict[str, Any] = json.loads(out.read_text())
    assert on_disk["summary"] == rec["summary"]
    return on_disk


def test_the_checks_hold(record: dict[str, Any]) -> None:
    assert [r["endpoints"] for r in record["engine"]] == [1, 2, 4]
    for r in record["engine"]:
        assert "error" not in r, r.get("error")
        assert r["correct"], r["checks"]
        assert all(r["checks"].values())
        assert r["query_result"] == r["expected"]
        assert r["model_calls"] == r["distinct_values_answered"] == 50
        assert r["server_stats"]["requests"] == 50
        assert r["server_stats"]["values_asked_more_than_once"] == 0
        assert len(r["per_endpoint"]) == r["endpoints"]
        assert sum(e["requests"] for e in r["per_endpoint"]) == 50
        assert all(e["max_in_flight"] <= 2 for e in r["per_endpoint"])
        assert r["summed_limit_per_s"] == pytest.approx(r["endpoints"] * 2 / 0.002)
    assert record["summary"]["all_correct"] is True
    for name in ("pool_only", "plain_openai_client"):
        base = record["baselines"][name]
        assert base["answers_right"] == base["values"] == 20, name
        assert base["each_value_asked_once"], name


def test_the_json_shape(record: dict[str, Any]) -> None:
    for key in ("command", "commit", "clean_tree", "machine", "date", "settings", "table",
                "engine", "summary", "client_cpu_profile"):
        assert key in record, key
    assert record["command"].startswith("python benchmarks/endpoint_scaling.py --rows 200")
    assert record["machine"]["cores"]
    assert record["table"]["count"] == record["engine"][0]["expected"]["count"]
    rows = record["summary"]["rows"]
    assert [r["endpoints"] for r in rows] == [1, 2, 4]
    assert rows[0]["ratio_to_first"] == 1.0
    for r in rows:
        for key in ("values_per_s", "fraction_of_limit", "ratio_to_first", "summed_limit_per_s"):
            assert isinstance(r[key], (int, float)) and r[key] > 0, (key, r)
    for r in rows:  # the CPU each row ran on and its client CPU per request
        assert r["cpu"] == record["machine"]["cpu"]
        assert isinstance(r["client_cpu_ms_per_request"], float)
        assert r["client_cpu_ms_per_request"] > 0
    targets = record["summary"]["targets"]
    assert {"fraction_of_limit_at_4", "ratio_4_over_1", "fraction_of_limit_at_4_ge_0.9",
            "ratio_4_over_1_ge_3.5", "client_cpu_ms_per_request_at_4",
            "client_cpu_ms_per_request_at_4_le_0.5"} <= set(targets)
    for phase in ("before_first_request", "model", "after_last_answer"):
        assert record["engine"][0]["phases_s"][phase] is not None
    prof = record["client_cpu_profile"]
    assert set(prof["cpu_ms_per_request"]) == {
        "blendsql OpenAI.answer", "blendsql OpenAI.answer on the SDK's httpx client",
        "openai SDK call", "http.client + json"}
    assert prof["cprofile_share_by_layer"]


def test_the_registered_numbers_read_from_the_json(record: dict[str, Any]) -> None:
    ENDPOINT_SCALING = published.REGISTRY["endpoint-scaling"]  # noqa: N806 - a constant
    values = published.read_numbers(ENDPOINT_SCALING, record)
    labelled = list(zip([n.label for n in ENDPOINT_SCALING.numbers], values, strict=True))
    # the Spark rows' numbers are absent from this run without Spark rows (--executors)
    assert all(v is not None for label, v in labelled if not label.startswith("Spark")), labelled
    assert all(v is None for label, v in labelled if label.startswith("Spark")), labelled
    source = (ROOT / "benchmarks" / "endpoint_scaling.py").read_text()
    for command in ENDPOINT_SCALING.commands():
        assert (ROOT / "benchmarks" / command[0]).is_file()
        for arg in command[1:]:
            if arg.startswith("--"):
                assert f'"{arg}"' in source, arg


def test_python_dash_m_benchmarks_knows_it() -> None:
    out = subprocess.run([sys.executable, "-m", "benchmarks", "endpoint-scaling", "--dry-run"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "python benchmarks/endpoint_scaling.py --rows 1000000 --distinct 100000" in out.stdout


def test_its_quick_run_is_the_same_measurement_smaller() -> None:
    bench = published.REGISTRY["endpoint-scaling"]
    (full,), (quick,) = bench.steps, bench.quick
    options = {a for a in full[0] if a.startswith("--")}
    assert {a for a in quick[0] if a.startswith("--")} == options
    size = {a: int(quick[0][quick[0].index(a) + 1]) for a in ("--rows", "--distinct")}
    assert size["--distinct"] < int(full[0][full[0].index("--distinct") + 1])
    assert size["--rows"] == 10 * size["--distinct"]  # ten rows a value, as the full run
    out = subprocess.run([sys.executable, "-m", "benchmarks", "endpoint-scaling", "--quick",
                          "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "python benchmarks/endpoint_scaling.py --rows 250000 --distinct 25000" in out.stdout
    none = subprocess.run([sys.executable, "-m", "benchmarks", "hot-path", "--quick",
                           "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert none.returncode == 2 and "no --quick run" in none.stderr


def test_the_fake_server_answers_completions_and_logprobs() -> None:
    import openai

    with es.fake_servers(1, 2, 0.001) as servers:
        client = openai.OpenAI(api_key="sk-no-key", base_url=servers.urls[0], max_retries=0)
        assert [m.id for m in client.models.list().data] == [es.MODEL]
        value = es.value_text(7, 50)
        want = "true" if es.answer_for(value) else "false"
        chat = client.chat.completions.create(
            model=es.MODEL, messages=[{"role": "user", "content": f"Q\n\nValue: {value}\nAnswer:"}],
            logprobs=True, top_logprobs=2)
        assert chat.choices[0].message.content == want
        assert chat.usage is not None and chat.usage.completion_tokens == 1
        assert chat.choices[0].logprobs is not None
        content = chat.choices[0].logprobs.content
        assert content and content[0].top_logprobs[0].token == want
        done = client.completions.create(model=es.MODEL, prompt=f"Value: {value}\nAnswer:")
        assert done.choices[0].text == want
        stats = servers.stats()
    assert stats["requests"] == 2 and stats["values_asked_more_than_once"] == 1
    assert stats["endpoints"][0]["logprobs_asked"] == 1
    assert stats["endpoints"][0]["completions"] == 1


def test_the_table_and_the_rule() -> None:
    assert es.value_text(3, 100_000) == "v000003"
    assert es.value_text(3, 10_000_000) == "v0000003"
    assert sorted({es.row_value(r, 50) for r in range(200)}) == list(range(50))
    assert es._value_in("x\nValue: v000012\nAnswer:") == "v000012"
    assert es._value_in("no value here") is None
