"""Eager (pre-)aggregation for a map call used as a GROUP BY key.

Why: ``SELECT {{M(t.x)}} AS n, COUNT(*) FROM t GROUP BY n`` would otherwise
scan ``t`` twice (once for the call's distinct values, once in the final
query) and call a Python lookup once per row. Grouping by ``x`` first gives
a few partial rows per distinct ``x`` in one scan; the map then sees the
distinct non-NULL ``x`` of those rows, and the final query groups the small
partial table by the map's output, merging groups whose raw values map to
the same output:

1. inner: ``SELECT x AS k0, <other keys> AS k1.., <partials> AS a0.. FROM t
   WHERE .. GROUP BY x, <other keys>`` (stored as a temp table);
2. outer: the user's SELECT over that table, with the call replaced by a
   lookup of ``k0`` and each aggregate by a combiner of its partials.

Grouping by ``x`` refines grouping by ``M(x)`` (a map is a function of its
value; a NULL value maps to NULL, its own group in both plans), so every
outer group is the union of whole inner groups, and the combiners below
are exact for such unions:

- ``COUNT(*)`` / ``COUNT(e)`` -> ``SUM`` of the partial counts (an outer
  group holds at least one inner row, so the SUM is never NULL);
- ``SUM(e)`` -> ``SUM`` (NULL iff every partial is NULL, i.e. every ``e``
  is; REAL iff some input was not an integer, as SQLite's SUM);
- ``TOTAL(e)`` -> ``TOTAL``; ``MIN(e)`` / ``MAX(e)`` -> ``MIN`` / ``MAX``;
- ``AVG(e)`` -> ``TOTAL(partial TOTAL(e)) / SUM(partial COUNT(e))``: REAL, and
  NULL when there is no non-NULL ``e`` (SQLite's ``x / 0`` is NULL).

Floating-point sums are reassociated (partial sums first), so REAL
results may differ from the one-pass plan in the last bits, as with any
partial aggregation; integer results are exact.

The rule refuses (returns None) unless all of this holds, keeping today's
plan otherwise: the GROUP BY holds the call itself (directly, by the alias
of a projection that is exactly the call, or by ordinal) and every other
key holds no call; the call's value argument is a plain column of the
scope; the call is the only ingredient call in the SELECT; every aggregate
is ``COUNT(*)`` or ``COUNT/SUM/TOTAL/MIN/MAX/AVG`` of one expression without
DISTINCT, FILTER, window, subquery or alias reference; projections, HAVING
and ORDER BY use nothing else outside aggregates than group keys, alias /
ordinal references and the value column itself (a bare column of the
group: it is constant within each inner group, so any row SQLite picks is
a row of the outer group, and with one MIN / MAX the row holding it); no
COLLATE, no unknown functions (they might be aggregates), no window and
no subquery outside FROM / WHERE; only plain SELECT clauses.

Functions here never mutate their input tree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import (
    find_calls,
    map_value,
    next_call,
    scope_of,
    source_names,
    visible_ctes,
)
from blendsql.plan.context import RunContext
from blendsql.plan.lookup import replace_node
from blendsql.plan.lookup import temp_table as temp_table_node
from blendsql.plan.steps import MapDecision, Strategy, planned_in
from blendsql.smoothie import TraceStep

KEY = "__bsql_k"  # inner group key columns: __bsql_k0 (the call's value), __bsql_k1, ..
PART = "__bsql_a"  # partial aggregate columns: __bsql_a0, ..
LOOKUP = "__bsql_preagg_lookup"  # placeholder for the map lookup of __bsql_k0
_PLAIN_ARGS = frozenset({"with_", "expressions", "distinct", "from_", "joins", "where",
                         "group", "having", "order", "limit", "offset"})
_ALLOWED_AGGS = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


class _Refuse(Exception):
    """Internal: the query is outside the rule's exact cases."""


@dataclass
class PreaggPlan:
    """The two statements of a pre-aggregation plan.

    ``inner`` runs on its own (visible CTEs attached) and yields ``columns``;
    ``outer`` replaces ``scope`` once :func:`preagg_final` puts the temp
    table and the lookup in.
    """

    scope: exp.Select
    inner: exp.Select
    outer: exp.Select
    columns: list[str]


