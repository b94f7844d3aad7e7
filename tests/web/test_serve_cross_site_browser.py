"""Another web site tries to drive ``blendsql serve`` through the user's Chromium (issue 39).

Two origins: the app on 127.0.0.1:P1, and an attacker's page on another local
port, served as ``localhost:P2`` (another site) or ``127.0.0.1:P2`` (the same
site, another origin). The attacker's page posts a form to ``/chat`` as
``text/plain``, posts a urlencoded form to ``/`` with a query, sends ``fetch``
POSTs in ``no-cors`` mode, and loads ``<img src>`` with a query. None of them
may run a query or change the conversation; then a person uses the page from
its own origin and everything works.
"""

from __future__ import annotations

import html
import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models import FunctionModel
from blendsql.models.base import Request

from .conftest import PAGE_TIMEOUT_MS, free_port, running

pytestmark = pytest.mark.browser
pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402

MAP_QUERY = "SELECT x FROM w WHERE {{LLMMap('is it odd?', w.x)}} = TRUE ORDER BY x"
PROGRAM = "SELECT x FROM w ORDER BY x"
WAIT = 20  # seconds for the attacks to reach the server


class Counting:
    """Writes ``PROGRAM`` when asked for a query, answers 'true' otherwise; counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, req: Request) -> str:
        self.calls += 1
        return PROGRAM if req.prompt.rstrip().endswith("BlendSQL:") else "true"


class Recorder:
    """ASGI wrapper: every request the app got, with the headers that decide, and its status."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        entry = {"method": scope["method"], "path": scope["path"],
                 "query": scope["query_string"].decode(), "status": None,
                 **{h: headers.get(h) for h in ("origin", "sec-fetch-site", "sec-fetch-dest",
                                                "content-type")}}
        self.seen.append(entry)

        async def recording(message: Any) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        await self.app(scope, receive, recording)


def attack_page(app: str) -> str:
    """The attacker's page: four ways to make the browser post or load the app."""
    query = json.dumps(MAP_QUERY)
    img = html.escape(f"{app}/?q={MAP_QUERY}&action=run".replace(" ", "+"))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>cute cats</title></head>
<body><h1>cute cats</h1>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="plain" method="post" action="{app}/chat" enctype="text/plain" target="sink1">
<input name="kind=say&amp;text=planted by another site&amp;x" value="1"></form>
<form id="query" method="post" action="{app}/" target="sink2">
<input name="q" value="{html.escape(MAP_QUERY)}"><input name="action" value="run"></form>
<img id="img" src="{img}">
<script>
window.results = {{}};
const img = document.getElementById('img');
img.onload = () => window.results.img = 'load';
img.onerror = () => window.results.img = 'error';
fetch('{app}/chat', {{method: 'POST', mode: 'no-cors', headers: {{'Content-Type': 'text/plain'}},
                     body: 'kind=say&text=planted+by+fetch'}})
  .then(() => window.results.fetchChat = 'sent', e => window.results.fetchChat = String(e));
fetch('{app}/', {{method: 'POST', mode: 'no-cors',
                 body: new URLSearchParams({{q: {query}, action: 'run'}})}})
  .then(() => window.results.fetchQuery = 'sent', e => window.results.fetchQuery = String(e));
document.getElementById('plain').submit();
document.getElementById('query').submit();
</script></body></html>"""


@contextmanager
def attacker(body: str) -> Iterator[int]:
    """The attacker's site: ``body`` for every path, on a port of its own; stopped on exit."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server interface
            data = body.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker", daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(15)


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page. No request routing here (Playwright's interception drops the form
    posts of frames); the pages of this test name only local addresses."""
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield pg
    finally:
        context.close()


def attacks_arrived(rec: Recorder) -> list[dict[str, Any]]:
    """Wait until the four attacking requests (and the image) reached the app."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        hits = [e for e in rec.seen if e["status"] is not None]
        posts_chat = [e for e in hits if e["method"] == "POST" and e["path"] == "/chat"]
        posts_root = [e for e in hits if e["method"] == "POST" and e["path"] == "/"]
        images = [e for e in hits if e["method"] == "GET" and "LLMMap" in e["query"]]
        if len(posts_chat) >= 2 and len(posts_root) >= 2 and images:
            return hits
        time.sleep(0.1)
    raise AssertionError(f"the attacks did not all arrive: {rec.seen}")


@pytest.mark.parametrize("attacker_host", ["localhost", "127.0.0.1"])
def test_another_site_cannot_drive_the_page_and_the_page_still_works(browser_page, attacker_host):
    model = Counting()
    bsql = BlendSQL({"w": pd.DataFrame({"x": [f"v{i}" for i in range(5)]})},
                    model=FunctionModel(model), cache=False)
    rec = Recorder(create_app(bsql, chat_acts=False, progress_after=None))
    page = browser_page
    with running(rec) as app:
        with attacker(attack_page(app)) as port:
            page.goto(f"http://{attacker_host}:{port}/cats")
            hits = attacks_arrived(rec)
            page.wait_for_function("() => window.results.fetchChat && window.results.fetchQuery"
                                   " && window.results.img")
            results = page.evaluate("window.results")

        # every attack was refused, and nothing ran or changed
        attacks = [e for e in hits if e["method"] == "POST" or "LLMMap" in e["query"]]
        assert attacks and all(e["status"] == 403 for e in attacks), attacks
        expected_site = "cross-site" if attacker_host == "localhost" else "same-site"
        assert {e["sec-fetch-site"] for e in attacks} == {expected_site}
        assert all(e["origin"] == f"http://{attacker_host}:{port}"
                   for e in attacks if e["method"] == "POST")
        assert any(e["content-type"] == "text/plain" for e in attacks)
        assert results["img"] == "error"  # the image got a refusal, not a picture
        assert model.calls == 0

        # the person's own use of the page, from its own origin
        seen_before = len(rec.seen)
        page.goto(f"{app}/chat")
        assert page.locator("li.turn").count() == 0  # nothing was planted
        page.goto(app)
        page.fill("#q", MAP_QUERY)
        page.click("#query-form button[value=run]")
        page.wait_for_selector("table.bsql-rows")
        assert page.locator("table.bsql-rows tbody tr").count() == 5
        assert model.calls == 5
        page.click("nav >> text=Conversation")
        page.fill("#say", "list every x")
        page.click("#chat-form button[value=say]")
        page.wait_for_selector("li.turn")
        assert page.locator("li.turn").count() == 1
        assert "planted" not in page.locator("ol.turns").inner_text()
        own = [e for e in rec.seen[seen_before:] if e["method"] == "POST"]
        assert [e["status"] for e in own] == [200, 303]
        assert all(e["origin"] == app and e["sec-fetch-site"] == "same-origin" for e in own)
