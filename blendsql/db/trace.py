"""The statement trace of one use of the database: every statement as a trace step.

Why in ``db`` and not in the engine's session: the database reports every
statement it runs (see :meth:`blendsql.db.backend.Backend.tracing`); recording
it here, into a list the caller owns, keeps the traced path inside ``db``
(no call back up into the engine for each statement). The caller only says
how the next statements are labelled (:attr:`StatementTrace.label`) and when
the cleanup runs (:attr:`StatementTrace.cleaning`).
"""

from __future__ import annotations

from typing import Any

from blendsql.db.statements import EXECUTOR_CHECK, EXECUTOR_JOB
from blendsql.smoothie import TraceStep


class StatementTrace:
    """A statement hook (``hook(sql, rows, seconds, engine, error)``) that appends one
    :class:`~blendsql.smoothie.TraceStep` per statement to ``steps``.

    - ``label``: (kind, summary) of the statements run now; None: unlabelled
      statements are the engine's temp objects (``temp_table``, summarised by
      their text), calls answered on Spark's executors (``executors``) or
      someone else's reads (``sql``, ``statement``; e.g. an ingredient's own).
    - ``cleaning``: the cleanup runs after the result is complete; its
      statements are listed in the last step's ``details["cleanup"]`` so the
      trace still ends with the final query.

    A failed statement has ``rows_out`` None and ``details["error"]``.
    """

    __slots__ = ("steps", "label", "cleaning")

    def __init__(self, steps: list[TraceStep]) -> None:
        self.steps = steps
        self.label: tuple[str, str] | None = None
        self.cleaning = False

    def __call__(self, sql: str, rows: int | None, seconds: float, engine: bool,
                 error: str | None) -> None:
        details: dict[str, Any] = {"error": error} if error else {}
        steps = self.steps
        if self.cleaning and steps:
            steps[-1].details.setdefault("cleanup", []).append(
                {"sql": sql, "rows": rows, "seconds": seconds, **details})
            return
        label = self.label
        if label is not None:
            kind, summary = label
        elif engine and sql.startswith(EXECUTOR_CHECK):  # can the executors run blendsql?
            kind = "executors_check"
            summary = ("the executors' Python cannot run blendsql's calls: they run on the "
                       "driver" if error else "the executors' Python can run blendsql's calls")
        elif engine and sql.startswith(EXECUTOR_JOB):  # calls answered on Spark's executors
            kind, summary = "executors", sql.split(" ON ", 1)[0][len(EXECUTOR_JOB):]
        else:
            kind, summary = (("temp_table", sql.split("(", 1)[0][:60]) if engine
                             else ("sql", "statement"))
        steps.append(TraceStep(kind, summary, sql=sql, rows_out=rows, seconds=seconds,
                               details=details))
