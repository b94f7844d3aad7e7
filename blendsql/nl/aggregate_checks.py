"""Aggregates where SQL allows none, in programs a model wrote.

A small model asked for "the one with the most X" or "the least in total" often
writes an aggregate inside another (``ORDER BY MAX(COUNT(*))``,
``MIN(SUM(cost))``) or in ``WHERE``. Every backend refuses both, and the bare
error ("misuse of aggregate: COUNT()") does not say what shape is right, so the
retry tends to repeat it. The check reads the tree only and words the error with
the right shape for the retry prompt. An aggregate under a window
(``SUM(COUNT(*)) OVER ()``) is valid and not reported; an aggregate in a subquery
belongs to that subquery's own scope.
"""

from __future__ import annotations

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


def aggregate_misuse(tree: exp.Expression) -> str | None:
    """An aggregate nested in another or used in WHERE, worded with the right shape
    for the retry prompt; else None."""
    for agg in tree.find_all(exp.AggFunc):
        outer = _outer_aggregate(agg)
        if outer is not None:
            return (f"an aggregate cannot hold another: {outer.sql(dialect='sqlite')}; {_TOP_GROUP}; "
                    "to compare groups by an aggregate, use HAVING")
        if _in_where(agg):
            return (f"an aggregate cannot be in WHERE: {agg.sql(dialect='sqlite')}; to keep groups by "
                    f"an aggregate, GROUP BY the group and put the condition in HAVING; {_TOP_GROUP}")
    return None
