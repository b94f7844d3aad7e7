"""Replacing computed calls by lookups of their outputs.

Why: the final SQL is the user's query with each call swapped for a
lookup of outputs computed beforehand, so the query keeps its exact
meaning and outputs travel as data (temp-table rows, bound parameters),
never as SQL text.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall


def temp_table(name: str) -> exp.Table:
    """``temp."<name>"`` as a table node."""
    return exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier("temp"))


def map_lookup(table: str, value: exp.Expression) -> exp.Expression:
    """``(SELECT v FROM temp.<table> WHERE k = <value>)``: the output for this row's value.

    A scalar subquery on the table's primary key: an index probe per row
    inside SQLite, no per-row Python. A missing or NULL value gives NULL.
    """
    sub = (exp.select(exp.column("v")).from_(temp_table(table), copy=False)
           .where(exp.EQ(this=exp.column("k"), expression=value.copy()), copy=False))
    return exp.Subquery(this=sub)


def join_lookup(table: str, left: exp.Expression, right: exp.Expression) -> exp.Expression:
    """``<right> = (lookup of <left> in the join's mapping)``: a join predicate."""
    return exp.EQ(this=right.copy(), expression=map_lookup(table, left))


def qa_param(name: str) -> exp.Expression:
    """A bound parameter ``:name`` holding a QA answer."""
    return exp.Placeholder(this=name)


def qa_list(table: str) -> exp.Expression:
    """``(SELECT v FROM temp.<table>)``: a list-valued answer, for ``x IN <<QA()>>``."""
    return exp.Subquery(this=exp.select(exp.column("v")).from_(temp_table(table), copy=False))


def replace_call(tree: exp.Expression, call_id: int, replacement: exp.Expression,
                 in_place: bool = False) -> exp.Expression:
    """Copy of ``tree`` with call ``call_id`` replaced by ``replacement``.

    A list-valued replacement under ``IN`` (``x IN <<QA()>>``) becomes the
    IN's subquery. ``in_place``: ``tree`` is the caller's own working copy
    and ``replacement`` a node built for this one use, so neither is copied
    (the engine copies a query's tree once, not once per computed call).
    """
    out = tree if in_place else tree.copy()
    new = replacement if in_place else replacement.copy()
    for c in out.find_all(IngredientCall):
        if c.call_id != call_id:
            continue
        target = in_target(c)
        if target is not None:  # x IN <<QA()>>: the answer is the set
            target.set("field", None)
            if isinstance(new, exp.Subquery):
                target.set("expressions", [])
                target.set("query", new)
            else:
                target.set("expressions", [new])
        elif c is out:
            return new
        else:
            c.replace(new)
        break
    return out


def in_target(call: exp.Expression) -> exp.In | None:
    """The ``IN`` whose whole right side is ``call`` (``x IN {{Q()}}`` / ``x IN ({{Q()}})``).

    Why: written without parentheses the call is the IN's ``field``, which
    SQLite cannot take as a bound parameter (``IN :p`` is invalid), and a
    list answer must become the IN's subquery, not one item of a list.
    """
    node: Any = call
    while isinstance(node.parent, exp.Paren):
        node = node.parent
    parent = node.parent
    if not isinstance(parent, exp.In) or parent.this is node:
        return None
    if parent.args.get("field") is node:
        return parent
    items = parent.expressions
    if len(items) == 1 and items[0] is node and parent.args.get("query") is None:
        return parent
    return None


_FILTER_CLAUSES = (exp.Where, exp.Having)


def filter_atom(call: IngredientCall) -> exp.Expression | None:
    """The predicate around ``call`` if it can become a set-membership test, else None.

    Why: ``WHERE {{M(x)}} = TRUE`` probing a lookup per row costs a scalar
    subquery per row; ``x IN (SELECT k FROM temp.m WHERE v = TRUE)`` lets
    SQLite build one ephemeral index and filter at plain-SQL speed. It is
    exact only where a NULL predicate acts like FALSE: a WHERE / HAVING /
    JOIN ON filter in positive polarity (even number of NOTs), and only
    when the predicate depends on nothing but the call's output.
    """
    atom: Any = call
    while atom.parent is not None and not isinstance(
        atom.parent, (exp.And, exp.Or, exp.Not, exp.Paren, *_FILTER_CLAUSES)
    ) and not (isinstance(atom.parent, exp.Join) and atom.arg_key == "on"):
        if isinstance(atom.parent, (exp.Select, exp.Subquery)):
            return None
        atom = atom.parent
    negations = 0
    p: Any = atom.parent
    while p is not None and not isinstance(p, _FILTER_CLAUSES) and not (
        isinstance(p, exp.Join)
    ):
        if isinstance(p, exp.Not):
            negations += 1
        elif not isinstance(p, (exp.And, exp.Or, exp.Paren)):
            return None
        p = p.parent
    if p is None or negations % 2:
        return None
    others = [n for n in atom.walk() if isinstance(n, (IngredientCall, exp.Select, exp.Window,
                                                       exp.AggFunc))
              and n is not call and not inside(n, call)]
    loose_cols = [c for c in atom.find_all(exp.Column) if not inside(c, call)]
    if others or loose_cols:
        return None
    return atom


def inside(node: Any, ancestor: Any) -> bool:
    """True when ``ancestor`` is a proper ancestor of ``node`` (by identity)."""
    p = node.parent
    while p is not None:
        if p is ancestor:
            return True
        p = p.parent
    return False


def filter_lookup(atom: exp.Expression, call: IngredientCall, table: str,
                  value: exp.Expression, null_passes: bool) -> exp.Expression:
    """``<value> IN (SELECT k FROM temp.<table> WHERE <atom with v for the call>)``.

    ``null_passes``: whether the atom is TRUE for a NULL output, in which
    case rows whose value is NULL (never passed to the ingredient) pass too.
    """
    cond = atom.copy()
    for c in cond.find_all(IngredientCall):
        if c.call_id == call.call_id:
            if c is cond:
                cond = exp.column("v")
            else:
                c.replace(exp.column("v"))
            break
    sub = exp.select(exp.column("k")).from_(temp_table(table), copy=False).where(cond, copy=False)
    test: Any = exp.In(this=value.copy(), query=exp.Subquery(this=sub))
    if null_passes:
        test = exp.or_(test, exp.Is(this=value.copy(), expression=exp.null()))
    return exp.Paren(this=test)


def null_passes_statically(atom: exp.Expression, call: IngredientCall) -> bool | None:
    """Whether a NULL output satisfies ``atom``, when that is clear without SQL.

    Why: the common atoms (the bare call, comparisons with a literal) are
    never TRUE for NULL; only unusual ones (``IS NULL``, ``COALESCE``) need
    :func:`null_test` run by SQLite.
    """
    core = atom
    while isinstance(core, exp.Paren):
        core = core.this
    if core is call:
        return False
    comparisons = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)
    if isinstance(core, comparisons) and call in (core.this, core.expression):
        return False
    return None


