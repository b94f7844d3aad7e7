"""Ingredient base classes: the extension point users subclass.

A user overrides one method, ``run``. The engine evaluates the query's
arguments (literals to Python values, column references to the distinct
values it must pass, subqueries to DataFrames) and calls ``run`` with them,
plus these keyword arguments supplied by the engine, never by globals:

- ``model``: the session's :class:`blendsql.models.Model` (metered for the
  trace), or ``None`` when the ingredient has ``needs_model = False``;
- ``db``: the read-only :class:`blendsql.db.Database`;
- ``constraint``: a :class:`blendsql.models.constraints.Constraint` inferred
  from where the call stands in the query (``= TRUE`` -> Bool, ...), or
  ``None``; explicit ``options=`` / ``return_type=`` / ``example_outputs=``
  arrive as keyword arguments too and win over the inferred constraint;
- ``warnings``: a list to append human-readable warnings to (e.g. "answer
  'maybe' could not be parsed as a boolean; NULL used"); each becomes a
  ``warning`` step in the Smoothie's trace.

Subclasses ignore what they do not use through ``**kwargs``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

#: keyword arguments the engine itself reads from a call, per ingredient kind (see
#: ``execute.engine``: ``options=`` / ``return_type=`` / ``example_outputs=`` set the
#: constraint; ``prefilter=`` ranks LIMIT candidates; ``left_on=`` / ``right_on=`` name a join)
ENGINE_QUERY_KWARGS: dict[str, frozenset[str]] = {
    "map": frozenset({"options", "return_type", "example_outputs", "prefilter"}),
    "qa": frozenset({"options", "return_type", "example_outputs"}),
    "join": frozenset({"left_on", "right_on", "options", "return_type", "example_outputs"}),
}


class Ingredient:
    """Base of every ingredient. SQL name = class name unless ``name=`` is given."""

    kind: ClassVar[str] = "base"
    needs_model: ClassVar[bool] = False
    #: keyword arguments a query may give this ingredient, beyond the ones the engine reads
    #: (:data:`ENGINE_QUERY_KWARGS`). Checked when the query is parsed, so a misspelt
    #: ``optoins=`` is a ``ParseError`` with a did-you-mean hint instead of being silently
    #: ignored. ``None`` (the default): any name, for ingredients that read ``**kwargs`` freely.
    query_kwargs: ClassVar[frozenset[str] | None] = None

    def __init__(self, name: str | None = None, **options: Any) -> None:
        self.name = name or type(self).__name__
        self.options = options

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.kind})>"


class MapIngredient(Ingredient):
    """A scalar function over one value: applied to each distinct value once.

    Query forms: ``{{Name('question', t.col)}}``, ``{{Name(t.col)}}`` and
    ``{{Name('question', 't::col', options=..., return_type=...)}}``.
    NULL inputs are never passed; they map to NULL.

    Several value columns (``{{Name('Do these agree?', r1.text, r2.text)}}``,
    every positional argument after the question): ``run`` then receives
    ``values`` as distinct *tuples* (one item per column, in argument order)
    and the keyword ``value_names`` (the columns' text, e.g. ``['r1.text',
    'r2.text']``); it returns one output per tuple. A row with a NULL in any
    of the columns is not passed and maps to NULL, as for one column. The
    tuple travels through SQL as ``json_array(...)``, so values are what JSON
    keeps (TEXT, INTEGER, REAL; a BLOB column cannot be one of several).
    With one value column nothing changes: ``values`` holds plain values.
    """

    kind = "map"

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[int | None, int]:
        """Which positional argument is (question, value). Override to reorder.

        Returns indices into ``args``; question may be ``None`` (absent).
        """
        if len(args) >= 2:
            return 0, 1
        return None, 0

    def value_args(self, args: list[Any], kwargs: dict[str, Any]) -> list[int]:
        """Indices of the value arguments (several: values become tuples, see above).

        Default: the value argument :meth:`bind` names and every positional
        argument after it. A subclass that overrides ``bind`` keeps exactly
        the one value it names unless it overrides this too.
        """
        _, vi = self.bind(args, kwargs)
        if type(self).bind is not MapIngredient.bind:
            return [vi]
        return list(range(vi, len(args))) or [vi]

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        raise NotImplementedError


class QAIngredient(Ingredient):
    """Answers one question once per query, optionally over a context table.

    ``{{Name('question', (SELECT ...), options='t::col')}}``.
    """

    kind = "qa"

    def run(
        self,
        question: str | None,
        context: pd.DataFrame | None,
        options: list[Any] | None,
        **kwargs: Any,
    ) -> Any:
        raise NotImplementedError


class JoinIngredient(Ingredient):
    """Aligns two value sets: returns ``{left_value: right_value}``.

    ``JOIN t2 ON {{Name(t1.a, t2.b)}}`` or ``JOIN {{Name(left_on='t1::a', right_on='t2::b')}}``.
    A left value missing from the dict joins nothing.
    """

    kind = "join"

    def run(
        self, left_values: list[Any], right_values: list[Any], question: str | None = None,
        **kwargs: Any,
    ) -> dict[Any, Any]:
        raise NotImplementedError


class StringIngredient(Ingredient):
    """Returns SQL expression text, spliced into the query at plan time.

    Example: a date-range helper returning ``"w.date BETWEEN '2020-01-01' AND '2020-12-31'"``.
    The text is parsed (never concatenated) before it joins the AST.
    """

    kind = "string"

    def run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError


class AliasIngredient(Ingredient):
    """Expands to another BlendSQL expression (which may hold ingredients).

    Example: ``{{IsPitcher('w::position')}}`` -> ``{{LLMMap('Is this a pitcher?', 'w::position')}}``.
    ``run`` receives the arguments as BlendSQL source text and returns BlendSQL text.
    """

    kind = "alias"

    def run(self, *args: str, **kwargs: str) -> str:
        raise NotImplementedError


def accepted_kwargs(ingredient: Ingredient) -> frozenset[str] | None:
    """The keyword names a query may pass to ``ingredient`` (``None``: any).

    Only a declaration on the ingredient's own class counts: a user's subclass of
    ``LLMMap`` that reads a new keyword keeps accepting anything until it declares.
    """
    declared = type(ingredient).__dict__.get("query_kwargs")
    if declared is None:
        return None
    return frozenset(declared) | ENGINE_QUERY_KWARGS.get(ingredient.kind, frozenset())


class IngredientRegistry:
    """Case-insensitive name -> ingredient instance."""

    def __init__(self, items: Any = ()) -> None:
        self._items: dict[str, Ingredient] = {}
        for item in items:
            self.add(item)

    def add(self, item: type[Ingredient] | Ingredient) -> Ingredient:
        from blendsql.errors import IngredientError

        if isinstance(item, type) and issubclass(item, Ingredient):
            item = item()
        if not isinstance(item, Ingredient):
            raise IngredientError(
                f"{item!r} is not an ingredient",
                hint="pass an Ingredient subclass or an instance of one",
            )
        self._items[item.name.lower()] = item
        return item

    def get(self, name: str) -> Ingredient | None:
        return self._items.get(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def names(self) -> list[str]:
        return [i.name for i in self._items.values()]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._items.values())

    def copy(self) -> IngredientRegistry:
        r = IngredientRegistry()
        r._items = dict(self._items)
        return r
