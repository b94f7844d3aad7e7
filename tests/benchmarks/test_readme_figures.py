"""The main README: short, its two commands unchanged, and every figure it shows backed.

The README's "How good is it" table links each row to a section of benchmarks/README.md.
Each figure of a row must be written in that section too, and each percentage must be a
recorded number of a ``python -m benchmarks NAME`` the section names (so a figure in the
README always has a command that reruns it). The checks are shown to catch a bad row on
made-up text.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.published import REGISTRY  # noqa: E402

_spec = importlib.util.spec_from_file_location("published_checks",
                                               Path(__file__).with_name("test_published.py"))
assert _spec is not None and _spec.loader is not None
pub = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pub)

MAIN_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install . && \\\n"
                "  blendsql run example \"SELECT name, position, school FROM w WHERE school = "
                "{{LLMQA('Which school does this baseball team represent?', (SELECT title, "
                "content FROM documents WHERE documents MATCH 'Dirtbags'), options='w::school')}}\"")
TEST_COMMAND = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
                "&& python -m pytest -q")
_LINK = re.compile(r"\[([^\]]*)\]\(benchmarks/README\.md#([\w-]+)\)")


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def section_texts(text: str) -> dict[str, str]:
    """Each ``##`` / ``###`` section of ``text`` by its GitHub anchor."""
    lines = text.splitlines()
    return {github_slug(h): "\n".join(lines[start:end])
            for h, start, end in pub.readme_sections(text)}


def unbacked_rows(readme_text: str, bench_text: str, registry: set[str],
                  recorded: Callable[[str], list[float]]) -> list[str]:
    """Problems of the rows of the README's "How good is it" table (empty: all backed)."""
    sections = section_texts(bench_text)
    part = readme_text.split("## How good is it", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in part.splitlines()
            if pub._TABLE_ROW.match(line) and not pub._TABLE_RULE.match(line)][1:]
    if not rows:
        return ["the How good is it section has no table rows"]
    bad = []
    for row in rows:
        link = _LINK.search(row)
        if not link:
            bad.append(f"{row}: links no section of benchmarks/README.md")
            continue
        section = sections.get(link.group(2))
        if section is None:
            bad.append(f"{row}: no section #{link.group(2)} in benchmarks/README.md")
            continue
        names = set(pub.COMMAND.findall(section)) & registry
        if not names:
            bad.append(f"{row}: #{link.group(2)} names no `python -m benchmarks NAME`")
            continue
        in_section = pub.numbers_in(section)
        numbers = [x for name in sorted(names) for x in recorded(name)]
        cells = _LINK.sub(lambda m: m.group(1), row)  # the link text, not the anchor
        for figure in pub._FIGURE.findall(re.sub(r"`[^`]*`", " ", cells)):
            if not pub.matches(figure, in_section):
                bad.append(f"{row}: {figure} is not written in #{link.group(2)}")
            elif figure.endswith("%") and not pub.matches(figure, numbers):
                bad.append(f"{row}: {figure} is not a recorded number of {sorted(names)}")
    return bad


def test_readme_is_a_short_guide() -> None:
    text = readme()
    assert len(text.splitlines()) <= 150
    assert len(pub.COMMAND.findall(text)) == 0, "benchmark commands belong in benchmarks/README.md"
    for heading in ("## Try it", "## Python", "## Ingredients", "## Models", "## Backends",
                    "## Command line", "## How good is it", "## Run the tests"):
        assert f"\n{heading}" in text, heading


def test_readme_commands_are_unchanged() -> None:
    text = readme()
    blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    assert blocks[0] == MAIN_COMMAND
    assert TEST_COMMAND in blocks
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -e '.[test]'" in ci and "python -m pytest -q" in ci


def test_every_readme_figure_is_in_benchmarks_readme_with_its_command() -> None:
    bench_text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    part = readme().split("## How good is it", 1)[1]
    assert len(pub._FIGURE.findall(part.split("\n## ", 1)[0])) >= 8  # the figures are found
    bad = unbacked_rows(readme(), bench_text, set(REGISTRY), pub.recorded_numbers)
    assert not bad, "\n".join(bad)


def test_figures_in_the_sections_prose_are_in_the_linked_sections() -> None:
    """The sentences around the table (an interval, say) quote the linked sections too."""
    bench_text = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    sections = section_texts(bench_text)
    part = readme().split("## How good is it", 1)[1].split("\n## ", 1)[0]
    numbers = [x for m in _LINK.finditer(part) for x in pub.numbers_in(sections[m.group(2)])]
    prose = "\n".join(line for line in part.splitlines() if not pub._TABLE_ROW.match(line))
    prose = re.sub(r"Qwen[\w.-]+|\([^)]*\.md\)", " ", prose)  # the model's name, link targets
    figures = pub._FIGURE.findall(prose)
    assert {"-0.7", "+15.3"} <= set(figures), figures  # the HybridQA interval is found
    assert not pub.matches("+15.4", numbers)  # and would be caught if it were wrong
    assert [f for f in figures if not pub.matches(f, numbers)] == []


def test_the_row_check_catches_an_unbacked_figure() -> None:
    bench = ("# B\n\n## Spider dev (`spider.py`)\n\nRerun: `python -m benchmarks toy`. "
             "Accuracy 0.680 and n = 200.\n\n## Other\n\nno command, 0.5\n")
    head = "## How good is it\n\n| task | a |\n|---|---:|\n"
    recorded = {"toy": [0.68, 0.5]}
    ok = head + "| [Spider, 200](benchmarks/README.md#spider-dev-spiderpy) | 68.0% |\n"
    assert unbacked_rows(ok, bench, {"toy"}, lambda n: recorded[n]) == []
    assert unbacked_rows(ok.replace("68.0%", "69.0%"), bench, {"toy"}, lambda n: recorded[n])
    assert unbacked_rows(ok.replace("200", "300"), bench, {"toy"}, lambda n: recorded[n])
    assert unbacked_rows(ok.replace("#spider-dev-spiderpy", "#other"), bench, {"toy"},
                         lambda n: recorded[n])[0].endswith("names no `python -m benchmarks NAME`")
    assert unbacked_rows(ok.replace("#spider-dev-spiderpy", "#nope"), bench, {"toy"},
                         lambda n: recorded[n])
    recorded["toy"] = [0.5]  # written in the section but not recorded by its command
    assert unbacked_rows(ok, bench, {"toy"}, lambda n: recorded[n])
    assert github_slug("SParC (`conversation.py --dataset sparc`)") == \
        "sparc-conversationpy---dataset-sparc"
