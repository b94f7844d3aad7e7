"""OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp servers, Ollama...).

Servers differ in how they accept output constraints, so each request is
turned into a ``_Plan``: the extra request fields that make the *server*
enforce the constraint where it can (GBNF ``grammar`` for llama.cpp, guided
decoding for vLLM, JSON-schema ``response_format`` / ``logit_bias`` for
OpenAI). Whatever the server does, the text is parsed with the constraint and,
if invalid, the model is asked again with the parse error (validate + retry),
so every backend returns values of the same type.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from contextlib import suppress
from contextvars import copy_context
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlparse

from blendsql.cancel import CancelToken, stopped, watching
from blendsql.cancel import current as current_token
from blendsql.errors import BlendSQLError, ModelError
from blendsql.models.base import Model, Request, Response, Usage, check_timeout
from blendsql.models.chat_transport import ChatTransport
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Date,
    Float,
    Grammar,
    Int,
    JsonSchema,
    ListOf,
    Regex,
    Text,
)
from blendsql.models.gbnf import max_output_bytes, to_gbnf
from blendsql.models.llamacpp import parse_output
from blendsql.models.retry import retry
from blendsql.models.scoring import from_top_logprobs, scored_answers, spellings, why_unscored

ServerKind = Literal["auto", "llamacpp", "vllm", "openai", "generic"]
_KINDS = ("auto", "llamacpp", "vllm", "openai", "generic")

# Regexes for scalar constraints, shared with the guidance adapter. They are
# deliberately bounded so a constrained decoder cannot run away.
INT_REGEX = r"-?[0-9]{1,18}"
FLOAT_REGEX = r"-?[0-9]{1,15}(\.[0-9]{1,10})?"
DATE_REGEX = r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_LOGIT_BIAS_MAX_TOKENS = 300  # OpenAI's limit on logit_bias entries
_PARSE_RETRIES = 2  # extra attempts after an answer that does not parse
TOP_LOGPROBS = 20  # alternatives asked for the first answer token of a scored request


def constraint_regex(c: Constraint) -> str | None:
    """A regex whose full matches all parse under ``c`` (None: not expressible as one)."""
    if isinstance(c, Regex):
        return c.pattern
    if isinstance(c, Int):
        return INT_REGEX
    if isinstance(c, Float):
        return FLOAT_REGEX
    if isinstance(c, Date):
        return DATE_REGEX
    if isinstance(c, Bool):
        return "true|false"
    if isinstance(c, Choice) and c.options:
        return "|".join(re.escape(o) for o in c.options)
    return None


def constraint_json_schema(c: Constraint) -> dict[str, Any] | None:
    """A JSON schema for ``c`` when its answer is JSON (lists, JSON values), else None."""
    if isinstance(c, JsonSchema):
        return c.schema
    if isinstance(c, ListOf):
        schema: dict[str, Any] = {"type": "array", "items": _item_schema(c.item)}
        if c.min_len:
            schema["minItems"] = c.min_len
        if c.max_len is not None:
            schema["maxItems"] = c.max_len
        return schema
    return None


def _item_schema(c: Constraint) -> dict[str, Any]:
    """JSON schema of one list item (ListOf parses JSON scalars back through ``c``)."""
    if isinstance(c, Choice):
        return {"type": "string", "enum": list(c.options)}
    if isinstance(c, Bool):
        return {"type": "boolean"}
    if isinstance(c, Int):
        return {"type": "integer"}
    if isinstance(c, Float):
        return {"type": "number"}
    if isinstance(c, (Date, Regex)):
        return {"type": "string", "pattern": f"^(?:{constraint_regex(c)})$"}
    nested = constraint_json_schema(c)
    return nested if nested is not None else {"type": "string"}


def choice_logit_bias(
    options: Sequence[str], encode: Callable[[str], list[int]]
) -> tuple[dict[str, int], int] | None:
    """(logit_bias, max_tokens) restricting sampling to the options' tokens, or None.

    Only the tokens that spell some option get +100, and ``max_tokens`` is the
    longest option, so the model can barely produce anything else; parsing still
    checks the result because token sequences can recombine.
    """
    tokens: set[int] = set()
    longest = 0
    for opt in options:
        ids = encode(opt)
        if not ids:
            return None
        tokens.update(ids)
        longest = max(longest, len(ids))
    if len(tokens) > _LOGIT_BIAS_MAX_TOKENS:
        return None
    return {str(t): 100 for t in sorted(tokens)}, longest


@dataclass
class _Plan:
    """Extra request fields that make one server enforce one constraint."""

    extra_body: dict[str, Any] = field(default_factory=dict)
    create_kwargs: dict[str, Any] = field(default_factory=dict)
    unwrap: str | None = None  # answer sits under this key of a JSON object
    enforced: bool = False  # the server guarantees the shape (we still validate)

    @property
    def mechanism(self) -> str | None:
        """Name of the server feature used (remembered if the server rejects it)."""
        keys = list(self.extra_body) + list(self.create_kwargs)
        return keys[0] if keys else None


def _wrap_object(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI structured outputs need an object at the root: put the value under 'value'."""
    return {
        "type": "object",
        "properties": {"value": schema},
        "required": ["value"],
        "additionalProperties": False,
    }


