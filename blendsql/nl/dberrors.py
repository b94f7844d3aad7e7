"""Database errors from the plain-language layer's own reads, as blendsql errors.

The parser, the conversation and the fallback read the database to build
their prompts: the schema, sample rows, a column's common values, a value's
spelling. They read through the backend (:mod:`blendsql.nl.source`), which
already turns every driver error into an
:class:`~blendsql.errors.ExecutionError` with a hint. A read can still fail
for reasons that are not the layer's (a writer holds a lock, the caller
interrupted the connection, a table was dropped meanwhile); should a raw
driver exception ever escape, :func:`reads_database` is the safety net that
turns it into an ``ExecutionError`` too, never a raw ``sqlite3`` /
``duckdb`` / ``psycopg`` / ``pyspark`` exception.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from blendsql.errors import ExecutionError

F = TypeVar("F", bound=Callable[..., Any])

#: top-level modules of the database drivers whose exceptions are turned into ours
DRIVER_MODULES = frozenset({"sqlite3", "duckdb", "psycopg", "pyspark", "py4j"})


def read_error(e: Exception, what: str) -> ExecutionError:
    """``e``, raised while ``what``, as an :class:`ExecutionError` with a hint."""
    msg = str(e)
    if "interrupted" in msg:
        hint = ("a statement was interrupted (conn.interrupt() or a progress handler on the "
                "connection); ask again once nothing interrupts it")
    elif "locked" in msg or "busy" in msg:
        hint = "another connection holds a lock on the database; ask again when it has committed"
    elif "no such" in msg or "does not exist" in msg:
        hint = "the schema changed while the question was being answered; ask again"
    else:
        hint = "the database could not be read; check that it is readable"
    return ExecutionError(f"database error while {what}: {msg}", hint=hint)


def is_driver_error(e: BaseException) -> bool:
    """True for an exception raised by a database driver (not by blendsql)."""
    return type(e).__module__.split(".")[0].lstrip("_") in DRIVER_MODULES


def reads_database(what: str) -> Callable[[F], F]:
    """Decorate a function of the layer that reads the database: a driver
    exception escaping it becomes an :class:`ExecutionError` saying ``what`` it
    was doing (blendsql errors pass through unchanged)."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if not is_driver_error(e):
                    raise
                raise read_error(e, what) from e

        return inner  # type: ignore[return-value]

    return wrap
