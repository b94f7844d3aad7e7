"""ChatTransport's direct route: a plain-HTTP endpoint no proxy covers is reached over
``http.client`` keep-alive connections, with the same request, answers and SDK error
classes as the SDK's own client; HTTPS, proxied and redirecting endpoints keep the SDK's."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

from blendsql.models import OpenAI
from blendsql.models.chat_transport import ChatTransport, direct_route

PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
              "https_proxy", "HTTPS_PROXY")


class Endpoint:
    """A chat-completions server on 127.0.0.1 that records what reached it.

    ``mode``: ``echo`` answers the request's body back inside a completion; ``status``
    answers ``status`` with an error body and a Retry-After header; ``slow`` answers
    after ``delay`` s; ``close`` answers and closes the connection (``Connection:
    close``); ``redirect`` sends a 307 to ``/v2/chat/completions``, which echoes.
    """

    def __init__(self) -> None:
        self.mode = "echo"
        self.status = 500
        self.delay = 0.0
        self.requests: list[dict[str, Any]] = []
        self.connections: set[tuple[str, int]] = set()
        self.open_sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        state = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive

            def setup(self) -> None:
                super().setup()
                with state.lock:
                    state.connections.add(self.client_address)
                    state.open_sockets.append(self.connection)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with state.lock:
                    state.requests.append({"path": self.path, "headers": dict(self.headers),
                                           "body": json.loads(body)})
                if state.mode == "redirect" and self.path.startswith("/v1/"):
                    self._send(307, b"", {"Location": "/v2/chat/completions"})
                elif state.mode == "status":
                    self._send(state.status, json.dumps(
                        {"error": {"message": "nope", "type": "x"}}).encode(),
                        {"Retry-After": "2"})
                else:
                    if state.mode == "slow":
                        time.sleep(state.delay)
                    answer = {"choices": [{"message": {"content": body.decode()}}]}
                    extra = {"Connection": "close"} if state.mode == "close" else {}
                    self._send(200, json.dumps(answer).encode(), extra)

            def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
                if headers.get("Connection") == "close":
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def drop_idle_connections(self) -> None:
        """Close every connection from the server's side (as an idle timeout does)."""
        with self.lock:
            sockets, self.open_sockets = self.open_sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    server = Endpoint()
    yield server
    server.stop()


def transport(url: str, **sdk_options: Any) -> ChatTransport:
    http = openai.DefaultHttpxClient()
    sdk = openai.OpenAI(http_client=http, max_retries=0, base_url=url,
                        api_key=sdk_options.pop("api_key", "sk-test"), **sdk_options)
    return ChatTransport(sdk, http, direct=True)


def sent(raw: bytes) -> dict[str, Any]:
    """The body the echo server received, read back from its answer."""
    return json.loads(json.loads(raw)["choices"][0]["message"]["content"])


def test_direct_route_is_plain_http_that_no_proxy_covers(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    assert direct_route("http://127.0.0.1:8080/v1/chat/completions")
    assert direct_route("http://llm.internal/v1/chat/completions")
    assert not direct_route("https://api.openai.com/v1/chat/completions")
    assert not direct_route("http://user:secret@llm.internal/v1/chat/completions")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not direct_route("http://llm.internal/v1/chat/completions")
    monkeypatch.setenv("NO_PROXY", "llm.internal")
    assert direct_route("http://llm.internal/v1/chat/completions")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("ALL_PROXY", "socks5://proxy.example:1080")
    assert not direct_route("http://llm.internal/v1/chat/completions")


def test_https_and_proxied_endpoints_keep_the_sdks_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    assert transport("https://api.example/v1").direct is None
    assert transport("http://127.0.0.1:9/v1").direct is not None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert transport("http://127.0.0.1:9/v1").direct is None


def test_the_request_carries_the_sdk_headers_path_and_body(endpoint: Endpoint) -> None:
    t = transport(endpoint.url, organization="org-1", default_headers={"X-Custom": "yes"})
    assert t.direct is not None
    body = {"model": "m", "messages": [{"role": "user", "content": "hé"}]}
    assert sent(t.post(body, 5.0)) == body
    (request,) = endpoint.requests
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert request["path"] == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-test"
    assert headers["content-type"] == "application/json"
    assert headers["openai-organization"] == "org-1"
    assert headers["x-custom"] == "yes"
    assert headers["user-agent"].startswith("OpenAI/Python")
    assert "openai-project" not in headers


def test_requests_reuse_one_keep_alive_connection(endpoint: Endpoint) -> None:
    t = transport(endpoint.url)
    for i in range(5):
        assert sent(t.post({"i": i}, 5.0)) == {"i": i}
    assert len(endpoint.connections) == 1


def test_a_connection_the_server_closed_while_idle_is_replaced(endpoint: Endpoint) -> None:
    t = transport(endpoint.url)
    assert sent(t.post({"i": 1}, 5.0)) == {"i": 1}
    endpoint.drop_idle_connections()
    time.sleep(0.05)
    assert sent(t.post({"i": 2}, 5.0)) == {"i": 2}
    assert len(endpoint.connections) == 2
    assert [r["body"] for r in endpoint.requests] == [{"i": 1}, {"i": 2}]  # each sent once


def test_connection_close_answers_are_read_and_the_connection_not_reused(
        endpoint: Endpoint) -> None:
    endpoint.mode = "close"
    t = transport(endpoint.url)
    for i in range(3):
        assert sent(t.post({"i": i}, 5.0)) == {"i": i}
    assert len(endpoint.connections) == 3
    assert t.direct is not None and not t.direct._idle


def test_concurrent_requests_get_their_own_answers(endpoint: Endpoint) -> None:
    endpoint.mode, endpoint.delay = "slow", 0.01
    t = transport(endpoint.url)
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda i: sent(t.post({"i": i}, 10.0)), range(80)))
    assert answers == [{"i": i} for i in range(80)]
    assert len(endpoint.connections) <= 8


