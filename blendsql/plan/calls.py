"""Finding ingredient calls, their scopes, and which one to compute next.

Why: the engine computes ingredient outputs before the final SQL runs, inner
scopes before outer ones, so that each call's candidate query (the rows it
must see) is plain SQL once the calls below it have become lookups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlglot import exp

from blendsql.errors import BlendSQLError
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import IngredientRegistry, MapIngredient


def find_calls(tree: exp.Expression) -> list[IngredientCall]:
    """All ingredient calls in ``tree``, in text (pre-)order.

    Why: every stage needs the list of what is left to compute.
    """
    return [n for n in tree.walk() if isinstance(n, IngredientCall)]


def number_calls(tree: exp.Expression) -> exp.Expression:
    """Give every call a unique ``call_id`` (keeping the parser's when unique).

    Why: calls are tracked by id across the copies that pure rules make.
    """
    ids = [c.call_id for c in find_calls(tree)]
    if all(i >= 0 for i in ids) and len(set(ids)) == len(ids):
        return tree
    out = tree.copy()
    seen: set[int] = set()
    nxt = max([c.call_id for c in find_calls(out)] + [-1]) + 1
    for c in find_calls(out):
        if c.call_id < 0 or c.call_id in seen:
            c.renumber(nxt)
            nxt += 1
        seen.add(c.call_id)
    return out


def call_by_id(tree: exp.Expression, call_id: int) -> IngredientCall | None:
    """The call with ``call_id`` in ``tree`` (None once it was replaced)."""
    for c in find_calls(tree):
        if c.call_id == call_id:
            return c
    return None


def scope_of(node: exp.Expression) -> exp.Select | None:
    """The nearest enclosing SELECT: the scope whose rows a call is evaluated over.

    Why: a map call sees one value per row of its own SELECT (after that
    SELECT's FROM / JOIN / WHERE), not of any outer query.
    """
    p = node.parent
    while p is not None and not isinstance(p, exp.Select):
        p = p.parent
    return p


def has_aggregate(e: exp.Expression) -> bool:
    """True when ``e`` contains an aggregate function outside nested SELECTs."""
    for n in e.walk():
        if isinstance(n, exp.AggFunc) and same_scope(n, e):
            return True
    return False


def same_scope(n: Any, root: Any) -> bool:
    """True when no SELECT lies between ``n`` and ``root`` (``n`` belongs to root's scope)."""
    if n is root:  # the expression itself is the aggregate: SELECT MAX(..) FROM t
        return True
    p = n.parent
    while p is not None and p is not root:
        if isinstance(p, exp.Select):
            return False
        p = p.parent
    return True


def visible_ctes(scope: exp.Select) -> list[exp.CTE]:
    """CTEs that ``scope`` may reference, outermost first.

    Why: a candidate query is run on its own, so it must carry the WITH
    clauses its FROM refers to. A scope inside CTE ``c`` of ``WITH a, b, c,
    d`` sees ``a`` and ``b`` (and ``c`` itself when recursive), not ``d``.
    """
    groups: list[list[exp.CTE]] = []
    own = scope.args.get("with_")
    if own is not None:
        groups.append(list(own.expressions))
    node: Any = scope
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.With) and isinstance(node, exp.CTE):
            idx = next(i for i, c in enumerate(parent.expressions) if c is node)
            upto = idx + 1 if parent.args.get("recursive") else idx
            groups.append(list(parent.expressions[:upto]))
            owner = parent.parent
            if owner is None:
                break
            node = owner  # the owner's WITH is already accounted for
            continue
        if isinstance(parent, (exp.Select, exp.SetOperation)):
            w = parent.args.get("with_")
            if w is not None and w is not node:
                groups.append(list(w.expressions))
        node = parent
    out: list[exp.CTE] = []
    for g in reversed(groups):
        out.extend(g)
    return out


def effective_scope(call: exp.Expression, value: exp.Expression) -> exp.Select | None:
    """The nearest enclosing SELECT that has every table ``value`` refers to.

    Why: in a correlated subquery ``... WHERE {{M(outer.col)}}`` the values
    come from the outer query's rows; the candidate is built there.
    """
    scope = scope_of(call)
    tables = {c.table.lower() for c in value.find_all(exp.Column) if c.table}
    s = scope
    while s is not None and tables:
        if tables <= set(source_names(s)):
            return s
        s = scope_of(s)
    return scope


def depth(node: exp.Expression) -> int:
    """Number of enclosing SELECTs (inner scopes are computed first)."""
    n, p = 0, node.parent
    while p is not None:
        if isinstance(p, exp.Select):
            n += 1
        p = p.parent
    return n


def source_names(scope: exp.Select) -> dict[str, exp.Expression]:
    """Alias (or table name) -> source node, for the scope's FROM and JOINs."""
    out: dict[str, exp.Expression] = {}
    froms = []
    f = scope.args.get("from_")
    if f is not None:
        froms.append(f.this)
    froms += [j.this for j in scope.args.get("joins") or []]
    for src in froms:
        name = src.alias_or_name
        if name:
            out[name.lower()] = src
    return out


def kind_of(call: IngredientCall, registry: IngredientRegistry) -> str:
    """The ingredient kind (map, qa, join, string, alias) of a call."""
    ing = registry.get(call.key_name)
    return ing.kind if ing is not None else "unknown"


def next_call(tree: exp.Expression, registry: IngredientRegistry,
              candidate: Callable[[IngredientCall], exp.Expression | None],
              cost: Callable[[IngredientCall], float] | None = None,
              known_ready: set[int] | None = None,
              calls: list[IngredientCall] | None = None,
              order_keys: dict[int, tuple[IngredientCall, tuple[int, int, int]]] | None = None,
              ) -> IngredientCall | None:
    """The next call to compute: one that is ready, in a good order.

    Ready = no call inside its arguments and, for maps and joins, a
    ``candidate(call)`` query without calls (all calls it could not relax
    soundly — in derived tables, CTEs — are computed already).
    Order: QA calls first (one value each; once computed they are plain
    predicates that shrink everyone else's rows), then deeper scopes first,
    then ingredients that need no model, then (with ``cost``) the cheapest
    estimated call (``blendsql.plan.order``), then text order, so that
    ingredient predicates of one scope form a cascade, cheap ones first.

    ``known_ready``: ids of calls already found ready, kept by the caller
    across steps. Readiness only grows (computing a call removes calls,
    never adds one), so a ready call is never checked again; with it, the
    whole loop builds each call's candidate once instead of once per step
    (which made n AND-ed filters cost O(n^3)). Only the first group (by the
    static order) that holds a ready call is examined. ``calls``: the calls
    in ``tree`` when the caller found them already (one walk per step, not two).
    ``order_keys``: a memo of each call's static order key (kept by the caller
    across steps; a call's depth does not change while it waits, and walking
    up from every waiting call at every step made n filters cost n^3). A call
    is keyed once no call is left in its arguments, which stays so: its
    arguments are not walked again at later steps.
    """
    all_calls = find_calls(tree) if calls is None else calls
    if len(all_calls) == 1:
        return all_calls[0]  # nothing to wait for
    keys = {} if order_keys is None else order_keys
    groups: dict[tuple[int, int, int], list[tuple[int, IngredientCall]]] = {}
    for c in all_calls:
        cid = c.call_id
        known = keys.get(cid)
        if known is None or known[0] is not c:  # keyed only once it holds no call: stays so
            if any(isinstance(n, IngredientCall) for n in c.walk() if n is not c):
                continue
            known = keys[cid] = (c, _order_key(c, registry))
        groups.setdefault(known[1], []).append((cid, c))

    def is_ready(cid: int, c: IngredientCall) -> bool:
        if known_ready is not None and cid in known_ready:
            return True
        if kind_of(c, registry) not in ("map", "join"):
            return True
        cand = candidate(c)
        ok = cand is not None and cand.find(IngredientCall) is None
        if ok and known_ready is not None:
            known_ready.add(cid)
        return ok

    for key in sorted(groups):
        ready = [(cid, c) for cid, c in groups[key] if is_ready(cid, c)]
        if not ready:
            continue
        if cost is not None and len(ready) > 1:
            return min(ready, key=lambda p: (cost(p[1]), p[0]))[1]
        return min(ready, key=lambda p: p[0])[1]
    return None


def _order_key(c: IngredientCall, registry: IngredientRegistry) -> tuple[int, int, int]:
    """QA calls first, then deeper scopes, then calls that need no model."""
    ing = registry.get(c.key_name)
    needs = bool(getattr(ing, "needs_model", False))
    return (0 if kind_of(c, registry) == "qa" else 1, -depth(c), int(needs))


def map_ingredient(call: IngredientCall, registry: IngredientRegistry) -> MapIngredient | None:
    """The map ingredient ``call`` names, or None for any other kind."""
    ing = registry.get(call.key_name)
    return ing if isinstance(ing, MapIngredient) else None


def map_value(call: IngredientCall, registry: IngredientRegistry) -> exp.Expression | None:
    """The value argument of a map call, or None (not a map, or arguments that do not
    bind: the executor reports those when it computes the call).

    Several value arguments (``MapIngredient.value_args``) give one
    :func:`tuple_value` expression, so every later stage (candidates,
    lookups, lazy scans, late maps) handles one value per row as before.
    """
    ing = map_ingredient(call, registry)
    if ing is None:
        return None
    try:
        args = call.call_args
        return one_value([args[i] for i in ing.value_args(args, call.call_kwargs)])
    except (BlendSQLError, IndexError, TypeError, KeyError):
        return None


def one_value(nodes: list[exp.Expression]) -> exp.Expression:
    """The one value expression of a call's value nodes (several: :func:`tuple_value`)."""
    return nodes[0] if len(nodes) == 1 else tuple_value(nodes)


TUPLE_META = "bsql_tuple"  # meta flag on a tuple_value expression


def tuple_value(nodes: list[exp.Expression]) -> exp.Expression:
    """``CASE WHEN a IS NOT NULL AND b IS NOT NULL THEN json_array(a, b) END``.

    Why JSON: a row's several values become one TEXT value, distinct exactly
    when the tuples are, that the engine decodes back into a tuple before
    calling the ingredient; NULL when any part is NULL (never passed, maps
    to NULL, like a NULL single value).
    """
    test = exp.and_(*[exp.Not(this=exp.Is(this=n.copy(), expression=exp.null()))
                      for n in nodes])
    arr = exp.Anonymous(this="json_array", expressions=[n.copy() for n in nodes])
    case = exp.Case(ifs=[exp.If(this=test, true=arr)])
    case.meta[TUPLE_META] = len(nodes)
    return case


def _column_source(col: exp.Column, scope: exp.Select | None) -> str:
    """Canonical name of the rows a column reference reads, for :func:`call_key`.

    A base table is named by the table (an alias of it reads the same
    values); a CTE by its name; a derived table by its alias and the
    scope it belongs to; an unqualified column of a one-source scope by
    that source. Anything unresolved keeps the scope's identity, so it is
    never confused with another scope's column.
    """
    if scope is None:
        return (col.table or "").lower()
    sources = source_names(scope)
    table = col.table.lower() if col.table else ""
    src = sources.get(table) if table else (
        next(iter(sources.values())) if len(sources) == 1 else None)
    if src is None:
        outer = scope_of(scope)
        if table and outer is not None:
            return _column_source(col, outer)
        return f"{table}@{id(scope)}"
    if isinstance(src, exp.Table):
        ctes = {c.alias_or_name.lower() for c in visible_ctes(scope)}
        name = src.name.lower()
        return f"cte:{name}" if name in ctes else f"table:{src.db.lower()}.{name}"
    return f"derived:{src.alias_or_name.lower()}@{id(scope)}"


def call_key(call: IngredientCall) -> str:
    """Identity of a call for sharing one evaluation: name, arguments, resolved columns.

    Why: ``SELECT {{M('q', t.x)}} ... WHERE {{M('q', x)}} > 3`` holds the
    same function twice; computing it twice costs two model calls and, with
    constraints inferred separately, lets the two uses disagree. Two calls
    with the same key compute the same output for the same value.
    """
    scope = scope_of(call)
    copy = call.copy()
    originals = list(call.find_all(exp.Column))
    for orig, col in zip(originals, list(copy.find_all(exp.Column)), strict=True):
        col.replace(exp.column(col.name.lower(), table=_column_source(orig, scope_of(orig)
                                                                         or scope)))
    return f"{call.key_name.lower()}|{to_blendsql(copy)}"


def twins(call: IngredientCall,
          key_of: Callable[[IngredientCall], str] = call_key,
          groups: dict[str, list[IngredientCall]] | None = None) -> list[IngredientCall]:
    """Calls in ``call``'s whole tree with the same :func:`call_key` (``call`` included).

    ``key_of``: a (memoised) key function; a call's key never changes, since
    its scope and arguments stay as they are until the call is replaced.
    ``groups``: the tree's calls grouped by key once (:func:`group_by_key`)
    and reused for every key, instead of a walk of the whole tree per key
    (n identical-free calls cost n walks); calls no longer in ``call``'s
    tree are left out.
    """
    key = key_of(call)
    root = cast(exp.Expression, call.root())
    if groups is None:
        return [c for c in find_calls(root) if c is call or key_of(c) == key]
    same = [c for c in groups.get(key, ()) if c is call or c.root() is root]
    return same if any(c is call for c in same) else [call, *same]


def group_by_key(tree: exp.Expression, key_of: Callable[[IngredientCall], str] = call_key,
                 ) -> dict[str, list[IngredientCall]]:
    """The calls of ``tree`` grouped by their key, in text order (see :func:`twins`)."""
    out: dict[str, list[IngredientCall]] = {}
    for c in find_calls(tree):
        out.setdefault(key_of(c), []).append(c)
    return out


def share_identical(run: Any, call: IngredientCall, key: str) -> str:
    """Identical calls (same ingredient, arguments, resolved columns) share one evaluation.

    Why: they must agree, and a value computed for one use is never sent to
    the model again for another; one output constraint is combined from all
    their uses.

    The shared key is :func:`call_key`'s (without this rule every call is
    evaluated on its own).
    """
    return key
