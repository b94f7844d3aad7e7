"""``blendsql serve`` answers only itself (issue 39), with Starlette's TestClient (fast).

Another web site the user visits can make the browser send requests to the
page: a form that posts itself (``text/plain`` or a form), a ``fetch`` in
``no-cors`` mode, an ``<img src>``. None of them may run a query (spend model
calls) or change the conversation. The headers below are what Chromium sends in
each case; the same attacks from a real second origin are in
``test_serve_cross_site_browser.py``.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models import FunctionModel

from .conftest import token_of

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
pytest.importorskip("httpx", reason="Starlette's TestClient needs httpx: pip install -e '.[test]'")
from starlette.testclient import TestClient  # noqa: E402

from blendsql.web import create_app  # noqa: E402
from blendsql.web.guard import (  # noqa: E402
    MAX_BODY_BYTES,
    MAX_URL_BYTES,
    Guard,
    split_host,
    url_for,
)

BASE = "http://127.0.0.1:8000"
OWN = {"origin": BASE, "sec-fetch-site": "same-origin", "sec-fetch-mode": "navigate",
       "sec-fetch-dest": "document"}
MAP_QUERY = "SELECT x FROM w WHERE {{LLMMap('is it odd?', w.x)}} = TRUE"
FORM = "application/x-www-form-urlencoded"


class Counting:
    """A model that answers 'true' and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: Any) -> str:
        self.calls += 1
        return "true"


@pytest.fixture
def site() -> Any:
    """(client, model, token): the app as the browser on its own origin sees it."""
    model = Counting()
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a", "b", "c"]})}, model=FunctionModel(model),
                    cache=False)
    client = TestClient(create_app(bsql, chat_acts=False, progress_after=None), base_url=BASE)
    page = client.get("/")
    assert page.status_code == 200
    return client, model, token_of(page.text)


def turns(client: TestClient) -> int:
    return client.get("/chat").text.count("class='turn'")


# --- what the page itself does still works ---------------------------------------------------


def test_the_page_s_own_forms_run_queries_and_send_messages(site):
    client, model, token = site
    r = client.post("/", data={"q": MAP_QUERY, "action": "run", "token": token}, headers=OWN)
    assert r.status_code == 200 and "<td>a</td>" in r.text and model.calls == 3
    r = client.post("/chat", data={"kind": "say", "text": "which x?", "token": token},
                    headers=OWN, follow_redirects=False)
    assert r.status_code == 303 and turns(client) == 1


def test_every_form_carries_the_token_and_posts(site):
    client, _, token = site
    for path in ("/", "/chat"):
        html = client.get(path).text
        assert html.count("<form") == html.count(f'name="token" value="{token}"') >= 1
        assert 'method="get"' not in html


def test_the_token_is_random_per_app(site):
    client, model, token = site
    other = create_app(BlendSQL({"w": pd.DataFrame({"x": ["a"]})}), progress_after=None)
    other_token = token_of(TestClient(other, base_url=BASE).get("/").text)
    assert other_token != token and len(token) >= 40
    r = client.post("/", data={"q": MAP_QUERY, "token": other_token}, headers=OWN)
    assert r.status_code == 403 and model.calls == 0


def test_a_get_with_a_query_fills_the_box_and_runs_nothing(site):
    client, model, _ = site
    for headers in ({}, OWN, {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate",
                              "sec-fetch-dest": "document"}):  # a link from another site
        r = client.get("/", params={"q": MAP_QUERY, "action": "run"}, headers=headers)
        assert r.status_code == 200
        assert "{{LLMMap(&#x27;is it odd?&#x27;, w.x)}}" in r.text and "bsql-rows" not in r.text
        r = client.get("/ask", params={"question": "which x are odd?"}, headers=headers)
        assert r.status_code == 200 and 'value="which x are odd?"' in r.text
    assert model.calls == 0


# --- other sites ------------------------------------------------------------------------------

ATTACKS = {
    # <form enctype=text/plain method=post action=http://127.0.0.1:8000/chat> on another site
    "form, another site": {"origin": "http://evil.example", "sec-fetch-site": "cross-site",
                           "sec-fetch-mode": "navigate", "sec-fetch-dest": "iframe"},
    # the same from another port of this machine: same-site, but not the same origin
    "form, another port": {"origin": "http://127.0.0.1:9000", "sec-fetch-site": "same-site",
                           "sec-fetch-mode": "navigate", "sec-fetch-dest": "document"},
    # fetch(url, {method: 'POST', mode: 'no-cors', body}) from localhost: another origin
    "fetch, localhost": {"origin": "http://localhost:8000", "sec-fetch-site": "cross-site",
                         "sec-fetch-mode": "no-cors", "sec-fetch-dest": "empty"},
    # a browser without fetch metadata still sends Origin
    "origin only": {"origin": "http://evil.example"},
    # a sandboxed frame or a data: page
    "origin null": {"origin": "null"},
    # fetch metadata without Origin (a browser always sends both with a POST)
    "site only": {"sec-fetch-site": "cross-site"},
}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("body_type", [FORM, "text/plain"])
def test_a_post_from_another_site_is_refused_even_with_the_token(site, attack, body_type):
    """The origin checks stand on their own: refused even if the attacker had the token."""
    client, model, token = site
    headers = {**ATTACKS[attack], "content-type": body_type}
    r = client.post("/chat", content=f"kind=say&text=hello&token={token}", headers=headers,
                    follow_redirects=False)
    assert r.status_code == 403, r.text
    assert "role='alert'" in r.text and "refused" in r.text
    r = client.post("/", content=f"q=SELECT+1&action=run&token={token}", headers=headers)
    assert r.status_code == 403
    r = client.post("/ask", content=f"question=hi&token={token}", headers=headers)
    assert r.status_code == 403
    assert model.calls == 0 and turns(client) == 0


