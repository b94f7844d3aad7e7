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


#: rendered text of plain atoms, by ``id``, with the atom (so an id is never reused)
AtomTexts = dict[int, tuple[exp.Expression, str]]


def relax_predicate(pred: exp.Expression, outer_refs: frozenset[str] | None = None,
                    least: bool = False, texts: AtomTexts | None = None) -> exp.Expression:
    """Copy of boolean ``pred`` with each uncomputed call's atom made a constant.

    A call inside a subquery relaxes the predicate around that subquery. With
    ``outer_refs`` (table names not in this scope), atoms that reference such
    a table (a correlated predicate, which cannot run on its own) are relaxed
    the same way. ``least``: each such atom takes the constant that lets the
    *fewest* rows through (FALSE in positive position, TRUE under an odd
    number of NOTs): where that copy is TRUE, ``pred`` is TRUE whatever the
    calls return (see :func:`blendsql.plan.candidates.decided_rows`).

    Built top-down in one pass: the AND / OR / NOT / parentheses from the
    root are rebuilt, each atom below them (:func:`predicate_atom`) is either
    copied or, when it holds a call, replaced by its constant without being
    copied. Why not copy everything and then replace: a WHERE of n
    ingredient filters made every candidate copy n calls only to drop them
    (n AND-ed filters cost n^2 copied nodes).

    ``texts``: a run's cache of plain atoms' SQL. With it a plain atom (a
    user's predicate, a computed call's lookup) is not copied but stands in
    the copy as its text (``exp.Var``), rendered once per run: a cascade of n
    filters puts up to n lookups in every later candidate. The caller owns
    the tree and never changes a plain atom in place (a computed call's
    lookup replaces the call's atom, never a plain one).
    """
    wrapper = exp.Paren()
    stack: list[tuple[exp.Expression, exp.Expression, str, bool]] = [
        (pred, wrapper, "this", True)]
    while stack:
        node, parent, key, positive = stack.pop()
        out: exp.Expression
        if isinstance(node, _CONNECTIVES):
            out = node.__class__()
            for k, v in node.args.items():
                if isinstance(v, exp.Expression):
                    stack.append((v, out, k, positive != isinstance(node, exp.Not)))
                elif v is not None:
                    out.set(k, v)
        elif texts is not None and texts.get(id(node), (None,))[0] is node:
            out = exp.Var(this=texts[id(node)][1])
        elif _relaxes(node, outer_refs):
            out = exp.true() if positive != least else exp.false()
        elif texts is not None:
            text = str(node.sql(dialect="sqlite"))
            texts[id(node)] = (node, text)
            out = exp.Var(this=text)
        else:
            out = node.copy()
        parent.set(key, out)
    return wrapper.this


def _relaxes(atom: exp.Expression, outer_refs: frozenset[str] | None) -> bool:
    """True when ``atom`` holds an uncomputed call, or a column of ``outer_refs``
    at its own level (not inside a nested SELECT)."""
    if isinstance(atom, IngredientCall) or any(  # the common atoms first: M(x), M(x) = v
            isinstance(c, IngredientCall) for c in atom.iter_expressions()):
        return True
    if atom.find(IngredientCall) is not None:
        return True
    if not outer_refs:
        return False
    return any(c.table and c.table.lower() in outer_refs and same_scope(c, atom)
               for c in atom.find_all(exp.Column))


def relax_scope(select: exp.Select, outer_refs: frozenset[str] | None = None,
                texts: AtomTexts | None = None) -> tuple[exp.Select, bool]:
    """Relax uncomputed calls in a SELECT's WHERE, HAVING and JOIN ... ON.

    Returns a SELECT holding relaxed copies of FROM / JOIN / WHERE / GROUP BY /
    HAVING only (the projection is the caller's to set) and whether an outer join's ON was relaxed.
    Why the flag: relaxing a LEFT JOIN's ON to TRUE removes NULL-extended
    rows, which a later ``WHERE t2.x IS NULL`` could have kept, so the
    caller must then also drop WHERE to stay a superset.
    """
    out = exp.Select()
    outer_relaxed = False
    for key in ("from_", "group"):
        part = select.args.get(key)
        if part is not None:
            out.set(key, part.copy())
    for key in ("where", "having"):
        clause = select.args.get(key)
        if clause is not None and (texts is not None or outer_refs
                                   or _has_local_call(clause.this)):
            out.set(key, clause.__class__(this=relax_predicate(clause.this, outer_refs,
                                                               texts=texts)))
        elif clause is not None:
            out.set(key, clause.copy())
    joins = []
    for j in select.args.get("joins") or []:
        on = j.args.get("on")
        if on is not None and _has_local_call(on):
            joins.append(_copy_with(j, "on", relax_predicate(on, outer_refs, texts=texts)))
            if (j.side or "").upper() in ("LEFT", "RIGHT", "FULL"):
                outer_relaxed = True
        else:
            joins.append(j.copy())
    if joins:
        out.set("joins", joins)
    return out, outer_relaxed


def _copy_with(node: exp.Expression, key: str, value: exp.Expression) -> exp.Expression:
    """Copy of ``node`` whose ``key`` argument is ``value`` (the old one is not copied)."""
    out = node.__class__()
    for k, v in node.args.items():
        if k == key:
            out.set(k, value)
        elif isinstance(v, exp.Expression):
            out.set(k, v.copy())
        elif isinstance(v, list):
            out.set(k, [x.copy() if isinstance(x, exp.Expression) else x for x in v])
        elif v is not None:
            out.set(k, v)
    return out


def _has_local_call(e: exp.Expression) -> bool:
    return e.find(IngredientCall) is not None
