"""Lazy evaluation under LIMIT: which rows, in which order, and how many must qualify.

Why: ``SELECT * FROM t WHERE {{M('q', t.x)}} = TRUE LIMIT 5`` only needs the
first five rows (in the order SQLite produces them) for which the predicate
holds. Computing the map for every distinct ``x`` wastes model calls; instead
the engine walks the candidate rows in their order, computes outputs for the
next batch of new values, and stops once ``LIMIT + OFFSET`` rows qualify.

The final SQL still runs in full over a lookup of the computed outputs. A
value that was never computed is simply absent from the lookup, so it fails
the (positive, set-membership) filter; every such value's rows come *after*
the first ``LIMIT + OFFSET`` qualifying rows in the scan order, so the final
rows equal the unoptimised plan's rows for the same scan order.

The first part decides whether a call qualifies and builds the ordered row
query (pure); the second runs the loop through the run (:func:`lazy_pairs`, the
rule's function at the executor's ``values`` hook).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from sqlglot import exp

from blendsql.errors import ExecutionError
from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import (
    effective_scope,
    find_calls,
    scope_of,
    visible_ctes,
)
from blendsql.plan.candidates import (
    VALUE_ALIAS,
    _order_depends_on_calls,
    null_calls,
    outer_tables,
)
from blendsql.plan.context import RunContext
from blendsql.plan.lookup import (
    filter_atom,
    inside,
    null_passes_statically,
    null_test,
    temp_table,
    with_call_as,
)
from blendsql.plan.relax import relax_scope
from blendsql.plan.steps import MapDecision, Strategy, planned_in
from blendsql.plan.values import outputs_to_sqlite
from blendsql.smoothie import TraceStep


@dataclass(frozen=True)
class LazyPlan:
    """How to evaluate one filter call lazily.

    ``rows``: the call's scope with every other uncomputed predicate relaxed,
    projecting the call's value as the *last* column, one row per source row
    in the scope's order (ORDER BY kept; no DISTINCT, no LIMIT).
    ``needed``: ``LIMIT + OFFSET``, the number of qualifying rows that fix the
    answer.
    """

    rows: exp.Select
    needed: int
    limit: int
    offset: int


def _int_literal(node: Any) -> int | None:
    """The value of a non-negative integer literal (LIMIT / OFFSET), else None."""
    if node is None:
        return None
    expr = node.args.get("expression") if isinstance(node, (exp.Limit, exp.Offset)) else node
    if isinstance(expr, exp.Literal) and not expr.is_string:
        try:
            value = int(str(expr.this))
        except ValueError:
            return None
        return value if value >= 0 else None
    return None


def limit_of(scope: exp.Select) -> tuple[int, int] | None:
    """``(limit, offset)`` of a scope when both are plain non-negative integers."""
    limit = _int_literal(scope.args.get("limit"))
    if limit is None:
        return None
    offset_node = scope.args.get("offset")
    offset = 0 if offset_node is None else _int_literal(offset_node)
    if offset is None:
        return None
    return limit, offset


def is_top_conjunct(atom: exp.Expression, scope: exp.Select) -> bool:
    """True when ``atom`` is one of the AND-connected parts of the scope's WHERE.

    Why: then a row qualifies exactly when the plain part of WHERE holds and
    the atom holds for the row's value, so qualification can be counted per
    value. Under OR a row might qualify without the atom; the walk would
    still be sound but could not stop as early, so it is not attempted.
    """
    p: Any = atom.parent
    while isinstance(p, (exp.And, exp.Paren)):
        p = p.parent
    return isinstance(p, exp.Where) and p.parent is scope


def order_free_of_calls(scope: exp.Select) -> bool:
    """The scope's row order (ORDER BY) does not depend on any uncomputed call."""
    return not _order_depends_on_calls(scope)


