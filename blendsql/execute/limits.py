"""A time limit on an ingredient's ``run``: user code must not hang a query.

SQL statements have the ``timeout`` watchdog and model requests their
``model_timeout``; an ingredient's own Python code had no limit, so a custom
``run`` stuck in a loop or a sleep hung ``execute`` and held the session.
Python cannot stop a thread from outside, and running ``run`` in a worker
thread would break ingredients that use a ``sqlite3`` connection made in the
caller's thread. So the limit is a ``SIGALRM`` timer (POSIX, main thread:
where scripts, notebooks and the CLI run): its handler raises inside ``run``.

What it cannot do: a call into C (a ``sqlite3`` query on the ingredient's own
connection, a NumPy kernel) runs to its end before the handler runs. The
handler never raises inside blendsql's own code that ``run`` calls (the
``db`` it is given, a nested ``execute``), nor in a helper or finalizer that
code called: it waits until control is back in the ingredient's code, so no
lock or cursor of ours is left half-done. A stop that user code swallows
(a finalizer, ``except BaseException``) comes again 1 s later: the grace
lets the ingredient's own cleanup (its ``finally`` blocks) run while the
first stop unwinds. It is
not armed when the caller already has a real-time timer armed (that timer is
theirs), off the main thread (e.g. under ``blendsql serve``, whose requests
have their own deadline) or on Windows. Only ingredients that need no model
are limited: a model ingredient's requests each have ``model_timeout``, and
stopping its ``run`` would leave a batch of requests running.
"""

from __future__ import annotations

import itertools
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

#: default limit (seconds) on one ``run`` of an ingredient that needs no model
DEFAULT_INGREDIENT_TIMEOUT = 300.0
#: a longer limit is the same as this one (``setitimer`` overflows past ~9e9 s)
MAX_SECONDS = 1e8
#: how soon the handler looks again when the signal arrived inside blendsql's code
RETRY_SECONDS = 0.02
#: how soon it raises again when its exception was swallowed (a finalizer, a ``__del__``)
RERAISE_SECONDS = 1.0

_PACKAGE = str(Path(__file__).resolve().parents[1])
_LIBRARY = tuple(str(Path(_PACKAGE) / d) for d in ("db", "execute", "plan", "grammar", "models", "retrieval"))
_LIBRARY_FILES = (str(Path(_PACKAGE) / "blend.py"), str(Path(_PACKAGE) / "smoothie.py"))
_tokens = itertools.count(1)
_active: list[int] = []  # tokens of the limits armed now, outermost first


class RunExpired(BaseException):  # noqa: N818 - not an error users see; see time_limit
    """Raised inside ``run`` when its time is up; ``token`` names the limit.

    A ``BaseException``, so that an ``except Exception`` in user code cannot
    swallow it and carry on past the limit.
    """

    def __init__(self, token: int) -> None:
        super().__init__(token)
        self.token = token


def can_limit() -> str | None:
    """None when a limit can be armed here, else why not (for the trace)."""
    if not hasattr(signal, "setitimer"):
        return "this platform has no SIGALRM timer"
    if threading.current_thread() is not threading.main_thread():
        return "the query runs off the main thread"
    if _active:
        return None  # an enclosing ingredient's limit is ours: nested calls run under it
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        return "the caller's own real-time timer is armed"
    return None


def in_library(frame: FrameType | None) -> bool:
    """True when ``frame`` runs blendsql's engine, database or model code."""
    if frame is None:
        return False
    name = frame.f_code.co_filename
    return name.startswith(_LIBRARY) or name in _LIBRARY_FILES or name == __file__


def call_user(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call an ingredient's ``run`` (or any user code) as ``fn(*args, **kwargs)``.

    Its frame marks where blendsql's code hands over to the user's, whatever
    the user's function is called or however it is wrapped: see
    :func:`inside_library`.
    """
    return fn(*args, **kwargs)


def inside_library(frame: FrameType | None, anchor: FrameType | None) -> bool:
    """True unless the signal landed in user code: walking out from ``frame``,
    a :func:`call_user` frame comes before any of blendsql's own frames.

    The innermost frame alone is not enough: the signal can be handled in a
    standard-library helper (``weakref``, ``contextlib``) or a garbage-collector
    callback that our database code called, and raising there would leave our
    lock or cursor half-done just the same. Frames that reach ``anchor`` (the
    ``with`` that armed the limit) without a hand-over are our wrappers.
    """
    while frame is not None and frame is not anchor:
        if frame.f_code is call_user.__code__:
            return False
        if in_library(frame):
            return True
        frame = frame.f_back
    return True


@contextmanager
def time_limit(seconds: float | None) -> Iterator[int | None]:
    """Raise :class:`RunExpired` in the block after ``seconds``; yields the limit's
    token, or None when no limit was armed (see :func:`can_limit`; inside an
    enclosing limit the block runs under that one).

    The caller's SIGALRM handler and timer state are restored on exit, whatever
    happens in the block.
    """
    if seconds is None or _active or can_limit() is not None:
        yield None
        return
    token = next(_tokens)
    armed = [True]
    anchor = sys._getframe(2)  # 0: this generator, 1: contextlib's __enter__, 2: the ``with``

    def expire(signum: int, frame: FrameType | None) -> None:
        if not armed[0]:
            return
        if inside_library(frame, anchor):
            signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)  # raise once back in user code
            return
        # Armed again before raising: when the exception is swallowed (the signal
        # landed in a finalizer, a ``__del__``, a bare ``except BaseException``)
        # the handler fires again; the ``finally`` below disarms it once the
        # exception has reached the ``with``.
        signal.setitimer(signal.ITIMER_REAL, RERAISE_SECONDS)
        raise RunExpired(token)

    previous: Any = signal.signal(signal.SIGALRM, expire)
    _active.append(token)
    try:
        signal.setitimer(signal.ITIMER_REAL, min(float(seconds), MAX_SECONDS))
        yield token
    finally:
        armed[0] = False  # a signal landing from here on is ignored
        _active.remove(token)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