def plan_for(
    kind: str,
    c: Constraint,
    gbnf: Callable[[Constraint], str | None] | None = None,
    encode: Callable[[str], list[int]] | None = None,
) -> _Plan:
    """Choose how ``kind`` of server is told about constraint ``c``."""
    if isinstance(c, Text):
        return _Plan(enforced=True)
    if isinstance(c, Grammar):
        if kind == "llamacpp":
            return _Plan(extra_body={"grammar": c.gbnf}, enforced=True)
        if kind == "vllm":  # vLLM's xgrammar backend reads GBNF
            return _Plan(extra_body={"guided_grammar": c.gbnf}, enforced=True)
        return _Plan()
    if kind == "llamacpp":
        try:
            grammar = gbnf(c) if gbnf is not None else None
        except BlendSQLError:  # e.g. a regex feature GBNF cannot express
            grammar = None
        if grammar:
            return _Plan(extra_body={"grammar": grammar}, enforced=True)
        schema = constraint_json_schema(c)
        if schema is not None:  # llama.cpp answers 500 to json_schema, accepts this
            fmt = {"type": "json_object", "schema": schema}
            return _Plan(create_kwargs={"response_format": fmt}, enforced=True)
        return _Plan()
    if kind == "vllm":
        if isinstance(c, Choice):
            return _Plan(extra_body={"guided_choice": list(c.options)}, enforced=True)
        if isinstance(c, Bool):
            return _Plan(extra_body={"guided_choice": ["true", "false"]}, enforced=True)
        schema = constraint_json_schema(c)
        if schema is not None:
            return _Plan(extra_body={"guided_json": schema}, enforced=True)
        rx = constraint_regex(c)
        return _Plan(extra_body={"guided_regex": rx}, enforced=True) if rx else _Plan()
    if kind == "openai":
        if isinstance(c, Choice) and encode is not None and c.options:
            bias = choice_logit_bias(c.options, encode)
            if bias is not None:
                return _Plan(create_kwargs={"logit_bias": bias[0], "max_tokens": bias[1]})
        schema = constraint_json_schema(c)
        if schema is not None:
            fmt = {"type": "json_schema",
                   "json_schema": {"name": "answer", "schema": _wrap_object(schema), "strict": True}}
            return _Plan(create_kwargs={"response_format": fmt}, unwrap="value", enforced=True)
        return _Plan()
    # generic servers (Ollama, LM Studio, ...): the standard JSON-schema response_format
    schema = constraint_json_schema(c)
    if schema is not None:
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        return _Plan(create_kwargs={"response_format": fmt}, enforced=True)
    return _Plan()


def detect_kind(base_url: str | None, models_payload: list[dict[str, Any]] | None) -> str:
    """Server kind from the base URL and (optionally) the ``/v1/models`` listing.

    ``owned_by`` says who serves: llama-cpp-python answers "me", upstream
    llama-server "llamacpp", vLLM "vllm".
    """
    host = urlparse(base_url).hostname if base_url else "api.openai.com"
    if host and host.endswith("openai.com"):
        return "openai"
    owners = {str(m.get("owned_by", "")).lower() for m in models_payload or []}
    if owners & {"llamacpp", "me"} or any("llama" in o for o in owners):
        return "llamacpp"
    if "vllm" in owners:
        return "vllm"
    return "generic"