@dataclass
class _Ctx:
    """What the outer rewrite needs to know about the scope."""

    call_id: int
    value: exp.Column
    single_source: bool
    keys: list[exp.Expression]  # other (call-free) keys; key i is column __bsql_k{i+1}
    aliases: set[str]
    sources: frozenset[str]
    partials: list[exp.Expression] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)


def key_col(i: int) -> str:
    """Name of inner group key ``i`` (0 is the call's value)."""
    return f"{KEY}{i}"


def grouped_scope(call: IngredientCall) -> exp.Select | None:
    """The call's SELECT when its GROUP BY may hold the call (cheap pre-check).

    Why: the executor only looks the schema up for candidates of the rule;
    :func:`plan_preagg` decides exactly.
    """
    scope = scope_of(call)
    if scope is None or scope.args.get("group") is None:
        return None
    group = scope.args["group"]
    if any(call is c for c in group.find_all(IngredientCall)):
        return scope
    proj = call.parent
    if isinstance(proj, exp.Alias) and proj.parent is scope:
        return scope
    if proj is scope:  # an unaliased projection, maybe named by ordinal
        return scope
    return None


def other_calls(scope: exp.Select, call: IngredientCall) -> list[IngredientCall]:
    """Ingredient calls in ``scope`` (nested SELECTs included) other than ``call``."""
    return [c for c in find_calls(scope) if c.call_id != call.call_id]


def calls_only_in_where(scope: exp.Select, calls: list[IngredientCall]) -> bool:
    """True when every call lies in the scope's own WHERE clause.

    Why: those end up in the inner query, so computing them first (as plain
    filters) leaves the rule applicable and shrinks the map's values.
    """
    where = scope.args.get("where")
    if where is None:
        return False
    inside = {id(n) for n in where.walk()}
    return all(id(c) in inside for c in calls)


def plan_preagg(call: IngredientCall, value: exp.Expression, source_columns: frozenset[str],
                pending_ok: bool = False) -> PreaggPlan | None:
    """The pre-aggregation plan for ``call`` in its SELECT, or None where it is not exact.

    ``value`` is the call's value argument; ``source_columns`` the (lower-case)
    column names the scope's FROM / JOINs provide, which decide whether an
    unqualified name in GROUP BY / HAVING / projections means a source column
    (SQLite's precedence there) or a projection alias. ``pending_ok``: accept
    other calls in the WHERE clause (the executor computes them first).
    """
    scope = grouped_scope(call)
    if scope is None:
        return None
    try:
        return _plan(scope, call, value, source_columns, pending_ok)
    except _Refuse:
        return None


def _plan(scope: exp.Select, call: IngredientCall, value: exp.Expression,
          sources: frozenset[str], pending_ok: bool) -> PreaggPlan:
    """Build inner and outer queries; raises :class:`_Refuse` outside the exact cases."""
    _check_shape(scope, call, pending_ok)
    col = _value_column(scope, value, sources)
    aliases = {p.alias.lower() for p in scope.expressions if isinstance(p, exp.Alias)}
    keys = _other_keys(scope, call, sources, aliases)
    ctx = _Ctx(call.call_id, col, len(source_names(scope)) == 1, keys, aliases, sources)
    for part in [scope.args.get("where"), *(scope.args.get("joins") or [])]:
        if part is not None and _alias_refs(part, ctx):
            raise _Refuse  # WHERE / ON naming a projection alias depends on the SELECT list
    outer = exp.Select()
    outer.set("expressions", [_outer_projection(p, ctx) for p in scope.expressions])
    outer.set("group", exp.Group(expressions=[
        exp.Anonymous(this=LOOKUP, expressions=[exp.column(key_col(0))]),
        *[exp.column(key_col(i + 1)) for i in range(len(keys))]]))
    if scope.args.get("having") is not None:
        outer.set("having", exp.Having(this=_outer(scope.args["having"].this, ctx)))
    if scope.args.get("order") is not None:
        outer.set("order", exp.Order(expressions=[
            _outer_ordered(o, ctx) for o in scope.args["order"].expressions]))
    for key in ("distinct", "limit", "offset"):
        if scope.args.get(key) is not None:
            outer.set(key, scope.args[key].copy())
    inner = _inner(scope, col, keys, ctx.partials)
    columns = [key_col(i) for i in range(len(keys) + 1)]
    columns += [f"{PART}{j}" for j in range(len(ctx.partials))]
    return PreaggPlan(scope, inner, outer, columns)


