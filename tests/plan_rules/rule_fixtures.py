"""Reading, running and writing the per-rule golden fixtures (``fixtures/<rule>.txt``).

A fixture file holds blocks::

    === <id>
    -- options: enum_match=hashing          (optional; applied with the rule on and off)
    <query>
    --- on
    <plan text with the rule on>
    decisions:
      [<rule>] <summary of each rule decision the run traced>
    --- off
    <the same with the rule switched off by name (rules_off={rule}), or "(same as on)">

The queries are the source: a new rule's fixture is its ``=== id`` lines and
queries, and ``BLENDSQL_REGEN_GOLDEN=1 python -m pytest tests/plan_rules``
fills in the rest. Required rules (which cannot be switched off) have no
``--- off`` part. The database is Spider's ``world_1`` (in ``tests/data``);
the ingredients are deterministic, and the one model is a pure function of
the prompt, so the text depends only on the planner and the engine.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError
from blendsql.ingredients.base import AliasIngredient, StringIngredient
from blendsql.models.base import FunctionModel, Request
from blendsql.options import parse_option_text
from blendsql.plan.rules import BY_NAME
from tests.engine.conftest import WORLD, AskModel, CountCtx, Len, LowerJoin, StartsWith

HERE = Path(__file__).parent / "fixtures"
REGEN = os.environ.get("BLENDSQL_REGEN_GOLDEN") == "1"
SAME = "(same as on)"


class IsLong(AliasIngredient):
    """Alias: a name longer than 20 characters, written with Len."""

    def run(self, *args: str, **kwargs: str) -> str:
        return f"{{{{Len('chars', {args[0]})}}}} > 20"


class Populous(StringIngredient):
    """SQL text: cities over a million people."""

    def run(self, *args: Any, **kwargs: Any) -> str:
        return "city.Population > 1000000"


def model_answer(req: Request) -> bool:
    """A deterministic model: a pure function of the prompt."""
    return len(req.prompt) % 3 == 0


def session() -> BlendSQL:
    """A fresh session over world_1 with the fixture ingredients (no cache)."""
    ingredients = [StartsWith, Len, CountCtx, LowerJoin, AskModel, IsLong, Populous]
    return BlendSQL(WORLD, model=FunctionModel(model_answer, name="fixture"),
                    ingredients=ingredients, cache=False)


@dataclass
class Case:
    """One fixture block: id, options and query (the rest is regenerated)."""

    id: str
    query: str
    options: dict[str, Any] = field(default_factory=dict)
    text: str = ""  # the whole block as stored


def parse_fixture(text: str) -> list[Case]:
    """The blocks of one fixture file, in order."""
    cases = []
    for m in re.finditer(r"^=== (\S+)\n(.*?)(?=^=== |\Z)", text, re.S | re.M):
        body = m.group(2).split("\n--- ", 1)[0].strip("\n")
        lines = body.splitlines()
        options: dict[str, Any] = {}
        if lines and lines[0].startswith("-- options:"):
            for part in lines.pop(0).removeprefix("-- options:").split():
                name, _, value = part.partition("=")
                options[name] = parse_option_text(name, value)
        cases.append(Case(m.group(1), "\n".join(lines).strip(), options, m.group(0)))
    return cases


def header(rule: str) -> str:
    """The comment line a fixture starts with: the rule's name and why it exists."""
    lines = textwrap.wrap(f"rule {rule}: {BY_NAME[rule].doc}", 88)
    return "".join(f"# {line}\n" for line in lines)


def outcome(query: str, options: dict[str, Any]) -> str:
    """Plan text and the rule decisions of a real run (or the error either raised)."""
    b = session()
    try:
        try:
            plan = str(b.plan(query, **options))
        except BlendSQLError as e:
            return f"error: {type(e).__name__}: {e.message}"
        try:
            smoothie = b.execute(query, **options)
        except BlendSQLError as e:
            return f"{plan}\nrun error: {type(e).__name__}: {e.message}"
        decisions = [f"  [{t.details.get('rule') or 'rules_off'}] {t.summary}"
                     for t in smoothie.trace
                     if t.details.get("rule") or t.details.get("rules_off")]
        return plan + "\ndecisions:\n" + ("\n".join(decisions) if decisions else "  (none)")
    finally:
        b.close()


def render_case(rule: str, case: Case) -> str:
    """One block, regenerated."""
    opts = " ".join(f"{k}={v}" for k, v in case.options.items())
    head = f"=== {case.id}\n" + (f"-- options: {opts}\n" if opts else "") + case.query + "\n"
    on = outcome(case.query, case.options)
    out = head + "--- on\n" + on + "\n"
    if not BY_NAME[rule].required:
        off = outcome(case.query, {**case.options, "rules_off": frozenset({rule})})
        out += "--- off\n" + (SAME if off == on else off) + "\n"
    return out


def render_fixture(rule: str, cases: list[Case]) -> str:
    """A whole fixture file, regenerated from its cases."""
    return header(rule) + "\n" + "\n".join(render_case(rule, c) for c in cases)


def fixture_path(rule: str) -> Path:
    return HERE / f"{rule}.txt"
