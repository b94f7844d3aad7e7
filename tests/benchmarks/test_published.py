"""``python -m benchmarks NAME``: every published number has a command that exists.

Checks the registry of ``benchmarks/published.py`` without running a benchmark:
each script exists and takes the flags given to it, ``--list`` / ``--dry-run`` /
``--recorded`` work, every recorded number is found in its committed results file,
the READMEs' ``python -m benchmarks NAME`` commands name registered benchmarks and
every benchmark is published there; and the runner, on a fake command, prints the
new number beside the recorded one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import published  # noqa: E402
from benchmarks.published import BENCHES, REGISTRY, Bench, Number, lookup  # noqa: E402

READMES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
COMMAND = re.compile(r"python -m benchmarks ([a-z0-9][a-z0-9-]*)")


def test_names_are_unique_and_every_script_exists() -> None:
    assert len(REGISTRY) == len(BENCHES)
    for bench in BENCHES:
        assert bench.commands(), bench.name
        assert bench.numbers, bench.name
        for command in bench.commands():
            assert (ROOT / "benchmarks" / command[0]).is_file(), (bench.name, command[0])


def test_every_flag_is_one_the_script_takes() -> None:
    for bench in BENCHES:
        for command in bench.commands():
            source = (ROOT / "benchmarks" / command[0]).read_text()
            for arg in command[1:]:
                if arg.startswith("--"):
                    assert f'"{arg}"' in source, f"{bench.name}: {command[0]} has no {arg}"


def test_every_published_number_is_in_its_committed_results() -> None:
    for bench in BENCHES:
        if bench.pending:
            continue
        data = published.recorded_json(bench)
        assert data is not None, f"{bench.name}: no {bench.results}"
        values = published.read_numbers(bench, data)
        missing = [n.label for n, v in zip(bench.numbers, values, strict=True) if v is None]
        assert not missing, f"{bench.name}: not in {bench.results}: {missing}"


def test_readme_commands_name_registered_benchmarks() -> None:
    used: set[str] = set()
    for readme in READMES:
        names = set(COMMAND.findall(readme.read_text(encoding="utf-8")))
        unknown = names - set(REGISTRY)
        assert not unknown, f"{readme.name} names unregistered benchmarks: {sorted(unknown)}"
        used |= names
    assert set(REGISTRY) <= used, f"not published in a README: {sorted(set(REGISTRY) - used)}"


def test_needs_follow_from_the_arguments() -> None:
    assert "peer:blendsql-0.1.28" in REGISTRY["engine-overhead"].requirements()
    assert {"llama-server", "peer:blendsql-0.1.28"} <= set(REGISTRY["model-throughput"].requirements())
    assert {"eval-model", "llama-server"} <= set(REGISTRY["model-throughput-qwen"].requirements())
    assert REGISTRY["spider"].requirements() == ["eval-model", "data:spider"]
    assert REGISTRY["lazy-limit"].requirements() == []


def test_list_dry_run_and_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    assert published.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in REGISTRY:
        assert f"\n{name}\n" in f"\n{out}"
    assert published.main(["spider", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[1] python benchmarks/spider.py --n 200 --shard 1/2" in out
    assert "[3] python benchmarks/spider.py --combine" in out
    assert published.main(["lazy-limit", "--recorded"]) == 0
    assert re.search(r"lazy\s+144\b", capsys.readouterr().out)
    assert published.main(["nope"]) == 2


def test_python_dash_m_benchmarks_lists() -> None:
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "call-economy" in out.stdout and "spider" in out.stdout


def test_lookup() -> None:
    data: dict[str, Any] = {"a": {"rows": [{"id": "x", "n": 1}, {"id": "y", "n": 2}]},
                            "paths": {"k=on": {"m": 0.5}}, "l": [[3, 4]]}
    assert lookup(data, "a.rows[id=y].n") == 2
    assert lookup(data, "paths.k=on.m") == 0.5
    assert lookup(data, "l.0.1") == 4
    for path in ("a.rows[id=z].n", "a.nope", "l.5"):
        with pytest.raises(KeyError):
            lookup(data, path)


# ------------------------------------------------------------------------ the runner


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Bench:
    """A registered benchmark in a scratch checkout whose one command writes a number."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "toy.json").write_text(json.dumps({"totals": {"x": 7}}))
    bench = Bench("toy", "a toy", "nowhere", ((("toy.py", "--out", "benchmarks/results/toy.jsonl"),),),
                  "benchmarks/results/toy.json", (Number("x", "totals.x"),), "seconds")
    monkeypatch.setattr(published, "ROOT", tmp_path)
    monkeypatch.setitem(published.REGISTRY, "toy", bench)
    return bench


class FakePopen:
    """Stands in for the benchmark process: writes the new results file."""

    seen: list[list[str]] = []

    def __init__(self, args: list[str], cwd: Path) -> None:
        FakePopen.seen.append(args)
        (Path(cwd) / "benchmarks" / "results" / "toy.json").write_text(
            json.dumps({"totals": {"x": 9}}))

    def wait(self) -> int:
        return 0


def test_runner_prints_the_new_number_beside_the_recorded(
        toy: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(published, "start", FakePopen)
    FakePopen.seen.clear()
    (tmp_path / "benchmarks" / "results" / "toy.jsonl").write_text("{}\n")
    assert published.main(["toy", "--fresh"]) == 0
    out = capsys.readouterr().out
    assert "moved benchmarks/results/toy.jsonl to toy.jsonl.previous" in out
    assert re.search(r"^x\s+7\s+9$", out, re.M), out
    assert FakePopen.seen[0][1:] == [str(tmp_path / "benchmarks" / "toy.py"), "--out",
                                     "benchmarks/results/toy.jsonl"]


def test_runner_stops_before_running_without_the_evaluation_model(
        toy: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    needy = Bench(**{**toy.__dict__, "needs": ("eval-model",)})
    monkeypatch.setitem(published.REGISTRY, "toy", needy)
    monkeypatch.delenv(published.MODEL_ENV, raising=False)
    monkeypatch.setattr(published, "start", None)  # must not be reached
    assert published.main(["toy"]) == 2
    assert "python -m benchmarks.envs build eval-model" in capsys.readouterr().err
