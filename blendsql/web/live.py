"""Live progress on the page while a query or a question runs, without a script.

Why streaming HTML: the page forbids every script (see ``SECURITY_HEADERS``),
so it cannot poll. A request that is still running after ``progress_after``
seconds is answered with a streamed page instead: the page's top first, then
one small progress block per change (an elapsed-time line and, once the model
works, a bar per ingredient: ``LLMMap 12/40``), then the result. CSS shows
only the newest block, so the browser, which renders HTML as it arrives,
shows one bar moving. Work that finishes quickly keeps its plain response and
its HTTP status (400 for a bad query, 504 for a time-out); a streamed page
has already sent 200, so its errors are shown in the page the same way.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import HTMLResponse, Response, StreamingResponse

from blendsql._display import esc

#: seconds a request may run before its page is streamed with live progress
DEFAULT_PROGRESS_AFTER = 1.0
#: seconds between progress blocks when nothing else changes (the elapsed time still moves)
TICK_SECONDS = 1.0
#: marks where the result goes in a rendered page, to split it into top and bottom
RESULT_MARK = "\x00blendsql-result\x00"

# a block followed by a newer one is hidden (``:last-child`` would not do: Chromium matches it
# only once the parent element is closed, i.e. when the stream has ended)
LIVE_CSS = (".live-progress>.tick:has(+ .tick){display:none}"
            ".live-progress .tick{font-size:13px;margin:6px 0}"
            ".live-progress progress{width:220px;vertical-align:middle;margin-right:6px}")


class Progress:
    """What the engine reported so far: ``(ingredient, done, total)`` per ingredient label.

    Called from the worker thread (the engine's ``progress`` callback) and read
    from the event loop, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bars: dict[str, tuple[int, int]] = {}
        self._version = 0
        self.started = time.monotonic()

    def __call__(self, label: str, done: int, total: int) -> None:
        with self._lock:
            self._bars[str(label)] = (int(done), int(total))
            self._version += 1

    @property
    def version(self) -> int:
        with self._lock:
            return self._version

    def bars(self) -> list[tuple[str, int, int]]:
        with self._lock:
            return [(label, d, t) for label, (d, t) in self._bars.items()]

    def html(self) -> str:
        """One progress block: the elapsed time, then a bar per ingredient reported so far."""
        elapsed = time.monotonic() - self.started
        rows = "".join(
            f"<div class='bar'><progress value='{d}' max='{max(t, 1)}'></progress>"
            f"<span class='label'>{esc(label, 200)}</span> {d}/{t}</div>"
            for label, d, t in self.bars())
        waiting = "" if rows else "<div class='note'>waiting for the first result…</div>"
        return (f"<div class='tick' role='status'><b>Running</b> · "
                f"<span class='elapsed'>{elapsed:.0f} s</span>{rows}{waiting}</div>")


def reporting(bsql: Any, fn: Callable[[], str], sink: Progress) -> Callable[[], str]:
    """``fn`` with the session's ``progress`` callback also feeding ``sink`` while it runs.

    The session runs one request at a time (``Engine`` holds a lock around
    ``fn``), so swapping its callback for the call's duration is safe; the
    user's own callback, if any, is still called.
    """

    def run() -> str:
        previous = getattr(bsql, "progress", None)

        def both(label: str, done: int, total: int) -> None:
            sink(label, done, total)
            if previous is not None:
                previous(label, done, total)

        bsql.progress = both
        try:
            return fn()
        finally:
            bsql.progress = previous

    return run


def split_page(render: Callable[[str], str]) -> tuple[str, str]:
    """The page ``render(result)`` builds, cut where the result goes."""
    top, _, bottom = render(RESULT_MARK).partition(RESULT_MARK)
    return top, bottom


async def respond(work: Callable[[Progress], Any], render: Callable[[str], str],
                  progress_after: float | None,
                  plain: Callable[[Any], Response] | None = None,
                  final: Callable[[Any], str] | None = None) -> Response:
    """Run ``work(progress)`` (a coroutine returning an ``Outcome``) and answer with the page.

    Finished within ``progress_after`` seconds (or ``None``: never stream):
    ``plain(outcome)``, by default the page ``render`` builds around the
    outcome, with its status. Otherwise the page streamed: its top, progress
    blocks until the outcome arrives, ``final(outcome)`` (by default the
    outcome's body), its bottom.
    """
    progress = Progress()
    task = asyncio.ensure_future(work(progress))
    if progress_after is not None:
        await asyncio.wait({task}, timeout=progress_after)
    if progress_after is None or task.done():
        outcome = await task
        return plain(outcome) if plain else HTMLResponse(render(outcome.body), outcome.status)
    top, bottom = split_page(render)
    return StreamingResponse(_stream(task, progress, top, bottom, final or (lambda o: o.body)),
                             media_type="text/html")


async def _stream(task: asyncio.Future[Any], progress: Progress, top: str, bottom: str,
                  final: Callable[[Any], str]) -> AsyncIterator[str]:
    yield top + f"<style>{LIVE_CSS}</style><div class='live-progress'>{progress.html()}"
    seen = progress.version
    last = time.monotonic()
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.2)
            if task.done():
                break
            if progress.version != seen or time.monotonic() - last >= TICK_SECONDS:
                seen, last = progress.version, time.monotonic()
                yield progress.html()
    finally:
        if not task.done():  # the client went away (the stream was closed): stop the work
            task.cancel()
    outcome = task.result()
    # the finished work replaces the bar: hide the block, then the result as in a plain page
    yield "</div><style>.live-progress{display:none}</style>" + final(outcome) + bottom


__all__ = ["DEFAULT_PROGRESS_AFTER", "Progress", "reporting", "respond"]
