"""The model contract: a batch of requests in, responses out.

Every backend (llama.cpp, OpenAI-compatible, guidance, a Python function)
implements ``Model.generate``. Ingredients only ever see this interface.
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from blendsql.cancel import CancelToken, stopped, wait_slice, watching
from blendsql.cancel import current as current_token
from blendsql.errors import BlendSQLError, ModelError, ModelTimeoutError
from blendsql.models.constraints import Constraint, Text
from blendsql.models.scoring import Distribution, best

# Seconds one request may take before the model gives up on it. Generous on
# purpose: a 7B model on a slow CPU can need a minute for a long answer, but a
# hung model must still end the query instead of blocking it forever.
DEFAULT_TIMEOUT = 120.0
_MAX_WAIT = 3600.0  # one wait at a time: threading refuses waits past TIMEOUT_MAX


@dataclass(frozen=True)
class Request:
    """One generation: a prompt (or chat messages), a constraint and limits."""

    prompt: str = ""
    messages: tuple[tuple[str, str], ...] = ()  # (role, content) pairs; wins over prompt
    constraint: Constraint = field(default_factory=Text)
    max_tokens: int = 64
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    # seconds this request may take (the engine's ``model_timeout`` option); None: the
    # backend's own ``timeout``. Not part of :meth:`key`: it does not change the answer.
    timeout: float | None = None
    # ask for each allowed answer's log-probability (``Response.scores``); only a Bool or a
    # short Choice can be scored (``blendsql.models.scoring.scored_answers``)
    score: bool = False

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages:
            return [{"role": r, "content": c} for r, c in self.messages]
        return [{"role": "user", "content": self.prompt}]

    def key(self) -> str:
        """Stable identity of the request (for the cache)."""
        parts: tuple[Any, ...] = (self.prompt, self.messages, self.constraint.key(),
                                  self.max_tokens, self.temperature, self.stop)
        return repr((*parts, "score") if self.score else parts)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def __iadd__(self, other: Usage) -> Usage:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        return self


@dataclass
class Response:
    """What came back: raw text, the parsed value (None if unparseable), usage."""

    text: str
    value: Any = None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    cached: bool = False
    error: str | None = None  # set when the text could not be parsed after retries
    # for a request with ``score=True``: the log-probability of each allowed answer text
    # (summed over its tokens); None when the backend could not score, and then
    # ``unscored`` says why (the answer is its greedy one)
    scores: dict[str, float] | None = None
    unscored: str | None = None
    # the server that answered (an OpenAI-compatible base URL; a ``Pool`` says which of
    # its endpoints); None for a cached answer or a backend without endpoints
    endpoint: str | None = None


class Model(ABC):
    """A language model backend."""

    name: str = "model"
    # False: the default persistent cache skips this model (its outputs may change
    # between sessions without its identity changing, e.g. a Python function).
    cacheable: bool = True

    @abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Response]:
        """Answer each request; the output list is parallel to the input."""

    #: True when :meth:`generate_each` reports each answer as it completes (a
    #: backend with requests in flight); False: only once the whole batch is done.
    streams_results: bool = False

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None]) -> list[Response]:
        """``generate``, also calling ``on_result(index, response)`` for each answer.

        Why: with several requests in flight, the progress bar and the live page
        should move as answers arrive, not once per batch. Backends that answer
        concurrently override this (and set ``streams_results``); the default
        reports after the batch. Called in the caller's thread.
        """
        responses = self.generate(requests)
        for i, resp in enumerate(responses):
            on_result(i, resp)
        return responses

    def identity(self) -> str:
        """What makes two models interchangeable for caching (name + weights + params)."""
        return self.name

    def count_tokens(self, text: str) -> int:
        """Token count of ``text``; backends with a tokenizer override this."""
        return max(1, len(text) // 4)

    def context_window(self) -> int | None:
        """Tokens of prompt plus answer one request may take (None: unknown or no limit).

        Prompt builders with optional parts (worked examples) drop them to fit."""
        return None

    def record_decisions(self, decisions: Sequence[dict[str, Any]]) -> None:
        """Keep an ingredient's per-value decisions (answer, probability, margin) for the trace.

        A plain model keeps nothing; the engine's metering wrapper files them under the
        ingredient step that made them (``TraceStep.details['decisions']``).
        """
        return None

    def companion(self, other: Model) -> Model:
        """``other`` as an ingredient should call it beside this model (a cascade's second
        stage): a plain model returns it as is; the engine's metering wrapper returns it
        counted, budgeted and traced like itself."""
        return other



class Wrapper(Model):
    """A model around ``inner`` (set by the subclass) that answers as it does: its name,
    identity, tokenizer, context window and capabilities are ``inner``'s, and
    ``generate`` / ``generate_each`` pass through unless the subclass changes them."""

    inner: Model

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def cacheable(self) -> bool:  # type: ignore[override]
        return self.inner.cacheable

    @property
    def streams_results(self) -> bool:  # type: ignore[override]
        return self.inner.streams_results

    def identity(self) -> str:
        return self.inner.identity()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def context_window(self) -> int | None:
        return self.inner.context_window()

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self.inner.generate(requests)

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None]) -> list[Response]:
        return self.inner.generate_each(requests, on_result)

def parse_response(text: str, constraint: Constraint) -> tuple[Any, str | None]:
    """Parse ``text`` under ``constraint``: (value, None) or (None, error message)."""
    try:
        return constraint.parse(text), None
    except (ValueError, TypeError) as e:
        return None, f"could not parse {text!r} as {constraint.describe()}: {e}"


def check_value(value: Any, constraint: Constraint) -> tuple[Any, str | None]:
    """Validate an already-typed answer under ``constraint``: (value, None) or (None, error).

    The typed twin of :func:`parse_response`; ``None`` is no answer at all.
    """
    if value is None:
        return None, "the model gave no answer (None)"
    try:
        return constraint.check(value), None
    except (ValueError, TypeError, OverflowError) as e:
        return None, f"answer {value!r} is not {constraint.describe()}: {e}"


def check_timeout(timeout: Any) -> float:
    """A validated per-request time limit in seconds (a positive, finite number)."""
    ok = (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
          and math.isfinite(timeout) and timeout > 0)
    if not ok:
        raise ModelError(f"timeout={timeout!r} is not a time limit",
                         hint="pass a positive number of seconds, e.g. timeout=30")
    return float(timeout)


def time_limit(req: Request, default: float) -> float:
    """The time limit of one request: its own (set by the engine) or the backend's."""
    return req.timeout if req.timeout is not None else default


