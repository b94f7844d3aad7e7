"""ChatTransport: the lean chat-completions request path sends what the SDK would send and
fails with the SDK's own error classes (so OpenAI's retries and messages are unchanged)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from blendsql.models.chat_transport import ChatTransport, http_library

lib = http_library()


def _transport(handler: Any, **sdk_options: Any) -> ChatTransport:
    http = openai.DefaultHttpxClient(transport=lib.MockTransport(handler))
    sdk = openai.OpenAI(http_client=http, max_retries=0, **sdk_options)
    return ChatTransport(sdk, http)


def test_http_library_is_what_the_sdk_client_extends() -> None:
    assert issubclass(openai.DefaultHttpxClient, lib.Client)


def test_request_carries_the_sdk_headers_body_and_timeout() -> None:
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return lib.Response(200, json={"choices": []})

    t = _transport(handler, api_key="sk-test", base_url="http://h:1/v1/",
                   organization="org-1", default_headers={"X-Custom": "yes"})
    raw = t.post({"model": "m", "messages": [{"role": "user", "content": "hé"}]}, 7.5)
    assert json.loads(raw) == {"choices": []}
    (request,) = seen
    assert str(request.url) == "http://h:1/v1/chat/completions"
    assert request.method == "POST"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["x-custom"] == "yes"
    assert "openai-project" not in request.headers  # the SDK omits unset ones
    assert json.loads(request.content)["messages"][0]["content"] == "hé"
    assert request.extensions["timeout"] == {"connect": 7.5, "read": 7.5, "write": 7.5,
                                             "pool": 7.5}


@pytest.mark.parametrize(("status", "cls"), [
    (400, openai.BadRequestError), (401, openai.AuthenticationError),
    (403, openai.PermissionDeniedError), (404, openai.NotFoundError),
    (409, openai.ConflictError), (422, openai.UnprocessableEntityError),
    (429, openai.RateLimitError), (503, openai.InternalServerError),
    (418, openai.APIStatusError)])
def test_error_statuses_raise_the_sdks_classes(status: int, cls: type) -> None:
    def handler(request: Any) -> Any:
        return lib.Response(status, json={"error": {"message": "nope", "type": "x"}},
                            headers={"retry-after": "2"})

    with pytest.raises(cls) as info:
        _transport(handler, api_key="k", base_url="http://h/v1").post({}, 1.0)
    err = info.value
    assert err.status_code == status
    assert err.body == {"message": "nope", "type": "x"}  # the SDK's: the inner 'error'
    assert err.response.headers["retry-after"] == "2"


def test_a_non_json_error_body_is_kept_as_text() -> None:
    def handler(request: Any) -> Any:
        return lib.Response(502, content=b"<html>bad gateway</html>")

    with pytest.raises(openai.InternalServerError) as info:
        _transport(handler, api_key="k", base_url="http://h/v1").post({}, 1.0)
    assert info.value.body == "<html>bad gateway</html>"


def test_transport_failures_raise_connection_and_timeout_errors() -> None:
    def refuse(request: Any) -> Any:
        raise lib.ConnectError("refused", request=request)

    def slow(request: Any) -> Any:
        raise lib.ReadTimeout("slow", request=request)

    with pytest.raises(openai.APIConnectionError) as info:
        _transport(refuse, api_key="k", base_url="http://h/v1").post({}, 1.0)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert "refused" in str(info.value)
    with pytest.raises(openai.APITimeoutError):
        _transport(slow, api_key="k", base_url="http://h/v1").post({}, 1.0)



def test_openai_posts_to_its_endpoint_also_when_unpickled_elsewhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from blendsql.models import OpenAI

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = OpenAI("gpt-4o-mini")
    assert model._chat.url == "https://api.openai.com/v1/chat/completions"
    # an executor whose environment names another server: the copy still asks OpenAI's
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere:1/v1")
    twin = pickle.loads(pickle.dumps(model))
    assert twin._chat.url == "https://api.openai.com/v1/chat/completions"
    assert twin._chat.headers["Authorization"] == "Bearer sk-test"
    local = OpenAI("m", "http://h:2/v1/", api_key="k")
    assert local._chat.url == "http://h:2/v1/chat/completions"
