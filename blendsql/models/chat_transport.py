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
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any


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
    API key, organisation / project and custom headers are read once, here.
    """

    def __init__(self, sdk: Any, http: Any) -> None:
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

    def post(self, body: dict[str, Any], timeout: float) -> bytes:
        """The raw answer to one POST; a transport failure or an HTTP error status raises
        the SDK's error for it."""
        lib = self._lib
        request = lib.Request("POST", self._url, headers=self._headers,
                              content=json.dumps(body).encode(), extensions={"timeout": {
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


__all__ = ["ChatTransport", "http_library", "status_error"]
