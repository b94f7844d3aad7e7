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
from blendsql.plan.render import render_part

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
            text = render_part(node)
            texts[id(node)] = (node, text)
            out = exp.Var(this=text)
        else:
            out = node.copy()
        parent.set(key, out)
    return wrapper.this


_JOINERS: dict[type, str] = {exp.And: " AND ", exp.Or: " OR "}


class _Irregular(Exception):
    """A connective holding more than its operands: the generator writes the text."""


def relaxed_text(pred: exp.Expression, texts: AtomTexts,
                 outer_refs: frozenset[str] | None = None) -> str:
    """SQLite text of ``relax_predicate(pred, outer_refs, texts=texts)``, built as a string.

    Why: a run's candidate queries only need the relaxed filter's text, and a
    WHERE of n ingredient filters is relaxed once per candidate (n candidates
    over n steps). Building the relaxed copy node by node and rendering it
    with sqlglot's generator costs a few microseconds per connective each
    time; this walk writes the same text (AND / OR / NOT / parentheses as
    the generator writes them, each plain atom's cached text, TRUE / FALSE
    for the relaxed ones). Connectives carrying anything else than their
    operands fall back to the generator.

    ``texts`` also keeps the text of plain connectives (no relaxed atom
    below them: nothing in them is ever replaced, as for plain atoms): a
    computed lookup's parentheses, or the first conjuncts of a chain once
    their calls are all computed, are one cached text at the next candidate.
    """
    try:
        return _relaxed(pred, True, texts, outer_refs)[0]
    except _Irregular:
        return str(relax_predicate(pred, outer_refs, texts=texts).sql(dialect="sqlite",
                                                                       copy=False))


def _relaxed(node: exp.Expression, positive: bool, texts: AtomTexts,
             outer_refs: frozenset[str] | None) -> tuple[str, bool]:
    """(relaxed text of ``node``, whether it is plain); see :func:`relaxed_text`."""
    known = texts.get(id(node))
    if known is not None and known[0] is node:
        return known[1], True
    cls = node.__class__
    if cls is IngredientCall:
        return ("TRUE" if positive else "FALSE"), False
    joiner = _JOINERS.get(cls)
    if joiner is not None:  # a chain a AND b AND c is And(And(a, b), c): down its left side
        spine: list[exp.Expression] = []
        operands: list[exp.Expression] = []
        while True:
            args = node.args
            left, right = args.get("this"), args.get("expression")
            if left is None or right is None or (len(args) > 2 and _extra(node)):
                raise _Irregular
            spine.append(node)
            operands.append(right)
            known = texts.get(id(left))
            if left.__class__ is not cls or (known is not None and known[0] is left):
                break
            node = left
        operands.append(left)
        parts: list[str] = []
        plain_prefix, prefix = -1, True  # parts[0 .. plain_prefix] are all plain
        for i in range(len(operands) - 1, -1, -1):  # in text order
            op = operands[i]
            known = texts.get(id(op))
            if known is not None and known[0] is op:
                parts.append(known[1])
                plain = True
            elif op.__class__ is IngredientCall:
                parts.append("TRUE" if positive else "FALSE")
                plain = False
            else:
                text, plain = _relaxed(op, positive, texts, outer_refs)
                parts.append(text)
            if prefix and plain:
                plain_prefix += 1
            else:
                prefix = False
        if plain_prefix >= 1:  # the chain's node over the first plain_prefix + 1 operands
            top = spine[len(spine) - plain_prefix]
            texts[id(top)] = (top, joiner.join(parts[:plain_prefix + 1]))
        return joiner.join(parts), plain_prefix == len(operands) - 1
    if cls is exp.Not or cls is exp.Paren:
        inner = node.args.get("this")
        if inner is None or (len(node.args) > 1 and _extra(node)):
            raise _Irregular
        text, plain = _relaxed(inner, positive if cls is exp.Paren else not positive, texts,
                               outer_refs)
        text = f"({text})" if cls is exp.Paren else f"NOT {text}"
        if plain:
            texts[id(node)] = (node, text)
        return text, plain
    if isinstance(node, _CONNECTIVES):  # a subclass: as the generator writes it
        raise _Irregular
    if _relaxes(node, outer_refs):
        return ("TRUE" if positive else "FALSE"), False
    text = render_part(node)
    texts[id(node)] = (node, text)
    return text, True


def _extra(node: exp.Expression) -> bool:
    """True when a connective holds more than its operands (``this``, ``expression``)."""
    return any(v is not None for k, v in node.args.items() if k not in ("this", "expression"))


#: relaxed clauses' texts while the tree does not change: (id, outer refs) -> (clause, text)
ClauseTexts = dict[tuple[int, frozenset[str] | None], tuple[exp.Expression, str]]


def relaxed_node(pred: exp.Expression, outer_refs: frozenset[str] | None,
                 texts: AtomTexts, clauses: ClauseTexts | None = None) -> exp.Expression:
    """:func:`relaxed_text` as one node (``exp.Var``) standing for the relaxed predicate.

    Combining it with another condition (``exp.and_``) must parenthesise it
    where the relaxed copy's root would have been: see :func:`relaxed_connector`.
    ``clauses``: a cache of relaxed clauses the caller empties whenever the
    tree changes (the n filters of one WHERE, all checked for readiness at
    one step, relax it once).
    """
    if clauses is None:
        return exp.Var(this=relaxed_text(pred, texts, outer_refs))
    key = (id(pred), outer_refs)
    known = clauses.get(key)
    if known is None or known[0] is not pred:
        known = clauses[key] = (pred, relaxed_text(pred, texts, outer_refs))
    return exp.Var(this=known[1])


def relaxed_connector(pred: exp.Expression) -> bool:
    """True when the relaxed copy of ``pred`` has an AND / OR at its root (sqlglot's
    ``exp.and_`` puts such an operand in parentheses)."""
    return isinstance(pred, (exp.And, exp.Or))


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
                texts: AtomTexts | None = None, clauses: ClauseTexts | None = None,
                ) -> tuple[exp.Select, bool]:
    """Relax uncomputed calls in a SELECT's WHERE, HAVING and JOIN ... ON.

    Returns a SELECT holding relaxed copies of FROM / JOIN / WHERE / GROUP BY /
    HAVING only (the projection is the caller's to set) and whether an outer join's ON was relaxed.
    Why the flag: relaxing a LEFT JOIN's ON to TRUE removes NULL-extended
    rows, which a later ``WHERE t2.x IS NULL`` could have kept, so the
    caller must then also drop WHERE to stay a superset. With ``texts`` each
    relaxed clause is one node holding its text (:func:`relaxed_node`, with
    ``clauses``).
    """
    out = exp.Select()
    outer_relaxed = False
    for key in ("from_", "group"):
        part = select.args.get(key)
        if part is not None:
            out.set(key, part.copy())
    for key in ("where", "having"):
        clause = select.args.get(key)
        if clause is not None and texts is not None:  # the text alone: see relaxed_text
            out.set(key, clause.__class__(this=relaxed_node(clause.this, outer_refs, texts,
                                                            clauses)))
        elif clause is not None and (outer_refs or _has_local_call(clause.this)):
            out.set(key, clause.__class__(this=relax_predicate(clause.this, outer_refs)))
        elif clause is not None:
            out.set(key, clause.copy())
    joins = []
    for j in select.args.get("joins") or []:
        on = j.args.get("on")
        if on is not None and _has_local_call(on):
            joins.append(_copy_with(j, "on", relax_predicate(on, outer_refs) if texts is None
                                    else relaxed_node(on, outer_refs, texts, clauses)))
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
