"""The request path of an OpenAI-compatible endpoint: one chat completion, JSON in, dict out.

Why not the SDK's ``client.post``: its request building (option models, a deep copy of
the options, header validation, URL merging) and response wrapping cost about 0.2 ms of
CPU per request on top of the HTTP client, and a pool's values/s in one process is
capped by the CPU its threads spend per request. This transport sends the same request
on the SDK's own HTTP client (``openai.DefaultHttpxClient``: the library, connection
limits and redirects the SDK uses, shared with the SDK client for everything else) with
the SDK's headers, computed once; failures become the SDK's own error classes
(``openai.APITimeoutError``, ``APIConnectionError``, ``BadRequestError``,
``RateLimitError``, ...), so retries, failover and error messages are the SDK's.

With ``direct=True`` a plain ``http://`` endpoint that no proxy setting covers (a local
llama.cpp or vLLM server, a cluster's endpoints: where a pool's throughput matters) is
reached over the standard library's ``http.client`` instead, on keep-alive connections
this transport keeps (:class:`KeepAliveConnections`). The same request, headers and
error classes; about a quarter of the CPU per request of ``httpx`` and its pure-Python
HTTP/1.1 parser (``benchmarks/endpoint_scaling.py --profile``). HTTPS, proxied and
redirecting endpoints keep the SDK's client.
"""

from __future__ import annotations

import http.client
import importlib
import json
import select
import threading
import urllib.request
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit


def http_library() -> ModuleType:
    """The HTTP library the installed ``openai`` SDK is built on (``httpx`` or ``httpx2``):
    the package of the client class its public ``openai.DefaultHttpxClient`` extends."""
    import openai

    for cls in openai.DefaultHttpxClient.__mro__:
        package = cls.__module__.partition(".")[0]
        if package not in ("openai", "builtins"):
            return importlib.import_module(package)
    raise ImportError("openai.DefaultHttpxClient extends no HTTP client class")


class ChatTransport:
    """POSTs JSON bodies to ``<base_url>/chat/completions`` of one SDK client.

    ``sdk`` is an ``openai.OpenAI`` client built with ``http_client=http``; its base URL,
    API key, organisation / project and custom headers are read once, here. ``direct``:
    reach a plain-HTTP endpoint that no proxy covers over ``http.client`` (see the
    module's docstring); ``http`` still serves every other case.
    """

    def __init__(self, sdk: Any, http: Any, *, direct: bool = False) -> None:
        import openai

        self._http = http
        self._timeout_error = openai.APITimeoutError
        self._connection_error = openai.APIConnectionError
        self._lib = http_library()
        self.url = str(sdk.base_url).rstrip("/") + "/chat/completions"
        headers = {k: v for k, v in sdk.default_headers.items() if isinstance(v, str)}
        if sdk.api_key:
            headers["Authorization"] = f"Bearer {sdk.api_key}"
        self.headers = headers
        # parsed once: the client's ``post`` would parse and merge them on each request
        self._url = self._lib.URL(self.url)
        self._headers = self._lib.Headers(headers)
        self.direct = (KeepAliveConnections(self.url, headers)
                       if direct and direct_route(self.url) else None)

    def post(self, body: dict[str, Any], timeout: float) -> bytes:
        """The raw answer to one POST; a transport failure or an HTTP error status raises
        the SDK's error for it."""
        content = json.dumps(body).encode()
        if self.direct is not None:
            answer = self._post_direct(self.direct, content, timeout)
            if answer is not None:
                return answer
        lib = self._lib
        request = lib.Request("POST", self._url, headers=self._headers,
                              content=content, extensions={"timeout": {
                                  "connect": timeout, "read": timeout, "write": timeout,
                                  "pool": timeout}})
        try:
            response = self._http.send(request)
        except lib.TimeoutException as e:
            raise self._timeout_error(request=request) from e
        except lib.HTTPError as e:
            raise self._connection_error(message=f"Connection error: {e}",
                                            request=request) from e
        raw: bytes = response.content
        if response.status_code >= 400:
            raise status_error(response, raw)
        return raw

    def _post_direct(self, direct: KeepAliveConnections, content: bytes,
                     timeout: float) -> bytes | None:
        """The answer over ``http.client``; None for a redirect (the SDK's client, which
        follows redirects, sends the request again)."""
        try:
            status, headers, raw = direct.post(content, timeout)
        except TimeoutError as e:
            raise self._timeout_error(request=self._request(content)) from e
        except (OSError, http.client.HTTPException) as e:
            raise self._connection_error(message=f"Connection error: {e}",
                                         request=self._request(content)) from e
        if 300 <= status < 400:
            return None
        if status >= 400:
            response = self._lib.Response(status, headers=headers, content=raw,
                                          request=self._request(content))
            raise status_error(response, raw)
        return raw

    def _request(self, content: bytes) -> Any:
        """The request as the SDK's HTTP library describes it (for its error classes)."""
        return self._lib.Request("POST", self._url, headers=self._headers, content=content)

    def close(self) -> None:
        """Close the keep-alive connections of the direct route (a later request opens
        new ones); the SDK's client is its owner's to close."""
        if self.direct is not None:
            self.direct.close()


