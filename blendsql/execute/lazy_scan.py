"""Running a LAZY plan step: the candidate rows in scan order, batch by batch, until
``LIMIT + OFFSET`` rows qualify (see :mod:`blendsql.plan.lazy` for why this is exact).

Why here: the decision (``plan.lazy.lazy_strategy``) is taken once, when the plan
is made; the statements, temp tables and ingredient batches of the scan are the
executor's work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.context import RunContext
from blendsql.plan.lazy import (
    PREFILTER_OPTION,
    LazyPlan,
    atom_condition,
    lazy_atom,
    lazy_plan,
    next_batch_size,
    null_passes,
)
from blendsql.plan.lookup import temp_table
from blendsql.plan.values import outputs_to_sqlite
from blendsql.smoothie import TraceStep

Compute = Callable[[list[Any]], list[Any]]


def enabled(run: RunContext, name: str, default: Any, kw: dict[str, Any] | None = None) -> Any:
    """A per-call kwarg wins over the session option, which wins over ``default``."""
    if kw is not None and name in kw:
        return kw[name]
    return run.options.get(name, default)


class _Walk:
    """State of one lazy evaluation: row values, outputs so far, which pass."""

    def __init__(self, run: RunContext, call: IngredientCall, atom: exp.Expression,
                 row_values: list[Any], null_passes: bool) -> None:
        self.run = run
        self.call = call
        self.cond = atom_condition(atom, call)
        self.row_values = row_values
        self.null_passes = null_passes
        self.passes: dict[Any, bool] = {}
        self.pairs: list[tuple[Any, Any]] = []

    def add(self, values: list[Any], outputs: list[Any]) -> None:
        """Record a batch; which values pass is decided by SQLite on the atom itself."""
        self.pairs.extend(zip(values, outputs, strict=True))
        pairs = list(zip(values, outputs_to_sqlite(outputs), strict=True))
        name = self.run.temp_table("lz", pairs, index=False)
        q = exp.select(exp.column("k")).from_(temp_table(name), copy=False).where(
            self.cond.copy(), copy=False)
        _, rows = self.run.sql(q, f"which values pass {self.call.name} (batch)")
        good = {r[0] for r in rows}
        for v in values:
            self.passes[v] = v in good

    def qualified_prefix(self) -> tuple[int, Any]:
        """(rows qualified, first uncomputed value or None) walking in scan order."""
        n = 0
        for v in self.row_values:
            if v is None:
                n += int(self.null_passes)
                continue
            if v not in self.passes:
                return n, v
            n += int(self.passes[v])
        return n, None

    def qualified_anywhere(self) -> int:
        """Rows (anywhere in scan order) whose value is computed and passes."""
        return sum(int(self.null_passes) if v is None else int(self.passes.get(v, False))
                   for v in self.row_values)


def lazy_pairs(run: RunContext, call: IngredientCall, value: exp.Expression,
               question: Any, kw: dict[str, Any], compute: Compute,
               ) -> tuple[list[Any], list[Any]] | None:
    """Apply a LAZY decision: (values, raw outputs) gathered in batches under LIMIT.

    ``compute(values) -> outputs`` invokes the ingredient (metered, traced);
    ``kw``: the call's engine-level kwargs (``prefilter=``). With ``prefilter``
    on (session option or the call's kwarg), values are verified best-ranked
    first instead of in scan order. None when the scan cannot be applied on the
    tree as the earlier steps left it (an earlier step's lookup took a shape the
    scan cannot test); the caller then computes every candidate value (the same
    rows), traced as ``lazy_not_applied``.
    """
    atom = lazy_atom(call)
    plan = lazy_plan(call, value, atom)
    if plan is None or atom is None:
        run.decided(f"lazy scan of {call.name} not applied: an earlier step's lookup "
                    "changed its condition; computed from its candidate values",
                    outcome="not_applied", call=run.call_text(call))
        return None
    t0 = time.perf_counter()
    from blendsql.retrieval.prefilter import method_of

    method = method_of(enabled(run, PREFILTER_OPTION, None, kw))
    scan = _Scan(run, call, plan)
    if method is not None and question is not None:
        scan.pull_all()  # ranking needs every candidate value
    walk = _Walk(run, call, atom, scan.row_values, null_passes(run, atom, call))
    if method is not None and question is not None:
        _prefiltered(run, call, plan, walk, scan.distinct, str(question), method, compute, t0)
    else:
        _in_scan_order(run, call, plan, walk, scan, compute, t0)
    return [p[0] for p in walk.pairs], [p[1] for p in walk.pairs]


class _Scan:
    """The lazy plan's rows, read in scan order a page at a time.

    Why pages: the source may be huge or endless (``WITH RECURSIVE c(x) AS
    (SELECT 1 UNION ALL SELECT x + 1 FROM c)``); reading every row first
    never ends, although LIMIT makes the answer finite. Each page re-runs
    the rows query with a doubled ``LIMIT`` and keeps the rows past the
    ones already read, so the total work stays within twice the rows read.
    With an ORDER BY the rows are read at once: a sort must see every row
    anyway, and a top-N sort need not order ties as the full sort does.
    """

    FIRST_PAGE = 256

    def __init__(self, run: RunContext, call: IngredientCall, plan: LazyPlan) -> None:
        self.run, self.call, self.plan = run, call, plan
        self.row_values: list[Any] = []
        self.distinct: list[Any] = []
        self.position: dict[Any, int] = {}
        self.done = False
        self.pages = 0
        self._limit = 0

    def pull(self) -> bool:
        """Read the next page; False when the source had no more rows."""
        if self.done:
            return False
        q = self.plan.rows
        if q.args.get("order") is None:
            self._limit = max(self.FIRST_PAGE, self._limit * 2)
            q = q.copy()
            q.set("limit", exp.Limit(expression=exp.Literal.number(self._limit)))
        else:
            self._limit = 0
        _, rows = self.run.sql(q, f"rows in scan order for lazy {self.call.name}"
                               + (f" (first {self._limit})" if self._limit else ""))
        self.pages += 1
        new = rows[len(self.row_values):]
        self.done = not self._limit or len(rows) < self._limit
        for r in new:
            v = r[-1]
            self.row_values.append(v)
            if v is not None and v not in self.position:
                self.position[v] = len(self.distinct)
                self.distinct.append(v)
        return bool(new)

    def pull_all(self) -> None:
        while self.pull():
            pass


def _in_scan_order(run: RunContext, call: IngredientCall, plan: LazyPlan, walk: _Walk,
                   scan: _Scan, compute: Compute, t0: float) -> None:
    """Batches of the next new values in scan order; stop when the answer is fixed.

    Rows are read page by page (:class:`_Scan`) only as far as the walk needs.
    """
    size, rounds = max(1, plan.needed), 0
    scan.pull()
    while True:
        qualified, first_missing = walk.qualified_prefix()
        if qualified >= plan.needed:
            break
        if first_missing is None:
            if scan.pull():
                continue
            break
        if rounds:
            size = next_batch_size(size, len(walk.passes), qualified, plan.needed)
        start = scan.position[first_missing]
        batch = [v for v in scan.distinct[start:] if v not in walk.passes][:size]
        while len(batch) < size and scan.pull():  # fill the batch from further pages
            batch = [v for v in scan.distinct[start:] if v not in walk.passes][:size]
        walk.add(batch, compute(batch))
        rounds += 1
    _trace(run, call, plan, walk, len(scan.distinct), rounds,
           "scan order" + ("" if scan.done else f", {len(scan.row_values)} rows read"), t0)


def _prefiltered(run: RunContext, call: IngredientCall, plan: LazyPlan, walk: _Walk,
                 distinct: list[Any], question: str, method: str, compute: Compute,
                 t0: float) -> None:
    """Verify values best-ranked first; stop when LIMIT + OFFSET rows qualify."""
    from blendsql.retrieval.prefilter import memo_for, rank_values, session_embedder

    t_rank = time.perf_counter()
    kind = str(run.options.get("prefilter_embedder", "default"))
    embedder = session_embedder(kind)
    disk = run.options.get("prefilter_cache", kind != "hashing" and method != "bm25")
    ranked = rank_values(question, distinct, method, embedder=embedder,
                         memo=memo_for(run.db, disk))
    order = [distinct[i] for i in ranked]
    rank_seconds = time.perf_counter() - t_rank
    size, rounds, done = max(1, plan.needed), 0, 0
    while done < len(order) and walk.qualified_anywhere() < plan.needed:
        batch = order[done:done + size]
        walk.add(batch, compute(batch))
        done += len(batch)
        rounds += 1
        size *= 2
    run.trace.append(TraceStep(
        "retrieval",
        f"prefilter for {call.name}: ranked {len(distinct)} value(s) by {method} similarity "
        f"to {question!r}; verified the top {done} with the model",
        seconds=rank_seconds, ingredient=call.name, rows_in=len(distinct), rows_out=done,
        details={"method": method, "ranked": len(distinct), "verified": done,
                 "embedder": embedder.identity() if method != "bm25" else None,
                 "top": [str(v)[:80] for v in order[:5]], "call": run.call_text(call)}))
    _trace(run, call, plan, walk, len(distinct), rounds, f"{method} rank order", t0)


def _trace(run: RunContext, call: IngredientCall, plan: LazyPlan, walk: _Walk, total: int,
           rounds: int, order: str, t0: float) -> None:
    """One plan step saying how much lazy evaluation saved."""
    qualified = walk.qualified_anywhere()
    run.trace.append(TraceStep(
        "plan",
        f"lazy {call.name} under LIMIT {plan.limit}"
        + (f" OFFSET {plan.offset}" if plan.offset else "")
        + f": computed {len(walk.pairs)} of {total} distinct value(s) in {rounds} batch(es) "
        f"({order}); {qualified} row(s) qualified, {plan.needed} needed",
        seconds=time.perf_counter() - t0, ingredient=call.name, rows_in=total,
        rows_out=len(walk.pairs),
        details={"rule": run.state.rule_name, "condition": f"LIMIT {plan.limit}"
                 + (f" OFFSET {plan.offset}" if plan.offset else "")
                 + f" needs {plan.needed} row(s); stopped with {qualified} qualified",
                 "computed": len(walk.pairs), "distinct": total,
                 "needed": plan.needed, "batches": rounds, "order": order,
                 "call": run.call_text(call)}))
