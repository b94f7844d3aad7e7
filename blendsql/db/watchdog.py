"""Time limits for SQL statements, without touching the connection's handlers.

Why a watchdog thread and not a progress handler: Python cannot read back
the progress handler a user installed on a connection they hand in, so
installing ours would lose theirs. ``Connection.interrupt()`` is safe to
call from any thread and changes no connection state: SQLite stops the
statement that is running, and a call made when nothing runs is a no-op.

One daemon thread per process serves every connection. ``arm`` costs a
heap push under a lock; the thread is only woken when a new deadline is
the earliest one, so a long run of statements with the same generous limit
does not cost a context switch each.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from typing import Any


class Ticket:
    """One armed deadline; ``fired`` tells whether the watchdog interrupted it.

    ``conn``: anything with a thread-safe ``interrupt()`` (a sqlite3 or DuckDB
    connection, or the PostgreSQL backend's canceller).
    """

    __slots__ = ("deadline", "conn", "active", "fired")

    def __init__(self, deadline: float, conn: Any) -> None:
        self.deadline = deadline
        self.conn = conn
        self.active = True
        self.fired = False


class Watchdog:
    """Interrupt a connection whose statement has run past its deadline."""

    def __init__(self) -> None:
        self._seq = itertools.count()
        self._start_afresh()

    def _start_afresh(self) -> None:
        """No thread and no deadlines yet, in this process (``_pid``).

        Also on the first use in a forked child (``arm`` and ``disarm`` compare
        ``_pid``): there the parent's thread is gone and its lock may be held
        forever (the armed tickets were the parent's). Checked on use, not in an
        at-fork hook: code run between fork and exec can crash a child forked
        from a multi-threaded parent (a subprocess with ``preexec_fn``, as PySpark
        starts Java)."""
        self._pid = os.getpid()
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Ticket]] = []
        self._active = 0
        self._thread: threading.Thread | None = None

    def arm(self, conn: Any, seconds: float) -> Ticket:
        """Interrupt ``conn`` after ``seconds`` unless :meth:`disarm` comes first."""
        if self._pid != os.getpid():  # a forked child: see _start_afresh
            self._start_afresh()
        ticket = Ticket(time.monotonic() + seconds, conn)
        with self._cond:
            heapq.heappush(self._heap, (ticket.deadline, next(self._seq), ticket))
            self._active += 1
            if len(self._heap) > 64 and len(self._heap) > 4 * self._active:
                self._heap = [e for e in self._heap if e[2].active]
                heapq.heapify(self._heap)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="blendsql-watchdog",
                                                daemon=True)
                self._thread.start()
            elif self._heap[0][2] is ticket:
                self._cond.notify()
        return ticket

    def disarm(self, ticket: Ticket) -> bool:
        """Cancel a deadline; True if it had already fired."""
        if self._pid != os.getpid():  # a forked child: see _start_afresh
            self._start_afresh()
        with self._cond:
            if ticket.active:
                ticket.active = False
                self._active -= 1
            return ticket.fired

    def _loop(self) -> None:
        with self._cond:
            while True:
                while self._heap and not self._heap[0][2].active:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                first = self._heap[0][2]
                delay = first.deadline - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                first.active = False
                first.fired = True
                self._active -= 1
                try:
                    first.conn.interrupt()
                except Exception:  # noqa: BLE001 - closed meanwhile: nothing runs on it
                    pass




WATCHDOG = Watchdog()
