"""The README's main command: its query, its answer, and how far that answer is from flipping.

A yes/no that is a near tie flips between machines (``LLMMap('Is this position a
pitcher?', ...) = TRUE`` at a logit margin of 0.03 gives 10 rows on one CPU and 0 on
an Intel AMX one), so the README's query is one whose every constrained decision
wins by a wide margin on the embedded model; the
``model`` tests measure that with ``benchmarks/demo_margins.py`` and fail if the
answer changes or a margin drops below ``SAFE_MARGIN``. The other tests check
the README command is the measured query and that the margin arithmetic is right
(on a fake vocabulary, without the model).
"""

from __future__ import annotations

import importlib.util
import io
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from blendsql.models import Request
from blendsql.models.constraints import Bool, Choice

ROOT = Path(__file__).resolve().parents[1]
SAFE_MARGIN = 1.0  # logits; measured 2.12 on AMD EPYC (both kernel paths)
EXPECTED_ROWS = [["Steve Whitaker", "Pitcher", "Long Beach State"]]


def _load_demo_margins():
    spec = importlib.util.spec_from_file_location("demo_margins",
                                                  ROOT / "benchmarks" / "demo_margins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("demo_margins", module)
    spec.loader.exec_module(module)
    return module


dm = _load_demo_margins()


def readme_main_query() -> str:
    """The query of the ``blendsql run example "..."`` line of the README's "Try it" block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Try it", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    m = re.search(r'blendsql run example "(.+)"\s*$', block, re.M)
    assert m, "the Try it block must end with blendsql run example \"<query>\""
    return m.group(1)


# ---------------------------------------------------------------- without the model


def test_readme_runs_the_measured_query():
    assert readme_main_query() == dm.README_QUERY


def test_readme_states_the_expected_answer():
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Try it", 1)[1]
    for value in EXPECTED_ROWS[0]:
        assert value in section


class FakeVocab:
    """A tiny vocabulary shaped like ``demo_margins.Vocab``."""

    def __init__(self, texts: list[str], eog: list[int]) -> None:
        self.text = texts
        self.n = len(texts)
        self.eog = eog
        self.by_text: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            if t and i not in eog:
                self.by_text.setdefault(t, []).append(i)

    prefixes_of = dm.Vocab.prefixes_of


def _logits(vocab: FakeVocab, **by_text: float) -> np.ndarray:
    out = np.full(vocab.n, -10.0)
    for i, t in enumerate(vocab.text):
        key = "END" if i in vocab.eog else t
        if key in by_text:
            out[i] = by_text[key]
    return out


def test_choice_margin_is_best_continuing_minus_best_diverging_token():
    v = FakeVocab(["pitch", "p", "field", "f", "er", "<e>", "x"], eog=[5])
    logits = _logits(v, pitch=1.0, p=3.0, field=2.5, f=0.0, x=9.0)  # "x" is not allowed
    step, best = dm.step_choice(v, logits, ("pitcher", "fielder"), "", "pitcher")
    assert best == 1  # greedy takes "p", the best allowed token
    assert step.margin == pytest.approx(0.5) and step.rival_answers == ["fielder"]


def test_choice_margin_goes_negative_when_the_rival_leads():
    v = FakeVocab(["pitch", "field", "<e>"], eog=[2])
    logits = _logits(v, pitch=1.0, field=1.2)
    step, best = dm.step_choice(v, logits, ("pitcher", "fielder"), "", "pitcher")
    assert best == 1 and step.margin == pytest.approx(-0.2)


def test_shared_prefix_is_decided_where_the_options_part():
    v = FakeVocab(["Florida", " State", "<e>"], eog=[2])
    opts = ("Florida", "Florida State")
    first, _ = dm.step_choice(v, _logits(v, Florida=5.0), opts, "", "Florida State")
    assert first is None  # "Florida" keeps both alive: not a decision yet
    second, best = dm.step_choice(v, _logits(v, **{" State": 0.7, "END": 0.2}), opts,
                                  "Florida", "Florida State")
    assert best == 1 and second.margin == pytest.approx(0.5)
    assert second.rival_token == dm.END and second.rival_answers == ["Florida"]


def test_bool_and_choice_expose_their_answer_sets():
    assert dm.options_of(Bool()) == ("true", "false")
    assert dm.options_of(Choice(("a", "b"))) == ("a", "b")


def test_label_is_the_map_value_or_the_question():
    assert dm.label_of(Request(prompt="Q\nQuestion: q?\n\nValue: Pitcher\nAnswer:")) == "Pitcher"
    assert dm.label_of(Request(prompt="ctx\n\nQuestion: Which one?\nAnswer:")) == "Which one?"


# ---------------------------------------------------------------- on the embedded model


@pytest.mark.model
@pytest.mark.parametrize("extra_bufts", [True, False], ids=["extra_bufts_on", "extra_bufts_off"])
def test_readme_query_answer_is_right_and_every_decision_is_wide(extra_bufts):
    """Each kernel path runs in a child process (``dm.measure_isolated``): forcing the
    extra buffer types on takes the path that crashes on some AMX CPUs, and a crash
    there must be this test's result, not the end of the test run."""
    pytest.importorskip("llama_cpp")
    result = dm.measure_isolated(readme_main_query(), extra_bufts)
    if "crashed" in result:
        if result["known_crash"] and extra_bufts:
            pytest.xfail(f"llama.cpp's extra buffer types crash on this AMX CPU "
                         f"({result['crashed']}); the engine never loads them here")
        pytest.fail(f"the child process died ({result['crashed']}):\n{result['stderr_tail']}")
    assert result["rows"] == EXPECTED_ROWS
    assert result["decisions"], "the query must consult the model"
    assert result["all_consistent"], "the measured greedy path must be llama.cpp's answer"
    for d in result["decisions"]:
        assert d["margin"] is not None and d["margin"] >= SAFE_MARGIN, d


@pytest.mark.model
def test_readme_command_prints_the_answer():
    pytest.importorskip("llama_cpp")
    from blendsql import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["run", "example", readme_main_query(), "--no-cache"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    text = out.getvalue() + err.getvalue()
    assert "Steve Whitaker" in text and "Long Beach State" in text
    assert "1 rows" in text