def _check_shape(scope: exp.Select, call: IngredientCall, pending_ok: bool) -> None:
    """Plain SELECT clauses only; the call is the scope's only (or last pending) call."""
    for key, val in scope.args.items():
        if val not in (None, [], False) and key not in _PLAIN_ARGS:
            raise _Refuse
    group = scope.args["group"]
    if set(k for k, v in group.args.items() if v not in (None, [], False)) != {"expressions"}:
        raise _Refuse
    others = other_calls(scope, call)
    if others and not (pending_ok and calls_only_in_where(scope, others)):
        raise _Refuse
    if any(isinstance(n, IngredientCall) for n in call.walk() if n is not call):
        raise _Refuse
    for node in scope.walk():
        if isinstance(node, exp.Collate):
            raise _Refuse  # temp-table columns compare with BINARY
    for key in ("expressions", "group", "having", "order"):
        val = scope.args.get(key)
        for part in (val if isinstance(val, list) else [val]):
            if part is not None and any(
                    isinstance(n, (exp.Select, exp.Window))
                    or (isinstance(n, exp.Star) and not isinstance(n.parent, exp.Count))
                    for n in part.walk()):
                raise _Refuse


def _value_column(scope: exp.Select, value: exp.Expression,
                  sources: frozenset[str]) -> exp.Column:
    """The call's value argument, when it is a plain column of the scope's sources."""
    if not isinstance(value, exp.Column) or not isinstance(value.this, exp.Identifier):
        raise _Refuse
    names = source_names(scope)
    if value.table:
        if value.table.lower() not in names or value.args.get("db"):
            raise _Refuse  # a correlated (outer) column
    elif value.name.lower() not in sources:
        raise _Refuse
    return value


def _resolve_key(scope: exp.Select, key: exp.Expression, sources: frozenset[str],
                 aliases: set[str]) -> exp.Expression:
    """What a GROUP BY term means: an ordinal or a projection alias, else itself.

    In GROUP BY SQLite resolves a name against the sources first, then the
    projection aliases; an integer literal K is the K-th projection.
    """
    if isinstance(key, exp.Literal) and not key.is_string:
        try:
            k = int(key.this)
        except ValueError as e:
            raise _Refuse from e
        if not 1 <= k <= len(scope.expressions):
            raise _Refuse
        return _unalias(scope.expressions[k - 1])
    if (isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases
            and key.name.lower() not in sources):
        for p in scope.expressions:
            if isinstance(p, exp.Alias) and p.alias.lower() == key.name.lower():
                return p.this
    return key


def _unalias(p: exp.Expression) -> exp.Expression:
    return p.this if isinstance(p, exp.Alias) else p


def _other_keys(scope: exp.Select, call: IngredientCall, sources: frozenset[str],
                aliases: set[str]) -> list[exp.Expression]:
    """The call-free GROUP BY keys; refuses unless some key is exactly the call."""
    keys: list[exp.Expression] = []
    has_call = False
    for term in scope.args["group"].expressions:
        key = _resolve_key(scope, term, sources, aliases)
        if isinstance(key, IngredientCall) and key.call_id == call.call_id:
            has_call = True
            continue
        if any(True for _ in key.find_all(IngredientCall)):
            raise _Refuse  # the call inside a larger key expression
        if any(isinstance(n, (exp.AggFunc, exp.Window, exp.Select)) for n in key.walk()):
            raise _Refuse
        if any(k == key for k in keys):
            continue
        keys.append(key)
    if not has_call:
        raise _Refuse
    return keys


def _alias_refs(node: exp.Expression, ctx: _Ctx) -> bool:
    """True when ``node`` has an unqualified name that can only be a projection alias."""
    return any(not c.table and c.name.lower() in ctx.aliases
               and c.name.lower() not in ctx.sources for c in node.find_all(exp.Column))


def _same_column(a: exp.Column, b: exp.Column, single_source: bool) -> bool:
    """Whether two column references name the same source column."""
    if a.name.lower() != b.name.lower():
        return False
    if a.table and b.table:
        return a.table.lower() == b.table.lower()
    return single_source or (not a.table and not b.table)


def _outer_projection(p: exp.Expression, ctx: _Ctx) -> exp.Expression:
    """A projection of the outer query, named as SQLite named the original column."""
    if isinstance(p, exp.Alias):
        return exp.Alias(this=_outer(p.this, ctx), alias=p.args["alias"].copy())
    name = p.name if isinstance(p, exp.Column) else p.sql(dialect="sqlite")
    return exp.Alias(this=_outer(p, ctx), alias=exp.to_identifier(name, quoted=True))


