"""The shared helpers of the LLM ingredients: serialisation budgets, option shapes, parsing."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from blendsql.ingredients import _llm, prompts
from blendsql.models.base import FunctionModel, Response
from blendsql.models.constraints import (
    Bool,
    Choice,
    Date,
    Float,
    Int,
    JsonSchema,
    ListOf,
    Regex,
    Text,
)
from blendsql.text_values import render_scalar, text_items

cells = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=300))


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.tuples(cells, cells, cells), max_size=60),
    budget=st.integers(min_value=200, max_value=5000),
)
def test_serialize_table_accounts_for_every_row(rows, budget):
    df = pd.DataFrame(rows, columns=["a", "b", "c"])
    out = _llm.serialize_table(df, max_chars=budget, cell_chars=200)
    lines = out.split("\n")
    assert lines[0] == "a | b | c"
    body = [line for line in lines[1:] if not line.endswith("more rows not shown)")]
    omitted = 0
    if lines[-1].endswith("more rows not shown)"):
        omitted = int(lines[-1].strip("(").split()[0])
    assert len(body) + omitted == len(rows)
    for line in body:  # cells never add columns or lines
        assert line.count("|") == 2 or line.endswith(_llm.ELLIPSIS)
    tail = len(lines[-1]) + 1 if omitted else 0
    assert len(out) <= budget + tail


def test_serialize_table_empty_and_missing():
    assert _llm.serialize_table(pd.DataFrame()) == ""
    out = _llm.serialize_table(pd.DataFrame({"x": [None, 1.0, float("nan")]}))
    assert out.split("\n") == ["x", "", "1", ""]


def test_as_list_shapes():
    assert _llm.as_list(None) is None
    assert _llm.as_list("a; b;;a") == ["a", "b"]
    assert _llm.as_list("single") == ["single"]
    assert _llm.as_list(pd.Series([1, 2, 2, None])) == [1.0, 2.0]
    assert _llm.as_list(pd.DataFrame({"c": ["x", "y"]})) == ["x", "y"]
    assert _llm.as_list(("a", float("nan"), "a")) == ["a"]
    assert _llm.as_list(3) == [3]


def test_text_items_shapes():
    assert text_items('["a", "", "b"]') == ["a", "b"]
    assert text_items("[not json]") == ["[not json]"]
    assert text_items('[{"stars": 5}]') == ['{"stars": 5}']
    assert text_items(["x", None]) == ["x"]
    assert text_items(None) == []
    assert text_items(float("nan")) == []
    assert text_items("  plain  ") == ["plain"]


def test_first_line_and_truncate():
    assert _llm.first_line("\n  'Atlanta' \nmore") == "Atlanta"
    assert _llm.first_line("   ") == ""
    assert _llm.truncate("abcdef", 5) == "ab..."
    assert _llm.truncate("abc", 5) == "abc"


def test_render_scalar():
    assert render_scalar(3.0) == "3"
    assert render_scalar(2.5) == "2.5"
    assert render_scalar(True) == "true"
    assert render_scalar(b"hi") == "hi"


def test_every_constraint_has_a_format_hint():
    for c in [Text(), Choice(("a", "b")), Bool(), Int(), Float(), Date(), Regex("[0-9]+"),
              JsonSchema.of({"type": "object"}), ListOf(Int())]:
        assert _llm.format_hint(c).strip()
    assert "a; b" in _llm.format_hint(Choice(("a", "b")))
    assert _llm.format_hint(Text(), text_hint="") == ""
    assert set(prompts.FORMAT_HINTS) >= {"Choice", "Bool", "Int", "Float", "Date", "Text"}


def test_max_tokens_fit_constraint():
    m = FunctionModel(lambda r: "")
    short = _llm.max_tokens_for(Choice(("a", "b")), m, 48)
    long = _llm.max_tokens_for(Choice(("a" * 400,)), m, 48)
    assert short < long <= 512
    assert _llm.max_tokens_for(Bool(), m, 48) <= 8
    assert _llm.max_tokens_for(Text(), m, 48) == 48
    assert _llm.max_tokens_for(ListOf(Text()), m, 48) >= 256


def test_interpret():
    assert _llm.interpret(Response("x", error="bad"), Text(), {}, True) == (None, "bad")
    assert _llm.interpret(Response("2", value="2"), Choice(("1", "2")), {"2": 2}, True) == (2, None)
    value, err = _llm.interpret(Response("\n", value=""), Text(), {}, True)
    assert value is None and err
    assert _llm.interpret(Response("a\nb", value="a\nb"), Text(), {}, False) == ("a\nb", None)
    assert _llm.interpret(Response("abcdef", value="abcdef"), Text(max_chars=3), {}, True) == (
        "abc", None)
    value, err = _llm.interpret(Response("nan", value=float("nan")), Float(), {}, True)
    assert value is None and "finite" in (err or "")  # NaN is no number: NULL, with a warning


class SmallWindow(FunctionModel):
    """A model with a 400-token window and 2 characters per token."""

    n_ctx = 400

    def count_tokens(self, text: str) -> int:
        return len(text) // 2


def room(model: SmallWindow, req) -> int:
    return model.n_ctx - req.max_tokens - _llm.PROMPT_MARGIN


def test_prompts_shrink_to_fit_the_context_window():
    import json

    from blendsql.ingredients import ANSWER, LLMQA, LLMMap, LLMValidate

    seen = []
    model = SmallWindow(lambda r: (seen.append(r), "x")[1])
    big = pd.DataFrame({"passage": ["word " * 300] * 20})
    LLMQA().run("q?", big, None, model=model)
    LLMValidate().run("s", big, None, model=model)
    LLMMap().run("q?", ["v" * 5000, "short"], model=model, context=big)
    ANSWER().run("q?", [json.dumps(["review " * 100] * 30)], model=model)
    assert len(seen) == 5
    for req in seen:
        assert model.count_tokens(req.prompt) <= room(model, req), req.prompt[:80]
    short = [r for r in seen if r.prompt.rstrip().endswith("Value: short\nAnswer:")]
    assert short and "passage" in short[0].prompt  # context shrank but is still there


def test_fit_prompt_leaves_models_without_window_alone():
    model = FunctionModel(lambda r: "x")
    calls = []

    def build(scale: float) -> str:
        calls.append(scale)
        return "p" * 100_000

    assert len(_llm.fit_prompt(build, model, 16)) == 100_000
    assert calls == [1.0]


def test_many_options_listed_within_budget_but_all_enforced():
    options = tuple(f"city number {i}" for i in range(2000))
    hint = _llm.format_hint(Choice(options))
    assert len(hint) < 1700
    assert "city number 0" in hint and "more)" in hint
    shown = hint.split(": ", 1)[1].split("; ... (")[0].split("; ")
    assert hint.rstrip().endswith(f"({2000 - len(shown)} more)")
    assert _llm.list_options(["a", "b"]) == "a; b"