def lazy_plan(call: IngredientCall, value: exp.Expression,
              atom: exp.Expression | None) -> LazyPlan | None:
    """A :class:`LazyPlan` when ``call`` is the only undecided filter of a LIMIT scope.

    Requirements (each keeps the answer identical to the full plan):
    the call is a positive WHERE filter in set-membership form (``atom``)
    and a top-level conjunct; the scope has an integer LIMIT (and OFFSET);
    no DISTINCT / GROUP BY / HAVING / aggregate / window (LIMIT would count
    groups, not rows); no other uncomputed call in WHERE, JOIN ON or ORDER
    BY; the value is not correlated with an outer query.
    """
    scope = scope_of(call)
    if atom is None or scope is None or effective_scope(call, value) is not scope:
        return None
    lo = limit_of(scope)
    if lo is None or not is_top_conjunct(atom, scope) or outer_tables(scope):
        return None
    if scope.args.get("distinct") or scope.args.get("group") or scope.args.get("having"):
        return None
    if any(_aggregates(p, scope) or p.find(exp.Window) for p in scope.expressions):
        return None
    where = scope.args.get("where")
    if where is None or [c.call_id for c in find_calls(where)] != [call.call_id]:
        return None
    if any(find_calls(j) for j in scope.args.get("joins") or []):
        return None
    if not order_free_of_calls(scope):
        return None
    rows = ordered_rows(scope, value)
    if rows is None:
        return None
    return LazyPlan(rows=rows, needed=lo[0] + lo[1], limit=lo[0], offset=lo[1])


def _aggregates(projection: exp.Expression, scope: exp.Select) -> bool:
    """True when the projection aggregates over the scope's rows (itself or inside)."""
    return any(isinstance(n, exp.AggFunc) and scope_of(cast(Any, n)) is scope
               for n in projection.walk())


def ordered_rows(scope: exp.Select, value: exp.Expression) -> exp.Select | None:
    """``SELECT [projections,] <value> FROM ... WHERE <relaxed> [ORDER BY ...]``.

    The projections are kept (uncomputed calls as NULL) only when ORDER BY
    exists, since it may name their aliases. Returns None when relaxation
    had to drop WHERE (outer-join sides) or a call is left.
    """
    relaxed, outer_join_relaxed = relax_scope(scope, None)
    if outer_join_relaxed:
        return None
    q = exp.Select()
    for key in ("from_", "joins", "where"):
        if relaxed.args.get(key) is not None:
            q.set(key, relaxed.args[key])
    order = scope.args.get("order")
    projections: list[exp.Expression] = []
    if order is not None:
        projections = [null_calls(p) for p in scope.expressions]
        q.set("order", order.copy())
    q.set("expressions", projections + [exp.alias_(value.copy(), VALUE_ALIAS)])
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        recursive = any(bool(c.parent and c.parent.args.get("recursive"))
                        for c in visible_ctes(scope))
        q.set("with_", exp.With(expressions=ctes, recursive=recursive))
    if q.find(IngredientCall) is not None:
        return None
    return q


def conjunct_atom(call: IngredientCall) -> exp.Expression | None:
    """The top-level WHERE conjunct holding ``call`` when it depends on nothing else.

    Why: a negative filter (``WHERE NOT {{M(x)}}``, ``NOT ({{M(x)}} = TRUE)``)
    is no set-membership test (``blendsql.plan.lookup.filter_atom``), but it
    can still be evaluated lazily: its lookup gives NULL for a value never
    computed, and when a NULL output fails the conjunct (the caller checks),
    such rows fail just as a set-membership test would make them fail.
    """
    stops = (exp.And, exp.Where, exp.Select, exp.Subquery, exp.Or)
    node: Any = call
    while node.parent is not None and not isinstance(node.parent, stops):
        node = node.parent
    if not isinstance(node.parent, (exp.And, exp.Where)):
        return None
    scope = scope_of(call)
    if scope is None or not is_top_conjunct(node, scope):
        return None
    for n in node.walk():
        if n is call or inside(n, call):
            continue
        if isinstance(n, (IngredientCall, exp.Column, exp.Select, exp.AggFunc, exp.Window)):
            return None
    return cast(exp.Expression, node)


