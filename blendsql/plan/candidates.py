"""Candidate queries: which values an ingredient call must see.

Why: the final SQL looks each call's output up by its argument value, so
the engine must compute outputs for a *superset* of the values the final
query will look up, and should compute as few as possible. The candidate
query is the call's own scope (FROM / JOIN / WHERE, with other uncomputed
ingredient predicates relaxed) projecting ``SELECT DISTINCT <argument>``;
plain predicates therefore run below the ingredient.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import (
    effective_scope,
    find_calls,
    has_aggregate,
    scope_of,
    source_names,
    visible_ctes,
)
from blendsql.plan.relax import (
    AtomTexts,
    ClauseTexts,
    relax_predicate,
    relax_scope,
    relaxed_connector,
)

VALUE_ALIAS = "__bsql_v"
DECIDED_META = "bsql_decided"  # on a candidate that leaves out rows decided_rows keeps


def _with_ctes(select: exp.Select, scope: exp.Select) -> exp.Select:
    """Attach the CTEs visible from ``scope`` so the candidate runs on its own."""
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        recursive = any(bool(c.parent and c.parent.args.get("recursive"))
                        for c in visible_ctes(scope))
        select.set("with_", exp.With(expressions=ctes, recursive=recursive))
    return select


def outer_tables(scope: exp.Select) -> frozenset[str]:
    """Table qualifiers used at the scope's own level that name no source of it.

    Why: such references are correlations to an outer query; the candidate
    query runs alone, so predicates using them are relaxed. A scope with no
    enclosing SELECT has no outer query: nothing to look for (a walk of its
    whole WHERE per candidate made n AND-ed filters cost n^2 node visits).
    """
    if scope_of(scope) is None:
        return frozenset()
    names = set(source_names(scope))
    out: set[str] = set()
    for key in ("where", "having"):
        clause = scope.args.get(key)
        if clause is None:
            continue
        for col in own_level(clause, exp.Column):
            if col.table and col.table.lower() not in names:
                out.add(col.table.lower())
    return frozenset(out)


def own_level(node: exp.Expression, kind: type[exp.Expression]) -> list[Any]:
    """Nodes of type ``kind`` under ``node`` that belong to its SELECT (no nested SELECT
    between them): one top-down walk, instead of walking up from every node found."""
    out: list[Any] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            out.append(n)
        stack.extend(c for c in n.iter_expressions() if not isinstance(c, exp.Select))
    return out


def _order_depends_on_calls(scope: exp.Select) -> bool:
    """True when ORDER BY uses an uncomputed call, directly or through a select alias."""
    order = scope.args.get("order")
    if order is None:
        return False
    if find_calls(order):
        return True
    tainted = {p.alias.lower() for p in scope.expressions if p.alias and find_calls(p)}
    return any(c.name.lower() in tainted for c in order.find_all(exp.Column) if not c.table)


def can_keep_limit(scope: exp.Select) -> bool:
    """LIMIT/OFFSET may be kept when no uncomputed call can change which rows come first.

    That needs: no call in WHERE / HAVING / JOIN ON / GROUP BY / ORDER BY, no
    DISTINCT, grouping, aggregates or windows (LIMIT would then count groups,
    not source rows).
    """
    if scope.args.get("limit") is None and scope.args.get("offset") is None:
        return False
    if scope.args.get("distinct") or scope.args.get("group") or scope.args.get("having"):
        return False
    if any(has_aggregate(p) or p.find(exp.Window) for p in scope.expressions):
        return False
    for key in ("where", "group", "having"):
        if scope.args.get(key) is not None and find_calls(scope.args[key]):
            return False
    if any(find_calls(j) for j in scope.args.get("joins") or []):
        return False
    return not _order_depends_on_calls(scope)


def _group_covers(scope: exp.Select, value: exp.Expression) -> bool:
    """True when every column of ``value`` is itself a plain GROUP BY key."""
    group = scope.args.get("group")
    if group is None or find_calls(group):
        return False
    keys = {k.sql().lower() for k in group.expressions if isinstance(k, exp.Column)}
    cols = list(value.find_all(exp.Column))
    return bool(cols) and all(c.sql().lower() in keys for c in cols)


def map_candidate(call: IngredientCall, value: exp.Expression,
                  texts: AtomTexts | None = None, clauses: ClauseTexts | None = None,
                  ) -> exp.Select:
    """``SELECT DISTINCT <value>`` over the call's scope, relaxed: the values to compute.

    ``value`` is the call's value argument (a node inside the scope).
    GROUP BY / HAVING are kept only when the value is an aggregate or a
    function of group keys; ORDER BY + LIMIT / OFFSET only when
    :func:`can_keep_limit` says no ingredient decides which rows come first.
    ``texts``: the run's cache of plain atoms' SQL (see
    :func:`~blendsql.plan.relax.relax_predicate`); with it the relaxed clauses
    stand as their text (``clauses``: see :func:`~blendsql.plan.relax.relaxed_node`).
    """
    scope = effective_scope(call, value)
    if scope is None:
        return exp.select(value.copy()).distinct(copy=False)
    relaxed, outer_join_relaxed = relax_scope(scope, outer_tables(scope) or None, texts,
                                              clauses)
    cand = exp.Select()
    for key in ("from_", "joins"):
        if relaxed.args.get(key) is not None:
            cand.set(key, relaxed.args[key])
    if relaxed.args.get("where") is not None and not outer_join_relaxed:
        cand.set("where", relaxed.args["where"])
        decided = decided_rows(scope, call, outer_tables(scope) or None, texts)
        if decided is not None:
            kept = exp.Is(this=exp.Paren(this=decided), expression=exp.true())
            where = relaxed.args["where"].this
            if texts is not None and relaxed_connector(scope.args["where"].this):
                where = exp.Paren(this=where)  # as exp.and_ wraps an AND / OR root
            cand.set("where", exp.Where(this=exp.and_(
                where, exp.not_(exp.Paren(this=kept)), copy=False)))
            cand.meta[DECIDED_META] = True
    if has_aggregate(value) or _group_covers(scope, value):
        cand.set("group", relaxed.args.get("group"))
        if not outer_join_relaxed:
            cand.set("having", relaxed.args.get("having"))
    if can_keep_limit(scope):
        projections = [null_calls(p) for p in scope.expressions]
        inner = cand
        inner.set("expressions", projections + [exp.alias_(value.copy(), VALUE_ALIAS)])
        for key in ("order", "limit", "offset"):
            if scope.args.get(key) is not None:
                inner.set(key, scope.args[key].copy())
        outer = exp.select(exp.column(VALUE_ALIAS)).distinct(copy=False).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__bsql_c"))),
            copy=False,
        )
        return _with_ctes(outer, scope)
    cand.set("expressions", [value.copy()])
    cand.set("distinct", exp.Distinct())
    return _with_ctes(cand, scope)


def decided_rows(scope: exp.Select, call: IngredientCall, outer_refs: frozenset[str] | None,
                 texts: AtomTexts | None = None) -> exp.Expression | None:
    """The rows ``scope``'s WHERE keeps whatever ``call`` returns, when there can be any.

    Why: under ``A OR {{M(x)}}`` a row where ``A`` holds is kept whatever
    ``M`` says, so ``M`` need not see its value; the same for ``{{M1(x)}} OR
    {{M2(y)}}`` once the cheaper ``M1`` is computed (its lookup is then plain
    SQL). The WHERE with every uncomputed call's atom at its *least* passing
    constant (:func:`~blendsql.plan.relax.relax_predicate` with ``least``)
    is TRUE exactly on rows kept for any outputs: AND / OR / NOT are
    monotone, so larger outputs only keep more. The candidate leaves those
    rows out; the final query's lookup there (no output computed) cannot
    change the result.

    None unless ``call`` is in ``scope``'s own WHERE (not in the SELECT list,
    GROUP BY, ORDER BY, HAVING, nor a nested SELECT: there every row's value
    is needed) and an OR or a NOT lies between the WHERE and the call's atom
    (under AND alone no row is kept whatever the call says).
    """
    where = scope.args.get("where")
    if where is None or scope_of(call) is not scope:
        return None
    node: Any = call
    path: list[exp.Expression] = []
    while node is not None and node is not where:
        path.append(node)
        node = node.parent
    if node is None:
        return None
    if not any(isinstance(n, (exp.Or, exp.Not)) for n in path):
        return None
    decided = relax_predicate(where.this, outer_refs, least=True, texts=texts)
    return None if _constant(decided) is False else decided


def _constant(node: Any) -> bool | None:
    """The truth value of a predicate made only of TRUE / FALSE, AND, OR, NOT and
    parentheses (``NOT TRUE`` is FALSE), or None when it depends on a row."""
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Paren):
        return _constant(node.this)
    if isinstance(node, exp.Not):
        inner = _constant(node.this)
        return None if inner is None else not inner
    if isinstance(node, (exp.And, exp.Or)):
        left, right = _constant(node.left), _constant(node.right)
        absorbing = isinstance(node, exp.Or)  # TRUE absorbs OR, FALSE absorbs AND
        if absorbing in (left, right):
            return absorbing
        return None if None in (left, right) else not absorbing
    return None


def null_calls(projection: exp.Expression) -> exp.Expression:
    """Projection copy with uncomputed calls as NULL (kept only for ORDER BY aliases)."""
    out = projection.copy()
    for c in find_calls(out):
        if c is out:
            return exp.null()
        c.replace(exp.null())
    return out


def conjuncts(e: Any) -> list[exp.Expression]:
    """Top-level AND-connected parts of a predicate."""
    if e is None:
        return []
    if isinstance(e, exp.Paren):
        return conjuncts(e.this)
    if isinstance(e, exp.And):
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def _only_tables(e: exp.Expression, tables: set[str]) -> bool:
    """True when ``e`` is plain (no call, no subquery) and uses only ``tables`` columns."""
    if find_calls(e) or e.find(exp.Select):
        return False
    cols = list(e.find_all(exp.Column))
    return all(c.table and c.table.lower() in tables for c in cols)


def _nullable_side(join: exp.Join | None, table: str) -> bool:
    """True when ``table`` is the NULL-extended side of the outer join holding the call.

    Why: ``LEFT JOIN ci ON J(..) WHERE ci.ID IS NULL`` keeps the rows that
    did *not* match; which right values match decides that, so WHERE
    conjuncts on the NULL-extended side must not filter that side's values.
    """
    if join is None:
        return False
    side = (join.side or "").upper()
    joined = join.this.alias_or_name.lower() == table
    return (side in ("LEFT", "FULL") and joined) or (side in ("RIGHT", "FULL") and not joined)


def join_side_candidate(call: IngredientCall, side: exp.Expression) -> exp.Select:
    """Distinct values of one side of a join call, after that side's own filters.

    Why: a join ingredient aligns two value sets; each side only needs its
    values that survive the predicates mentioning that side alone (WHERE
    conjuncts and the call's own ON conjuncts), without forming the cross
    product. Falls back to the relaxed scope when the side spans tables.
    """
    scope = scope_of(call)
    tables = {c.table.lower() for c in side.find_all(exp.Column) if c.table}
    sources = source_names(scope) if scope is not None else {}
    if scope is None or len(tables) != 1 or next(iter(tables)) not in sources:
        return map_candidate(call, side)
    table = next(iter(tables))
    src = sources[table]
    on_join = call.find_ancestor(exp.Join)
    preds = [] if _nullable_side(on_join, table) else conjuncts(
        scope.args["where"].this if scope.args.get("where") else None)
    if on_join is not None and on_join.args.get("on") is not None:
        preds += conjuncts(on_join.args["on"])
    keep = [p.copy() for p in preds if _only_tables(p, tables)]
    cand = exp.select(side.copy()).distinct(copy=False).from_(src.copy(), copy=False)
    if keep:
        cand = cand.where(exp.and_(*keep), copy=False)
    return _with_ctes(cand, scope)
