"""The code fences of the documentation pages, and a stand-in model to run them with.

A fence runs unless the line before it says why not: ``<!-- no-test: REASON -->``.
``<!-- test: needs spark -->`` runs it only where a Spark session can start, and
``<!-- test: needs postgres -->`` only where a throwaway PostgreSQL server can (CI requires
both); there the example's ``postgresql://localhost/NAME`` URLs point at that server's
database NAME, created empty for the page. Python fences of one page run in order in one namespace; a shell fence holds
``blendsql ...`` commands, each run through ``blendsql.cli.main`` in-process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blendsql.models import FunctionModel, Request
from blendsql.models.constraints import Bool, Choice

ROOT = Path(__file__).resolve().parents[2]
PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell", "console"}
_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARK = re.compile(r"<!--\s*(no-test|test):\s*(.*?)\s*-->")


@dataclass
class Fence:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None = None  # why it does not run
    needs: str | None = None  # "spark" or "postgres"

    @property
    def runnable(self) -> bool:
        return self.lang in PYTHON | SHELL and self.skip is None


def pages() -> list[Path]:
    """The README and every page of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def fences(text: str, page: str = "") -> list[Fence]:
    """Every fenced block of ``text`` with the marker on the line before it."""
    lines = text.splitlines()
    out: list[Fence] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            j += 1
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in lines[i + 1:j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = _MARK.search(lines[k]) if k >= 0 else None
        fence = Fence(page, i + 1, lang.lower(), body)
        if mark and mark.group(1) == "no-test":
            fence.skip = mark.group(2) or "no reason given"
        elif mark:
            fence.needs = mark.group(2).removeprefix("needs ").strip()
        out.append(fence)
        i = j + 1
    return out


def shell_commands(code: str) -> list[str]:
    """The commands of a shell fence: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _prompt(request: Request) -> str:
    return request.prompt or "\n".join(content for _, content in request.messages)


def _value(prompt: str) -> str:
    """The value a map prompt asks about (its last ``Value:`` line), else the prompt's end."""
    return prompt.rsplit("Value:", 1)[-1] if "Value:" in prompt else prompt[-300:]


CANNED = {  # a plain-language question -> the program the stand-in writes
    "Which pitchers went to Fresno State?":
        "SELECT name FROM w WHERE school = 'Fresno State' AND position = 'Pitcher'",
    "Which players went to Fresno State?": "SELECT name FROM w WHERE school = 'Fresno State'",
    "only the pitchers":
        "SELECT name FROM w WHERE school = 'Fresno State' AND position = 'Pitcher'",
}


def scripted_answer(request: Request) -> Any:
    """A deterministic stand-in for a language model: yes/no by whether the value names a
    pitcher (yes to other yes/no questions); a choice by which option the prompt's context mentions most; a canned program
    for a known plain-language question; else a short text."""
    prompt = _prompt(request)
    c = request.constraint
    if isinstance(c, Bool):  # a map's yes/no on a value, else "yes" (e.g. is it relevant?)
        return "pitcher" in _value(prompt).lower() if "Value:" in prompt else True
    if isinstance(c, Choice) and prompt.rstrip().endswith("Answerable:"):
        asked = prompt.rstrip().rsplit("Question:", 1)[-1].lower()
        return "yes" if any(w in asked for w in ("table", "player", "pitcher", "school")) else "no"
    if isinstance(c, Choice) and "inform_sql" in c.options:
        return "inform_sql"  # a dialogue act: every scripted turn is a clear question
    if isinstance(c, Choice) and c.options:
        return max(c.options, key=lambda o: (prompt.count(str(o)), -c.options.index(o)))
    tail = prompt[-600:]
    found = [(tail.rfind(q), program) for q, program in CANNED.items() if q in tail]
    return max(found)[1] if found else "unknown"  # the question (or feedback) asked last


def scripted_model() -> FunctionModel:
    return FunctionModel(scripted_answer, name="docs-scripted")


PG_URL = re.compile(r"postgresql://localhost/(\w+)")


def with_server_urls(code: str, server: Any) -> str:
    """``code`` with each ``postgresql://localhost/NAME`` pointing at ``server``'s database
    NAME (created once)."""
    made: dict[str, str] = {}

    def url(m: re.Match[str]) -> str:
        if m.group(1) not in made:
            made[m.group(1)] = server.create_db(m.group(1))
        return made[m.group(1)]

    return PG_URL.sub(url, code)
