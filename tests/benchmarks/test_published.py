"""``python -m benchmarks NAME``: every published number has a command that exists.

Checks the registry of ``benchmarks/published.py`` without running a benchmark:
each script exists and takes the flags given to it, ``--list`` / ``--dry-run`` /
``--recorded`` work, every recorded number is found in its committed results file,
the READMEs' ``python -m benchmarks NAME`` commands name registered benchmarks and
every benchmark is published there, and every table of results in
benchmarks/README.md has such a command next to it; and the runner, on a fake command,
prints the new number beside the recorded one, after moving the recorded run's item
files aside (so the command recomputes the numbers rather than resuming from them).
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

READMES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "docs" / "SCALING.md"]
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


# sections of benchmarks/README.md whose tables no command reproduces, and why
NO_COMMAND = {
    "Withdrawn numbers, and what replaces them": "numbers withdrawn, kept to say what "
                                                  "replaced them; nothing to rerun",
}
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")


def readme_tables(text: str) -> list[tuple[str, int, str]]:
    """(the ``##`` / ``###`` heading, the table's line number, the table with the text
    around it) for every markdown table: from the end of the previous table of the section
    (or its heading) to the start of the next one (or the next heading)."""
    lines = text.splitlines()
    sections: list[tuple[str, int, int]] = []  # (heading, first line, end)
    in_code = False
    for i, line in enumerate(lines):
        in_code ^= line.lstrip().startswith("```")
        if not in_code and re.match(r"#{2,3} ", line):
            sections.append((line.lstrip("#").strip(), i, len(lines)))
            if len(sections) > 1:
                prev = sections[-2]
                sections[-2] = (prev[0], prev[1], i)
    found = []
    for heading, start, end in sections:
        tables = []  # (first line, last line)
        i = start + 1
        while i < end:
            if _TABLE_ROW.match(lines[i]) and i + 1 < end and _TABLE_RULE.match(lines[i + 1]):
                j = i + 1
                while j + 1 < end and _TABLE_ROW.match(lines[j + 1]):
                    j += 1
                tables.append((i, j))
                i = j
            i += 1
        for k, (first, _last) in enumerate(tables):
            lo = tables[k - 1][1] + 1 if k else start + 1
            hi = tables[k + 1][0] if k + 1 < len(tables) else end
            found.append((heading, first + 1, "\n".join(lines[lo:hi])))
    return found


def test_every_table_of_results_has_its_command() -> None:
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    tables = readme_tables(text)
    assert len(tables) >= 10
    headings = {h for h, _, _ in tables}
    assert set(NO_COMMAND) <= headings, f"exempt but gone: {sorted(set(NO_COMMAND) - headings)}"
    bare = [f"line {line} ({heading})" for heading, line, around in tables
            if heading not in NO_COMMAND and not set(COMMAND.findall(around)) & set(REGISTRY)]
    assert not bare, ("tables of benchmarks/README.md without a `python -m benchmarks NAME` "
                      "next to them (before the next table or heading): " + ", ".join(bare))


def test_readme_tables_are_found() -> None:
    text = ("## A\n\nintro\n\n| a | b |\n|---|---:|\n| 1 | 2 |\n\nRerun: `python -m benchmarks x`\n\n"
            "| c |\n|---|\n| 3 |\n\n```\n## not a heading\n```\n### B\n\n| d |\n|---|\n")
    found = readme_tables(text)
    assert [(h, line) for h, line, _ in found] == [("A", 5), ("A", 11), ("B", 20)]
    assert "python -m benchmarks x" in found[0][2] and "python -m benchmarks x" in found[1][2]
    assert "python -m benchmarks" not in found[2][2]


def test_peer_commands_run_the_queries_their_results_hold() -> None:
    """A rerun of a peer must not drop a query of the published table (the summary covers
    the queries of the command only)."""
    for name in ("sembench-lotus", "sembench-blendsql-0128", "sembench-palimpzest"):
        bench = REGISTRY[name]
        data = published.recorded_json(bench)
        held = set(data["queries"]) | set(data.get("not_applicable") or {})
        (command,) = bench.commands()
        asked = set(command[command.index("--queries") + 1].split(","))
        assert held <= asked, f"{name}: the command drops {sorted(held - asked)}"
        assert {n.path.split(".")[1] for n in bench.numbers
                if n.path.endswith(".mean")} == set(data["queries"]), name


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
    assert published.main(["call-economy-counts", "--dry-run"]) == 0
    assert "call_economy.py --no-model" in capsys.readouterr().out
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


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   cwd=cwd, check=True, capture_output=True, timeout=60)


def test_runner_moves_the_recorded_items_aside_and_resumes_a_stopped_run(
        toy: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without a flag the recorded run's item file (tracked, unchanged) is moved aside, so
    the command recomputes; a changed one (a run of yours that stopped) is resumed;
    ``--reuse`` resumes from the recorded one."""
    monkeypatch.setattr(published, "start", FakePopen)
    items = tmp_path / "benchmarks" / "results" / "toy.jsonl"
    items.write_text('{"item": 1}\n')
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "recorded")
    summary = items.with_suffix(".json")  # the toy's results file, beside its items
    assert published.to_move_aside(toy, "default") == [items, summary]
    assert published.to_move_aside(toy, "reuse") == []
    assert published.main(["toy", "--dry-run"]) == 0
    assert "moves aside first: benchmarks/results/toy.jsonl" in capsys.readouterr().out

    assert published.main(["toy", "--reuse"]) == 0
    assert items.is_file() and "resumes from toy.jsonl (--reuse)" in capsys.readouterr().out

    assert published.main(["toy"]) == 0
    out = capsys.readouterr().out
    assert "moved benchmarks/results/toy.jsonl to toy.jsonl.previous" in out
    assert not items.exists() and re.search(r"^x\s+7\s+9$", out, re.M), out

    items.write_text('{"item": 1}\n{"item": 2}\n')  # a run that stopped: changed since HEAD
    assert published.to_move_aside(toy, "default") == []  # the summary is the new run's too
    assert published.main(["toy"]) == 0
    assert items.is_file() and "resumes from toy.jsonl" in capsys.readouterr().out
    assert published.to_move_aside(toy, "fresh") == [items, summary]


