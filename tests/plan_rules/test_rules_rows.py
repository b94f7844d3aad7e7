"""Rules only save work: switching any one off (or all) leaves a query's rows unchanged.

Every query of every rule fixture is run with all rules on and with each
switchable rule off by name, on deterministic ingredients (and a model that
is a pure function of the prompt). ``enum_match`` is left out: it is an
opt-in approximation that changes literals, so by design it may change rows.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from blendsql.errors import BlendSQLError
from blendsql.plan.rules import OPTIONAL, RULES

from .rule_fixtures import Case, fixture_path, parse_fixture, session

SAVERS = [r for r in OPTIONAL if r != "enum_match"]


def all_cases() -> list[Case]:
    out = []
    for rule in RULES:
        for case in parse_fixture(fixture_path(rule.name).read_text(encoding="utf-8")):
            if "enum_match" not in case.options:
                out.append(case)
    return out


CASES = all_cases()


def rows(query: str, options: dict[str, Any]) -> Any:
    """The query's rows (sorted unless it orders them), or the error it raised."""
    b = session()
    try:
        df = b.execute(query, **options).df
    except BlendSQLError as e:
        return ("error", type(e).__name__)
    finally:
        b.close()
    out = [tuple(r) for r in df.itertuples(index=False, name=None)]
    return out if "ORDER BY" in query.upper() else sorted(out, key=repr)


@cache
def baseline(query: str) -> Any:
    return rows(query, {})


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("rule", SAVERS)
def test_rule_off_gives_the_same_rows(rule: str, case: Case) -> None:
    assert rows(case.query, {"rules_off": frozenset({rule})}) == baseline(case.query)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_all_rules_off_give_the_same_rows(case: Case) -> None:
    assert rows(case.query, {"rules_off": frozenset(SAVERS)}) == baseline(case.query)


def test_the_cases_return_rows() -> None:
    """Not a suite of empty answers: most fixture queries return rows."""
    non_empty = [c.id for c in CASES if isinstance(baseline(c.query), list)
                 and baseline(c.query)]
    assert len(non_empty) >= 25


def test_the_rows_check_catches_a_broken_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: a static_filter that lets every value pass changes
    the rows of a filter it decides, and only with the rule on."""
    import blendsql.plan.static_filter as static_filter

    query = "SELECT COUNT(*) FROM city WHERE {{Len('n', city.Name)}} > 8"
    want = baseline(query)
    monkeypatch.setattr(static_filter, "passing_values", lambda atom, call, values, outputs: values)
    assert rows(query, {}) != want
    assert rows(query, {"rules_off": frozenset({"static_filter"})}) == want
