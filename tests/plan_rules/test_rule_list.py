"""The rule list itself: order, documentation, switches and their validation."""

from __future__ import annotations

import pytest

from blendsql import BlendSQL
from blendsql.errors import OptionError
from blendsql.options import parse_option_text
from blendsql.plan.rules import BY_NAME, OPTIONAL, RULES, rule_on

from .rule_fixtures import session

STAGES = ["prepare", "rewrite", "call"]


def test_rules_are_unique_and_ordered_by_stage() -> None:
    assert len(BY_NAME) == len(RULES)
    stages = [STAGES.index(r.stage) for r in RULES]
    assert stages == sorted(stages)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rule_says_why_it_exists(rule) -> None:  # type: ignore[no-untyped-def]
    assert "Why" in rule.doc, f"{rule.name}: its doc says why it exists"
    assert "Why" in (rule.fn.__doc__ or ""), f"{rule.name}: its function says so itself"


def test_old_switches_are_the_rules_of_the_same_name() -> None:
    for name in ("lazy", "preaggregate", "late_maps", "cost_order"):
        assert BY_NAME[name].switch is not None
        assert rule_on({}, name)
        assert not rule_on({name: False}, name)
        assert not rule_on({"rules_off": {name}}, name)
    assert not rule_on({}, "enum_match")  # opt-in
    assert rule_on({"enum_match": "hashing"}, "enum_match")
    assert not rule_on({"enum_match": "hashing", "rules_off": ["enum_match"]}, "enum_match")


def test_old_switch_and_rules_off_give_the_same_plan() -> None:
    q = "SELECT Name FROM city WHERE {{StartsWith('B', city.Name)}} LIMIT 5"
    b = session()
    try:
        assert str(b.plan(q, lazy=False)) == str(b.plan(q, rules_off={"lazy"}))
        assert str(b.plan(q, lazy=False)) != str(b.plan(q))
    finally:
        b.close()


@pytest.mark.parametrize("where", ["session", "execute"])
def test_unknown_rule_name_raises_with_did_you_mean(where: str) -> None:
    b = session()
    try:
        with pytest.raises(OptionError) as e:
            if where == "session":
                BlendSQL(b.db, rules_off={"preagg"})
            else:
                b.execute("SELECT 1", rules_off=["lazzy"])
        assert "did you mean" in (e.value.hint or "")
        assert ("preaggregate" if where == "session" else "'lazy'") in e.value.hint
    finally:
        b.close()


def test_required_rule_cannot_be_switched_off() -> None:
    with pytest.raises(OptionError) as e:
        parse_option_text("rules_off", "lazy,expand_macros")
    assert "expand_macros" in e.value.message and "meaning" in e.value.message


def test_rules_off_from_the_command_line_text() -> None:
    assert parse_option_text("rules_off", "lazy, preaggregate") == {"lazy", "preaggregate"}


def test_a_string_is_not_a_set_of_rule_names() -> None:
    with pytest.raises(OptionError):
        parse_option_text("lazy", "x")  # a bool option
    b = session()
    try:
        with pytest.raises(OptionError):
            b.execute("SELECT 1", rules_off="lazy")
    finally:
        b.close()


def test_every_optional_rule_listed() -> None:
    assert set(OPTIONAL) == {r.name for r in RULES if not r.required}
    assert {"lazy", "preaggregate", "late_maps", "cost_order", "static_filter",
            "share_identical", "enum_match"} <= set(OPTIONAL)


def test_rules_off_on_the_command_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``blendsql explain DB QUERY --option rules_off=lazy`` plans without the lazy scan;
    a misspelt rule name is a user error with the nearest name."""
    import io
    import sqlite3

    from blendsql.cli import main
    from blendsql.models.base import FunctionModel

    db = tmp_path / "r.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id INTEGER, kind TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"k{i % 4}") for i in range(20)])
    con.commit()
    con.close()
    q = "SELECT id FROM t WHERE {{LLMMap('Is it rare?', t.kind)}} = TRUE LIMIT 2"

    def explain(*extra: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        rc = main(["explain", str(db), q, *extra], model=FunctionModel(lambda r: True),
                  stdout=out, stderr=err)
        return rc, out.getvalue(), err.getvalue()

    rc, text, _ = explain()
    assert rc == 0 and "[lazy_scan]" in text
    rc, text, _ = explain("--option", "rules_off=lazy")
    assert rc == 0 and "[lazy_scan]" not in text and "[call]" in text
    rc, _, err = explain("--option", "rules_off=lazzy")
    assert rc != 0 and "'lazy'" in err
