"""A metering proxy around the session model.

Why: ingredients call ``model.generate`` themselves; wrapping the model is
the one place that sees every request, so calls, tokens, cache hits and
prompts land in ``Smoothie.meta`` and in the trace step of the ingredient
that caused them, without ingredients having to report anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from blendsql.budget import Budget, batch_size, prices_of
from blendsql.cancel import current as current_token
from blendsql.cancel import stopped
from blendsql.errors import QueryCancelledError, QueryTimeoutError
from blendsql.models.base import Model, Request, Response, Wrapper


@dataclass
class Counters:
    """Running totals; differences of two snapshots give one step's share."""

    model_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    prompts: int = 0

    def minus(self, other: Counters) -> Counters:
        return Counters(*[getattr(self, f) - getattr(other, f) for f in _COUNTER_FIELDS])


_COUNTER_FIELDS = tuple(Counters.__dataclass_fields__)


class MeteredModel(Wrapper):
    """Counts what passes through ``generate``; resolves the real model lazily.

    ``factory`` is called on first use only, so a query whose ingredients
    need no model never loads one. Everything else (name, identity, tokenizer,
    context window) is the inner model's, as for any :class:`Wrapper`.
    """

    def __init__(self, factory: Callable[[], Model],
                 progress: Callable[[str, int, int], None] | None = None,
                 chunk: int = 8) -> None:
        self._factory = factory
        self._inner: Model | None = None
        self.counters = Counters()
        self.prompt_log: list[str] = []
        self.endpoint_log: list[str | None] = []  # which endpoint answered each prompt (pools)
        self.decision_log: list[dict[str, Any]] = []  # per-value decisions (record_decisions)
        self.progress = progress
        self.chunk = chunk
        self.label = ""  # the ingredient currently running (set by the engine)
        self.budget: Budget | None = None  # checked around every request batch
        # the ``model_timeout`` option: stamped on each request that has no limit of its own
        self.request_timeout: float | None = None

    @property
    def inner(self) -> Model:
        if self._inner is None:
            self._inner = self._factory()
        return self._inner

    @inner.setter
    def inner(self, model: Model) -> None:
        self._inner = model

    def record_decisions(self, decisions: Sequence[dict[str, Any]]) -> None:
        self.decision_log.extend(decisions)

    def companion(self, other: Model) -> MeteredModel:
        """``other`` metered into the same counters, prompt and decision logs and budget."""
        twin = MeteredModel(lambda: other, self.progress, self.chunk)
        twin.counters, twin.prompt_log, twin.decision_log, twin.endpoint_log = (
            self.counters, self.prompt_log, self.decision_log, self.endpoint_log)
        twin.label, twin.budget, twin.request_timeout = self.label, self.budget, self.request_timeout
        return twin

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        token = current_token()
        if token is not None and requests and token.cancelled:  # no new batch past the deadline
            raise stopped(token, not_started=len(requests))
        if self.request_timeout is not None:
            requests = [r if r.timeout is not None else replace(r, timeout=self.request_timeout)
                        for r in requests]
        if self.budget is not None and requests:
            self._check_batch(requests)
        responses = self._generate(requests)
        c = self.counters
        for req, resp in zip(requests, responses, strict=False):
            c.prompts += 1
            self.prompt_log.append(req.prompt or "\n".join(f"{r}: {t}" for r, t in req.messages))
            self.endpoint_log.append(resp.endpoint)
            if resp.cached:
                c.cache_hits += 1
            else:
                c.model_calls += 1
            c.prompt_tokens += resp.usage.prompt_tokens
            c.completion_tokens += resp.usage.completion_tokens
            c.cached_tokens += resp.usage.cached_tokens
        if self.budget is not None:  # tokens are known only now
            self.budget.check_used(c.model_calls, c.prompt_tokens, c.completion_tokens,
                                   prices_of(self.inner))
        return responses

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None]) -> list[Response]:
        """Metered as :meth:`generate` (answers reported after the batch)."""
        return Model.generate_each(self, requests, on_result)

    def _check_batch(self, requests: Sequence[Request]) -> None:
        """Refuse a batch that would take the query past its budget (before sending it).

        Every request counts as a call here (the cache may answer some: the
        check errs on the side of the limit).
        """
        assert self.budget is not None
        n, prompt, completion = batch_size(requests, self.inner.count_tokens)
        c = self.counters
        self.budget.check_batch(c.model_calls, c.prompt_tokens, c.completion_tokens,
                                n, prompt, completion, prices_of(self.inner))

    def _generate(self, requests: Sequence[Request]) -> list[Response]:
        """One batch; in chunks reporting ``progress(label, done, total)`` when asked to.

        Chunking only happens with a progress callback, so batching backends
        keep their whole batch otherwise. A backend that streams its answers
        (requests in flight) gets the whole batch and reports each answer as it
        arrives: chunks would stall its slots at every chunk's slowest request.
        """
        progress = self.progress
        if progress is not None and requests and self.inner.streams_results:
            done = [0]

            def arrived(_i: int, _resp: Response) -> None:
                done[0] += 1
                progress(self.label, done[0], len(requests))

            return self.inner.generate_each(requests, arrived)
        if self.progress is None or len(requests) <= self.chunk:
            responses = self.inner.generate(requests)
            if self.progress is not None:
                self.progress(self.label, len(responses), len(requests))
            return responses
        out: list[Response] = []
        token = current_token()
        for i in range(0, len(requests), self.chunk):
            if token is not None and token.cancelled:  # between chunks too
                raise stopped(token, not_started=len(requests) - i)
            try:
                out += self.inner.generate(requests[i : i + self.chunk])
            except (QueryTimeoutError, QueryCancelledError):
                if token is not None:  # the chunks after this one were never sent either
                    token.note(not_started=max(0, len(requests) - i - self.chunk))
                raise
            self.progress(self.label, len(out), len(requests))
        return out

    def snapshot(self) -> Counters:
        c = self.counters
        return Counters(*[getattr(c, f) for f in _COUNTER_FIELDS])

    def __getattr__(self, item: str) -> object:
        # backend-specific helpers (tokenizer, context size...) pass through
        if item.startswith("_"):
            raise AttributeError(item)
        return getattr(self.inner, item)