def test_an_image_or_a_fetch_of_the_page_from_another_site_is_refused(site):
    client, model, _ = site
    img = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors", "sec-fetch-dest": "image"}
    r = client.get("/", params={"q": MAP_QUERY}, headers=img)
    assert r.status_code == 403
    fetch = {"sec-fetch-site": "same-site", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty",
             "origin": "http://127.0.0.1:9000"}
    assert client.get("/chat", headers=fetch).status_code == 403
    assert model.calls == 0


@pytest.mark.parametrize("token", [None, "", "wrong", "ü" * 43])
def test_a_post_without_the_page_s_token_is_refused(site, token):
    client, model, _ = site
    data = {"q": MAP_QUERY, "action": "run", **({"token": token} if token is not None else {})}
    r = client.post("/", data=data, headers=OWN)
    assert r.status_code == 403 and "token is missing or out of date" in r.text
    assert "reload the page" in r.text
    r = client.post("/chat", data={"kind": "say", "text": "hi",
                                   **({"token": token} if token is not None else {})},
                    headers=OWN, follow_redirects=False)
    assert r.status_code == 403 and "token" in r.text
    assert model.calls == 0 and turns(client) == 0


def test_a_post_that_is_not_a_form_is_refused(site):
    client, model, token = site
    for kind in ("text/plain", "application/json", None):
        headers = {**OWN, **({"content-type": kind} if kind else {})}
        r = client.post("/chat", content=f"kind=say&text=hi&token={token}", headers=headers,
                        follow_redirects=False)
        assert r.status_code == 415 and "accepts forms" in r.text
    r = client.post("/", content=b"q=%FF&token=" + token.encode(),
                    headers={**OWN, "content-type": FORM})
    assert r.status_code == 400 and "could not be read" in r.text
    assert model.calls == 0 and turns(client) == 0


def test_own_form_posts_keep_referrer_and_origin(site):
    """Under Referrer-Policy no-referrer a browser would send ``Origin: null`` with the
    page's own posts; same-origin keeps the real origin (and sends nothing elsewhere)."""
    client, _, _ = site
    headers = client.get("/").headers
    assert headers["referrer-policy"] == "same-origin"
    assert headers["cross-origin-resource-policy"] == "same-origin"
    assert "form-action 'self'" in headers["content-security-policy"]


# --- size caps ---------------------------------------------------------------------------------


def test_a_body_over_the_cap_is_refused(site):
    client, model, token = site
    body = f"kind=say&token={token}&text=".encode() + b"x" * MAX_BODY_BYTES
    r = client.post("/chat", content=body, headers={**OWN, "content-type": FORM},
                    follow_redirects=False)
    assert r.status_code == 413 and "accepts at most" in r.text
    assert r.headers["connection"] == "close"
    assert model.calls == 0 and turns(client) == 0


def test_a_long_message_within_the_cap_gets_the_length_error(site):
    client, model, token = site
    r = client.post("/chat", data={"kind": "say", "text": "é" * 100_001, "token": token},
                    headers=OWN, follow_redirects=True)
    assert r.status_code == 400 and "100001 characters" in r.text and model.calls == 0


def test_a_long_address_is_refused(site):
    client, model, _ = site
    r = client.get("/", params={"q": "x" * MAX_URL_BYTES})
    assert r.status_code == 414 and "paste a long query" in r.text
    assert client.get("/", params={"q": "x" * 1000}).status_code == 200
    assert model.calls == 0


def _call(guard: Guard, method: str, headers: dict[str, str], receive: Any) -> list[dict]:
    """One request through the middleware alone; the messages it sent back."""
    sent: list[dict] = []
    scope = {"type": "http", "method": method, "path": "/chat", "raw_path": b"/chat",
             "query_string": b"", "scheme": "http", "server": ("127.0.0.1", 8000),
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}

    async def send(message: dict) -> None:
        sent.append(message)

    # a thread of its own: the browser tests' Playwright keeps an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, guard(scope, receive, send)).result(timeout=60)
    return sent


async def _never_called_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("the app must not see a refused request")


def test_a_body_announced_too_long_is_refused_before_one_byte_is_read():
    async def receive() -> dict:
        raise AssertionError("the body must not be read")

    guard = Guard(_never_called_app, ["127.0.0.1"])
    sent = _call(guard, "POST", {"host": "127.0.0.1:8000", "content-type": FORM,
                                 "content-length": str(100 * 1024 * 1024)}, receive)
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    sent = _call(guard, "POST", {"host": "127.0.0.1:8000", "content-length": "12x"}, receive)
    assert sent[0]["status"] == 400