def with_call_as(atom: exp.Expression, call: IngredientCall,
                 replacement: exp.Expression) -> exp.Expression:
    """A copy of ``atom`` with ``call`` replaced by ``replacement`` (the atom may be the call)."""
    cond = atom.copy()
    for c in cond.find_all(IngredientCall):
        if c.call_id == call.call_id:
            if c is cond:
                return replacement
            c.replace(replacement)
            break
    return cond


def null_test(atom: exp.Expression, call: IngredientCall) -> exp.Expression:
    """``SELECT (<atom with NULL for the call>) IS TRUE``: does a NULL output pass?"""
    cond = with_call_as(atom, call, exp.null())
    return exp.select(exp.Is(this=exp.Paren(this=cond), expression=exp.true()))


def replace_node(tree: exp.Expression, target: exp.Expression,
                 replacement: exp.Expression, in_place: bool = False) -> exp.Expression:
    """Copy of ``tree`` with the node at ``target``'s position replaced.

    Why positions: rules must not mutate their input; the target is found
    in the copy by its path of argument keys from the root. ``in_place``
    (as for :func:`replace_call`): ``target`` itself is replaced in ``tree``.
    """
    if in_place:
        if target is tree:
            return replacement
        target.replace(replacement)
        return tree
    path: list[tuple[str, int | None]] = []
    n: Any = target
    while n.parent is not None:
        parent = n.parent
        value = parent.args.get(n.arg_key)
        idx = next(i for i, x in enumerate(value) if x is n) if isinstance(value, list) else None
        path.append((n.arg_key, idx))
        n = parent
    out = tree.copy()
    node = out
    for key, idx in reversed(path):
        child = node.args[key]
        node = child[idx] if idx is not None else child
    if node is out:
        return replacement.copy()
    node.replace(replacement.copy())
    return out