class FunctionModel(Model):
    """A Python callable as a model, for tests and rules.

    ``fn(request)`` returns either text (parsed with the request's constraint)
    or an already-typed value (checked against the constraint the same way;
    ``None`` counts as no answer), or a
    :class:`~blendsql.models.scoring.Distribution` over a Bool's or Choice's
    answers: the model answers with the most probable one and reports every
    answer's log-probability (``Response.scores``), so a test sets exactly
    the probabilities a decision rule sees. Not persistently cached by default (a
    function's code can change while its name stays); pass ``cacheable=True``
    with a distinctive ``name`` to opt in.

    Each request may take at most ``timeout`` seconds: a batch runs in a worker
    thread, and a request still running at its deadline raises
    :class:`~blendsql.errors.ModelTimeoutError` (the stuck thread is left
    behind as a daemon: Python cannot stop a running function). So ``fn`` runs
    outside the caller's thread: a ``sqlite3`` connection it uses must be opened
    with ``check_same_thread=False`` (or inside ``fn``).
    """

    def __init__(self, fn: Callable[[Request], Any], name: str = "function",
                 cacheable: bool = False, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.fn = fn
        self.name = name
        self.cacheable = cacheable
        self.timeout = check_timeout(timeout)

    def identity(self) -> str:
        return f"function:{self.name}:{getattr(self.fn, '__qualname__', repr(self.fn))}"

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        batch = TimedBatch(self._answer, list(requests))
        batch.run_within(self.timeout, self.name)
        return batch.out

    def _answer(self, req: Request) -> Response:
        t0 = time.perf_counter()
        result = self.fn(req)
        scores = None
        if isinstance(result, Distribution):
            scores = result.logprobs(req.constraint)
            result = best(scores)
        if isinstance(result, str):
            value, err = parse_response(result, req.constraint)
            text = result
        else:
            value, err = check_value(result, req.constraint)
            text = "" if result is None else str(result)
        usage = Usage(self.count_tokens(req.prompt or str(req.messages)), self.count_tokens(text))
        unscored = None
        if req.score and scores is None:
            unscored = "the function gave one answer, not a Distribution"
        return Response(text, value, usage, time.perf_counter() - t0, error=err,
                        scores=scores, unscored=unscored)


class TimedBatch:
    """Answers a batch in one daemon worker thread, watched request by request.

    Why one thread per batch, not per request: a map over 100k values must not
    pay a thread hand-off per value; the watcher only reads when the current
    request started. Why a daemon: a function that never returns cannot be
    stopped, and must not keep the interpreter from exiting either.

    The query's :class:`~blendsql.cancel.CancelToken` (read in the caller's
    thread) stops the batch: the worker starts no request once it is cancelled,
    the caller stops waiting at once (the request in flight is abandoned), and
    the same happens when the caller leaves for any other reason (a request's
    time-out, Ctrl-C): an abandoned batch never runs on in the background.
    """

    def __init__(self, answer: Callable[[Request], Response], requests: list[Request]) -> None:
        self.answer = answer
        self.requests = requests
        self.out: list[Response] = []
        self.error: BaseException | None = None
        self.started = time.monotonic()  # when the current request began
        self.done = threading.Event()
        self.wake = threading.Event()  # done, or the query cancelled
        self.abandoned = False  # the caller left: the worker starts no further request
        self.token = current_token()
        self.thread: threading.Thread | None = None  # the worker (still alive after a timeout)

    def _work(self) -> None:
        token = self.token
        try:
            for req in self.requests:
                if self.abandoned or (token is not None and token.cancelled):
                    return
                self.started = time.monotonic()
                self.out.append(self.answer(req))
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            self.error = e
        finally:
            self.done.set()
            self.wake.set()

    def _limit(self, default: float) -> float:
        """The time limit of the request running now (``default`` unless it has one)."""
        current = self.requests[min(len(self.out), len(self.requests) - 1)]
        return time_limit(current, default)

    def run_within(self, timeout: float, name: str) -> None:
        """Run the batch; raise the worker's error, or a timeout for a stuck request
        (or the query's time-out / cancellation, see the class)."""
        token = self.token
        if token is not None and token.cancelled:
            raise stopped(token, not_started=len(self.requests))
        self.thread = threading.Thread(target=self._work, name=f"blendsql-{name}", daemon=True)
        try:
            self.thread.start()
            with watching(token, self.wake.set):
                while True:
                    limit = self._limit(timeout)
                    wait = wait_slice(min(_MAX_WAIT, max(0.0, self._wait(token, limit))))
                    if self.wake.wait(wait):
                        break
                    if token is not None and token.cancelled:
                        break
                    if time.monotonic() - self.started >= limit and not self.done.is_set():
                        n = len(self.out) + 1
                        raise ModelTimeoutError(
                            f"model {name!r} did not answer request {n} of {len(self.requests)} "
                            f"within {limit:g} s",
                            hint="the model may be stuck; raise its timeout= if it is just slow")
            if not self.done.is_set():  # the query was cancelled: stop here
                assert token is not None
                answered = len(self.out)
                in_flight = int(answered < len(self.requests))
                raise stopped(token, not_started=len(self.requests) - answered - in_flight,
                              abandoned=in_flight)
        finally:
            if not self.done.is_set():
                self.abandoned = True
        if self.error is not None:
            if isinstance(self.error, BlendSQLError) or not isinstance(self.error, Exception):
                raise self.error  # ours already, or a KeyboardInterrupt / SystemExit
            n = len(self.out) + 1
            raise ModelError(
                f"model {name!r} failed on request {n} of {len(self.requests)}: "
                f"{type(self.error).__name__}: {self.error}",
                hint="the error came from the model's own code (its function or engine); "
                "the original exception is chained as __cause__") from self.error

    def _wait(self, token: CancelToken | None, limit: float) -> float:
        """Seconds to wait for the worker: until the current request's limit or the
        query's deadline, whichever comes first."""
        left = self.started + limit - time.monotonic()
        if token is None:
            return left
        bound = token.bound(left)
        return left if bound is None else bound