def test_call_economy_counts_keep_the_model_subset_and_read_the_pinned_versions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``call-economy-counts`` (``--no-model``) writes the shared call_economy.json: the
    model subset already there is kept, not erased; the 0.1.28 venv's pandas / polars /
    duckdb are read from its envs stamp, not written by hand."""
    from benchmarks import call_economy, envs

    out = tmp_path / "call_economy.json"
    assert call_economy.kept_model_subset(out) is None
    out.write_text(json.dumps({"model_subset": {"model": "m", "rows": [{"id": "a"}]}}))
    kept = call_economy.kept_model_subset(out)
    assert kept is not None and kept["rows"] == [{"id": "a"}] and "--no-model" in kept["kept"]
    out.write_text(json.dumps({"model_subset": {"model": None, "rows": []}}))
    assert call_economy.kept_model_subset(out) is None

    monkeypatch.setitem(call_economy.VENVS_0128, "pinned", (None, []))
    monkeypatch.setattr(envs, "peer_folder", lambda name: tmp_path / name)
    monkeypatch.setattr(envs, "peer_python_path", lambda name: tmp_path / "no-python")
    (tmp_path / "blendsql-0.1.28").mkdir()
    (tmp_path / "blendsql-0.1.28" / envs.STAMP).write_text(json.dumps(
        {"installed": ["blendsql==0.1.28", "duckdb==1.4.5", "pandas==2.3.3", "polars==1.33.1"]}))
    assert call_economy.deps_0128("pinned") == "pandas 2.3.3, polars 1.33.1, duckdb 1.4.5"
    pins = {r.split("==")[0]: r.split("==")[1] for r in envs.PEERS["blendsql-0.1.28"].requirements}
    assert call_economy.deps_0128("pinned") == ", ".join(
        f"{d} {pins[d]}" for d in call_economy.DEPS_0128)  # the pins are what was measured
