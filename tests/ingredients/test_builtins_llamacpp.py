"""The built-ins on the embedded llama.cpp model (marked ``model``: slower).

Accuracy of a 135M model is not tested here; what must hold on a real
backend is that every answer parses under its constraint and that LLMMap's
value-last layout lets llama.cpp reuse the shared prompt prefix.
"""

from __future__ import annotations

import pytest

from blendsql.ingredients import LLMQA, LLMJoin, LLMMap
from blendsql.models.base import Model, Response
from blendsql.models.constraints import Bool

pytestmark = pytest.mark.model


class Keep(Model):
    """Keeps the responses of the wrapped model for token accounting."""

    def __init__(self, inner: Model) -> None:
        self.inner, self.name, self.responses = inner, inner.name, []

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def generate(self, requests):  # type: ignore[no-untyped-def]
        out: list[Response] = self.inner.generate(requests)
        self.responses.extend(out)
        return out


@pytest.fixture(scope="module")
def llama() -> Model:
    pytest.importorskip("llama_cpp")
    from blendsql.models import LlamaCpp

    try:
        model = LlamaCpp()
        model.count_tokens("load")
    except Exception as e:  # noqa: BLE001 - no model here: skip, do not fail
        pytest.skip(f"embedded model unavailable: {e}")
    return model


def test_map_answers_parse_and_reuse_prefix(llama):
    keep = Keep(llama)
    out = LLMMap().run("Is this baseball position a pitcher?", ["sp", "1b", "rp"],
                       model=keep, constraint=Bool(), few_shot=[("first base", False)])
    assert all(isinstance(v, bool) for v in out)
    later = keep.responses[1:]
    assert all(r.usage.cached_tokens > 0.5 * r.usage.prompt_tokens for r in later)


def test_qa_choice_and_join_parse(llama):
    import pandas as pd

    ctx = pd.DataFrame({"city": ["Lithgow"], "fact": ["Lithgow is 120 miles west of Sydney."]})
    answer = LLMQA().run("Which city is 120 miles west of Sydney?", ctx,
                         ["Sydney", "Lithgow"], model=llama)
    assert answer in {"Sydney", "Lithgow"}
    mapping = LLMJoin().run(["Deutschland", "france"], ["Germany", "France", "Spain"],
                            model=llama)
    assert mapping["france"] == "France"  # exact match, no model
    assert set(mapping.values()) <= {"Germany", "France", "Spain"}
