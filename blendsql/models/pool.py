"""A pool of OpenAI-compatible endpoints serving one model, as one model.

Why: one server is one machine's throughput and one point of failure. A pool
spreads a batch over several servers of the same model and keeps going when
one of them dies.

How a batch runs (:meth:`Pool.generate_each`):

- **Assignment.** The caller's thread is the only dispatcher. Requests wait in
  one queue (in :func:`~blendsql.models.openai_compat.prefix_order`); whenever an
  endpoint that is up has a free slot (fewer than its ``max_concurrency`` in
  flight), the next request goes to the endpoint with the least outstanding work
  per slot (estimated tokens in flight / ``max_concurrency``; ties: the one sent
  fewer requests). A fast endpoint frees its slots sooner and so takes more.
- **Failover without duplicates.** A request is in flight on at most one
  endpoint at a time, and only the dispatcher writes answers. When an attempt
  fails with a connection error, a timeout or (after the endpoint's own retries)
  a 429 / 5xx, the endpoint is marked down and the request goes back to the front
  of the queue for another endpoint; any other error (401, 404, ...) fails the
  batch as a lone ``OpenAI`` would. Every request is therefore answered exactly
  once: a failed attempt has no answer, and an answer is taken only from the one
  attempt that succeeded.
- **Health.** A down endpoint is probed (``GET /models``, one try) after a
  back-off of ``probe_backoff`` s, doubling with each consecutive failure up to
  ``max_probe_backoff``; a probe that answers brings it back, mid-batch too. When
  no endpoint is up and nothing is in flight, every endpoint is probed once more
  at once; if none answers, the batch fails with a :class:`ModelError` naming each
  endpoint and its last error. A request that failed ``len(endpoints) + 1`` times
  fails the batch as well (a request that kills every server must not loop).

Each :class:`~blendsql.models.base.Response` says which endpoint answered it
(``Response.endpoint``); :meth:`Pool.status` has the per-endpoint counts.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import copy_context
from dataclasses import dataclass
from typing import Any

from blendsql.cancel import current as current_token
from blendsql.cancel import stopped, watching
from blendsql.errors import BlendSQLError, ModelError
from blendsql.models.base import Model, Request, Response
from blendsql.models.openai_compat import OpenAI, _transient, prefix_order

# one finished attempt: (request index, endpoint, answer or None, error or None)
_Event = tuple[int, "_Endpoint", Response | None, BaseException | None]


@dataclass
class _Endpoint:
    """One server of the pool and what the pool knows of it (guarded by the pool's lock)."""

    model: OpenAI
    url: str
    capacity: int
    up: bool = True
    outstanding: int = 0  # requests in flight (all batches)
    work: int = 0  # their estimated tokens
    sent: int = 0
    answered: int = 0
    failures: int = 0  # consecutive failures: the probe back-off doubles with each
    retry_at: float = 0.0  # when a down endpoint is probed next (time.monotonic)
    probing: bool = False
    last_error: str | None = None


class Pool(Model):
    """Several ``OpenAI`` endpoints of one model behind one :class:`Model`.

    ``Pool([OpenAI(m, url1), OpenAI(m, url2)])``, or ``Pool.from_urls(m, [url1, url2])``
    (:meth:`from_urls`). Each endpoint keeps its own ``max_concurrency``, ``timeout``
    and retries of 429 / 5xx; a refused or dropped connection and a timeout are not
    retried in place (the pool sets ``retry_connection_errors = False`` on its
    endpoints) but sent to another endpoint. See the module docstring for how
    requests are assigned, how failover keeps each answer unique and how a down
    endpoint comes back.

    :meth:`identity` is ``openai-pool|<model>|kind=<server_kind>``: it does **not**
    depend on the URLs, their order or which of them are up, because every endpoint
    serves the same model. So the answer cache serves a rerun whatever endpoints
    exist then; the flip side is that endpoints serving different weights under one
    name must not share a pool. It differs from a lone ``OpenAI``'s identity (which
    names its URL), so a pool does not read a single endpoint's cache entries.
    """

    streams_results = True

    def __init__(self, endpoints: Sequence[OpenAI], *, probe_backoff: float = 1.0,
                 max_probe_backoff: float = 30.0, probe_timeout: float = 5.0) -> None:
        eps = list(endpoints)
        if not eps:
            raise ModelError("a model pool needs at least one endpoint",
                             hint="Pool([OpenAI(model, url1), OpenAI(model, url2)]) or "
                             "Pool.from_urls(model, [url1, url2])")
        bad = [e for e in eps if not isinstance(e, OpenAI)]
        if bad:
            raise ModelError(f"a model pool holds OpenAI endpoints, not {type(bad[0]).__name__}",
                             hint="build each endpoint with blendsql.models.OpenAI(model, url)")
        names = sorted({e.model for e in eps})
        if len(names) > 1:
            raise ModelError(f"a model pool serves one model, not {', '.join(map(repr, names))}",
                             hint="every endpoint must serve the same model under the same "
                             "name (the pool's cache identity ignores which endpoint answered)")
        urls = [e.endpoint for e in eps]
        twice = sorted({u for u in urls if urls.count(u) > 1})
        if twice:
            raise ModelError(f"endpoint {twice[0]} is in the pool twice",
                             hint="give each URL once; raise its max_concurrency= for more "
                             "requests in flight there")
        for value, what in ((probe_backoff, "probe_backoff"), (max_probe_backoff,
                            "max_probe_backoff"), (probe_timeout, "probe_timeout")):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ModelError(f"{what}={value!r} is not a number of seconds",
                                 hint=f"pass a positive number, e.g. {what}=1")
        for e in eps:
            e.retry_connection_errors = False  # fail over instead of retrying in place
        self.model = names[0]
        self.server_kind = "+".join(sorted({e.server_kind for e in eps}))
        self.name = f"openai-pool:{self.model}"
        self.probe_backoff = float(probe_backoff)
        self.max_probe_backoff = float(max_probe_backoff)
        self.probe_timeout = float(probe_timeout)
        self.max_attempts = len(eps) + 1  # failed attempts of one request before giving up
        self.failovers = 0  # requests sent again after their endpoint failed
        self._eps = [_Endpoint(e, e.endpoint, e.max_concurrency) for e in eps]
        self._cond = threading.Condition()

    @classmethod
    def from_urls(cls, model: str, urls: Sequence[str], api_key: str | None = None, *,
                  factory: Callable[..., OpenAI] = OpenAI, probe_backoff: float = 1.0,
                  max_probe_backoff: float = 30.0, probe_timeout: float = 5.0,
                  **options: Any) -> Pool:
        """One ``factory(model, url, api_key, **options)`` endpoint per URL, pooled."""
        if isinstance(urls, str) or not all(isinstance(u, str) for u in urls):
            raise ModelError(f"base_url={urls!r} is not a list of URLs",
                             hint="e.g. base_url=['http://gpu1:8080/v1', 'http://gpu2:8080/v1']")
        return cls([factory(model, url, api_key, **options) for url in urls],
                   probe_backoff=probe_backoff, max_probe_backoff=max_probe_backoff,
                   probe_timeout=probe_timeout)

    # -- copies for worker processes ---------------------------------------------------

    def for_workers(self, share: int) -> Pool:
        """A pool of each endpoint's :meth:`OpenAI.for_workers` copy (its requests in
        flight divided by ``share``), all up: each copy finds dead endpoints itself."""
        return Pool([e.model.for_workers(share) for e in self._eps],
                    probe_backoff=self.probe_backoff, max_probe_backoff=self.max_probe_backoff,
                    probe_timeout=self.probe_timeout)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its endpoints and probe settings (not its threads and counters)."""
        return (_rebuild_pool, ([e.model for e in self._eps], self.probe_backoff,
                                self.max_probe_backoff, self.probe_timeout))

    # -- the Model contract -------------------------------------------------------
    def identity(self) -> str:
        return f"openai-pool|{self.model}|kind={self.server_kind}"

    def count_tokens(self, text: str) -> int:
        return self._eps[0].model.count_tokens(text)

    def context_window(self) -> int | None:
        windows = [w for e in self._eps if (w := e.model.context_window()) is not None]
        return min(windows) if windows else None

    @property
    def endpoints(self) -> list[OpenAI]:
        """The pooled endpoints, in the order given."""
        return [e.model for e in self._eps]

    def status(self) -> list[dict[str, Any]]:
        """Per endpoint: url, up, in flight, requests sent and answered, last error."""
        with self._cond:
            return [{"url": e.url, "up": e.up, "in_flight": e.outstanding, "sent": e.sent,
                     "answered": e.answered, "failures": e.failures, "last_error": e.last_error}
                    for e in self._eps]

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self.generate_each(requests, None)

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None] | None) -> list[Response]:
        """Answer ``requests`` over the endpoints; ``on_result`` as each answer arrives.

        ``on_result(i, response)`` runs in the caller's thread, once per request;
        the returned list keeps input order.
        """
        if not requests:
            return []
        n = len(requests)
        pending = deque(prefix_order(requests))
        out: list[Response | None] = [None] * n
        failed: list[list[str]] = [[] for _ in range(n)]  # each failed attempt, per request
        events: deque[_Event] = deque()
        in_flight = answered = 0
        last_chance = True  # the all-endpoints probe, once per batch
        workers = min(n, sum(e.capacity for e in self._eps))
        token = current_token()
        if token is not None and token.cancelled:
            raise stopped(token, not_started=n)
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="blendsql-pool")
        finished = False
        try:
            while answered < n:
                with self._cond:
                    if token is not None and token.cancelled:
                        # the query stopped: no new attempt; those in flight are left unread
                        raise stopped(token, not_started=len(pending), abandoned=in_flight)
                    self._start_due_probes()
                    while pending and (ep := self._pick()) is not None:
                        i = pending.popleft()
                        work = _work(requests[i])
                        ep.outstanding += 1
                        ep.work += work
                        ep.sent += 1
                        in_flight += 1
                        executor.submit(copy_context().run, self._attempt, ep, requests[i], i,
                                        work, events)
                    if not events:
                        if in_flight == 0 and not any(e.up or e.probing for e in self._eps):
                            if not last_chance:
                                raise self._all_down(n - answered, n)
                            last_chance = False
                            for e in self._eps:
                                e.retry_at = 0.0  # probed at the top of the loop
                            continue
                        with watching(token, self._wake):
                            self._cond.wait(self._wait_seconds() if token is None
                                            else token.bound(self._wait_seconds()))
                        continue
                    done = list(events)
                    events.clear()
                for i, ep, resp, err in done:
                    in_flight -= 1
                    if err is None and resp is not None:
                        if out[i] is not None:  # cannot happen: one attempt at a time
                            raise ModelError(f"request {i + 1} of {n} was answered twice",
                                             hint="a bug in blendsql.models.pool; please report")
                        out[i] = resp
                        answered += 1
                        if on_result is not None:
                            on_result(i, resp)
                    elif err is not None and _endpoint_failure(err):
                        failed[i].append(f"{ep.url}: {_message(err)}")
                        if len(failed[i]) >= self.max_attempts:
                            raise ModelError(
                                f"request {i + 1} of {n} failed on {len(failed[i])} attempts: "
                                + "; ".join(failed[i]),
                                hint="each endpoint it reached failed or timed out; the request "
                                "may be too slow for timeout=, or the servers are overloaded")
                        with self._cond:
                            self.failovers += 1
                        pending.appendleft(i)  # next, on another endpoint
                    else:
                        assert err is not None
                        raise err
            finished = True
        finally:
            # on an error, attempts still in flight finish in the background: each
            # updates its endpoint's counters and nothing reads its answer
            executor.shutdown(wait=finished, cancel_futures=not finished)
        return [r for r in out if r is not None]

    # -- dispatch -------------------------------------------------------------------
    def _pick(self) -> _Endpoint | None:
        """The up endpoint with a free slot and the least outstanding work per slot."""
        free = [e for e in self._eps if e.up and e.outstanding < e.capacity]
        if not free:
            return None
        return min(free, key=lambda e: (e.work / e.capacity, e.outstanding / e.capacity, e.sent))

    def _attempt(self, ep: _Endpoint, req: Request, i: int, work: int,
                 events: deque[_Event]) -> None:
        """One attempt at request ``i`` on ``ep`` (a worker thread); reports an event."""
        resp: Response | None = None
        err: BaseException | None = None
        try:
            resp = ep.model.answer(req)
            resp.endpoint = ep.url
        except BaseException as e:  # noqa: BLE001 - handed to the dispatcher
            err = e
        with self._cond:
            ep.outstanding -= 1
            ep.work -= work
            if err is None:
                ep.answered += 1
                if ep.up:
                    ep.failures = 0
            elif _endpoint_failure(err):
                self._mark_down(ep, err)
            events.append((i, ep, resp, err))
            self._cond.notify_all()

    # -- health ---------------------------------------------------------------------
    def _backoff(self, failures: int) -> float:
        return min(self.max_probe_backoff, self.probe_backoff * 2 ** max(0, failures - 1))

    def _mark_down(self, ep: _Endpoint, err: BaseException) -> None:
        """Take ``ep`` out of rotation until a probe answers (the lock is held)."""
        ep.last_error = _message(err)
        if ep.up:  # several attempts failing at once count as one failure
            ep.up = False
            ep.failures += 1
            ep.retry_at = time.monotonic() + self._backoff(ep.failures)

    def _start_due_probes(self) -> None:
        """Probe each down endpoint whose back-off has passed, in a thread (lock held)."""
        now = time.monotonic()
        for ep in self._eps:
            if not ep.up and not ep.probing and ep.retry_at <= now:
                ep.probing = True
                threading.Thread(target=self._probe, args=(ep,), daemon=True,
                                 name=f"blendsql-probe-{ep.url}").start()

    def _probe(self, ep: _Endpoint) -> None:
        err: BaseException | None = None
        try:
            ep.model.probe(self.probe_timeout)
        except Exception as e:  # noqa: BLE001 - any failure keeps it down
            err = e
        with self._cond:
            ep.probing = False
            if err is None:
                ep.up = True  # ``failures`` stays until a request succeeds: a relapse waits longer
            else:
                ep.failures += 1
                ep.retry_at = time.monotonic() + self._backoff(ep.failures)
                ep.last_error = _message(err)
            self._cond.notify_all()

    def _wake(self) -> None:
        """Wake the dispatcher (the query was cancelled; called from another thread)."""
        with self._cond:
            self._cond.notify_all()

    def _wait_seconds(self) -> float:
        """How long the dispatcher may sleep: until the next probe is due, at most 1 s."""
        now = time.monotonic()
        due = [e.retry_at - now for e in self._eps if not e.up and not e.probing]
        return max(0.001, min([1.0, *due]))

    def _all_down(self, unanswered: int, n: int) -> ModelError:
        lines = []
        for e in self._eps:
            err = e.last_error or "down"
            lines.append(err if e.url in err else f"{e.url}: {err}")
        return ModelError(
            f"every endpoint of the {self.model!r} pool is down ({unanswered} of {n} requests "
            f"unanswered): " + "; ".join(lines),
            hint="start the servers or check the base_url list; a down endpoint is probed "
            f"(GET /models) again after {self.probe_backoff:g} s, doubling up to "
            f"{self.max_probe_backoff:g} s")


def _rebuild_pool(endpoints: list[OpenAI], probe_backoff: float, max_probe_backoff: float,
                  probe_timeout: float) -> Pool:
    """An unpickled :class:`Pool` (see ``Pool.__reduce__``)."""
    return Pool(endpoints, probe_backoff=probe_backoff, max_probe_backoff=max_probe_backoff,
                probe_timeout=probe_timeout)


def _work(req: Request) -> int:
    """A request's estimated tokens (prompt plus answer budget): its share of the work."""
    text = req.prompt or "".join(c for _r, c in req.messages)
    return max(1, len(text) // 4) + req.max_tokens


def _endpoint_failure(err: BaseException) -> bool:
    """A failure of the endpoint rather than of the request: try another endpoint."""
    import openai

    cause = err.__cause__ if isinstance(err, ModelError) else err
    return isinstance(cause, openai.APIError) and _transient(cause)


def _message(err: BaseException) -> str:
    return err.message if isinstance(err, BlendSQLError) else f"{type(err).__name__}: {err}"


__all__ = ["Pool"]