def _outer_ordered(o: exp.Expression, ctx: _Ctx) -> exp.Expression:
    """An ORDER BY term: ordinals and alias names (which win in ORDER BY) stay."""
    out = o.copy()
    term = o.this if isinstance(o, exp.Ordered) else o
    if isinstance(term, exp.Literal) and not term.is_string:
        return out
    if isinstance(term, exp.Column) and not term.table and term.name.lower() in ctx.aliases:
        return out
    new = _outer(term, ctx, in_order=True)
    if isinstance(out, exp.Ordered):
        out.set("this", new)
        return out
    return new


def _outer(node: exp.Expression, ctx: _Ctx, in_order: bool = False) -> exp.Expression:
    """Copy of a projection / HAVING / ORDER BY expression over the partial table.

    ``in_order``: a name that is both a source column and an alias inside an
    ORDER BY expression is refused (which one SQLite picks there is subtle).
    """

    def swap(n: exp.Expression) -> exp.Expression:
        if isinstance(n, IngredientCall):
            if n.call_id != ctx.call_id:
                raise _Refuse
            return exp.Anonymous(this=LOOKUP, expressions=[exp.column(key_col(0))])
        for i, key in enumerate(ctx.keys):
            if n == key or (isinstance(n, exp.Column) and isinstance(key, exp.Column)
                            and _same_column(n, key, ctx.single_source)):
                return exp.column(key_col(i + 1))
        if isinstance(n, (exp.AggFunc, exp.Filter)) or _is_total(n):
            return _combiner(n, ctx)
        if isinstance(n, exp.Column):
            name = n.name.lower()
            if not n.table and name in ctx.aliases:
                if name not in ctx.sources:
                    return n  # an alias of the outer SELECT list, rewritten there
                if in_order:
                    raise _Refuse
            if _same_column(n, ctx.value, ctx.single_source):
                return exp.column(key_col(0))
            raise _Refuse  # a bare column that is no group key
        if isinstance(n, exp.Anonymous) and not str(n.this).lower().startswith("__bsql_"):
            raise _Refuse  # an unknown function might be an aggregate
        return n

    return node.copy().transform(swap, copy=False)


def _is_total(n: exp.Expression) -> bool:
    return isinstance(n, exp.Anonymous) and str(n.this).lower() == "total"


def _partial(agg: exp.Expression, ctx: _Ctx) -> exp.Column:
    """Column of the partial table holding ``agg`` per inner group (deduplicated)."""
    text = agg.sql(dialect="sqlite")
    j = ctx.seen.get(text)
    if j is None:
        j = ctx.seen[text] = len(ctx.partials)
        ctx.partials.append(agg)
    return exp.column(f"{PART}{j}")


def _combiner(agg: exp.Expression, ctx: _Ctx) -> exp.Expression:
    """The outer aggregate over partials that equals ``agg`` over the raw rows."""
    if not isinstance(agg, _ALLOWED_AGGS) and not _is_total(agg):
        raise _Refuse  # GROUP_CONCAT, FILTER, other aggregates: order or state matter
    args = list(agg.expressions) if _is_total(agg) else [agg.this, *agg.expressions]
    if len(args) != 1 or args[0] is None:
        raise _Refuse
    arg = args[0]
    if isinstance(agg, exp.Count) and isinstance(arg, exp.Star):
        return exp.Sum(this=_partial(exp.Count(this=exp.Star()), ctx))
    for n in arg.walk():
        if isinstance(n, (exp.AggFunc, exp.Window, exp.Select, exp.Distinct, IngredientCall,
                          exp.Star)) or _is_total(n):
            raise _Refuse
    if _alias_refs(arg, ctx):
        raise _Refuse
    if isinstance(agg, exp.Count):
        return exp.Sum(this=_partial(exp.Count(this=arg.copy()), ctx))
    if isinstance(agg, exp.Avg):
        total = _partial(_total(arg), ctx)
        count = _partial(exp.Count(this=arg.copy()), ctx)
        return exp.Paren(this=exp.Div(this=_total(total), expression=exp.Sum(this=count)))
    if _is_total(agg):
        return _total(_partial(_total(arg), ctx))
    cls = type(agg)
    return cls(this=_partial(cls(this=arg.copy()), ctx))


