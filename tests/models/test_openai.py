"""The OpenAI-compatible backend.

Two kinds of server:
- a real llama.cpp server (``llamacpp_server`` fixture, marked ``server``) for
  constrained decoding, usage and batching end to end;
- a tiny scripted HTTP server in a thread for failure modes a real server will not
  produce on demand (401, 429, 5xx, timeouts, rejected fields, invalid answers).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from blendsql.errors import ModelError
from blendsql.models import OpenAI
from blendsql.models.base import Request
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Int,
    JsonSchema,
    ListOf,
    Regex,
)
from blendsql.models.openai_compat import choice_logit_bias, detect_kind, plan_for, prefix_order

# ----------------------------------------------------------------------------- scripted server


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Reply = tuple[int, dict[str, Any], dict[str, str]]


def completion(text: str, prompt_tokens: int = 10, completion_tokens: int = 2,
               cached: int | None = None) -> Reply:
    """A chat-completion body as an OpenAI-compatible server sends it."""
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": usage}
    return 200, body, {}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"error": {"message": message, "type": "x", "code": None}}, headers or {}


@dataclass
class Scripted:
    """A local HTTP server answering chat completions with ``script(n, body)``."""

    script: Callable[[int, dict[str, Any]], Reply]
    owned_by: str = "someone"
    delay: float = 0.0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    base_url: str = ""

    def handle(self, path: str, body: dict[str, Any]) -> Reply:
        if path.endswith("/models"):
            return 200, {"object": "list", "data": [{"id": "m", "object": "model",
                                                     "owned_by": self.owned_by}]}, {}
        with self.lock:
            n = len(self.bodies)
            self.bodies.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            return self.script(n, body)
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture
def scripted() -> Iterator[Callable[..., Scripted]]:
    """Factory: ``scripted(script, **opts)`` starts a server in a thread; all stop after."""
    servers: list[ThreadingHTTPServer] = []

    def start(script: Callable[[int, dict[str, Any]], Reply], **opts: Any) -> Scripted:
        state = Scripted(script, **opts)

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                status, payload, headers = state.handle(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        return state

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def fast(base_url: str, **kw: Any) -> OpenAI:
    """A client with short back-off so failure tests stay quick."""
    opts: dict[str, Any] = {"api_key": "k", "max_retries": 2, "backoff": 0.02, "timeout": 5}
    return OpenAI("m", base_url, **{**opts, **kw})


# ----------------------------------------------------------------------------- failures


def test_dead_server_fails_fast_with_hint() -> None:
    port = free_port()  # nothing listens there
    model = fast(f"http://127.0.0.1:{port}/v1", max_retries=1, server_kind="llamacpp")
    t0 = time.perf_counter()
    with pytest.raises(ModelError) as e:
        model.generate([Request("hi", constraint=Bool())])
    assert time.perf_counter() - t0 < 10  # no long back-off (first call also imports lazily)
    assert f"is the server running at http://127.0.0.1:{port}/v1" in str(e.value)


def test_bad_key_gives_auth_hint_without_retrying(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: error(401, "Incorrect API key provided"))
    with pytest.raises(ModelError) as e:
        fast(srv.base_url, server_kind="generic").generate([Request("hi")])
    assert "check OPENAI_API_KEY / api_key=" in str(e.value)
    assert "Incorrect API key" in str(e.value)
    assert len(srv.bodies) == 1


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_status_is_retried(scripted: Callable[..., Scripted], status: int) -> None:
    srv = scripted(lambda n, b: error(status, "busy", {"retry-after": "0"}) if n == 0
                   else completion("true"))
    [r] = fast(srv.base_url, server_kind="generic").generate([Request("x?", constraint=Bool())])
    assert r.value is True and r.error is None
    assert len(srv.bodies) == 2


def test_rate_limit_exhausted_names_the_cause(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: error(429, "slow down"))
    with pytest.raises(ModelError) as e:
        fast(srv.base_url, server_kind="generic", max_retries=2).generate([Request("x")])
    assert "rate limited" in str(e.value)
    assert len(srv.bodies) == 3  # first try + 2 retries


def test_timeout_is_retried_then_reported(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion("late"), delay=0.6)
    t0 = time.perf_counter()
    with pytest.raises(ModelError) as e:
        fast(srv.base_url, server_kind="generic", timeout=0.2, max_retries=1).generate([Request("x")])
    assert "timed out" in str(e.value)
    assert time.perf_counter() - t0 < 3


def test_unknown_model_is_named(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: error(404, "The model `gpt-9` does not exist"))
    with pytest.raises(ModelError) as e:
        OpenAI("gpt-9", srv.base_url, api_key="k").generate([Request("x")])
    assert "model 'gpt-9' not found" in str(e.value)
    assert "available models: m" in str(e.value)  # from the /models probe


def test_rejected_constraint_field_falls_back_to_validation(scripted: Callable[..., Scripted]) -> None:
    def script(n: int, body: dict[str, Any]) -> Reply:
        if "grammar" in body:
            return error(400, "unknown field grammar")
        return completion("yes")

    srv = scripted(script)
    model = fast(srv.base_url, server_kind="llamacpp")
    [r] = model.generate([Request("x?", constraint=Bool())])
    assert r.value is True
    model.generate([Request("y?", constraint=Bool())])
    assert ["grammar" in b for b in srv.bodies] == [True, False, False]  # remembered


def test_invalid_answer_is_retried_with_the_error(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion("maybe" if n == 0 else "false"))
    [r] = fast(srv.base_url, server_kind="generic").generate([Request("x?", constraint=Bool())])
    assert r.value is False and r.error is None
    retry_msgs = srv.bodies[1]["messages"]
    assert retry_msgs[-2] == {"role": "assistant", "content": "maybe"}
    assert "'maybe' is not a boolean" in retry_msgs[-1]["content"]
    assert r.usage.prompt_tokens == 20  # both attempts are counted


def test_unparseable_after_retries_sets_error(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion("no idea"))
    [r] = fast(srv.base_url, server_kind="generic").generate([Request("x", constraint=Int())])
    assert r.value is None and r.error is not None and "integer" in r.error
    assert len(srv.bodies) == 3


def test_usage_reads_cached_tokens(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion("12", prompt_tokens=30, completion_tokens=1, cached=24))
    [r] = fast(srv.base_url, server_kind="generic").generate([Request("x", constraint=Int())])
    assert (r.value, r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.cached_tokens) == (12, 30, 1, 24)


def test_batch_is_bounded_and_ordered(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion(b["messages"][-1]["content"].split()[-1]), delay=0.15)
    model = fast(srv.base_url, server_kind="generic", max_concurrency=2)
    out = model.generate([Request(f"echo {i}") for i in range(8)])
    assert [r.value for r in out] == [str(i) for i in range(8)]
    assert srv.max_in_flight == 2


@pytest.mark.parametrize("concurrency", [1, 3])
def test_shared_prefixes_are_sent_together(scripted: Callable[..., Scripted], concurrency: int) -> None:
    # two ingredients' prompts interleaved in the batch; the server should see them grouped
    srv = scripted(lambda n, b: completion(b["messages"][-1]["content"].split()[-1]))
    model = fast(srv.base_url, server_kind="generic", max_concurrency=concurrency)
    reqs = [Request(f"{q} value {i}") for i in range(4) for q in ("Is it red?", "Is it big?")]
    out = model.generate(reqs)
    assert [r.value for r in out] == [str(i) for i in range(4) for _ in range(2)]
    sent = [b["messages"][-1]["content"].split(" value")[0] for b in srv.bodies]
    if concurrency == 1:  # with several in flight arrival order is up to the threads
        assert sent == ["Is it big?"] * 4 + ["Is it red?"] * 4


def test_prefix_order_groups_prompts_and_messages() -> None:
    reqs = [Request("b 1"), Request("a 1"), Request("b 0"), Request("a 1"),
            Request(messages=(("system", "s"), ("user", "x"))), Request("a 0")]
    order = prefix_order(reqs)
    assert sorted(order) == list(range(len(reqs)))
    assert [reqs[i].prompt for i in order[:5]] == ["a 0", "a 1", "a 1", "b 0", "b 1"]
    assert order[1:3] == [1, 3]  # equal prompts keep their order


# ----------------------------------------------------------------------------- server kinds


def test_detect_kind() -> None:
    assert detect_kind(None, None) == "openai"
    assert detect_kind("https://api.openai.com/v1", None) == "openai"
    assert detect_kind("http://h/v1", [{"id": "a", "owned_by": "me"}]) == "llamacpp"
    assert detect_kind("http://h/v1", [{"id": "a", "owned_by": "llamacpp"}]) == "llamacpp"
    assert detect_kind("http://h/v1", [{"id": "a", "owned_by": "vllm"}]) == "vllm"
    assert detect_kind("http://h/v1", [{"id": "a", "owned_by": "library"}]) == "generic"


def test_vllm_gets_guided_decoding_fields(scripted: Callable[..., Scripted]) -> None:
    answers = {"a": "CA", "b": "AB-12", "c": "[1, 2]"}
    srv = scripted(lambda n, b: completion(answers[b["messages"][0]["content"]]), owned_by="vllm")
    model = OpenAI("m", srv.base_url, api_key="k", max_concurrency=1)
    out = model.generate([Request("a", constraint=Choice(("CA", "NY"))),
                          Request("b", constraint=Regex(r"[A-Z]{2}-[0-9]{2}")),
                          Request("c", constraint=ListOf(Int(), max_len=3))])
    assert model.kind() == "vllm"
    assert [r.value for r in out] == ["CA", "AB-12", [1, 2]]
    assert srv.bodies[0]["guided_choice"] == ["CA", "NY"]
    assert srv.bodies[1]["guided_regex"] == r"[A-Z]{2}-[0-9]{2}"
    assert srv.bodies[2]["guided_json"] == {"type": "array", "items": {"type": "integer"}, "maxItems": 3}


def test_openai_lists_use_wrapped_json_schema(scripted: Callable[..., Scripted]) -> None:
    srv = scripted(lambda n, b: completion('{"value": ["a", "b"]}'))
    model = fast(srv.base_url, server_kind="openai")
    [r] = model.generate([Request("x", constraint=ListOf(Choice(("a", "b", "c"))))])
    assert r.value == ["a", "b"]
    fmt = srv.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["value"]["items"]["enum"] == ["a", "b", "c"]


def test_choice_logit_bias() -> None:
    def encode(s: str) -> list[int]:
        return [ord(ch) for ch in s]  # a character-level tokenizer

    bias, n = choice_logit_bias(["yes", "no"], encode) or ({}, 0)
    assert n == 3
    assert set(bias) == {str(ord(ch)) for ch in "yesno"} and set(bias.values()) == {100}
    plan = plan_for("openai", Choice(("yes", "no")), encode=encode)
    assert plan.create_kwargs["logit_bias"] == bias and plan.create_kwargs["max_tokens"] == 3
    many = [chr(0x4E00 + i) for i in range(400)]  # > 300 distinct tokens: not expressible
    assert choice_logit_bias(many, encode) is None
    assert plan_for("openai", Choice(("yes", "no"))).create_kwargs == {}  # no tokenizer


# ----------------------------------------------------------------------------- real llama.cpp server

PROMPTS = ["Is Paris the capital of France?", "How many legs does a spider have?",
           "Name a primary colour."]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


def _satisfies(c: Constraint, v: Any) -> bool:
    """Independent check of a parsed value (not via ``c.parse``)."""
    if isinstance(c, Choice):
        return v in c.options
    if isinstance(c, Bool):
        return type(v) is bool
    if isinstance(c, Int):
        return type(v) is int
    if isinstance(c, Regex):
        return isinstance(v, str) and re.fullmatch(c.pattern, v) is not None
    if isinstance(c, ListOf):
        return (isinstance(v, list) and c.min_len <= len(v) <= (c.max_len or len(v))
                and all(_satisfies(c.item, x) for x in v))
    if isinstance(c, JsonSchema):
        return isinstance(v, dict) and isinstance(v.get("name"), str) and type(v.get("age")) is int
    raise AssertionError(c)


@pytest.fixture(scope="module")
def served(llamacpp_server: str) -> OpenAI:
    return OpenAI("smollm2", llamacpp_server, max_concurrency=2, timeout=60)


@pytest.mark.server
def test_detects_llamacpp(served: OpenAI) -> None:
    assert served.kind() == "llamacpp"


#: one constraint of each kind a served model must satisfy (shared with the llama-server tests)
SERVER_CONSTRAINTS = [
    Choice(("red", "green", "blue")),
    Bool(),
    Int(),
    Regex(r"[A-Z]{2}-[0-9]{3}"),
    ListOf(Choice(("red", "green", "blue")), min_len=1, max_len=3),
    JsonSchema.of(PERSON),
]


@pytest.mark.server
@pytest.mark.parametrize("constraint", SERVER_CONSTRAINTS, ids=lambda c: type(c).__name__)
def test_constrained_answers_always_satisfy(served: OpenAI, constraint: Constraint) -> None:
    out = served.generate([Request(p, constraint=constraint, max_tokens=48) for p in PROMPTS])
    for r in out:
        assert r.error is None, r.error
        assert _satisfies(constraint, r.value), (r.text, r.value)
        assert r.usage.prompt_tokens > 5 and r.usage.completion_tokens >= 1


@pytest.mark.server
def test_batch_of_8_in_order_on_server(llamacpp_server: str) -> None:
    model = OpenAI("smollm2", llamacpp_server, max_concurrency=2)
    reqs = [Request(f"Say item {i}.", constraint=Regex(f"item-{i}-ok")) for i in range(8)]
    out = model.generate(reqs)
    assert [r.value for r in out] == [f"item-{i}-ok" for i in range(8)]
    assert all(r.usage.prompt_tokens > 0 for r in out)