def direct_route(url: str) -> bool:
    """Whether ``url`` may be reached over ``http.client``: plain HTTP without credentials
    in the URL, and no proxy setting of this process's environment covers its host (the
    SDK's client honours ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``; such endpoints
    keep it)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.username or parts.password:
        return False  # HTTPS, or credentials in the URL: the SDK's client handles those
    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


class KeepAliveConnections:
    """HTTP/1.1 keep-alive connections to one plain-HTTP URL, for POSTs of JSON.

    Thread-safe: each request takes an idle connection (or opens one) and gives it back
    when the answer was read whole and the server keeps it open; at most as many
    connections exist as requests were ever in flight at once. A connection the server
    closed while it was idle is noticed before use (its socket reads as ready) and
    replaced; one that fails as the request is sent is replaced once, as ``httpx`` does.
    """

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port or 80
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = {**headers, "Content-Type": "application/json"}
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def post(self, content: bytes, timeout: float) -> tuple[int, list[tuple[str, str]], bytes]:
        """Status, headers and body of the answer to one POST of ``content``."""
        conn = self._take()
        if conn is not None:
            try:
                return self._exchange(conn, content, timeout)
            except (ConnectionResetError, BrokenPipeError, http.client.BadStatusLine):
                pass  # closed by the server between requests: once more, on a new one
        return self._exchange(self._open(timeout), content, timeout)

    def _exchange(self, conn: http.client.HTTPConnection, content: bytes,
                  timeout: float) -> tuple[int, list[tuple[str, str]], bytes]:
        try:
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.timeout = timeout
            conn.request("POST", self.path, body=content, headers=self.headers)
            response = conn.getresponse()
            raw = response.read()
        except BaseException:
            conn.close()
            raise
        if response.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return response.status, response.getheaders(), raw

    def _take(self) -> http.client.HTTPConnection | None:
        """An idle connection still open (the most recently used), or None."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if conn.sock is not None and not _readable(conn.sock):
                return conn
            conn.close()  # the server closed it (or sent what no request asked for)

    def _open(self, timeout: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _readable(sock: Any) -> bool:
    """Whether an idle keep-alive socket has something to read: EOF or stray bytes,
    either way not a connection to send a request on."""
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def status_error(response: Any, raw: bytes) -> Exception:
    """The SDK's error class for an HTTP error answer (what ``client.post`` raises)."""
    import openai

    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = raw.decode("utf-8", "replace")
    data = body.get("error", body) if isinstance(body, dict) else body
    message = f"Error code: {response.status_code} - {body}"
    status = response.status_code
    cls = _STATUS_ERRORS.get(status) or (
        "InternalServerError" if status >= 500 else "APIStatusError")
    error: Exception = getattr(openai, cls)(message, response=response, body=data)
    return error


_STATUS_ERRORS = {400: "BadRequestError", 401: "AuthenticationError",
                  403: "PermissionDeniedError", 404: "NotFoundError", 409: "ConflictError",
                  422: "UnprocessableEntityError", 429: "RateLimitError"}


__all__ = ["ChatTransport", "KeepAliveConnections", "direct_route", "http_library",
           "status_error"]