def _total(arg: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="TOTAL", expressions=[arg.copy()])


def _inner(scope: exp.Select, value: exp.Column, keys: list[exp.Expression],
           partials: list[exp.Expression]) -> exp.Select:
    """``SELECT value, keys.., partials.. FROM .. WHERE .. GROUP BY value, keys..``."""
    inner = exp.Select()
    cols = [exp.alias_(value.copy(), key_col(0), copy=False)]
    cols += [exp.alias_(k.copy(), key_col(i + 1), copy=False) for i, k in enumerate(keys)]
    cols += [exp.alias_(a.copy(), f"{PART}{j}", copy=False) for j, a in enumerate(partials)]
    inner.set("expressions", cols)
    for key in ("from_", "joins", "where"):
        val = scope.args.get(key)
        if val is not None:
            inner.set(key, [j.copy() for j in val] if isinstance(val, list) else val.copy())
    inner.set("group", exp.Group(expressions=[value.copy(), *[k.copy() for k in keys]]))
    ctes = visible_ctes(scope)
    if ctes:
        recursive = any(bool(c.parent and c.parent.args.get("recursive")) for c in ctes)
        inner.set("with_", exp.With(expressions=[c.copy() for c in ctes], recursive=recursive))
    return inner


def source_query(scope: exp.Select) -> exp.Select:
    """``SELECT * FROM <scope's FROM / JOINs> LIMIT 0``: the names its sources provide."""
    q = exp.Select(expressions=[exp.Star()])
    for key in ("from_", "joins"):
        val = scope.args.get(key)
        if val is not None:
            q.set(key, [j.copy() for j in val] if isinstance(val, list) else val.copy())
    q.set("limit", exp.Limit(expression=exp.Literal.number(0)))
    ctes = visible_ctes(scope)
    if ctes:
        recursive = any(bool(c.parent and c.parent.args.get("recursive")) for c in ctes)
        q.set("with_", exp.With(expressions=[c.copy() for c in ctes], recursive=recursive))
    return q


SAMPLE_ROWS = 2000  # rows of the scope sampled to spot near-unique group values


def sample_query(plan: PreaggPlan, rows: int = SAMPLE_ROWS) -> exp.Select:
    """``SELECT COUNT(*), COUNT(DISTINCT v)`` over the scope's first ``rows`` rows.

    Why: SQLite groups by sorting every row, so a partial scan grouped by a
    near-unique value costs a sort of the whole input and saves nothing
    (the partial table is as large as the input); the executor keeps
    today's plan when the sample looks like that. A prefix is cheap and
    errs towards today's plan (values clustered in scan order look unique).
    """
    inner = plan.inner
    rows_q = exp.Select(expressions=[exp.alias_(inner.expressions[0].this.copy(), "__bsql_s")])
    for key in ("from_", "joins", "where"):
        val = inner.args.get(key)
        if val is not None:
            rows_q.set(key, [j.copy() for j in val] if isinstance(val, list) else val.copy())
    rows_q.set("limit", exp.Limit(expression=exp.Literal.number(rows)))
    out = exp.select(exp.Count(this=exp.Star()),
                     exp.Count(this=exp.Distinct(expressions=[exp.column("__bsql_s")])))
    out = out.from_(exp.Subquery(this=rows_q, alias=exp.TableAlias(
        this=exp.to_identifier("__bsql_sample"))), copy=False)
    if inner.args.get("with_") is not None:
        out.set("with_", inner.args["with_"].copy())
    return out


def preagg_final(tree: exp.Expression, plan: PreaggPlan, table: str,
                 lookup: exp.Expression) -> exp.Expression:
    """Copy of ``tree`` with the scope replaced by the outer query over ``temp.<table>``.

    ``lookup`` is the map's per-value lookup of ``__bsql_k0`` (data, never SQL text).
    """
    outer = plan.outer.copy()
    outer.set("from_", exp.From(this=temp_table_node(table)))

    def put(n: exp.Expression) -> Any:
        if isinstance(n, exp.Anonymous) and n.this == LOOKUP:
            return lookup.copy()
        return n

    outer = outer.transform(put, copy=False)
    return replace_node(tree, plan.scope, outer)


