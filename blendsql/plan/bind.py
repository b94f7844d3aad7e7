"""Binding a map call's arguments to their roles, once per call.

Why its own step: the question, the value argument(s), their names and the
keyword arguments are what every later part of computing the call reads;
reading them here once keeps the executor from going back to the node and
the ingredient for each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from blendsql.errors import IngredientError
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.calls import one_value
from blendsql.plan.infer import Uses, identical_uses, literal_value


@dataclass(frozen=True)
class MapArgs:
    """A map call's arguments bound to their roles (read from the call once).

    ``value``: the value argument, or one :func:`tuple_value` of several;
    ``value_names``: with several value arguments, their BlendSQL texts (the
    ingredient's ``value_names=``), else None; ``kwargs``: the keyword
    argument nodes; ``question_value``: the question's value when it is a
    literal (None: evaluate ``question``).
    """

    question: exp.Expression | None
    value: exp.Expression
    value_names: list[str] | None
    kwargs: dict[str, exp.Expression]
    question_value: Any = None


def map_args(call: IngredientCall, ing: MapIngredient) -> MapArgs:
    """Bind a map call's arguments (:meth:`MapIngredient.bind` / ``value_args``).

    Raises :class:`IngredientError` when no value argument binds.
    """
    args, kwargs = call.call_args, call.call_kwargs
    try:
        qi, _ = ing.bind(args, kwargs)
        nodes = [args[i] for i in ing.value_args(args, kwargs)]
    except (IndexError, TypeError, KeyError) as e:
        raise IngredientError(f"{call.name} needs a value argument",
                              hint=f"write {call.name}('question', table.column)") from e
    question = args[qi] if qi is not None and qi < len(args) else None
    literal = literal_value(question) if question is not None else None
    names = [to_blendsql(n) for n in nodes] if len(nodes) > 1 else None
    return MapArgs(question, one_value(nodes), names, kwargs, literal)


def bind_map(call: IngredientCall, ing: MapIngredient, key_of: Callable[[IngredientCall], str],
             known: Mapping[int, str], groups: dict[str, list[IngredientCall]] | None,
             ) -> tuple[MapArgs, Uses]:
    """:func:`map_args` and the call's identical uses (:func:`identical_uses`) at once:
    what binding a map call the first time needs from its node and its tree."""
    return map_args(call, ing), identical_uses(call, key_of, known, groups)
