"""Golden plan files: query -> plan text, reviewed in diffs.

Each file in ``golden_plans/`` holds blocks of ``=== id``, the options and
query, ``---`` and the plan text ``BlendSQL.plan`` prints. A change to a
planning rule shows up as a diff of these files. Regenerate after an
intended change with::

    BLENDSQL_REGEN_GOLDEN=1 python -m pytest tests/engine/test_plan_golden.py

Queries: call_economy's Spider suite with its recording ingredients, the
same suite with the model-backed built-ins (model calls, prompt tokens),
and queries with each switchable rule turned off by name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request

cases_mod = pytest.importorskip("benchmarks.call_economy")
CASES = [c for c in cases_mod.CASES if not c.db.startswith("hybridqa:")]
HERE = Path(__file__).parent / "golden_plans"
REGEN = os.environ.get("BLENDSQL_REGEN_GOLDEN") == "1"


def _refuse(req: Request) -> Any:
    raise AssertionError("a plan must not call the model")


def llm_variant(sql: str) -> str:
    return re.sub(r"\{\{CountCtx\(", "{{LLMQA(", re.sub(r"\{\{(IsPrefix|TextLen)\(", "{{LLMMap(", sql))


# rule switched off by name -> queries whose plan it changes
OFF = {
    "lazy": ["limit_simple", "limit_filter", "limit_join"],
    "preaggregate": ["select_map_group"],
    "late_maps": ["select_map", "select_map_join"],
    "cost_order": ["cascade_two_maps", "cascade_join_two_maps"],
}


def entries(group: str) -> list[tuple[str, str, str, dict[str, Any], bool]]:
    """(id, db, query, options, llm) for one golden file."""
    by_id = {c.id: c for c in CASES}
    if group == "economy":
        return [(c.id, c.db, c.sql, {}, False) for c in CASES]
    if group == "economy_llm":
        return [(c.id, c.db, llm_variant(c.sql), {}, True) for c in CASES]
    out = []
    for name, ids in OFF.items():
        for cid in ids:
            c = by_id[cid]
            out.append((f"{cid}:{name}=False", c.db, c.sql, {name: False}, False))
    return out


def plan_text(db: str, query: str, options: dict[str, Any], llm: bool) -> str:
    path = cases_mod.SPIDER / db / f"{db}.sqlite"
    ingredients = [] if llm else cases_mod.fresh_ingredients()
    b = BlendSQL(path, model=FunctionModel(_refuse), ingredients=ingredients, cache=False)
    try:
        return str(b.plan(query, **options))
    finally:
        b.close()


def render_file(group: str) -> str:
    blocks = []
    for eid, db, query, options, llm in entries(group):
        opts = " ".join(f"{k}={v}" for k, v in options.items())
        blocks.append(f"=== {eid}\n-- db: {db}{'  options: ' + opts if opts else ''}\n{query}\n---\n"
                      f"{plan_text(db, query, options, llm)}\n")
    return "\n".join(blocks)


def parse_file(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"^=== (\S+)\n.*?(?=^=== |\Z)", text,
                                                        re.S | re.M)}


GROUPS = ["economy", "economy_llm", "rules_off"]


@pytest.mark.parametrize("group", GROUPS)
def test_plans_match_the_golden_files(group: str) -> None:
    path = HERE / f"{group}.txt"
    got = render_file(group)
    if REGEN or not path.exists():
        if not REGEN:
            pytest.fail(f"{path} is missing: run with BLENDSQL_REGEN_GOLDEN=1 to create it")
        path.write_text(got, encoding="utf-8")
        return
    want = parse_file(path.read_text(encoding="utf-8"))
    have = parse_file(got)
    assert set(have) == set(want), "queries added or removed: regenerate the golden files"
    changed = [k for k in have if have[k].strip() != want[k].strip()]
    assert not changed, (f"plans changed for {changed}; review, then regenerate with "
                         f"BLENDSQL_REGEN_GOLDEN=1\n" + "\n".join(have[k] for k in changed[:3]))


def test_golden_files_hold_forty_queries_or_more() -> None:
    total = sum(len(entries(g)) for g in GROUPS)
    assert total >= 40
