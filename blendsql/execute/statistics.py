"""The measurements the planning rules decide on, taken by the executor.

Why here: ``plan/`` holds pure decisions and never runs SQL; a rule that needs a
fact about the data (which columns a FROM provides, whether a table declares a
COLLATE, how distinct a sample of values is, whether a NULL output passes a
condition) asks the run's :class:`Statistics` (``run.statistics``, the
:class:`blendsql.plan.context.RunStatistics` protocol) and receives data.
Every measurement is one traced statement of kind ``plan``.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from blendsql.errors import ExecutionError
from blendsql.plan.render import render


class Statistics:
    """The statistics of one run (``run``: its session, which runs the statements)."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def source_columns(self, query: exp.Select) -> frozenset[str] | None:
        """Lower-case column names ``query`` (``SELECT * ... LIMIT 0``) returns (None:
        unknown)."""
        try:
            cols, _ = self.run.sql(render(query, copy=False), "columns of the sources",
                                   kind="plan")
        except (ExecutionError, AttributeError):
            return None
        return frozenset(c.lower() for c in cols)

    def declares_collation(self, tree: exp.Expression) -> bool:
        """True when a table or view ``tree`` names declares a COLLATE (or we cannot tell)."""
        tables = list(tree.find_all(exp.Table))
        if any(t.db and t.db.lower() not in ("main", "temp") for t in tables):
            return True  # an attached database: its schema is not looked up here
        names = sorted({t.name.lower() for t in tables if t.name})
        if not names:
            return False
        db = self.run.db
        if db.dialect != "sqlite":  # typed backends: the backend knows its collations
            return bool(db.declares_collation(names))
        marks = ", ".join(f":n{i}" for i in range(len(names)))
        binds = {f"n{i}": n for i, n in enumerate(names)}
        q = (f"SELECT sql FROM sqlite_master WHERE lower(name) IN ({marks}) UNION ALL "
             f"SELECT sql FROM sqlite_temp_master WHERE lower(name) IN ({marks})")
        try:
            _, rows = self.run.sql(q, "declared collations", kind="plan", params=binds)
        except (ExecutionError, AttributeError):
            return True
        return any(r[0] and "collate" in str(r[0]).lower() for r in rows)

    def distinct_sample(self, query: exp.Select, summary: str) -> tuple[int, int] | None:
        """(rows, distinct values) that ``query`` (``SELECT COUNT(*), COUNT(DISTINCT v)``)
        counts; None when it cannot run."""
        try:
            _, rows = self.run.sql(render(query, copy=False), summary, kind="plan")
        except ExecutionError:
            return None
        return int(rows[0][0]), int(rows[0][1])

    def null_passes(self, test: exp.Expression, name: str) -> bool:
        """Whether the NULL test ``test`` (``SELECT <condition with NULL>``) holds."""
        _, r = self.run.sql(test, f"does a NULL output pass for {name}")
        return bool(r and r[0][0])
