"""The Smoothie as a person sees it: Jupyter HTML (escaped, clipped, collapsible) and terminal text."""

from __future__ import annotations

import html.parser

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql._display import CELL_CHARS, MAX_PAIRS, PROMPT_CHARS, trace_html
from blendsql.ingredients import MapIngredient
from blendsql.smoothie import HTML_MAX_ROWS, TEXT_MAX_ROWS, Meta, Smoothie, TraceStep

EVIL = "<script>alert('x')</script>"


class _Tags(html.parser.HTMLParser):
    """Collects start tags and text, to assert on structure rather than on substrings."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(markup: str) -> _Tags:
    p = _Tags()
    p.feed(markup)
    p.close()
    return p


def make(n_rows: int = 3, trace: list[TraceStep] | None = None, value: str = "a") -> Smoothie:
    df = pd.DataFrame({"name": [f"{value}{i}" for i in range(n_rows)], "n": list(range(n_rows))})
    meta = Meta(values_passed=7, model_calls=2, prompt_tokens=120, completion_tokens=9,
                cache_hits=1, seconds=0.25, ingredient_calls=1)
    steps = trace if trace is not None else [
        TraceStep("parse", "parsed query", seconds=0.001),
        TraceStep("sql", "candidate values", sql="SELECT name FROM t", rows_out=3, seconds=0.002),
        TraceStep("ingredient", "LLMMap (map) on 3 value(s)", ingredient="LLMMap",
                  inputs=["x", "y", "z"], outputs=[True, False, True],
                  prompts=["Is x a pitcher?"], model_calls=2, prompt_tokens=120,
                  completion_tokens=9, seconds=0.2),
    ]
    return Smoothie(df, meta, steps, query="SELECT 1")


def test_script_in_every_place_is_escaped():
    step = TraceStep("ingredient", EVIL, sql=f"SELECT '{EVIL}'", ingredient=EVIL,
                     inputs=[EVIL], outputs=[EVIL], prompts=[EVIL], details={"why": EVIL})
    s = make(trace=[step], value=EVIL)
    s.df.columns = [EVIL, "n"]
    out = s._repr_html_()
    assert "<script" not in out.lower()
    assert "&lt;script&gt;" in out
    tags = parse(out)
    assert "script" not in tags.tags
    # the escaped text reads back as the original value: nothing was lost, only made inert
    assert any(EVIL in t for t in tags.text)


def test_kind_with_markup_cannot_break_out_of_its_attribute():
    out = make(trace=[TraceStep("x' onclick='alert(1)", "s")])._repr_html_()
    assert "onclick='alert" not in out


def test_table_shows_first_rows_and_the_full_count():
    s = make(n_rows=HTML_MAX_ROWS + 15)
    out = s._repr_html_()
    assert f"showing {HTML_MAX_ROWS} of {HTML_MAX_ROWS + 15} rows" in out
    assert f"a{HTML_MAX_ROWS - 1}" in out and f"a{HTML_MAX_ROWS}<" not in out
    assert f"{HTML_MAX_ROWS + 15}</b> rows" in out  # the counter chip carries the real count


def test_small_and_empty_results():
    assert "3 rows × 2 columns" in make(n_rows=3)._repr_html_()
    assert "1 row × 2 columns" in make(n_rows=1)._repr_html_()
    assert "no rows" in make(n_rows=0)._repr_html_()
    empty = Smoothie(pd.DataFrame(), Meta(), [])
    assert "(no columns)" in empty._repr_html_()


def test_nulls_are_marked_and_long_cells_clipped():
    df = pd.DataFrame({"a": [None, "x" * (CELL_CHARS + 50)], "b": [1.5, float("nan")]})
    out = Smoothie(df, Meta(), [])._repr_html_()
    assert out.count("bsql-null") >= 3  # two NULL cells (+ the CSS rule)
    assert "x" * CELL_CHARS + "… (+50 chars)" in out
    assert "x" * (CELL_CHARS + 1) not in out


def test_counters_are_shown():
    out = make()._repr_html_()
    for text in ("<b>2</b> model calls", "<b>1</b> cache hits", "<b>120+9</b> tokens",
                 "<b>7</b> values passed", "<b>0.250 s</b>"):
        assert text in out


def test_trace_is_collapsed_with_step_details_inside():
    out = make()._repr_html_()
    tags = parse(out)
    assert tags.tags.count("details") == 1 + 2  # the trace, and the two steps with a body
    trace = out[out.index("<details class='bsql-trace'>"):]
    assert trace.startswith("<details class='bsql-trace'>")  # closed until clicked
    assert "Trace: 3 steps" in trace
    assert "SELECT name FROM t" in trace and "Is x a pitcher?" in trace
    assert "<td>y</td><td>False</td>" in trace  # inputs next to outputs


def test_long_prompts_and_many_values_are_truncated():
    step = TraceStep("ingredient", "big", inputs=list(range(MAX_PAIRS + 5)),
                     outputs=list(range(MAX_PAIRS + 5)), prompts=["p" * (PROMPT_CHARS + 10)] * 5)
    out = trace_html([step])
    assert "… 5 more<" in out
    assert "… 2 more prompt(s)" in out
    assert "p" * (PROMPT_CHARS + 1) not in out and "(+10 chars)" in out


def test_time_bar_is_proportional_to_the_slowest_step():
    steps = [TraceStep("sql", "slow", seconds=2.0), TraceStep("sql", "fast", seconds=0.5),
             TraceStep("sql", "nothing", seconds=0.0)]
    out = trace_html(steps)
    assert "width:100.0%" in out and "width:25.0%" in out and "width:0.0%" in out
    assert "width:0.0%" in trace_html([TraceStep("parse", "p", seconds=0.0)])  # no division by 0


def test_str_is_readable_text_with_a_row_note():
    s = make(n_rows=TEXT_MAX_ROWS + 5)
    text = str(s)
    assert "<" not in text.replace("<Smoothie", "")
    assert f"showing {TEXT_MAX_ROWS} of {TEXT_MAX_ROWS + 5} rows" in text
    assert "Trace:" in text and "[ingredient] LLMMap (map) on 3 value(s)" in text
    assert s.summary() in text
    assert "(no rows)" in str(make(n_rows=0))


class _Upper(MapIngredient):
    """Upper-cases a value (deterministic)."""

    def run(self, question, values, **kwargs):
        return [str(v).upper() for v in values]


def test_real_run_renders_its_trace(tmp_path):
    bsql = BlendSQL({"t": pd.DataFrame({"name": ["ann", "<b>bob</b>"]})}, ingredients=[_Upper])
    s = bsql.execute("SELECT name, {{_Upper('x', t.name)}} AS up FROM t ORDER BY name")
    out = s._repr_html_()
    assert "&lt;B&gt;BOB&lt;/B&gt;" in out and "<b>bob" not in out
    assert "_Upper" in out and "final query" in out
    assert len(s.df) == 2


@pytest.mark.parametrize("n", [0, 1, 5])
def test_html_is_well_formed(n):
    """Every opened details / table closes (a broken tag would swallow the next notebook cell)."""
    out = make(n_rows=n)._repr_html_()
    for tag in ("details", "table", "div", "pre", "summary"):
        assert out.count(f"<{tag}") == out.count(f"</{tag}>"), tag


def test_meta_alone_renders_its_counters():
    out = Meta(model_calls=3, prompt_tokens=10, completion_tokens=2, planner_misses=4)._repr_html_()
    assert "<b>3</b> model calls" in out and "<b>4</b> planner misses" in out
    assert "rows</span>" not in out  # a Meta does not know the row count


class _Handle:
    def __init__(self, log: list) -> None:
        self.log = log

    def update(self, obj) -> None:
        self.log.append(("update", obj.data))


def test_notebook_progress_redraws_in_place_and_starts_fresh_per_query(monkeypatch):
    display_mod = pytest.importorskip("IPython.display")
    from blendsql.smoothie import notebook_progress

    log: list = []

    def fake_display(obj, display_id=False):
        log.append(("display", obj.data))
        return _Handle(log)

    monkeypatch.setattr(display_mod, "display", fake_display)
    bar = notebook_progress(min_interval=0)
    bar("LLMMap", 0, 3)
    bar("LLMMap", 2, 3)
    bar("<b>X</b>", 1, 1)
    bar("LLMMap", 3, 3)  # everything finished
    assert [k for k, _ in log] == ["display", "update", "update", "update"]
    assert "value='2' max='3'" in log[1][1] and "&lt;b&gt;X&lt;/b&gt;" in log[2][1]
    bar("LLMMap", 1, 5)  # the next query: a new output, the old one stays as it was
    assert log[-1][0] == "display" and "1/5" in log[-1][1] and "X" not in log[-1][1]


def test_notebook_progress_throttles_but_always_draws_the_end(monkeypatch):
    display_mod = pytest.importorskip("IPython.display")
    from blendsql.smoothie import notebook_progress

    log: list = []
    monkeypatch.setattr(display_mod, "display",
                        lambda obj, display_id=False: log.append(obj.data) or _Handle(log))
    bar = notebook_progress(min_interval=3600)
    for i in range(50):
        bar("LLMMap", i, 50)
    bar("LLMMap", 50, 50)
    assert len(log) == 2 and "50/50" in log[-1][1]


def test_token_bars_scale_to_the_step_that_used_the_most():
    steps = [TraceStep("ingredient", "big", prompt_tokens=300, completion_tokens=100),
             TraceStep("ingredient", "small", prompt_tokens=90, completion_tokens=10),
             TraceStep("sql", "none")]
    out = trace_html(steps)
    assert out.count("bsql-tok'") == 2  # no bar for a step without tokens
    assert "width:100.0%'></span></span>300+100" in out
    assert "width:25.0%'></span></span>90+10" in out
