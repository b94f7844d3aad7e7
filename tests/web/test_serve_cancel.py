"""``blendsql serve``: a request past ``--timeout`` (or whose client went away) stops its
model work, so the next request is served instead of told "Busy" (issue 39)."""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models import FunctionModel

from .conftest import page_token, post_form, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402

N = 600
DELAY = 0.05  # seconds per model request: the whole map would take 30 s
LIMIT = 2.0  # --timeout
SLACK = 1.5  # generous, for a loaded two-core machine
CLIENT_TIMEOUT = 60
MAP = "SELECT x FROM w WHERE {{LLMMap('is it ok?', w.x)}} = TRUE"


class Slow:
    """A model function: ``DELAY`` seconds per request, counted."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, req: Any) -> str:
        with self.lock:
            self.calls += 1
        time.sleep(DELAY)
        return "true"


def session(fn: Slow) -> BlendSQL:
    return BlendSQL({"w": pd.DataFrame({"x": [f"value {i}" for i in range(N)]})},
                    model=FunctionModel(fn), cache=False)


def run(base: str, query: str, token: str) -> tuple[int, str]:
    """Run ``query`` as the page's form does (a POST with the page's token)."""
    return post_form(base, "/", {"q": query, "action": "run"}, token)


def test_a_timed_out_map_frees_the_session_for_the_next_request() -> None:
    fn = Slow()
    app = create_app(session(fn), query_timeout=LIMIT, progress_after=None)
    with running(app) as base:
        token = page_token(base)
        t0 = time.monotonic()
        status, body = run(base, MAP, token)
        # the page's own time-out, or the query's (with its trace), whichever ends first
        assert status == 504 and ("Timed out" in body or "QueryTimeoutError" in body)
        status, body = run(base, "SELECT COUNT(*) AS n FROM w", token)
        served = time.monotonic() - t0
        assert status == 200 and "<b>Busy</b>" not in body and f">{N}</td>" in body
        assert served < LIMIT + SLACK, f"the next request was served {served:.2f} s after the first"
        calls = fn.calls
        time.sleep(0.5)
        assert fn.calls == calls < N // 3  # no model request after the deadline


def test_a_client_that_goes_away_stops_the_work() -> None:
    """A streamed (live progress) page whose client disconnects: the map stops."""
    fn = Slow()
    app = create_app(session(fn), query_timeout=60.0, progress_after=0.2)
    with running(app) as base:
        host, port = base.removeprefix("http://").split(":")
        token = page_token(base)
        conn = http.client.HTTPConnection(host, int(port), timeout=CLIENT_TIMEOUT)
        conn.request("POST", "/", body=urllib.parse.urlencode(
            {"q": MAP, "action": "run", "token": token}),
            headers={"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        assert response.status == 200
        response.read1(64)  # the page has started streaming: the map is running
        t0 = time.monotonic()
        conn.close()  # the person closed the tab
        deadline = time.monotonic() + 10
        calls = -1
        while time.monotonic() < deadline and calls != fn.calls:
            calls = fn.calls
            time.sleep(1.0)  # the stream notices at its next write (a tick per second)
        stopped = time.monotonic() - t0
        assert calls == fn.calls and calls < N // 2, f"{fn.calls} calls, still running"
        assert stopped < 6
        status, body = run(base, "SELECT COUNT(*) AS n FROM w", token)
        assert status == 200 and f">{N}</td>" in body
