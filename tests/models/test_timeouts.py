"""A hung model cannot block ``execute()`` forever.

The stuck function waits on a ``threading.Event`` that is set only after the
assertion, so the tests never depend on how fast this (loaded) machine is:
the only timing is the 0.2 s limit itself.
"""

from __future__ import annotations

import threading
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ModelError, ModelTimeoutError
from blendsql.models.base import FunctionModel, Request


def _stuck(release: threading.Event) -> Any:
    def fn(req: Request) -> str:
        release.wait(30)  # a hung model; released by the test's cleanup
        return "true"
    return fn


def test_functionmodel_times_out_instead_of_hanging():
    release = threading.Event()
    try:
        with pytest.raises(ModelTimeoutError) as e:
            FunctionModel(_stuck(release), timeout=0.2).generate([Request("hi")])
        assert isinstance(e.value, ModelError) and isinstance(e.value, TimeoutError)
        assert "0.2 s" in str(e.value) and "timeout=" in (e.value.hint or "")
    finally:
        release.set()


def test_timeout_is_per_request_not_per_batch():
    """Each request gets the full limit: a batch of quick answers never times out."""
    calls: list[int] = []

    def fn(req: Request) -> str:
        calls.append(1)
        return "ok"

    out = FunctionModel(fn, timeout=0.2).generate([Request(str(i)) for i in range(200)])
    assert len(out) == 200 and len(calls) == 200


def test_second_request_hanging_names_its_position():
    release = threading.Event()
    seen: list[str] = []

    def fn(req: Request) -> str:
        seen.append(req.prompt)
        if req.prompt == "b":
            release.wait(30)
        return "x"

    try:
        with pytest.raises(ModelTimeoutError, match="request 2 of 3"):
            FunctionModel(fn, timeout=0.2).generate([Request("a"), Request("b"), Request("c")])
    finally:
        release.set()


def test_hung_model_fails_the_query_with_a_blendsql_error():
    release = threading.Event()
    df = pd.DataFrame({"x": ["a", "b"]})
    try:
        bsql = BlendSQL({"w": df}, model=FunctionModel(_stuck(release), timeout=0.2))
        with pytest.raises(BlendSQLError) as e:
            bsql.execute("SELECT {{LLMMap('Is it?', w.x)}} AS y FROM w")
        assert isinstance(e.value, ModelTimeoutError)
    finally:
        release.set()


def test_function_errors_still_reach_the_caller():
    def boom(req: Request) -> str:
        raise KeyError("nope")

    with pytest.raises(ModelError) as info:  # one error root; the function's own error chained
        FunctionModel(boom).generate([Request("x")])
    assert isinstance(info.value.__cause__, KeyError)
    assert "KeyError" in info.value.message and "request 1 of 1" in info.value.message

    def interrupted(req: Request) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # not an error: passed on as it is
        FunctionModel(interrupted).generate([Request("x")])


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "10", None, True])
def test_timeout_is_validated(bad):
    with pytest.raises(ModelError, match="timeout"):
        FunctionModel(lambda r: "x", timeout=bad)


def test_timeout_is_reported_in_the_failed_runs_trace():
    release = threading.Event()
    df = pd.DataFrame({"x": ["a", "b"]})
    try:
        bsql = BlendSQL({"w": df}, model=FunctionModel(_stuck(release), timeout=0.2))
        with pytest.raises(ModelTimeoutError) as e:
            bsql.execute("SELECT {{LLMMap('Is it?', w.x)}} AS y FROM w")
    finally:
        release.set()
    trace = e.value.trace
    assert trace is not None and trace[-1].kind == "error"
    assert trace[-1].ingredient == "LLMMap" and "0.2 s" in trace[-1].summary
    assert trace[-1].details["error"] == "ModelTimeoutError"
    assert any(s.kind == "parse" for s in trace)  # the steps before the failure are kept


def test_ingredient_crash_is_in_the_trace_too():
    from blendsql.ingredients.base import MapIngredient

    class Boom(MapIngredient):
        def run(self, question, values, **kwargs):
            raise ZeroDivisionError("x")

    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, ingredients=[Boom])
    with pytest.raises(BlendSQLError) as e:
        bsql.execute("SELECT {{Boom('q', w.x)}} FROM w")
    assert e.value.trace[-1].kind == "error" and "ZeroDivisionError" in e.value.trace[-1].summary


def test_a_huge_time_limit_is_accepted_and_used():
    # threading refuses waits past TIMEOUT_MAX; a generous limit must still work
    out = FunctionModel(lambda r: "ok", timeout=1e15).generate([Request("x")])
    assert out[0].value == "ok"


@pytest.mark.parametrize("bad", [0, -5, float("nan"), float("inf"), "60", None])
def test_openai_timeout_is_validated(bad):
    pytest.importorskip("openai")
    from blendsql.models import OpenAI

    with pytest.raises(ModelError, match="timeout"):
        OpenAI("m", base_url="http://127.0.0.1:9/v1", timeout=bad)


def test_guidance_request_past_its_limit_raises_and_blocks_reuse_until_it_ends():
    pytest.importorskip("guidance")
    from blendsql.models.base import Response
    from blendsql.models.guidance_model import Guidance

    g = Guidance.__new__(Guidance)  # no real guidance engine needed to test the limit
    g.name, g.timeout, g._stuck = "guidance:fake", 0.2, None
    release = threading.Event()

    def one(req: Request) -> Response:
        release.wait(30)
        return Response("x", "x")

    g._one = one  # type: ignore[method-assign]
    try:
        with pytest.raises(ModelTimeoutError):
            g.generate([Request("a")])
        with pytest.raises(ModelError, match="still running"):  # never two requests at once
            g.generate([Request("b")])
    finally:
        release.set()
    assert g._stuck is not None
    g._stuck.join(10)
    assert g.generate([Request("c")])[0].value == "x"