def _strip_fences(text: str) -> str:
    """Free-running chat models often wrap JSON in ``` fences; drop them before parsing."""
    m = re.fullmatch(r"\s*```[a-zA-Z]*\s*\n?(.*?)\n?```\s*", text, flags=re.S)
    return m.group(1) if m else text


class OpenAI(Model):
    """A model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    ``base_url`` / ``api_key`` fall back to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``.
    A batch runs with at most ``max_concurrency`` requests in flight; results keep
    input order. 429 / 5xx / timeouts / dropped connections are retried
    ``max_retries`` times with exponential back-off and jitter.

    Several URLs serving the same model make a pool:
    ``blendsql.models.Pool.from_urls(model, [url1, url2])`` spreads a batch over them and
    fails over when one dies.
    """

    #: retry a refused / dropped connection or a timeout in place (a :class:`Pool`
    #: turns this off on its endpoints: it sends the request to another endpoint instead)
    retry_connection_errors: bool = True

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_concurrency: int = 4,
        timeout: float = 60,
        max_retries: int = 4,
        server_kind: ServerKind = "auto",
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if server_kind not in _KINDS:
            raise ModelError(f"unknown server_kind {server_kind!r}", hint="use one of: " + ", ".join(_KINDS))
        timeout = check_timeout(timeout)
        if base_url is not None and not isinstance(base_url, str):
            raise ModelError(f"base_url={base_url!r} is not a URL",
                             hint="pass one URL; for several URLs of one model, "
                             "blendsql.models.Pool.from_urls(model, [url1, url2])")
        import openai

        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and self.base_url is None:
            raise ModelError("no API key for OpenAI", hint="check OPENAI_API_KEY / api_key=")
        self.max_concurrency = max(1, max_concurrency)
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self.server_kind = server_kind
        self.name = f"openai:{model}"
        # local servers accept any key; the client insists on one being set. Chat
        # completions go through the lean ChatTransport on the SDK's own HTTP client.
        self._http = openai.DefaultHttpxClient(timeout=timeout)
        self._client = openai.OpenAI(api_key=key or "sk-no-key", base_url=self.base_url,
                                     timeout=timeout, max_retries=0, http_client=self._http)
        self._chat = ChatTransport(self._client, self._http, direct=True)
        self._kind: str | None = None if server_kind == "auto" else server_kind
        self._known_models: list[str] = []
        self._rejected: set[str] = set()  # constraint mechanisms the server refused
        self._no_logprobs = False  # the server refused ``logprobs``: scored requests run greedy
        self._lock = threading.Lock()
        self._encode = _tiktoken_encoder(model)

    # -- copies for worker processes ---------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this client (its key included)."""
        return {"model": self.model, "base_url": self.base_url, "api_key": self._client.api_key,
                "max_concurrency": self.max_concurrency, "timeout": self.timeout,
                "max_retries": self.max_retries, "server_kind": self.server_kind,
                "backoff": self.backoff, "max_backoff": self.max_backoff}

    def for_workers(self, share: int) -> OpenAI:
        """A new client with these settings and ``max_concurrency / share`` (rounded up)
        requests in flight, knowing what this one learnt of the server (its kind, the
        constraint fields and ``logprobs`` it refused)."""
        settings = self.settings()
        settings["max_concurrency"] = -(-self.max_concurrency // max(1, share))
        twin = type(self)(**settings)
        twin.retry_connection_errors = self.retry_connection_errors
        with self._lock:
            twin._kind = self._kind
            twin._known_models = list(self._known_models)
            twin._rejected = set(self._rejected)
            twin._no_logprobs = self._no_logprobs
        return twin

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its settings and what it learnt (a live HTTP client does not pickle)."""
        with self._lock:
            learnt = (self._kind, list(self._known_models), set(self._rejected),
                      self._no_logprobs, self.retry_connection_errors)
        return (_rebuild_openai, (type(self), self.settings(), learnt))

    # -- identity ---------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The base URL requests go to (OpenAI's own when none was given)."""
        return self.base_url or "https://api.openai.com/v1"

    def identity(self) -> str:
        return f"openai-compat:{self.endpoint}|{self.model}|kind={self.server_kind}"

    def count_tokens(self, text: str) -> int:
        if self._encode is not None:
            return len(self._encode(text))
        return super().count_tokens(text)

    # -- server kind ------------------------------------------------------------
    def kind(self) -> str:
        """The server kind, probing ``/models`` once when it was left on 'auto'."""
        with self._lock:
            if self._kind is None:
                payload = None
                if self.base_url is not None:
                    page = self._call(lambda: self._client.models.list())
                    payload = [m.model_dump() for m in page.data]
                    self._known_models = [str(m.get("id")) for m in payload]
                self._kind = detect_kind(self.base_url, payload)
            return self._kind

    def probe(self, timeout: float = 5.0) -> None:
        """Check the server is up: one ``GET /models`` within ``timeout`` s, no retries.

        Returns when the server answers at all (an HTTP 4xx still means it is up:
        some proxies serve chat completions but no model list); raises
        :class:`~blendsql.errors.ModelError` on a refused or dropped connection, a
        timeout or a 5xx. A successful listing also settles an 'auto' server kind.
        What a :class:`~blendsql.models.pool.Pool` calls to bring a down endpoint back.
        """
        import openai

        try:
            page = self._client.models.list(timeout=timeout)
        except openai.APIStatusError as e:
            if e.status_code >= 500:
                raise self._to_model_error(e) from e
            return
        except openai.APIError as e:
            raise self._to_model_error(e) from e
        payload = [m.model_dump() for m in page.data]
        with self._lock:
            self._known_models = [str(m.get("id")) for m in payload]
            if self._kind is None:
                self._kind = detect_kind(self.base_url, payload)

    def answer(self, req: Request) -> Response:
        """One request, in the caller's thread (the server kind probed first if unknown).

        What a :class:`~blendsql.models.pool.Pool` sends each endpoint; a failure is
        the :class:`~blendsql.errors.ModelError` of :meth:`generate`, the transport
        error chained as ``__cause__``.
        """
        return self._one(req, self.kind())

    # -- generation -------------------------------------------------------------
    streams_results = True  # answers are reported as each request completes

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self.generate_each(requests, None)

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None] | None) -> list[Response]:
        """Up to ``max_concurrency`` requests in flight, sent in :func:`prefix_order`.

        ``on_result(i, response)`` is called in the caller's thread as each
        answer arrives (completion order); the returned list keeps input order.
        """
        if not requests:
            return []
        token = current_token()
        if token is not None and token.cancelled:
            raise stopped(token, not_started=len(requests))
        kind = self.kind()
        order = prefix_order(requests)
        out: list[Response | None] = [None] * len(requests)
        if token is None and (len(requests) == 1 or self.max_concurrency == 1):
            for i in order:
                out[i] = resp = self._one(requests[i], kind)
                if on_result is not None:
                    on_result(i, resp)
            return [r for r in out if r is not None]
        # in worker threads (one at least): a query that is cancelled or past its
        # deadline stops waiting for them at once, and they start no new request
        pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(requests)))
        finished = False
        try:
            futures = {pool.submit(copy_context().run, self._one, requests[i], kind): i
                       for i in order}
            self._collect(futures, out, on_result, token)
            finished = True
        finally:
            # stopped (an error, the query's time-out or cancellation, Ctrl-C): requests
            # not sent are dropped, those in flight finish in their threads unread
            pool.shutdown(wait=finished, cancel_futures=not finished)
        return [r for r in out if r is not None]

    @staticmethod
    def _collect(futures: dict[Future[Response], int], out: list[Response | None],
                 on_result: Callable[[int, Response], None] | None,
                 token: CancelToken | None) -> None:
        """Fill ``out`` as the futures complete (``on_result`` for each); when ``token`` is
        cancelled or past its deadline, raise its error at once (counting what it stopped)."""
        pending = set(futures)
        wake: Future[None] = Future()

        def ring() -> None:
            with suppress(InvalidStateError):
                wake.set_result(None)

        with watching(token, ring):
            while pending:
                if token is not None and token.cancelled:
                    not_started = sum(f.cancel() for f in pending)
                    raise stopped(token, not_started=not_started,
                                  abandoned=sum(not f.done() for f in pending))
                waits: list[Future[Any]] = [*pending, wake] if token is not None else [*pending]
                try:
                    for f in as_completed(waits, timeout=None if token is None
                                          else token.remaining()):
                        if f is wake:
                            break
                        pending.discard(f)
                        i = futures[f]
                        out[i] = resp = f.result()
                        if on_result is not None:
                            on_result(i, resp)
                        if not pending:
                            break  # all answered (``wake`` never completes on its own)
                except FuturesTimeout:
                    continue  # the deadline: stopped at the top of the loop

    def _plan(self, req: Request, kind: str) -> _Plan:
        plan = plan_for(kind, req.constraint, gbnf=to_gbnf, encode=self._encode)
        if plan.mechanism is not None and plan.mechanism in self._rejected:
            return _Plan()
        return plan

    def _one(self, req: Request, kind: str) -> Response:
        """One request: enforce where possible, validate always, re-ask with the error.

        A scored request (``req.score``) also asks for the first answer token's
        ``top_logprobs``; each allowed answer is scored from them
        (:func:`~blendsql.models.scoring.from_top_logprobs`), and ``unscored``
        says why when the server gives none or they cannot tell answers apart.
        """
        t0 = time.perf_counter()
        plan = self._plan(req, kind)
        messages = req.as_messages()
        if not plan.enforced and not isinstance(req.constraint, Text):
            messages[-1] = {**messages[-1], "content": messages[-1]["content"]
                            + f"\n\nAnswer with only {req.constraint.describe()}."}
        answers = scored_answers(req.constraint) if req.score else None
        usage = Usage()
        text, value, err, top = "", None, None, None
        for _attempt in range(_PARSE_RETRIES + 1):
            text, plan, top = self._complete(messages, req, plan, usage, answers is not None)
            value, err = self._parse(text, req.constraint, plan)
            if err is None:
                break
            messages = messages + [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"That answer is invalid ({err}). "
                 f"Reply with only {req.constraint.describe()}."},
            ]
        resp = Response(text.strip(), value, usage, time.perf_counter() - t0, error=err,
                        endpoint=self.endpoint)
        if req.score:
            self._attach_scores(resp, req, answers, top)
        return resp

    def _attach_scores(self, resp: Response, req: Request, answers: tuple[str, ...] | None,
                       top: list[tuple[str, float]] | None) -> None:
        """Fill ``resp.scores`` from the first token's alternatives (or ``resp.unscored``)."""
        if answers is None:
            resp.unscored = why_unscored(req.constraint)
        elif top is None:
            resp.unscored = "the server returned no logprobs"
        else:
            resp.scores, resp.unscored = from_top_logprobs(top, spellings(req.constraint))

    def _parse(self, text: str, c: Constraint, plan: _Plan) -> tuple[Any, str | None]:
        raw = text if plan.enforced else _strip_fences(text)
        if plan.unwrap is not None:
            try:
                raw = json.dumps(json.loads(raw)[plan.unwrap])
            except (ValueError, KeyError, TypeError) as e:
                return None, f"could not read {plan.unwrap!r} from {text!r}: {e}"
        return parse_output(raw, c)

    def _complete(
        self, messages: list[dict[str, str]], req: Request, plan: _Plan, usage: Usage,
        logprobs: bool = False,
    ) -> tuple[str, _Plan, list[tuple[str, float]] | None]:
        """One chat completion: its text, the plan used and (when ``logprobs``) the first
        token's top alternatives. If the server rejects the constraint fields or
        ``logprobs``, they are dropped."""
        import openai

        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": req.temperature,
            "max_tokens": _max_tokens(req, plan),
        }
        if req.stop:
            body["stop"] = list(req.stop[:4])
        asked = logprobs and not self._no_logprobs
        if asked:
            body.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        body.update(plan.create_kwargs)
        body.update(plan.extra_body or {})
        try:
            data = self._call(lambda: self._post_chat(body, req.timeout))
        except ModelError as e:
            cause = e.__cause__
            rejected = isinstance(cause, (openai.BadRequestError, openai.UnprocessableEntityError))
            if not rejected or (plan.mechanism is None and not asked):
                raise
            with self._lock:
                if plan.mechanism is not None:
                    self._rejected.add(plan.mechanism)
                else:
                    self._no_logprobs = True
            return self._complete(messages, req, _Plan() if plan.mechanism else plan, usage,
                                  logprobs)
        usage += _usage_of(data)
        return _message_content(data), plan, (_first_top_logprobs(data) if asked else None)

    def _post_chat(self, body: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """POST ``body`` to ``/chat/completions`` (:class:`ChatTransport`: the SDK's HTTP
        client, headers and error classes) and read the JSON answer as a dict.

        Why not ``chat.completions.create``: its request transform, typed response model
        and per-request option handling cost about 0.6 ms of CPU per request, which caps
        a pool's values/s in one process. ``timeout``: the engine's ``model_timeout``
        for this request (None: the client's)."""
        token = current_token()
        if token is not None:  # no new request (a retry too) once the query must stop
            if token.cancelled:
                raise token.error()
            # and none outlives the query's deadline by more than the transport's own delay
            bounded = token.bound(timeout if timeout is not None else self.timeout)
            timeout = None if bounded is None else max(0.05, bounded)
        raw = self._chat.post(body, self.timeout if timeout is None else timeout)
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ModelError(f"{self.endpoint} answered a chat completion with something other "
                             f"than a JSON object: {raw[:200]!r}",
                             hint="is base_url an OpenAI-compatible API (it usually ends in /v1)?")
        return data

    # -- transport: retries and errors -------------------------------------------
    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run one API call with back-off on transient failures; map errors to ModelError."""
        import openai

        def on_retry(attempt: int, err: BaseException, delay: float) -> None:
            # a server asking for a longer pause (Retry-After) gets it, up to max_backoff
            extra = _retry_after(err)
            if extra is not None and extra > delay:
                time.sleep(min(extra, self.max_backoff) - delay)

        def should_retry(err: BaseException) -> bool:
            if not self.retry_connection_errors and isinstance(err, openai.APIConnectionError):
                return False  # a pool's endpoint: another endpoint takes the request
            return _transient(err)

        try:
            return retry(fn, attempts=self.max_retries + 1, base=self.backoff, cap=self.max_backoff,
                         retry_on=(openai.APIError,), should_retry=should_retry,
                         on_retry=on_retry)
        except openai.APIError as e:
            raise self._to_model_error(e) from e

    def _to_model_error(self, err: Exception) -> ModelError:
        """A user-facing error that says what to check."""
        import openai

        where = self.endpoint
        if isinstance(err, openai.APITimeoutError):
            return ModelError(f"request to {where} timed out after {self.timeout}s",
                              hint="the server may be overloaded; raise timeout= or lower max_concurrency=")
        if isinstance(err, openai.APIConnectionError):
            return ModelError(f"cannot connect to {where}: {err}",
                              hint=f"is the server running at {where}? (check base_url= / OPENAI_BASE_URL)")
        status = getattr(err, "status_code", None)
        detail = _error_detail(err)
        if status in (401, 403):
            return ModelError(f"{where} refused the credentials (HTTP {status}): {detail}",
                              hint="check OPENAI_API_KEY / api_key=")
        if status == 404:
            known = ", ".join(self._known_models[:10])
            return ModelError(f"model {self.model!r} not found at {where} (HTTP 404): {detail}",
                              hint=f"available models: {known}" if known else
                              "check the model name and base_url (it usually ends in /v1)")
        if status == 429:
            return ModelError(f"rate limited by {where} after {self.max_retries} retries: {detail}",
                              hint="lower max_concurrency= or raise max_retries=")
        return ModelError(f"{where} answered HTTP {status}: {detail}",
                          hint="see the server's log; the request may use a feature it lacks")


def _rebuild_openai(cls: type[OpenAI], settings: dict[str, Any],
                    learnt: tuple[Any, ...]) -> OpenAI:
    """An unpickled :class:`OpenAI` (see ``OpenAI.__reduce__``)."""
    model = cls(**settings)
    if settings.get("base_url") is None and model.base_url is not None:
        # the pickled client talked to OpenAI's API: this process's OPENAI_BASE_URL (an
        # executor's environment) must not send its requests elsewhere under its identity
        model.base_url = None
        model._client = model._client.copy(base_url=model.endpoint)
        model._chat = ChatTransport(model._client, model._http, direct=True)
    (model._kind, model._known_models, model._rejected, model._no_logprobs,
     model.retry_connection_errors) = learnt
    return model


def prefix_order(requests: Sequence[Request]) -> list[int]:
    """Indices of ``requests`` in the order to send them: shared prompt prefixes together.

    Why: a server reuses the KV cache of the prompt it just processed (llama.cpp
    keeps a slot's previous tokens; vLLM and OpenAI cache prefixes), so prompts
    that start alike should arrive one after another. Sorting the prompt texts
    puts strings with the longest common prefixes next to each other; a batch
    mixing two ingredients' prompts is sent group by group instead of
    interleaved. Stable, so equal prompts keep their order; answers still come
    back in input order.
    """
    def text(i: int) -> str:
        req = requests[i]
        return "\x00".join(f"{r}\x01{c}" for r, c in req.messages) if req.messages else req.prompt

    return sorted(range(len(requests)), key=text)


def _transient(err: BaseException) -> bool:
    """429, 5xx, request timeouts and dropped / refused connections are worth retrying."""
    import openai

    if isinstance(err, openai.APIConnectionError):  # includes timeouts
        return True
    status = getattr(err, "status_code", None)
    return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)


def _retry_after(err: BaseException) -> float | None:
    """Seconds from a ``Retry-After`` header, when the server sent one."""
    response = getattr(err, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _error_detail(err: Exception) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        if msg:
            return str(msg)[:300]
    return str(getattr(err, "message", err))[:300]


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    """A completion's first choice (empty when there is none or it is malformed)."""
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _message_content(data: dict[str, Any]) -> str:
    """The text of a chat completion's first choice ("" when absent)."""
    message = _first_choice(data).get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _first_top_logprobs(data: dict[str, Any]) -> list[tuple[str, float]] | None:
    """(token, logprob) alternatives of a completion's first token (None when absent)."""
    logprobs = _first_choice(data).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    pairs = [(str(t["token"]), float(t["logprob"])) for t in first.get("top_logprobs") or []
             if isinstance(t, dict) and t.get("token") is not None and t.get("logprob") is not None]
    if not pairs and first.get("token") is not None and first.get("logprob") is not None:
        pairs = [(str(first["token"]), float(first["logprob"]))]
    return pairs or None


def _usage_of(data: dict[str, Any]) -> Usage:
    """Token counts from a completion's ``usage`` (cached tokens when the server reports them)."""
    u = data.get("usage")
    if not isinstance(u, dict):
        return Usage()
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, cached or 0)


def _tiktoken_encoder(model: str) -> Callable[[str], list[int]] | None:
    """tiktoken's encoder for ``model`` if tiktoken is installed and knows it."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        enc = tiktoken.encoding_for_model(model)
    except (KeyError, ValueError):
        return None
    return enc.encode


def _max_tokens(req: Request, plan: _Plan) -> int:
    """The request's limit, raised to the constraint's length bound when it is enforced.

    A grammar-bounded answer (a date, an option) cut off by ``max_tokens`` can never
    parse, and each token carries at least one byte, so the byte bound suffices.
    """
    if not plan.enforced:
        return req.max_tokens
    try:
        bound = max_output_bytes(req.constraint)
    except BlendSQLError:  # a regex the bound analysis cannot read
        return req.max_tokens
    if bound is None or bound > 4096:
        return req.max_tokens
    return max(req.max_tokens, bound + 1)  # + 1 for the end-of-text token


__all__ = ["OpenAI", "constraint_json_schema", "constraint_regex", "detect_kind", "plan_for",
           "prefix_order"]
