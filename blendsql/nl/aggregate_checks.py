"""Aggregates where SQL allows none, in programs a model wrote.

A small model asked for "the one with the most X" or "the least in total" often
writes an aggregate inside another (``ORDER BY MAX(COUNT(*))``,
``MIN(SUM(cost))``) or in ``WHERE``. Every backend refuses both, and the bare
error ("misuse of aggregate: COUNT()") does not say what shape is right, so the
retry tends to repeat it. The check reads the tree only and words the error with
the right shape for the retry prompt. An aggregate under a window
(``SUM(COUNT(*)) OVER ()``) is valid and not reported; an aggregate in a subquery
belongs to that subquery's own scope. A follow-up that ranks the earlier query's groups
often keeps its ``ORDER BY COUNT(*)`` and drops its ``GROUP BY`` (SQLite refuses
``SELECT name FROM t ORDER BY COUNT(*)``): reported too.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

_TOP_GROUP = ("for the group with the most (or least) of an aggregate, GROUP BY the group and "
              "ORDER BY the aggregate DESC (or ASC) LIMIT 1")


def _outer_aggregate(agg: exp.AggFunc) -> exp.AggFunc | None:
    """The aggregate of the same SELECT that holds ``agg`` (a window in between: none)."""
    node = agg.parent
    while node is not None and not isinstance(node, (exp.Select, exp.Subquery)):
        if isinstance(node, exp.Window):
            return None
        if isinstance(node, exp.AggFunc):
            return None if isinstance(node.parent, exp.Window) else node  # a window function
        node = node.parent
    return None


def _in_where(agg: exp.AggFunc) -> bool:
    """True when ``agg`` sits in the WHERE of its own SELECT."""
    node = agg.parent
    while node is not None and not isinstance(node, (exp.Select, exp.Subquery)):
        if isinstance(node, exp.Window):
            return False
        if isinstance(node, exp.Where):
            return True
        node = node.parent
    return False


def _own_aggregates(node: exp.Expr) -> list[exp.AggFunc]:
    """The aggregates of ``node`` outside its subqueries and windows."""
    return [a for a in node.find_all(exp.AggFunc)
            if a is node or not any(isinstance(n, (exp.Subquery, exp.Select, exp.Window))
                                    for n in _between(a, node))]


def _between(node: exp.Expr, top: exp.Expr) -> list[exp.Expr]:
    """The nodes strictly between ``node`` and its ancestor ``top``."""
    out: list[exp.Expr] = []
    cur = node.parent
    while cur is not None and cur is not top:
        out.append(cur)
        cur = cur.parent
    return out


def ranked_without_groups(select: exp.Select) -> str | None:
    """``ORDER BY COUNT(*)`` in a SELECT that groups nothing and selects no aggregate (a
    follow-up that dropped the earlier query's GROUP BY): worded for the retry prompt."""
    order = select.args.get("order")
    if order is None or select.args.get("group") is not None:
        return None
    if any(_own_aggregates(e) for e in select.expressions):
        return None
    ranked = _own_aggregates(order)
    if not ranked:
        return None
    return (f"ORDER BY {ranked[0].sql(dialect='sqlite')} ranks groups, but the query has no GROUP BY: "
            f"{_TOP_GROUP} (keep the GROUP BY of the earlier query when the question ranks its groups)")


def aggregate_misuse(tree: exp.Expression) -> str | None:
    """An aggregate nested in another or used in WHERE, or an ORDER BY an aggregate in a
    query that groups nothing, worded with the right shape for the retry prompt; else None."""
    for select in tree.find_all(exp.Select):
        message = ranked_without_groups(select)
        if message:
            return message
    for agg in tree.find_all(exp.AggFunc):
        outer = _outer_aggregate(agg)
        if outer is not None:
            return (f"an aggregate cannot hold another: {outer.sql(dialect='sqlite')}; {_TOP_GROUP}; "
                    "to compare groups by an aggregate, use HAVING")
        if _in_where(agg):
            return (f"an aggregate cannot be in WHERE: {agg.sql(dialect='sqlite')}; to keep groups by "
                    f"an aggregate, GROUP BY the group and put the condition in HAVING; {_TOP_GROUP}")
    return None


def group_ranking(program: str) -> str | None:
    """``program`` with each SELECT that ranks by an aggregate but groups nothing
    (:func:`ranked_without_groups`) grouped by its selected columns — "the treatment
    type that costs the least in total" ranks each selected type by its total; None
    when there is no such SELECT, the program is not plain SQLite or a selected
    expression is not a column."""
    try:
        tree = sqlglot.parse_one(program, read="sqlite")
    except sqlglot.errors.SqlglotError:  # model output that does not parse, or even tokenize
        return None
    changed = False
    for select in list(tree.find_all(exp.Select)):
        if ranked_without_groups(select) is None:
            continue
        columns = [e.this if isinstance(e, exp.Alias) else e for e in select.expressions]
        if not columns or not all(isinstance(c, exp.Column) for c in columns):
            return None
        select.set("group", exp.Group(expressions=[c.copy() for c in columns]))
        changed = True
    return tree.sql(dialect="sqlite") if changed else None
