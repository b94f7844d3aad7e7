"""``python -m benchmarks NAME``: every published number has a command that exists.

Checks the registry of ``benchmarks/published.py`` without running a benchmark:
each script exists and takes the flags given to it, ``--list`` / ``--dry-run`` /
``--recorded`` work, every recorded number is found in its committed results file,
the READMEs' ``python -m benchmarks NAME`` commands name registered benchmarks and
every benchmark is published there, every table of results in benchmarks/README.md has
such a command next to it, and every figure in those tables sits in a section naming a
command and is one of the recorded numbers of the benchmarks it names (each check shown to
catch a missing one on a made-up README); and the runner, on a fake command,
prints the new number beside the recorded one, after moving the recorded run's item
files aside (so the command recomputes the numbers rather than resuming from them).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import published  # noqa: E402
from benchmarks.published import BENCHES, REGISTRY, Bench, Number, lookup  # noqa: E402

READMES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "docs" / "scaling.md"]
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


def readme_sections(text: str) -> list[tuple[str, int, int]]:
    """(heading, index of its line, index of the next heading's line) for every ``##`` /
    ``###`` section (headings inside code blocks aside)."""
    lines = text.splitlines()
    sections: list[tuple[str, int, int]] = []
    in_code = False
    for i, line in enumerate(lines):
        in_code ^= line.lstrip().startswith("```")
        if not in_code and re.match(r"#{2,3} ", line):
            sections.append((line.lstrip("#").strip(), i, len(lines)))
            if len(sections) > 1:
                prev = sections[-2]
                sections[-2] = (prev[0], prev[1], i)
    return sections


def readme_tables(text: str) -> list[tuple[str, int, str]]:
    """(the ``##`` / ``###`` heading, the table's line number, the table with the text
    around it) for every markdown table: from the end of the previous table of the section
    (or its heading) to the start of the next one (or the next heading)."""
    lines = text.splitlines()
    found = []
    for heading, start, end in readme_sections(text):
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


# ------------------------------------------------- every figure of a table is a recorded number

# a number as a README writes it: 1,572 / 0.605 / -0.10 / 44.7% / 200k / 10M
_FIGURE = re.compile(r"(?<![\w.])[-\u2212+]?\d[\d,]*(?:\.\d+)?(?:%|[kM](?!\w))?")


def _value(figure: str) -> tuple[float, int, bool]:
    """(the value, its decimals, whether it is a percentage) of a figure as written."""
    text = figure.replace(",", "").replace("\u2212", "-")
    scale = {"k": 1e3, "M": 1e6}.get(text[-1], 1.0)
    pct = text.endswith("%")
    text = text.rstrip("%kM")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return float(text) * scale, decimals, pct


def numbers_in(value: Any) -> list[float]:
    """The numbers a recorded value holds (a number, or those written in a text or list)."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, (list, tuple, dict)):
        items = value.values() if isinstance(value, dict) else value
        return [x for v in items for x in numbers_in(v)]
    return [_value(m)[0] for m in _FIGURE.findall(str(value))]


def matches(figure: str, numbers: list[float]) -> bool:
    """Whether ``figure`` is one of ``numbers`` as the README rounds it: within half a unit
    of its last digit (a percentage, or a figure with decimals, also as a share x 100)."""
    value, decimals, pct = _value(figure)
    half = 10.0 ** -decimals / 2 + 1e-9
    return any(abs(candidate - value) <= half for n in numbers
               for candidate in ((n, 100 * n) if pct or decimals else (n,)))


def table_figures(text: str) -> list[tuple[str, int, int, str]]:
    """(heading, section's first line index, line number, figure) for every number-looking
    figure in the body rows of every table (header and rule rows aside, and inline code:
    names such as `local[2]` or commands)."""
    lines = text.splitlines()
    out = []
    for heading, start, end in readme_sections(text):
        for i in range(start + 1, end):
            if not _TABLE_ROW.match(lines[i]) or _TABLE_RULE.match(lines[i]):
                continue
            if i + 1 < end and _TABLE_RULE.match(lines[i + 1]):
                continue  # a header row
            row = re.sub(r"`[^`]*`", " ", lines[i])
            out += [(heading, start, i + 1, f) for f in _FIGURE.findall(row)]
    return out


def unbacked_figures(text: str, registry: set[str], recorded: Callable[[str], list[float]],
                     exempt: dict[str, str]) -> list[str]:
    """Each table figure of ``text`` that sits in a section naming no registered
    ``python -m benchmarks NAME``, or that is none of the recorded numbers of the
    benchmarks its section names (``recorded(name)``: the numbers in their values and
    labels); sections in ``exempt`` aside."""
    lines = text.splitlines()
    sections = {start: end for _h, start, end in readme_sections(text)}
    bad = []
    for heading, start, line, figure in table_figures(text):
        if heading in exempt:
            continue
        names = set(COMMAND.findall("\n".join(lines[start:sections[start]]))) & registry
        if not names:
            bad.append(f"line {line} ({heading}): {figure}: no `python -m benchmarks NAME` in its section")
        elif not matches(figure, [x for name in sorted(names) for x in recorded(name)]):
            bad.append(f"line {line} ({heading}): {figure}: not a recorded number of {sorted(names)}")
    return bad


@functools.cache
def recorded_numbers(name: str) -> list[float]:
    """The numbers in the recorded values of a registered benchmark, and in its labels
    (a label names the setting a number was measured at: "4 endpoints")."""
    bench = REGISTRY[name]
    values = published.read_numbers(bench, published.recorded_json(bench))
    return [x for v in values for x in numbers_in(v)] + [x for n in bench.numbers for x in numbers_in(n.label)]


def test_every_table_figure_is_a_recorded_number_of_its_sections_command() -> None:
    text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    figures = [f for f in table_figures(text) if f[0] not in NO_COMMAND]
    assert len(figures) > 500  # the tables are found
    bad = unbacked_figures(text, set(REGISTRY), recorded_numbers, NO_COMMAND)
    assert not bad, ("figures in the tables of benchmarks/README.md that no `python -m benchmarks "
                     "NAME` of their section records (register them as a Number in "
                     "benchmarks/published.py, or name the command):\n" + "\n".join(bad))


def test_the_figure_check_catches_a_missing_command_or_number() -> None:
    """A made-up README: a table in a section without a command, a figure the named
    benchmark does not record, a number recorded but rounded as the README rounds it."""
    text = ("## Measured\n\nRerun: `python -m benchmarks toy`.\n\n| run | values/s | share |\n|---|---:|---:|\n"
            "| `local[2]`, 4 endpoints | 596.23 | 44.7% |\n| 2 x 1 | 18.21 | 0.93 |\n\n"
            "## No command here\n\n| a | b |\n|---|---|\n| x | 1,572 |\n")
    recorded = {"toy": [596.2312, 0.4471, 18.205, 4.0, 2.0, 1.0]}
    bad = unbacked_figures(text, {"toy"}, lambda n: recorded[n], {})
    assert bad == ["line 8 (Measured): 0.93: not a recorded number of ['toy']",
                   "line 14 (No command here): 1,572: no `python -m benchmarks NAME` in its section"], bad
    recorded["toy"].append(0.931)
    assert unbacked_figures(text, {"toy"}, lambda n: recorded[n], {"No command here": "why"}) == []
    assert unbacked_figures(text, set(), lambda n: [], {"No command here": "why"})[0].endswith(
        "no `python -m benchmarks NAME` in its section")
    assert matches("1,572", [1572.0]) and matches("10M", [1e7]) and matches("\u22120.10", [-0.099])
    assert matches("0.313", [0.3125]) and matches("18.21", [18.205])  # rounded half up
    assert not matches("0.62", [0.6]) and not matches("27", [28.0]) and not matches("0.606", [0.605])


def unresolved(bench: Bench, data: Any) -> list[str]:
    """The numbers of ``bench`` not found in ``data`` (its results file)."""
    values = published.read_numbers(bench, data)
    return [n.label for n, v in zip(bench.numbers, values, strict=True) if v is None]


def test_every_bench_prints_its_recorded_numbers_without_running_anything(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks NAME --recorded`` for every benchmark: each number read from the
    committed results file (and the files its numbers also read), nothing started."""
    monkeypatch.setattr(published, "start", None)  # a benchmark process must not be reached
    for bench in BENCHES:
        assert published.main([bench.name, "--recorded"]) == 0, bench.name
        out = capsys.readouterr().out
        assert out.startswith(f"{bench.name}: {bench.results}"), out
        if not bench.pending:
            assert not unresolved(bench, published.recorded_json(bench)), bench.name
            assert not re.search(r"(?m)(\s-$|^    recorded  -$)", out), out
    toy = Bench("toy", "a toy", "nowhere", ((("toy.py",),),), "benchmarks/results/toy.json",
                (Number("x", "totals.x"), Number("y", "totals.y"),
                 Number("z", fn=lambda d, rows: len(rows), also=("benchmarks/results/none.jsonl",))),
                "seconds")
    assert unresolved(toy, {"totals": {"x": 1}}) == ["y", "z"]  # the check catches a missing one
    assert unresolved(toy, None) == ["x", "y", "z"]


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
        assert {n.label.split()[0] for n in bench.numbers
                if n.label.endswith("(95% CI)")} == set(data["queries"]), name


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