def test_a_chunked_body_is_read_only_up_to_the_cap():
    """No Content-Length (chunked): the middleware reads until the cap, then refuses."""
    chunk = b"x" * 65536
    read = 0

    async def endless() -> dict:
        nonlocal read
        read += len(chunk)
        assert read < 1000 * len(chunk), "read far past the cap"
        return {"type": "http.request", "body": chunk, "more_body": True}

    guard = Guard(_never_called_app, ["127.0.0.1"])
    sent = _call(guard, "POST", {"host": "127.0.0.1:8000", "content-type": FORM}, endless)
    assert sent[0]["status"] == 413
    assert MAX_BODY_BYTES < read <= MAX_BODY_BYTES + len(chunk)


def test_a_body_within_the_cap_reaches_the_app_whole():
    seen: list[bytes] = []
    parts = [b"kind=say", b"&text=hi", b""]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        assert message["more_body"] is False
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict:
        body = parts.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(parts)}

    sent = _call(Guard(app, ["127.0.0.1"]), "POST",
                 {"host": "127.0.0.1:8000", "content-type": FORM}, receive)
    assert sent[0]["status"] == 204 and seen == [b"kind=say&text=hi"]


# --- host names, IPv4 and IPv6 ------------------------------------------------------------------


@pytest.mark.parametrize("host,status", [
    ("127.0.0.1:8000", 200), ("localhost:8000", 200), ("[::1]:8000", 200),
    ("LOCALHOST:8000", 200),
    ("[::1]:8001", 400), ("localhost:8001", 400), ("localhost", 400),  # another port
    ("evil.example:8000", 400), ("127.0.0.2:8000", 400), ("[::2]:8000", 400),
    ("[::1", 400), ("::1:8000", 400), ("127.0.0.1:8000:1", 400), ("127.0.0.1:x", 400), ("", 400),
])
def test_the_host_allow_list_checks_name_and_port(site, host, status):
    client, _, _ = site
    r = client.get("/health", headers={"host": host})
    assert r.status_code == status
    if status == 400:
        assert "Host" in r.text and "blendsql serve printed" in r.text


def test_a_post_from_the_ipv6_origin_of_an_ipv6_page_is_its_own():
    model = Counting()
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a"]})}, model=FunctionModel(model), cache=False)
    client = TestClient(create_app(bsql, progress_after=None), base_url="http://[::1]:8000")
    token = token_of(client.get("/").text)
    own = {"origin": "http://[::1]:8000", "sec-fetch-site": "same-origin"}
    r = client.post("/", data={"q": MAP_QUERY, "token": token}, headers=own)
    assert r.status_code == 200 and model.calls == 1
    other = {"origin": "http://127.0.0.1:8000", "sec-fetch-site": "cross-site"}
    assert client.post("/", data={"q": MAP_QUERY, "token": token}, headers=other).status_code == 403
    assert model.calls == 1


def test_split_host_and_url_for():
    assert split_host("[::1]:8000") == ("::1", 8000)
    assert split_host("[::1]") == ("::1", None)
    assert split_host("LocalHost:80") == ("localhost", 80)
    assert split_host("127.0.0.1") == ("127.0.0.1", None)
    for bad in ("", "[]:1", "[::1]x", "::1", "a:b:c", "a:0", "a:65536", "a:"):
        with pytest.raises(ValueError):
            split_host(bad)
    assert url_for("::1", 8000) == "http://[::1]:8000/"
    assert url_for("[::1]", 8000) == "http://[::1]:8000/"
    assert url_for("127.0.0.1", 8000) == "http://127.0.0.1:8000/"


@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_cli_serve_on_ipv6_prints_a_valid_address(monkeypatch, capsys, host):
    import blendsql.web
    from blendsql import cli

    seen: dict[str, Any] = {}
    monkeypatch.setattr(blendsql.web, "serve", lambda bsql, h, p, **kw: seen.update(host=h))
    assert cli.main(["serve", "example", "--host", host, "--port", "8765"]) == 0
    captured = capsys.readouterr()
    assert "http://[::1]:8765/" in captured.out and "::1:8765" not in captured.out.replace(
        "[::1]:8765", "")
    assert "other machines" not in captured.err and seen["host"] == "::1"


def test_serve_on_ipv6_answers_its_bracketed_host(monkeypatch):
    import uvicorn

    from blendsql.web.app import allowed_hosts_for, serve

    assert "::1" in allowed_hosts_for("::1") and allowed_hosts_for("[::]") == ["*"]
    runs: list[tuple[Any, dict]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: runs.append((app, kw)))
    serve(BlendSQL({"w": pd.DataFrame({"x": ["a"]})}), "[::1]", 8765)
    app, kw = runs[0]
    assert kw["host"] == "::1" and kw["port"] == 8765
    client = TestClient(app, base_url="http://[::1]:8765")
    assert client.get("/health").status_code == 200
    assert client.get("/health", headers={"host": "evil.example:8765"}).status_code == 400
