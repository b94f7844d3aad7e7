"""One BlendSQL session behind the page: one request at a time, each under a deadline,
every failure turned into a readable error block.

Why a worker thread, a lock and a deadline per request: a BlendSQL session runs one
query at a time, a model call can be slow, and a browser tab must get an answer (a
clear time-out message) instead of hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio

from blendsql._display import esc, trace_html, wrap
from blendsql.cancel import CANCELLED, TIMEOUT, CancelToken
from blendsql.cancel import scope as cancel_scope
from blendsql.errors import BlendSQLError, ExecutionError

MAX_INPUT_CHARS = 100_000  # a query / question longer than this is refused before any work

T = TypeVar("T")


class Busy(Exception):
    """The session is still running an earlier request (its deadline passed, the thread did not)."""


@dataclass
class Outcome:
    """What one request produced: a page fragment and its HTTP status."""

    body: str
    status: int = 200


class Engine:
    """One BlendSQL session used by one request at a time, each under a deadline."""

    def __init__(self, bsql: Any, query_timeout: float, ask_timeout: float) -> None:
        if getattr(getattr(bsql, "db", None), "allow_writes", False):
            raise ExecutionError("blendsql serve is read-only",
                                 hint="open the session without allow_writes=True")
        self.bsql = bsql
        self.query_timeout = query_timeout
        self.ask_timeout = ask_timeout
        self._lock = threading.Lock()
        self._schema: list[tuple[str, list[str]]] | None = None

    async def call(self, fn: Callable[[], T], limit: float) -> T:
        """``fn()`` on a worker thread; ``TimeoutError`` (or ``Busy``) once ``limit`` seconds pass.

        ``fn`` runs under a :class:`~blendsql.cancel.CancelToken` with the same
        deadline: past it (or when the request is cancelled, e.g. its client went
        away) the query's work stops — no new model request starts, those in
        flight are abandoned — so the thread gives the session back within
        moments instead of running on for nobody. A request still waiting for the
        session when its time is up is told the session is busy, and its work is
        dropped rather than run for nobody.
        """
        started = threading.Event()
        abandoned = threading.Event()
        token = CancelToken(limit, what="the request")

        def locked() -> T:
            if not self._lock.acquire(timeout=limit):
                raise Busy()
            try:
                if abandoned.is_set():
                    raise Busy()
                started.set()
                with cancel_scope(token):
                    return fn()
            finally:
                self._lock.release()

        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(locked, abandon_on_cancel=True)
        except TimeoutError:
            abandoned.set()
            token.cancel(TIMEOUT)
            if not started.is_set():
                raise Busy() from None
            raise
        except BaseException:  # cancelled: the client went away, the server stops
            abandoned.set()
            token.cancel(CANCELLED)
            raise

    def schema(self) -> list[tuple[str, list[str]]]:
        """Tables and their columns, read once through the session's backend (any of
        SQLite, DuckDB, PostgreSQL; each read traced and time-limited like a query's).

        Hidden, as in ``blendsql schema``: the loader's metadata tables and
        FTS5's internal shadow tables (``documents_data`` ...).
        """
        if self._schema is None:
            from blendsql.db.loaders import META_COLUMNS, META_TABLES

            db = self.bsql.db
            with db.session(timeout=self.query_timeout):
                hidden = {META_COLUMNS, META_TABLES} | {
                    f"{v}{suffix}" for v in db.fts_tables()
                    for suffix in ("_data", "_idx", "_content", "_docsize", "_config")}
                self._schema = [(t, db.columns(t)) for t in db.tables() if t not in hidden]
        return self._schema


def error_html(e: BaseException) -> str:
    """An error as a person should read it: message, hint, and the trace up to the failure."""
    if isinstance(e, BlendSQLError):
        hint = f"<div class='hint'>Hint: {esc(e.hint, 2000)}</div>" if e.hint else ""
        trace = wrap(trace_html(e.trace, open_=True)) if e.trace else ""
        return (f"<div class='error' role='alert'><b>{esc(type(e).__name__)}</b>: "
                f"<span class='message'>{esc(e.message, 4000)}</span>{hint}</div>{trace}")
    if isinstance(e, Busy):
        return ("<div class='error' role='alert'><b>Busy</b>: an earlier request is still running "
                "on this session.<div class='hint'>Hint: wait for it, then submit again.</div></div>")
    if isinstance(e, TimeoutError):
        return ("<div class='error' role='alert'><b>Timed out</b>: the request took longer than "
                "its time limit.<div class='hint'>Hint: narrow the query (fewer rows reach the "
                "ingredients), or start the server with a larger --timeout.</div></div>")
    return (f"<div class='error' role='alert'><b>Internal error</b>: {esc(type(e).__name__)}: "
            f"{esc(e, 2000)}<div class='hint'>Hint: this is a bug in blendsql; please report the "
            "query.</div></div>")


def status_of(e: BaseException) -> int:
    if isinstance(e, (TimeoutError, Busy)):
        return 503 if isinstance(e, Busy) else 504
    return 400 if isinstance(e, BlendSQLError) else 500


async def guarded(engine: Engine, fn: Callable[[], str], limit: float) -> Outcome:
    """Run a renderer under the deadline; every failure becomes a readable error block."""
    try:
        return Outcome(await engine.call(fn, limit))
    except Exception as e:  # noqa: BLE001 - the page shows every failure, never a traceback
        return Outcome(error_html(e), status_of(e))


def check_length(text: str, what: str) -> None:
    """A query or question longer than :data:`MAX_INPUT_CHARS` is refused before any work."""
    if len(text) > MAX_INPUT_CHARS:
        raise ExecutionError(f"the {what} is {len(text)} characters long",
                             hint=f"the page accepts at most {MAX_INPUT_CHARS} characters")
