"""Live progress on ``blendsql serve``'s page: a long request streams bars, then its result."""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ExecutionError
from blendsql.ingredients import MapIngredient
from blendsql.models.base import FunctionModel

from .conftest import page_token, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402
from blendsql.web.live import Progress, reporting  # noqa: E402

WAIT = 60  # seconds: every wait in these tests is bounded


class GatedModel(FunctionModel):
    """Answers 'true' at once for the first ``free`` requests, then waits for ``gate``.

    A slow model without sleeping: the test decides when the work goes on.
    """

    def __init__(self, free: int) -> None:
        self.free = free
        self.calls = 0
        self.gate = threading.Event()
        self.waiting = threading.Event()
        super().__init__(self.answer)

    def answer(self, request: Any) -> str:
        self.calls += 1
        if self.calls > self.free:
            self.waiting.set()
            self.gate.wait(WAIT)
        return "true"


class Hold(MapIngredient):
    """Blocks every call until its class-level gate opens (no model, so no progress bars)."""

    gate = threading.Event()

    def run(self, question, values, **kwargs):
        Hold.gate.wait(WAIT)
        return [True for _ in values]


def session(model: Any = None, **kw: Any) -> BlendSQL:
    df = pd.DataFrame({"x": [f"v{i}" for i in range(20)]})
    return BlendSQL({"w": df}, model=model, ingredients=[Hold], **kw)


@contextmanager
def stream(base: str, query: str) -> Iterator[tuple[http.client.HTTPResponse, list[str]]]:
    """Run ``query`` as the page's form does (a POST with its token); yields the open
    response and a list its chunks are read into."""
    token = page_token(base)
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=WAIT)
    try:
        conn.request("POST", "/", body=urllib.parse.urlencode(
            {"q": query, "action": "run", "token": token}),
            headers={"content-type": "application/x-www-form-urlencoded"})
        yield conn.getresponse(), []
    finally:
        conn.close()


def read_until(resp: http.client.HTTPResponse, seen: list[str], text: str) -> str:
    """Read the streamed body until ``text`` has arrived (or the stream ends)."""
    while text not in "".join(seen):
        chunk = resp.read1(65536)
        if not chunk:
            break
        seen.append(chunk.decode("utf-8"))
    return "".join(seen)


MAP_QUERY = "SELECT x FROM w WHERE {{LLMMap('is it odd?', w.x)}} = TRUE ORDER BY x"


def test_a_long_query_streams_its_progress_then_the_result():
    model = GatedModel(free=8)  # the first chunk (8 of 20 values) answers, then the model waits
    with running(create_app(session(model), progress_after=0.0)) as base:
        with stream(base, MAP_QUERY) as (resp, seen):
            assert resp.status == 200
            page = read_until(resp, seen, "8/20")
            assert model.waiting.wait(WAIT)
            assert "class='live-progress'" in page and "<progress value='8' max='20'>" in page
            assert "LLMMap" in page and "bsql-rows" not in page  # no result while it runs
            model.gate.set()
            page = read_until(resp, seen, "</html>")
    assert "<progress value='20' max='20'>" in page or "bsql-rows" in page
    assert "20 rows × 1 column" in page and "<td>v19</td>" in page
    assert page.rstrip().endswith("</html>")
    assert ".live-progress{display:none}" in page  # the bar is hidden once the result is there


def test_quick_requests_keep_their_plain_response_and_status():
    with running(create_app(session(), progress_after=30.0)) as base:
        with stream(base, "SELECT {{Hlod('x', w.x)}} FROM w") as (resp, seen):
            page = read_until(resp, seen, "</html>")
            assert resp.status == 400 and "live-progress" not in page
            assert "Hold" in page  # the did-you-mean hint


def test_a_time_out_while_streaming_is_shown_in_the_page():
    Hold.gate.clear()
    app = create_app(session(), progress_after=0.0, query_timeout=1.0)
    try:
        with running(app) as base:
            with stream(base, "SELECT x FROM w WHERE {{Hold('x', w.x)}} = TRUE") as (resp, seen):
                page = read_until(resp, seen, "</html>")
        assert resp.status == 200  # sent before the time-out was known
        assert "live-progress" in page and "Timed out" in page and "role='alert'" in page
    finally:
        Hold.gate.set()


def test_the_users_own_progress_callback_still_hears_everything():
    heard: list[tuple[str, int, int]] = []
    bsql = session(FunctionModel(lambda r: "true"), progress=lambda *a: heard.append(a))
    sink = Progress()
    out = reporting(bsql, lambda: bsql.execute(MAP_QUERY).df.to_string(), sink)()
    assert "v19" in out
    assert heard[-1] == ("LLMMap", 20, 20) and sink.bars() == [("LLMMap", 20, 20)]
    assert bsql.progress is not None and bsql.progress.__name__ == "<lambda>"  # restored


def test_reporting_restores_the_callback_after_a_failure():
    bsql = session(FunctionModel(lambda r: "true"))

    def boom() -> str:
        raise ExecutionError("no")

    with pytest.raises(ExecutionError):
        reporting(bsql, boom, Progress())()
    assert bsql.progress is None


@pytest.mark.parametrize("bad", [-1, "1", True, float("nan")])
def test_progress_after_is_validated(bad):
    with pytest.raises(ExecutionError, match="progress_after"):
        create_app(session(), progress_after=bad)


def test_a_slow_chat_reply_streams_progress_then_leads_to_the_conversation():
    model = GatedModel(free=0)  # the very first model request (writing the program) waits
    bsql = session(model)
    with running(create_app(bsql, chat_acts=False, progress_after=0.0)) as base:
        token = page_token(base)
        host, port = base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=WAIT)
        try:
            conn.request("POST", "/chat", body=urllib.parse.urlencode(
                {"kind": "say", "text": "which <b>x</b> are odd?", "token": token}),
                headers={"content-type": "application/x-www-form-urlencoded"})
            resp, seen = conn.getresponse(), []
            assert resp.status == 200
            page = read_until(resp, seen, "class='live-progress'")
            assert model.waiting.wait(WAIT)
            assert "which &lt;b&gt;x&lt;/b&gt; are odd?" in page  # the pending message, escaped
            assert "chat-form" not in page  # no second message while this one runs
            model.gate.set()
            page = read_until(resp, seen, "</html>")
        finally:
            conn.close()
    assert "http-equiv='refresh' content='0;url=/chat'" in page and "id='continue'" in page
