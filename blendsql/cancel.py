"""Stopping one query's work: a deadline and a switch that every model call sees.

Why: a query that times out (``execute(..., timeout=)``, a web request past its
limit) or whose caller goes away (a closed page, Ctrl-C) must stop its work,
not only stop waiting for it. Before this, the caller got its error while the
abandoned model calls went on in the background and held the session (and the
model) for as long as they took.

How: ``BlendSQL.execute`` (and the web page's engine) hold a :class:`CancelToken`
in a context variable for the duration of the query (:func:`scope`). Each place
that starts model requests reads it (:func:`current`) and

- starts no new request once it is cancelled or past its deadline (between
  requests, batches, chunks, retries and endpoint attempts);
- waits for requests in flight no longer than the deadline, and wakes at once
  when the token is cancelled (:meth:`CancelToken.watch` registers a callback);
- aborts what it can (llama.cpp's abort switch) and abandons the rest (an HTTP
  request or a Python function running in a worker thread finishes there; its
  answer is dropped);
- counts what it stopped (:meth:`CancelToken.note`), for the query's trace.

No timer thread: the deadline is read where a wait is bounded or a request is
about to start, so a token costs nothing until it is used. Worker threads do
not see the caller's context variables: backends capture the token in the
caller's thread (or run their workers in a copy of its context).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from blendsql.errors import ExecutionError, QueryCancelledError, QueryTimeoutError

#: why a token was cancelled
TIMEOUT, CANCELLED, INTERRUPTED = "timeout", "cancelled", "interrupted"


class CancelToken:
    """One query's switch: cancelled explicitly (:meth:`cancel`) or by its deadline.

    ``seconds``: the time limit from now (None: none); ``parent``: an enclosing
    token (the web request's) whose deadline and cancellation this one shares.
    Thread-safe: any thread may cancel it, read it or note counts.
    """

    def __init__(self, seconds: float | None = None, parent: CancelToken | None = None,
                 what: str = "the query") -> None:
        self.started = time.monotonic()
        self.limit = seconds
        deadline = None if seconds is None else self.started + seconds
        above: float | None = parent.deadline if parent is not None else None
        if above is not None:
            deadline = above if deadline is None else min(deadline, above)
        self.deadline: float | None = deadline
        self.parent = parent
        self.what = what
        self.reason: str | None = None  # set once cancelled (TIMEOUT, CANCELLED, INTERRUPTED)
        self.cancelled_at: float | None = None  # time.monotonic() of the cancellation
        self.not_started = 0  # model requests that were never sent
        self.abandoned = 0  # model requests in flight when the work stopped (aborted or dropped)
        self._lock = threading.Lock()
        self._hooks: dict[int, Callable[[], None]] = {}
        self._made: list[ExecutionError] = []  # the errors raised for it (see final)
        self._next = 0

    # -- state ---------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once cancelled, or when the deadline (own or the parent's) has passed."""
        if self.reason is not None:
            return True
        if self.parent is not None and self.parent.cancelled:
            self.cancel(self.parent.reason or CANCELLED)
            return True
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.cancel(TIMEOUT)
            return True
        return False

    def remaining(self) -> float | None:
        """Seconds left before the deadline (0 when past it); None: no deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def bound(self, seconds: float | None) -> float | None:
        """``seconds`` (None: unbounded) cut to the time left before the deadline."""
        left = self.remaining()
        if left is None:
            return seconds
        return left if seconds is None else min(seconds, left)

    def cancel(self, reason: str = CANCELLED) -> None:
        """Stop the work: no new requests; each watcher (:meth:`watch`) is called once."""
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            self.cancelled_at = time.monotonic()
            hooks = list(self._hooks.values())
            self._hooks.clear()
        for hook in hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - a watcher failing must not stop the others
                pass

    def check(self) -> None:
        """Raise :meth:`error` when the work must stop."""
        if self.cancelled:
            raise self.error()

    def error(self) -> ExecutionError:
        """The error the stopped work raises (a ``QueryTimeoutError`` past the deadline)."""
        err = self._error()
        with self._lock:
            if len(self._made) < 64:
                self._made.append(err)
        return err

    def _error(self) -> ExecutionError:
        if self.reason in (None, TIMEOUT):
            limit = self.limit if self.limit is not None else (
                self.parent.limit if self.parent is not None else None)
            within = f" of {limit:g} s" if limit is not None else ""
            return QueryTimeoutError(
                f"{self.what} ran past its time limit{within} and was stopped"
                f"{self.summary()}",
                hint="narrow the query (fewer rows reach the ingredients), or raise the limit "
                "with execute(..., timeout=<seconds>)")
        why = "interrupted" if self.reason == INTERRUPTED else "cancelled"
        return QueryCancelledError(f"{self.what} was {why}{self.summary()}",
                                   hint="nothing of it is returned; run it again to get its result")

    def final(self, e: BaseException) -> ExecutionError:
        """The error to show once the work has stopped: ``e`` when it is one this token
        raised (its message brought up to date: counts noted after it was made), else a
        new one."""
        fresh = self.error()
        if type(e) is type(fresh) and isinstance(e, ExecutionError) and any(
                e is made for made in self._made):
            e.message, e.hint = fresh.message, fresh.hint
            e.args = (str(fresh),)
            return e
        return fresh

    def summary(self) -> str:
        """``": 12 model requests not started, 1 abandoned in flight"`` (empty if none)."""
        if not (self.not_started or self.abandoned):
            return ""
        return (f": {self.not_started} model request{'s' if self.not_started != 1 else ''} "
                f"not started, {self.abandoned} abandoned in flight")

    # -- what the backends use -------------------------------------------------------

    def note(self, not_started: int = 0, abandoned: int = 0) -> None:
        """Count model requests stopped by this token (shown in the trace)."""
        with self._lock:
            self.not_started += max(0, not_started)
            self.abandoned += max(0, abandoned)

    @contextmanager
    def watch(self, hook: Callable[[], None]) -> Iterator[None]:
        """Call ``hook()`` (from the cancelling thread) if the token is cancelled inside
        the block; at once when it already is. For waits that must wake up and work
        that can be aborted (llama.cpp's switch)."""
        with self._lock:
            key = self._next
            self._next += 1
            if self.reason is None:
                self._hooks[key] = hook
                key_set = True
            else:
                key_set = False
        if not key_set:
            hook()
        try:
            yield
        finally:
            with self._lock:
                self._hooks.pop(key, None)

    def details(self) -> dict[str, Any]:
        """What was stopped, for a trace step."""
        late = (None if self.cancelled_at is None or self.deadline is None
                else round(self.cancelled_at - self.deadline, 3))
        return {"reason": self.reason, "time_limit": self.limit,
                "requests_not_started": self.not_started,
                "requests_abandoned": self.abandoned,
                **({"noticed_after_deadline_s": late} if late is not None else {})}


#: longest single wait of the main thread for model work: a Ctrl-C that reached another
#: thread (or ``_thread.interrupt_main()``, which sends no signal) is raised within it
MAIN_THREAD_SLICE = 0.5


def wait_slice(seconds: float | None) -> float | None:
    """``seconds`` (None: forever), cut to :data:`MAIN_THREAD_SLICE` on the main thread.

    Why: a thread blocked in a wait sees a pending KeyboardInterrupt only when the wait
    ends or a real signal interrupts it; waits of worker threads are not cut."""
    if threading.current_thread() is not threading.main_thread():
        return seconds
    return MAIN_THREAD_SLICE if seconds is None else min(seconds, MAIN_THREAD_SLICE)


_CURRENT: ContextVar[CancelToken | None] = ContextVar("blendsql_cancel", default=None)


def current() -> CancelToken | None:
    """The token of the query running in this context (None: none)."""
    return _CURRENT.get()


@contextmanager
def scope(token: CancelToken | None) -> Iterator[CancelToken | None]:
    """``token`` is :func:`current` inside the block; a parent's cancellation reaches it."""
    reset = _CURRENT.set(token)
    try:
        parent = token.parent if token is not None else None
        if token is not None and parent is not None:
            child = token

            def follow() -> None:
                child.cancel(parent.reason or CANCELLED)

            with parent.watch(follow):
                yield token
        else:
            yield token
    finally:
        _CURRENT.reset(reset)


def watching(token: CancelToken | None, hook: Callable[[], None]) -> Any:
    """``token.watch(hook)``, or a block that does nothing when there is no token."""
    if token is None:
        return _NOTHING
    return token.watch(hook)


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()


def stopped(token: CancelToken | None, not_started: int = 0, abandoned: int = 0) -> ExecutionError:
    """Note what a backend stopped and return the error to raise (``token`` is cancelled)."""
    assert token is not None
    token.note(not_started, abandoned)
    return token.error()
