"""The guidance adapter, on guidance's own LlamaCpp model with the embedded GGUF."""

from __future__ import annotations

import re

import pytest

from blendsql.errors import ModelError
from blendsql.models.base import Request
from blendsql.models.constraints import Bool, Choice, Grammar, Int, ListOf, Regex

guidance = pytest.importorskip("guidance")

from blendsql.models.guidance_model import Guidance  # noqa: E402

PROMPTS = ["What colour is the sky?", "What colour is grass?", "What colour is blood?"]


@pytest.fixture(scope="module")
def gmodel() -> Guidance:
    """guidance's own LlamaCpp engine on the embedded SmolLM2 GGUF (loaded once), over a
    ``llama_cpp.Llama`` made by blendsql's loader (safe on AMX CPUs)."""
    return Guidance.from_gguf(n_ctx=2048)


def test_rejects_non_guidance_objects() -> None:
    with pytest.raises(ModelError) as e:
        Guidance(object())
    assert "guidance model" in str(e.value)


@pytest.mark.model
def test_choice(gmodel: Guidance) -> None:
    opts = ("red", "green", "blue")
    out = gmodel.generate([Request(p, constraint=Choice(opts)) for p in PROMPTS])
    assert all(r.value in opts and r.error is None for r in out), [r.text for r in out]
    assert all(r.usage.prompt_tokens > 0 for r in out)


@pytest.mark.model
def test_regex(gmodel: Guidance) -> None:
    pat = r"[A-Z]{2}-[0-9]{3}"
    out = gmodel.generate([Request(f"Give a code for: {p}", constraint=Regex(pat)) for p in PROMPTS])
    assert all(re.fullmatch(pat, r.value) for r in out), [r.text for r in out]


@pytest.mark.model
def test_scalars_lists_and_grammar(gmodel: Guidance) -> None:
    reqs = [Request("Is water wet?", constraint=Bool()),
            Request("How many legs has a cat?", constraint=Int()),
            Request("Name colours.", constraint=ListOf(Choice(("red", "blue")), min_len=1, max_len=2)),
            Request("Write a query.", constraint=Grammar('root ::= "SELECT " [a-z]{1,8}'))]
    b, i, lst, g = gmodel.generate(reqs)
    assert type(b.value) is bool and type(i.value) is int
    assert isinstance(lst.value, list) and 1 <= len(lst.value) <= 2
    assert set(lst.value) <= {"red", "blue"}
    assert re.fullmatch(r"SELECT [a-z]{1,8}", g.value), g.text


@pytest.mark.model
def test_plain_prompt_mode(gmodel: Guidance) -> None:
    plain = Guidance(gmodel.lm, chat=False)
    [r] = plain.generate([Request("The answer is", constraint=Choice(("yes", "no")))])
    assert r.value in ("yes", "no")
    assert plain.identity() != gmodel.identity()
