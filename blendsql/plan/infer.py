"""Inferring an output constraint from where a call stands in the query.

Why: the query already says what type an ingredient must return
(``= TRUE`` needs a boolean, ``> 3`` a number, ``city = {{QA()}}`` one of the
cities); telling the model lets constrained decoding make the output
usable, and the query stays short. Explicit ``options=`` /
``return_type=`` / ``example_outputs=`` always win (the executor applies them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import group_by_key, twins

_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_BOOLEAN_PARENTS = (exp.And, exp.Or, exp.Not, exp.Where, exp.Having, exp.If)


@dataclass
class Hint:
    """What the context says about a call's output.

    ``kind``: ``bool`` / ``int`` / ``float`` / ``number`` (any numeric type, e.g.
    ORDER BY: a Float unless another use is more precise) / ``choice_column`` / ``choice`` /
    ``list`` / ``example`` / ``None``. ``column`` is the compared column for
    ``choice_column``; ``values`` the literal options or examples.
    """

    kind: str | None = None
    column: exp.Column | None = None
    values: list[Any] = field(default_factory=list)


def _up(node: exp.Expression) -> tuple[Any, Any]:
    """Step over parentheses: (the node as its parent sees it, that parent)."""
    child: Any = node
    parent = node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    return child, parent


def literal_value(e: exp.Expression) -> Any:
    """Python value of a SQL literal (None when ``e`` is not a literal)."""
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) and not e.this.is_string:
        v = literal_value(e.this)
        return -v if v is not None else None
    if isinstance(e, exp.Literal):
        if e.is_string:
            return e.this
        text = str(e.this)
        try:
            return int(text)
        except ValueError:
            return float(text)
    return None


def infer_hint(call: IngredientCall) -> Hint:
    """Read the call's context; see the module docstring for the rules."""
    child, parent = _up(call)
    if parent is None:
        return Hint()
    if isinstance(parent, _COMPARE):
        other = parent.expression if parent.this is child else parent.this
        while isinstance(other, exp.Paren):
            other = other.this
        if isinstance(other, exp.Boolean):
            return Hint("bool")
        val = literal_value(other)
        if isinstance(val, bool):
            return Hint("bool")
        if isinstance(val, int):
            return Hint("int")
        if isinstance(val, float):
            return Hint("float")
        if isinstance(val, str):
            return Hint("example", values=[val])
        if isinstance(other, exp.Column):
            return Hint("choice_column", column=other)
        return Hint()
    if isinstance(parent, exp.Between):
        return Hint("float")
    if isinstance(parent, exp.In):
        if parent.this is child:
            vals = [literal_value(v) for v in parent.expressions]
            if vals and all(v is not None for v in vals):
                return Hint("choice", values=vals)
            return Hint()
        if isinstance(parent.this, exp.Column):
            return Hint("list", column=parent.this)
        return Hint("list")
    if isinstance(parent, exp.Ordered) or isinstance(parent, exp.Order):
        return Hint("number")  # any number sorts: a Float alone, no wider than another use
    if isinstance(parent, _BOOLEAN_PARENTS) or (
        isinstance(parent, exp.Join) and parent.args.get("on") is child
    ):
        return Hint("bool")
    return Hint()


_NUMERIC_RANK = {"bool": 0, "int": 1, "float": 2}


def combine_hints(hints: list[Hint]) -> tuple[Hint, bool]:
    """One hint for several uses of the same call; ``(hint, disagreed)``.

    Why: identical calls share one evaluation, so they need one output type
    that serves every use. Precedence:

    - uses that say nothing (a projection, an argument) add nothing, so
      ``WHERE {{M(x)}} > 3`` plus ``SELECT {{M(x)}}`` is ``int``;
    - a sort key (``number``) takes whatever numeric type another use needs;
    - numeric uses widen: ``bool`` < ``int`` < ``float`` (SQLite compares
      TRUE as 1, so a number serves a boolean test too);
    - ``list`` (an ``IN`` right side) wins over a scalar use of the same
      call (one answer is a list of one);
    - equal kinds merge their values (choices and examples are united; the
      first compared column is kept);
    - anything else (text vs number) disagrees: no constraint (free text),
      and ``disagreed`` is True so the engine can warn.
    """
    informative = [h for h in hints if h.kind is not None]
    if {h.kind for h in informative} & set(_NUMERIC_RANK):  # a sort key takes any number
        informative = [h for h in informative if h.kind != "number"]
    if not informative:
        return Hint(), False
    kinds = {h.kind for h in informative}
    if len(kinds) == 1:
        kind = informative[0].kind
        values: list[Any] = []
        for h in informative:
            values.extend(v for v in h.values if v not in values)
        column = next((h.column for h in informative if h.column is not None), None)
        return Hint(kind, column=column, values=values), False
    if kinds <= set(_NUMERIC_RANK):
        return Hint(max((str(k) for k in kinds), key=_NUMERIC_RANK.__getitem__)), False
    if "list" in kinds:
        lists = [h for h in informative if h.kind == "list"]
        return lists[0], False
    return Hint(), True


#: a call's identical uses, their combined hint, whether they disagreed, the tree's groups
Uses = tuple[list[IngredientCall], Hint, bool, dict[str, list[IngredientCall]]]


def identical_uses(call: IngredientCall, key_of: Callable[[IngredientCall], str],
                   known: Mapping[int, str], groups: dict[str, list[IngredientCall]] | None,
                   ) -> Uses:
    """``call``'s identical uses in its tree (:func:`blendsql.plan.calls.twins`), the hint
    combined from all of them, whether they disagreed (:func:`combine_hints`), and the
    tree's calls grouped by key (pass them back for the next call of the same tree).

    ``known``: keys already computed, by call id (``key_of`` is asked for the others);
    ``groups``: the tree's calls grouped by key, when grouped already.
    """
    def key(c: IngredientCall) -> str:
        found = known.get(c.call_id)
        return found if found is not None else key_of(c)

    if groups is None:
        groups = group_by_key(cast(exp.Expression, call.root()), key)
    uses = twins(call, key, groups)
    hint, disagreed = combine_hints([infer_hint(c) for c in uses])
    return uses, hint, disagreed, groups


def order_limit(call: IngredientCall) -> tuple[int | None, bool] | None:
    """``(LIMIT + OFFSET or None, descending)`` when ``call`` is an ORDER BY term (or in one).

    Why: a ranking ingredient (``LLMRank``) needs to order fully only the rows a
    ``LIMIT`` keeps, and in the term's direction; the call reads both from here.
    None when the call is not under ORDER BY; the count is None without a literal
    LIMIT (then every value is ordered).
    """
    node: Any = call
    ordered: exp.Ordered | None = None
    while node is not None and not isinstance(node, exp.Select):
        if isinstance(node, exp.Ordered) and ordered is None:
            ordered = node
        if isinstance(node, exp.Order):
            break
        node = node.parent
    if ordered is None or not isinstance(node, exp.Order):
        return None
    select = node.parent
    descending = bool(ordered.args.get("desc"))
    if not isinstance(select, exp.Select):
        return None, descending
    limit = select.args.get("limit")
    offset = select.args.get("offset")
    count = literal_value(limit.expression) if isinstance(limit, exp.Limit) else None
    skip = literal_value(offset.expression) if isinstance(offset, exp.Offset) else 0
    if not isinstance(count, int) or isinstance(count, bool):
        return None, descending
    return count + (skip if isinstance(skip, int) and not isinstance(skip, bool) else 0), descending
