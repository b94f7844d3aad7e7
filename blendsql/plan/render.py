"""Rendering a plan's tree as SQL text: a leaf module every part of ``execute`` may use.

Why a leaf: the engine, the step runners, the planner and the rule helpers
all render trees; with ``render`` in the engine module they had to import
the engine back, a cycle.
"""

from __future__ import annotations

from sqlglot import exp

from blendsql.plan.calls import visible_ctes


def render(tree: exp.Expression, copy: bool = True) -> str:
    """Plain SQLite text of an AST without ingredient calls.

    ``copy=False`` for trees built for this one statement (candidates, the
    final query): sqlglot's generator otherwise deep-copies the tree first.
    """
    return str(tree.sql(dialect="sqlite", copy=copy))


def attach_ctes(q: exp.Select, scope: exp.Select) -> exp.Select:
    """``q`` with the CTEs visible from ``scope`` (so it runs on its own)."""
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        q.set("with_", exp.With(expressions=ctes))
    return q
