"""The lazy-evaluation loop (see :mod:`blendsql.plan.lazy`) and its prefiltered variant.

Why a separate module: the engine's ``compute_map`` only has to ask
:func:`lazy_pairs` first; when it returns None the ordinary "all candidate
values at once" path runs unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from blendsql.execute.values import outputs_to_sqlite
from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.lazy import LazyPlan, atom_condition, lazy_plan
from blendsql.plan.lookup import null_passes_statically, null_test, temp_table
from blendsql.smoothie import TraceStep

if TYPE_CHECKING:  # pragma: no cover - typing only
    from blendsql.execute.engine import Run

Compute = Callable[[list[Any]], list[Any]]
LAZY_OPTION = "lazy"
PREFILTER_OPTION = "prefilter"
ENGINE_KWARGS = ("prefilter",)  # per-call kwargs the engine consumes (never passed to run())


def enabled(run: Run, name: str, default: Any, kw: dict[str, Any] | None = None) -> Any:
    """A per-call kwarg wins over the session option, which wins over ``default``."""
    if kw is not None and name in kw:
        return kw[name]
    return run.options.get(name, default)


def pop_engine_kwargs(kw: dict[str, Any]) -> dict[str, Any]:
    """Remove engine-level kwargs (``prefilter=``) from a call's kwargs; return them."""
    return {k: kw.pop(k) for k in ENGINE_KWARGS if k in kw}


class _Walk:
    """State of one lazy evaluation: row values, outputs so far, which pass."""

    def __init__(self, run: Run, call: IngredientCall, atom: exp.Expression,
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


def null_passes(run: Run, atom: exp.Expression, call: IngredientCall) -> bool:
    """Whether a NULL output satisfies the atom (statically, else asked of SQLite)."""
    static = null_passes_statically(atom, call)
    if static is not None:
        return static
    _, r = run.sql(null_test(atom, call), f"does a NULL output pass for {call.name}")
    return bool(r and r[0][0])


def lazy_pairs(run: Run, call: IngredientCall, value: exp.Expression,
               atom: exp.Expression | None, question: Any, kw: dict[str, Any],
               compute: Compute) -> tuple[list[Any], list[Any]] | None:
    """(values, raw outputs) computed lazily, or None when lazy evaluation does not apply.

    ``compute(values) -> outputs`` invokes the ingredient (metered, traced);
    ``kw``: the call's engine-level kwargs (``prefilter=``).
    With ``prefilter`` on (session option or the call's kwarg), values are
    verified best-ranked first instead of in scan order.
    """
    if not enabled(run, LAZY_OPTION, True):
        return None
    plan = lazy_plan(call, value, atom)
    if plan is None or atom is None:
        return None
    t0 = time.perf_counter()
    _, rows = run.sql(plan.rows, f"rows in scan order for lazy {call.name}")
    walk = _Walk(run, call, atom, [r[-1] for r in rows], null_passes(run, atom, call))
    distinct = list(dict.fromkeys(v for v in walk.row_values if v is not None))
    from blendsql.retrieval.prefilter import method_of

    method = method_of(enabled(run, PREFILTER_OPTION, None, kw))
    if method is not None and question is not None:
        _prefiltered(run, call, plan, walk, distinct, str(question), method, compute, t0)
    else:
        _in_scan_order(run, call, plan, walk, distinct, compute, t0)
    return [p[0] for p in walk.pairs], [p[1] for p in walk.pairs]


def _in_scan_order(run: Run, call: IngredientCall, plan: LazyPlan, walk: _Walk,
                   distinct: list[Any], compute: Compute, t0: float) -> None:
    """Batches of the next new values in scan order; stop when the answer is fixed."""
    size, rounds = max(1, plan.needed), 0
    position = {v: i for i, v in enumerate(distinct)}
    while True:
        qualified, first_missing = walk.qualified_prefix()
        if qualified >= plan.needed or first_missing is None:
            break
        if rounds:
            size = next_batch_size(size, len(walk.passes), qualified, plan.needed)
        start = position[first_missing]
        batch = [v for v in distinct[start:] if v not in walk.passes][:size]
        walk.add(batch, compute(batch))
        rounds += 1
    _trace(run, call, plan, walk, len(distinct), rounds, "scan order", t0)


def next_batch_size(previous: int, computed: int, qualified: int, needed: int) -> int:
    """How many new values to compute next.

    Why adaptive: a fixed doubling overshoots by up to 2x. Once some rows
    qualified, the observed values-per-qualifying-row rate predicts how many
    more values the remaining rows need (plus 10 %, at least 1); before any
    row qualified, the batch doubles so that rare matches need few rounds.
    """
    if qualified <= 0:
        return max(1, previous * 2)
    per_row = computed / qualified
    return max(1, int(per_row * (needed - qualified) * 1.1 + 0.999))


def _prefiltered(run: Run, call: IngredientCall, plan: LazyPlan, walk: _Walk,
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


def _trace(run: Run, call: IngredientCall, plan: LazyPlan, walk: _Walk, total: int,
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
        details={"lazy": True, "computed": len(walk.pairs), "distinct": total,
                 "needed": plan.needed, "batches": rounds, "order": order,
                 "call": run.call_text(call)}))
