"""A time limit on an ingredient's ``run``: user code must not hang a query.

SQL statements have the ``timeout`` watchdog and model requests their
``model_timeout``; an ingredient's own Python code had no limit, so a custom
``run`` stuck in a loop or a blocking call hung ``execute`` and held the
session. Python cannot stop a thread from outside, and running ``run`` in a
worker thread would break ingredients that use a ``sqlite3`` connection made
in the caller's thread. So the limit is a ``SIGALRM`` timer (POSIX, main
thread: where scripts, notebooks and the CLI run): its handler raises inside
``run``. It is not armed when the caller already has a real-time timer armed
(that timer is theirs), off the main thread (e.g. under ``blendsql serve``,
whose requests have their own deadline) or on Windows; the trace says so.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: default limit (seconds) on one ``run`` of an ingredient that needs no model; a
#: model ingredient's requests are each bounded by ``model_timeout`` instead
DEFAULT_INGREDIENT_TIMEOUT = 300.0


class RunExpired(BaseException):  # noqa: N818 - not an error users see; see time_limit
    """Raised inside ``run`` when its time is up.

    A ``BaseException``, so that an ``except Exception`` in user code cannot
    swallow it and carry on past the limit.
    """


def can_limit() -> str | None:
    """None when a limit can be armed here, else why not (for the trace)."""
    if not hasattr(signal, "setitimer"):
        return "this platform has no SIGALRM timer"
    if threading.current_thread() is not threading.main_thread():
        return "the query runs off the main thread"
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        return "the caller's own real-time timer is armed"
    return None


@contextmanager
def time_limit(seconds: float | None) -> Iterator[bool]:
    """Raise :class:`RunExpired` in the block after ``seconds``; yields whether armed.

    The caller's SIGALRM handler and timer state are restored on exit, whatever
    happens in the block.
    """
    if seconds is None or can_limit() is not None:
        yield False
        return

    def expire(signum: int, frame: Any) -> None:
        raise RunExpired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
