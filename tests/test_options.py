"""Session / execute options are one typed, validated set (blendsql.options)."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, OptionError
from blendsql.ingredients.base import MapIngredient
from blendsql.models.base import FunctionModel
from blendsql.options import KNOWN, Options, check_option, parse_option_text, validate
from blendsql.plan.rules import RULES

ROOT = Path(__file__).resolve().parents[1]


class StartsWith(MapIngredient):
    """True where the value starts with the question."""

    def run(self, question, values, **kwargs):
        return [str(v).startswith(str(question)) for v in values]


def session(**options):
    df = pd.DataFrame({"name": ["Ann", "Bob", "Abe"]})
    return BlendSQL({"w": df}, model=FunctionModel(lambda r: "true"),
                    ingredients=[StartsWith], cache=False, **options)


@pytest.mark.parametrize(("name", "near"), [
    ("lazzy", "lazy"), ("cost_ordr", "cost_order"), ("late_map", "late_maps"),
    ("preagregate", "preaggregate"), ("timout", "timeout"), ("model_timout", "model_timeout"),
    ("Lazy", "lazy"),
])
def test_unknown_session_option_is_refused_with_a_suggestion(name, near):
    with pytest.raises(OptionError) as info:
        session(**{name: False})
    err = info.value
    assert isinstance(err, BlendSQLError) and isinstance(err, TypeError)
    assert repr(name) in str(err) and f"did you mean {near!r}" in err.hint
    assert err.option == name


def test_unknown_option_without_a_near_name_lists_the_known_ones():
    with pytest.raises(OptionError) as info:
        session(zzzzqqq=1)
    assert "lazy" in info.value.hint and "timeout" in info.value.hint


def test_unknown_execute_option_is_refused_before_running():
    calls = []
    df = pd.DataFrame({"name": ["Ann"]})

    class Spy(StartsWith):
        def run(self, question, values, **kwargs):
            calls.append(values)
            return super().run(question, values, **kwargs)

    with BlendSQL({"w": df}, ingredients=[Spy], cache=False) as s:
        with pytest.raises(OptionError, match="execute") as info:
            s.execute("SELECT name FROM w WHERE {{Spy('A', w.name)}} = TRUE", lazzy=False)
        assert "'lazy'" in info.value.hint
        assert calls == []
        # the session still works, and a known option per query is accepted
        out = s.execute("SELECT name FROM w WHERE {{Spy('A', w.name)}} = TRUE", lazy=False)
        assert list(out.df["name"]) == ["Ann"]


@pytest.mark.parametrize(("name", "value"), [
    ("lazy", "no"), ("lazy", 0), ("cost_order", None), ("timeout", "5"), ("timeout", True),
    ("timeout", -1), ("timeout", 0), ("model_timeout", [1]), ("enum_threshold", "0.5"),
    ("enum_match", "fuzzy"), ("prefilter_embedder", "minilm"), ("max_query_chars", 1.5),
    ("max_query_chars", 0), ("late_maps", "false"), ("preaggregate", 1),
    ("model_timeout", None), ("timeout", float("inf")), ("model_timeout", float("nan")),
])
def test_wrong_type_or_value_is_refused(name, value):
    with pytest.raises(OptionError) as info:
        session(**{name: value})
    assert name in str(info.value) and info.value.hint


@pytest.mark.parametrize(("name", "value"), [
    ("lazy", False), ("cost_order", True), ("prefilter", "bm25"), ("prefilter", True),
    ("prefilter", None), ("prefilter_cache", False), ("prefilter_cache", Path("x.sqlite")),
    ("enum_match", "Model"), ("enum_match", True), ("enum_threshold", 0.3),
    ("enum_threshold", 1), ("timeout", 2.5), ("timeout", None), ("model_timeout", 30),
    ("model_timeout", 0.5),
    ("max_query_chars", 10), ("max_query_chars", None), ("late_maps", False),
    ("preaggregate", False), ("prefilter_embedder", "hashing"),
])
def test_valid_options_are_kept_as_given(name, value):
    with session(**{name: value}) as s:
        assert s.options[name] == value and s.options.get(name) == value


def test_options_stay_a_validating_dict():
    opts = Options(lazy=False)
    assert isinstance(opts, dict) and dict(opts) == {"lazy": False}
    assert opts.get("cost_order", True) is True  # readers keep their own defaults
    with pytest.raises(OptionError):
        opts["lazzy"] = True
    with pytest.raises(OptionError):
        opts.update(timeout="soon")
    with pytest.raises(OptionError):
        opts.setdefault("nope", 1)
    opts.update({"cost_order": False}, timeout=3)
    assert opts.merged({"lazy": True}) == {"lazy": True, "cost_order": False, "timeout": 3}
    assert opts == {"lazy": False, "cost_order": False, "timeout": 3}  # merged copies
    assert opts.effective()["preaggregate"] is True


def test_declared_defaults_match_the_engine_defaults():
    from blendsql.db import database
    from blendsql.models import base

    assert KNOWN["timeout"].default == database.DEFAULT_TIMEOUT
    assert KNOWN["model_timeout"].default == base.DEFAULT_TIMEOUT


def test_validate_and_check_option_name_the_call():
    with pytest.raises(OptionError, match=r"execute\(\)"):
        validate({"lazzy": 1}, "execute()")
    assert check_option("timeout", 1) == 1


@pytest.mark.parametrize(("name", "text", "value"), [
    ("lazy", "false", False), ("lazy", "On", True), ("timeout", "2.5", 2.5),
    ("timeout", "none", None), ("max_query_chars", "5000", 5000), ("prefilter", "bm25", "bm25"),
    ("prefilter", "true", True), ("enum_match", "model", "model"),
])
def test_option_text_from_the_command_line(name, text, value):
    assert parse_option_text(name, text) == value


@pytest.mark.parametrize(("name", "text"), [("lazy", "maybe"), ("timeout", "soon"),
                                             ("max_query_chars", "1.5"), ("lazzy", "true")])
def test_bad_option_text_is_refused(name, text):
    with pytest.raises(OptionError):
        parse_option_text(name, text)


def _option_names_read_by_the_engine() -> set[str]:
    """Every literal name passed to ``<x>.options.get("name", ...)`` / ``enabled(run, NAME)``,
    and every planning rule's ``switch="name"`` (read through ``rule_on``)."""
    names: set[str] = set()
    constants: dict[str, str] = {}
    for path in (ROOT / "blendsql").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                    and re.fullmatch(r"(?:[A-Z_]*_)?OPTION", node.targets[0].id)
                    and re.fullmatch(r"[a-z_]+", node.value.value)):
                constants[f"{path}:{node.targets[0].id}"] = node.value.value
            if not (isinstance(node, ast.Call) and node.args):
                continue
            func = node.func
            reads_run_options = (isinstance(func, ast.Attribute) and func.attr == "get"
                                 and isinstance(func.value, ast.Attribute)
                                 and func.value.attr == "options"
                                 and isinstance(func.value.value, ast.Name)
                                 and func.value.value.id == "run")
            if reads_run_options and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
    names.update(constants.values())
    names.update(r.name for r in RULES if r.switch is not None)  # a rule's switch: its name
    return names


