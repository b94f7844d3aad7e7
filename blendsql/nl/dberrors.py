"""SQLite errors from the plain-language layer's own reads, as blendsql errors.

The parser, the conversation and the fallback read the database directly to
build their prompts: the schema, sample rows, a column's common values, a
value's spelling. A read can fail for reasons that are not the layer's: a
writer on another connection holds the lock, the caller interrupted the
connection (``conn.interrupt()``, a progress handler of theirs), a table was
dropped meanwhile. Such a failure must reach the user as an
:class:`~blendsql.errors.ExecutionError` with a hint, like every other
failure, never as a raw ``sqlite3.OperationalError``.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from blendsql.errors import ExecutionError

F = TypeVar("F", bound=Callable[..., Any])


def read_error(e: sqlite3.Error, what: str) -> ExecutionError:
    """``e``, raised while ``what``, as an :class:`ExecutionError` with a hint."""
    msg = str(e)
    if "interrupted" in msg:
        hint = ("a statement was interrupted (conn.interrupt() or a progress handler on the "
                "connection); ask again once nothing interrupts it")
    elif "locked" in msg or "busy" in msg:
        hint = "another connection holds a lock on the database; ask again when it has committed"
    elif "no such" in msg:
        hint = "the schema changed while the question was being answered; ask again"
    else:
        hint = "the database could not be read; check that the file is a readable SQLite database"
    return ExecutionError(f"SQLite error while {what}: {msg}", hint=hint)


def reads_database(what: str) -> Callable[[F], F]:
    """Decorate a function of the layer that reads the database: a
    ``sqlite3.Error`` escaping it becomes an :class:`ExecutionError` saying
    ``what`` it was doing (errors it handles itself never get here)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except sqlite3.Error as e:
                raise read_error(e, what) from e

        return inner  # type: ignore[return-value]

    return wrap
