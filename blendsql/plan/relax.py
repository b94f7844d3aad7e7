"""Relaxing uncomputed ingredient predicates by polarity.

Why: to know which values a call must see, the engine runs the call's scope
with every *other* not-yet-computed ingredient predicate replaced by a
constant that can only let more rows through: TRUE where the predicate
stands in positive position, FALSE under an odd number of NOTs. With AND /
OR / NOT being monotone in SQL's three-valued logic, the relaxed filter
keeps a superset of the rows the real filter keeps.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import same_scope

_CONNECTIVES = (exp.And, exp.Or, exp.Not, exp.Paren)


def predicate_atom(node: exp.Expression, root: exp.Expression) -> exp.Expression:
    """The outermost non-connective expression on the path from ``root`` to ``node``.

    Why: an ingredient inside ``M(x) = TRUE`` or ``a + M(x) > 3`` decides the
    truth of that whole comparison, and one inside ``(M(x) AND p) = q`` or
    ``CASE WHEN M(x) AND p THEN 0 ELSE 1 END = 1`` decides the outer
    comparison, whose truth is not monotone in the inner AND; only a path of
    AND / OR / NOT / parentheses from the clause keeps polarity meaningful.
    """
    chain: list[exp.Expression] = []
    n: Any = node
    while n is not None and n is not root:
        chain.append(n)
        n = n.parent
    for candidate in reversed(chain):
        if not isinstance(candidate, _CONNECTIVES):
            return candidate
    return node


def polarity(node: exp.Expression, root: exp.Expression) -> bool:
    """True when ``node`` is under an even number of NOTs up to ``root``."""
    neg = 0
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, exp.Not):
            neg += 1
        p = p.parent
    return neg % 2 == 0


def relax_predicate(pred: exp.Expression, outer_refs: frozenset[str] | None = None,
                    copy: bool = True) -> exp.Expression:
    """Copy of boolean ``pred`` with each uncomputed call's atom made a constant.

    A call inside a subquery relaxes the predicate around that subquery. With ``outer_refs`` (table names not in this scope), atoms that
    reference such a table (a correlated predicate, which cannot run on its
    own) are relaxed the same way. ``copy=False``: ``pred`` is the caller's
    own copy, relaxed in place (it must then not be used but for the result).
    """
    out = pred.copy() if copy else pred
    wrapper = exp.Paren(this=out)
    # found once: replacing an atom only removes nodes, so every node still to
    # relax is in this list (a tree walk per replacement made n calls cost n^2)
    todo: list[exp.Expression] = list(wrapper.find_all(IngredientCall))
    if outer_refs:
        todo += [c for c in wrapper.find_all(exp.Column)
                 if c.table and c.table.lower() in outer_refs
                 and same_scope(c, wrapper)]
    for c in todo:
        if not _attached(c, wrapper):
            continue  # inside an atom relaxed already
        atom = predicate_atom(_scope_level(c, wrapper), wrapper)
        atom.replace(exp.true() if polarity(atom, wrapper) else exp.false())
    return wrapper.this


def _attached(node: exp.Expression, root: exp.Expression) -> bool:
    """True while ``node`` is still part of ``root``'s tree."""
    p: Any = node
    while p is not None:
        if p is root:
            return True
        p = p.parent
    return False


def _scope_level(node: exp.Expression, root: exp.Expression) -> exp.Expression:
    """``node`` itself, or the outermost subquery of ``root``'s scope that holds it.

    Why: a call inside a subquery (``(SELECT COUNT(*) ... WHERE {{M()}}) > 0``)
    decides the truth of the predicate around that subquery.
    """
    top = node
    p = node.parent
    while p is not None and p is not root:
        if isinstance(p, (exp.Subquery, exp.Select)):
            top = p
        p = p.parent
    return top


def relax_scope(select: exp.Select, outer_refs: frozenset[str] | None = None,
                ) -> tuple[exp.Select, bool]:
    """Relax uncomputed calls in a SELECT's WHERE, HAVING and JOIN ... ON.

    Returns a SELECT holding relaxed copies of FROM / JOIN / WHERE / GROUP BY /
    HAVING only (the projection is the caller's to set) and whether an outer join's ON was relaxed.
    Why the flag: relaxing a LEFT JOIN's ON to TRUE removes NULL-extended
    rows, which a later ``WHERE t2.x IS NULL`` could have kept, so the
    caller must then also drop WHERE to stay a superset.
    """
    out = exp.Select()
    for key in ("from_", "joins", "where", "group", "having"):
        part = select.args.get(key)
        if part is not None:
            out.set(key, [j.copy() for j in part] if isinstance(part, list) else part.copy())
    outer_relaxed = False
    for key in ("where", "having"):
        clause = out.args.get(key)
        if clause is not None and (_has_local_call(clause.this) or outer_refs):
            clause.set("this", relax_predicate(clause.this, outer_refs, copy=False))
    for j in out.args.get("joins") or []:
        on = j.args.get("on")
        if on is not None and _has_local_call(on):
            j.set("on", relax_predicate(on, outer_refs, copy=False))
            if (j.side or "").upper() in ("LEFT", "RIGHT", "FULL"):
                outer_relaxed = True
    return out, outer_relaxed


def _has_local_call(e: exp.Expression) -> bool:
    return e.find(IngredientCall) is not None