def test_every_option_the_engine_reads_is_declared():
    read = _option_names_read_by_the_engine()
    assert {"lazy", "cost_order", "late_maps", "preaggregate", "enum_match"} <= read
    assert read <= set(KNOWN), f"undeclared options: {sorted(read - set(KNOWN))}"


def test_max_query_chars_applies_to_session_and_query():
    with session(max_query_chars=30) as s:
        with pytest.raises(BlendSQLError, match="max_query_chars"):
            s.execute("SELECT name FROM w WHERE name LIKE 'A%' ORDER BY name")
        out = s.execute("SELECT name FROM w WHERE name LIKE 'A%' ORDER BY name",
                        max_query_chars=None)
        assert list(out.df["name"]) == ["Abe", "Ann"]


def test_option_error_leaves_a_handed_in_connection_untouched():
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a)")
    with pytest.raises(OptionError):
        BlendSQL(con, lazzy=True)
    assert con.execute("SELECT count(*) FROM t").fetchone() == (0,)
    assert not con.in_transaction
    con.close()


def _cli_db(tmp_path: Path) -> Path:
    path = tmp_path / "w.sqlite"
    if path.exists():
        return path
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE w (name TEXT)")
    con.executemany("INSERT INTO w VALUES (?)", [("Ann",), ("Bob",)])
    con.commit()
    con.close()
    return path


def test_cli_passes_options_through(tmp_path):
    import io

    from blendsql import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["run", str(_cli_db(tmp_path)), "SELECT name FROM w ORDER BY name",
                     "--option", "lazy=false", "--option", "max_query_chars=100",
                     "--no-cache", "--format", "csv"],
                    model=FunctionModel(lambda r: "x"), stdout=out, stderr=err)
    assert code == 0 and out.getvalue().split() == ["name", "Ann", "Bob"]
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["run", str(_cli_db(tmp_path)), "SELECT name FROM w",
                     "--option", "max_query_chars=5", "--no-cache"],
                    model=FunctionModel(lambda r: "x"), stdout=out, stderr=err)
    assert code == 2 and "max_query_chars" in err.getvalue()


@pytest.mark.parametrize(("flag", "fragment"), [("lazzy=false", "did you mean 'lazy'"),
                                                 ("lazy", "NAME=VALUE"),
                                                 ("timeout=soon", "number")])
def test_cli_refuses_bad_options(tmp_path, flag, fragment):
    import io

    from blendsql import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["run", str(_cli_db(tmp_path)), "SELECT 1", "--option", flag, "--no-cache"],
                    model=FunctionModel(lambda r: "x"), stdout=out, stderr=err)
    assert code == 2 and fragment in err.getvalue() and "Traceback" not in err.getvalue()