# -- deciding ------------------------------------------------------------------
# The rule needs two statistics before it can decide (which names the scope's
# sources provide; whether any COLLATE could make temp-table comparisons differ
# from the source's) and a sample of the values; the run measures them
# (``run.statistics``). ``execute.preaggregate`` runs a GROUPED step: one
# partial-aggregate scan into a session temp table, the map once on the distinct
# values of its key column, the outer query. ``BlendSQL(..., preaggregate=False)``
# turns the rule off.


def preaggregate(run: RunContext, tree: exp.Expression, call: IngredientCall,
                 ) -> MapDecision | None:
    """A map that is a GROUP BY key runs on the group keys of one partial-aggregate scan.

    Why: grouping first means the map sees each key once and SQLite scans
    once; skipped when a sample of the rows is nearly all distinct (the
    partial table would be as large as the input).

    The decision, taken when the plan is made: GROUPED (with the source
    columns it was decided on), or None to compute the call as usual. When
    the rule would apply but ingredient predicates of the same WHERE are
    still uncomputed, the decision names one of them to compute ``first``
    (in the order the engine would pick among them); the walk then comes
    back to this call with those filters computed. When the sample's rows
    depend on such an earlier step it cannot be taken before running, and
    the rule decides GROUPED (exact either way; the sample only saves time).
    """
    decided = decide(run, tree, call)
    if decided is None:
        return None
    plan, others, sources = decided
    if others:
        first = _first_of(run, tree, call, others)
        return MapDecision(Strategy.PLAIN, first=first) if first is not None else None
    if planned_in(plan.inner):
        return MapDecision(Strategy.GROUPED, sources, note="the near-unique sample was not "
                           "taken: the rows depend on an earlier step")
    if near_unique(run, plan, call):
        return None
    return MapDecision(Strategy.GROUPED, sources)


def decide(run: RunContext, tree: exp.Expression, call: IngredientCall,
           ) -> tuple[PreaggPlan, list[IngredientCall], frozenset[str]] | None:
    """(plan, ingredient calls of the WHERE still to compute first, the sources' column
    names) when the rule applies to ``call``, else None. The near-unique sample
    (:func:`near_unique`) is the caller's last check."""
    scope = grouped_scope(call)
    if scope is None:
        return None
    value = map_value(call, run.registry)
    if value is None:
        return None
    others = other_calls(scope, call)
    if others and not calls_only_in_where(scope, others):
        return None
    sources = run.statistics.source_columns(source_query(scope))
    if sources is None or run.statistics.declares_collation(tree):
        return None
    plan = plan_preagg(call, value, sources, pending_ok=bool(others))
    if plan is None:
        return None
    return plan, others, sources


def near_unique(run: RunContext, plan: PreaggPlan, call: IngredientCall) -> bool:
    """True when a full sample of the scope's rows is nearly all distinct values.

    Measured on 100k rows (zero-cost map, ``GROUP BY`` the map of a unique
    text column): pre-aggregation ~2x slower than today's plan, since the
    partial scan sorts every row and the partial table is as large as the
    input; with 20k or 500 distinct values it is ~1.5-2x faster.
    """
    counts = run.statistics.distinct_sample(
        sample_query(plan), f"how distinct the values of {call.name} are (sample)")
    if counts is None:
        return True  # let the usual plan run (and report) it
    n, distinct = counts
    if n >= SAMPLE_ROWS and distinct > 0.9 * n:
        run.trace.append(TraceStep(
            "plan", f"pre-aggregation skipped: {distinct} distinct value(s) of {call.name} "
            f"in the first {n} row(s)", details={
                "rule": f"{run.state.rule_name}_skipped", "call": run.call_text(call),
                "condition": f"{distinct} distinct of {n} sampled rows > 90%"}))
        return True
    return False


def _first_of(run: RunContext, tree: exp.Expression, call: IngredientCall,
              others: list[IngredientCall]) -> IngredientCall | None:
    """The WHERE call the engine would pick next were ``call`` not ready."""
    def candidate(c: IngredientCall) -> exp.Expression | None:
        if c.call_id == call.call_id:
            return None  # not ready: wait for the filters
        return run.readiness_candidate(c)

    # cost_order's costs, without recording them for its trace (this choice is not its)
    cost = run.call_cost if run.ordering_cost() is not None else None
    nxt = next_call(tree, run.registry, candidate, cost=cost)
    if nxt is None or nxt.call_id not in {c.call_id for c in others}:
        return None
    return nxt
