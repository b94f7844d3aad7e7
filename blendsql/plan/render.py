"""Rendering a plan's tree as SQL text: a leaf module every part of ``execute`` may use.

Why a leaf: the engine, the step runners, the planner and the rule helpers
all render trees; with ``render`` in the engine module they had to import
the engine back, a cycle.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from blendsql.plan.calls import visible_ctes

#: the SQLite dialect, looked up once (``Expression.sql(dialect=...)`` resolves the name
#: on every call); its ``generate`` makes a new generator per call, so threads may share it
SQLITE = Dialect.get_or_raise("sqlite")


def render(tree: exp.Expression, copy: bool = True) -> str:
    """Plain SQLite text of an AST without ingredient calls.

    ``copy=False`` for trees built for this one statement (candidates, the
    final query) and for parts of the run's own working tree: sqlglot's generator
    otherwise deep-copies the tree first.
    """
    return str(SQLITE.generate(tree, copy=copy))


def render_part(node: exp.Expression) -> str:
    """SQLite text of a part of a tree (an atom of a WHERE), copied first only when it
    holds a SELECT: the SQLite generator rewrites some SELECTs in place, nothing else."""
    return render(node, copy=node.find(exp.Select) is not None)


def attach_ctes(q: exp.Select, scope: exp.Select) -> exp.Select:
    """``q`` with the CTEs visible from ``scope`` (so it runs on its own)."""
    ctes = [c.copy() for c in visible_ctes(scope)]
    if ctes:
        q.set("with_", exp.With(expressions=ctes))
    return q
