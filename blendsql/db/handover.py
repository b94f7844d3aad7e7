"""Borrowing a user's ``sqlite3.Connection`` and giving it back as it came.

Why this module: a connection handed to ``BlendSQL`` belongs to the user.
The engine needs its write guard (an authorizer) while a query runs, but
Python offers no getter for a connection's current authorizer, so simply
installing ours and removing it afterwards would silently drop one the
user had installed.

Decision: the guard is installed only for the duration of a session use
and the user's own authorizer is found and put back afterwards. CPython's
connection object reports its callbacks (authorizer, progress handler,
trace callback) to the garbage collector, so the callable that disappears
from ``gc.get_referents(conn)`` when ours is installed is the user's. While
a query runs, the user's authorizer is still consulted after ours allows a
statement (so their policy holds for blendsql's statements too).

Trade-off: this relies on CPython's ``tp_traverse`` of the connection
(3.11+). :func:`authorizer_visible` checks it once on a scratch
connection; where it does not hold, a user's authorizer cannot be restored
and :class:`Borrowed` warns once. The alternative considered, checking
each statement's ``EXPLAIN`` opcodes instead of an authorizer, was
rejected: SQLite runs many PRAGMAs while *preparing* them (an ``EXPLAIN
PRAGMA foreign_keys = ON`` already changes the connection), opcode names
are not a stable interface, and an authorizer sees every table a view or
trigger touches.
"""

from __future__ import annotations

import gc
import sqlite3
import warnings
from collections import Counter
from collections.abc import Callable
from functools import lru_cache
from typing import Any

Authorizer = Callable[[int, Any, Any, Any, Any], int]


@lru_cache(maxsize=1)
def authorizer_visible() -> bool:
    """True when an installed authorizer shows up in ``gc.get_referents(conn)``."""
    probe = sqlite3.connect(":memory:")
    try:
        def auth(*_: Any) -> int:
            return sqlite3.SQLITE_OK

        probe.set_authorizer(auth)
        return any(r is auth for r in gc.get_referents(probe))
    finally:
        probe.close()


def swap_authorizer(conn: sqlite3.Connection, ours: Authorizer | None,
                    ) -> tuple[bool, Authorizer | None]:
    """Install ``ours``; return (known, previous authorizer or None).

    ``known`` is False when the previous authorizer could not be identified
    (see the module docstring); then ``previous`` is None.
    """
    before = Counter(map(id, gc.get_referents(conn)))
    objects = {id(r): r for r in gc.get_referents(conn)}
    conn.set_authorizer(ours)
    if not authorizer_visible():
        return False, None
    after = Counter(map(id, gc.get_referents(conn)))
    gone = [objects[i] for i, n in (before - after).items() if n > 0]
    callables = [g for g in gone if callable(g) and not isinstance(g, type)]
    if len(callables) > 1:
        return False, None
    return True, (callables[0] if callables else None)


class Borrowed:
    """The state of a handed-in connection to restore after a session use."""

    _warned = False

    def __init__(self, conn: sqlite3.Connection, ours: Authorizer) -> None:
        self.conn = conn
        self.in_transaction = conn.in_transaction
        # how rows and text come back is the user's choice for their own reads; the
        # engine reads plain tuples and str (a bytes text_factory broke lookups)
        self.row_factory, self.text_factory = conn.row_factory, conn.text_factory
        conn.row_factory, conn.text_factory = None, str
        known, self.previous = swap_authorizer(conn, ours)
        if not known and not Borrowed._warned:
            Borrowed._warned = True
            warnings.warn("blendsql cannot tell which authorizer this connection had; "
                          "after each query the connection has none", RuntimeWarning,
                          stacklevel=4)

    def user_authorizer(self, action: int, arg1: Any, arg2: Any, dbname: Any,
                        source: Any) -> int:
        """The user's own verdict (OK when they had no authorizer).

        A failing user authorizer denies, as SQLite does for an exception
        raised in one.
        """
        if self.previous is None:
            return sqlite3.SQLITE_OK
        try:
            verdict = self.previous(action, arg1, arg2, dbname, source)
        except Exception:  # noqa: BLE001 - SQLite treats a raising authorizer as a denial
            return sqlite3.SQLITE_DENY
        return verdict if isinstance(verdict, int) else sqlite3.SQLITE_DENY

    def restore(self) -> None:
        """Put the user's authorizer and factories back (never raises: used on error
        paths too)."""
        try:
            self.conn.set_authorizer(self.previous)
        except sqlite3.Error:
            pass
        self.conn.row_factory, self.conn.text_factory = self.row_factory, self.text_factory