def atom_condition(atom: exp.Expression, call: IngredientCall) -> exp.Expression:
    """The atom with the call replaced by column ``v``: evaluated over ``(k, v)`` rows."""
    return with_call_as(atom, call, exp.column("v"))


# -- running the rule ------------------------------------------------------------
# The lazy-evaluation loop and its prefiltered variant. When :func:`lazy_pairs`
# returns None the executor's ordinary "all candidate values at once" path runs.

Compute = Callable[[list[Any]], list[Any]]
PREFILTER_OPTION = "prefilter"
ENGINE_KWARGS = ("prefilter",)  # per-call kwargs the engine consumes (never passed to run())


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


def null_passes(run: RunContext, atom: exp.Expression, call: IngredientCall) -> bool:
    """Whether a NULL output satisfies the atom (statically, else asked of SQLite)."""
    static = null_passes_statically(atom, call)
    if static is not None:
        return static
    _, r = run.sql(null_test(atom, call), f"does a NULL output pass for {call.name}")
    return bool(r and r[0][0])


def lazy_atom(call: IngredientCall) -> exp.Expression | None:
    """The condition a lazy scan tests each row's output with: the call's filter atom,
    else its top-level conjunct (``WHERE NOT {{M(x)}}``)."""
    return filter_atom(call) or conjunct_atom(call)


def lazy_strategy(run: RunContext, tree: exp.Expression, call: IngredientCall,
                  value: exp.Expression) -> MapDecision | None:
    """Under LIMIT a filter is evaluated in batches, stopping once enough rows qualify.

    Why: LIMIT 5 over 10,000 candidates needs the model for a handful of
    values, not all of them; batch sizes and the stop are decided from the
    rows seen so far and traced.

    The decision (taken when the plan is made): LAZY when :func:`lazy_plan`
    applies and, for a conjunct that is not a set-membership filter
    (``WHERE NOT {{M(x)}}``), a NULL output fails the condition (else every
    row may qualify). :func:`lazy_pairs` applies it.
    """
    atom = filter_atom(call)
    conjunct = atom is None
    if atom is None:  # e.g. WHERE NOT {{M(x)}}: lazy when a NULL output fails it
        atom = conjunct_atom(call)
    if atom is None or lazy_plan(call, value, atom) is None:
        return None
    if conjunct:
        if planned_in(atom):  # its NULL test cannot run before the plan does
            return None
        if null_passes(run, atom, call):
            run.decided(f"lazy {call.name} skipped: a NULL output "
                        "passes its condition, so every row may qualify",
                        outcome="skipped", call=run.call_text(call))
            return None
    return MapDecision(Strategy.LAZY, note="stops once LIMIT rows qualify (upper bound: "
                       "every candidate)")


def lazy_pairs(run: RunContext, call: IngredientCall, value: exp.Expression,
               question: Any, kw: dict[str, Any], compute: Compute,
               ) -> tuple[list[Any], list[Any]]:
    """Apply a LAZY decision: (values, raw outputs) gathered in batches under LIMIT.

    ``compute(values) -> outputs`` invokes the ingredient (metered, traced);
    ``kw``: the call's engine-level kwargs (``prefilter=``). With ``prefilter``
    on (session option or the call's kwarg), values are verified best-ranked
    first instead of in scan order.
    """
    atom = lazy_atom(call)
    plan = lazy_plan(call, value, atom)
    if plan is None or atom is None:
        raise ExecutionError(f"the plan's lazy scan of {call.name} no longer applies",
                             hint="the query changed between planning and running; "
                             "plan it again")
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
        details={"rule": run.rule_name, "condition": f"LIMIT {plan.limit}"
                 + (f" OFFSET {plan.offset}" if plan.offset else "")
                 + f" needs {plan.needed} row(s); stopped with {qualified} qualified",
                 "computed": len(walk.pairs), "distinct": total,
                 "needed": plan.needed, "batches": rounds, "order": order,
                 "call": run.call_text(call)}))
