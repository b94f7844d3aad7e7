"""The ``model_timeout`` option (session or per query) bounds every model request.

A hung model is stopped at that limit, not at its backend's own (default 120 s).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ModelTimeoutError
from blendsql.execute.metering import MeteredModel
from blendsql.models import FunctionModel
from blendsql.models.base import Model, Request, Response

QUERY = "SELECT {{LLMQA('Which city?')}} AS a"


@pytest.fixture()
def gate() -> Any:
    ev = threading.Event()
    yield ev
    ev.set()  # lets the stuck worker thread end


def _hung(gate: threading.Event) -> FunctionModel:
    # its own limit is generous: only the option can end the query quickly
    return FunctionModel(lambda req: "Paris" if gate.wait(60) else "x", timeout=600)


@pytest.mark.parametrize("where", ["session", "execute"])
def test_model_timeout_option_ends_a_hung_request(gate: threading.Event, where: str) -> None:
    opts = {"model_timeout": 0.2}
    b = BlendSQL({"t": __import__("pandas").DataFrame({"a": [1]})}, model=_hung(gate),
                 **(opts if where == "session" else {}))
    with pytest.raises(ModelTimeoutError) as info:
        b.execute(QUERY, **(opts if where == "execute" else {}))
    assert isinstance(info.value, BlendSQLError)
    assert "0.2 s" in str(info.value)


class Recorder(Model):
    """Records the requests it receives."""

    name = "recorder"
    cacheable = False

    def __init__(self) -> None:
        self.seen: list[Request] = []

    def generate(self, requests: Any) -> list[Response]:
        self.seen += list(requests)
        return [Response("ok", "ok") for _ in requests]


def test_requests_carry_the_option_and_keep_their_own() -> None:
    inner = Recorder()
    metered = MeteredModel(lambda: inner)
    metered.request_timeout = 5.0
    metered.generate([Request("a"), Request("b", timeout=1.0)])
    assert [r.timeout for r in inner.seen] == [5.0, 1.0]
    metered.request_timeout = None
    metered.generate([Request("c")])
    assert inner.seen[-1].timeout is None


def test_timeout_is_not_part_of_the_cache_key() -> None:
    assert Request("a").key() == Request("a", timeout=3.0).key()


def test_without_the_option_the_backend_limit_applies(gate: threading.Event) -> None:
    model = FunctionModel(lambda req: "Paris" if gate.wait(60) else "x", timeout=0.2)
    b = BlendSQL({"t": __import__("pandas").DataFrame({"a": [1]})}, model=model)
    with pytest.raises(ModelTimeoutError):
        b.execute(QUERY)
