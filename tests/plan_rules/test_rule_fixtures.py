"""Each planning rule's golden fixture: queries -> plan text and decisions, rule on and off.

A change to a rule shows up as a diff of ``fixtures/<rule>.txt``. Regenerate
after an intended change (or to fill in a new fixture's queries) with::

    BLENDSQL_REGEN_GOLDEN=1 python -m pytest tests/plan_rules/test_rule_fixtures.py
"""

from __future__ import annotations

import pytest

from blendsql.plan.rules import OPTIONAL, RULES

from .rule_fixtures import (
    HERE,
    REGEN,
    SAME,
    fixture_path,
    header,
    parse_fixture,
    render_case,
    render_fixture,
)

RULE_NAMES = [r.name for r in RULES]


@pytest.mark.parametrize("rule", RULE_NAMES)
def test_rule_matches_its_fixture(rule: str) -> None:
    path = fixture_path(rule)
    assert path.exists(), f"rule {rule} has no fixture: write {path} with its queries"
    text = path.read_text(encoding="utf-8")
    cases = parse_fixture(text)
    assert len(cases) >= 3, f"{path}: give the rule at least three queries"
    if REGEN:
        path.write_text(render_fixture(rule, cases), encoding="utf-8")
        return
    assert text.startswith(header(rule)), f"{path}: header out of date; regenerate"
    changed = []
    for case in cases:
        got = render_case(rule, case)
        if got.strip() != case.text.strip():
            changed.append(got)
    assert not changed, (f"{rule}: {len(changed)} plan(s) changed; review, then regenerate "
                         "with BLENDSQL_REGEN_GOLDEN=1\n" + "\n".join(changed[:2]))


def test_every_fixture_names_a_rule() -> None:
    names = {p.stem for p in HERE.glob("*.txt")}
    assert names == set(RULE_NAMES)


@pytest.mark.parametrize("rule", [r for r in OPTIONAL if r != "enum_match"])
def test_switching_a_rule_off_shows_in_its_fixture(rule: str) -> None:
    """The fixture of a switchable rule holds a query whose plan or decisions change."""
    cases = parse_fixture(fixture_path(rule).read_text(encoding="utf-8"))
    assert any(SAME not in c.text.split("\n--- off\n", 1)[-1] for c in cases), rule


def test_fixtures_hold_forty_queries_or_more() -> None:
    total = sum(len(parse_fixture(fixture_path(r).read_text(encoding="utf-8")))
                for r in RULE_NAMES)
    assert total >= 40