@pytest.mark.parametrize(("status", "cls"), [
    (400, openai.BadRequestError), (401, openai.AuthenticationError),
    (404, openai.NotFoundError), (422, openai.UnprocessableEntityError),
    (429, openai.RateLimitError), (503, openai.InternalServerError),
    (418, openai.APIStatusError)])
def test_error_statuses_raise_the_sdks_classes(endpoint: Endpoint, status: int,
                                               cls: type) -> None:
    endpoint.mode, endpoint.status = "status", status
    t = transport(endpoint.url)
    with pytest.raises(cls) as info:
        t.post({}, 5.0)
    err = info.value
    assert err.status_code == status
    assert err.body == {"message": "nope", "type": "x"}
    assert err.response.headers["retry-after"] == "2"
    assert sent(_echo_after(endpoint, t)) == {"after": True}  # the connection still serves


def _echo_after(endpoint: Endpoint, t: ChatTransport) -> bytes:
    endpoint.mode = "echo"
    return t.post({"after": True}, 5.0)


def test_a_slow_answer_raises_the_sdks_timeout_error(endpoint: Endpoint) -> None:
    endpoint.mode, endpoint.delay = "slow", 1.0
    t = transport(endpoint.url)
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        t.post({}, 0.2)
    assert time.monotonic() - started < 0.9


def test_a_refused_connection_raises_the_sdks_connection_error(endpoint: Endpoint) -> None:
    url = endpoint.url
    endpoint.stop()
    with pytest.raises(openai.APIConnectionError) as info:
        transport(url).post({}, 2.0)
    assert not isinstance(info.value, openai.APITimeoutError)


def test_a_redirect_is_followed_by_the_sdks_client(endpoint: Endpoint) -> None:
    endpoint.mode = "redirect"
    t = transport(endpoint.url)
    assert sent(t.post({"i": 7}, 5.0)) == {"i": 7}
    assert [r["path"] for r in endpoint.requests] == [
        "/v1/chat/completions", "/v1/chat/completions", "/v2/chat/completions"]


def test_close_closes_the_idle_connections_and_a_later_request_opens_one(
        endpoint: Endpoint) -> None:
    t = transport(endpoint.url)
    t.post({"i": 1}, 5.0)
    assert t.direct is not None and len(t.direct._idle) == 1
    t.close()
    assert not t.direct._idle
    assert sent(t.post({"i": 2}, 5.0)) == {"i": 2}


def test_openai_answers_over_the_direct_route(endpoint: Endpoint) -> None:
    from blendsql.models.base import Request
    from blendsql.models.constraints import Text

    model = OpenAI("m", endpoint.url, server_kind="generic", timeout=5)
    assert model._chat.direct is not None
    resp = model.answer(Request("say hi", constraint=Text(), max_tokens=8))
    assert json.loads(resp.text)["messages"][-1]["content"].startswith("say hi")
    assert len(endpoint.connections) == 1
