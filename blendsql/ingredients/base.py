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

from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from blendsql.errors import IngredientError, IngredientOptionError
from blendsql.option_types import describe_types, has_type, unknown_hint

#: keyword arguments the engine itself reads from a call, per ingredient kind (see
#: ``execute.engine``: ``options=`` / ``return_type=`` / ``example_outputs=`` set the
#: constraint; ``prefilter=`` ranks LIMIT candidates; ``left_on=`` / ``right_on=`` name a join)
ENGINE_QUERY_KWARGS: dict[str, frozenset[str]] = {
    "map": frozenset({"options", "return_type", "example_outputs", "prefilter"}),
    "qa": frozenset({"options", "return_type", "example_outputs"}),
    "join": frozenset({"left_on", "right_on", "options", "return_type", "example_outputs"}),
}

#: where an option may be given, as messages name it
IN_QUERY, IN_CONSTRUCTOR, AS_ATTRIBUTE = "in a query", "to the constructor", "as a class attribute"
_LISTED = {IN_QUERY: "query keywords", IN_CONSTRUCTOR: "constructor keywords",
           AS_ATTRIBUTE: "class attributes"}
#: class attributes of the framework itself, never options
FRAMEWORK_ATTRIBUTES = frozenset({"kind", "needs_model", "bare_call", "options_spec",
                                  "ordered_by_limit"})


@dataclass(frozen=True)
class IngredientOption:
    """One setting an ingredient reads, its types and where it may be given.

    ``query``: as a keyword argument of a call (``{{LLMMap('q', t.c, max_tokens=8)}}``);
    ``init``: to the constructor (``LLMMap(name='Short', max_tokens=8)``); ``attribute``:
    as a class attribute of a subclass (``class Short(LLMMap): value_chars = 200``).
    ``types``: what a value may be (``object``: anything; ``None`` always means "not set").
    ``default``: the value used when the option is not given, as the reference documents
    it (``None``: not set; a class attribute of the same name, when there is one, is the
    default instead).
    """

    name: str
    types: tuple[Any, ...] = (object,)
    doc: str = ""
    query: bool = True
    init: bool = True
    attribute: bool = False
    default: Any = None

    def allowed(self, where: str) -> bool:
        """May the option be given ``where`` (one of IN_QUERY, IN_CONSTRUCTOR, AS_ATTRIBUTE)?"""
        return {IN_QUERY: self.query, IN_CONSTRUCTOR: self.init, AS_ATTRIBUTE: self.attribute}[where]

    def check(self, value: Any, owner: str, where: str) -> Any:
        """``value`` if its type is declared, else an :class:`IngredientOptionError`."""
        if value is not None and not has_type(value, self.types):
            raise IngredientOptionError(
                f"{owner}: {self.name}={value!r} ({where}) must be "
                f"{describe_types(self.types)}, not {type(value).__name__}",
                hint=f"{self.name}: {self.doc}" if self.doc else None, option=self.name)
        return value


def _places(option: IngredientOption) -> str:
    places = [w for w in (IN_QUERY, IN_CONSTRUCTOR, AS_ATTRIBUTE) if option.allowed(w)]
    return " or ".join(places) or "nowhere"


class Ingredient:
    """Base of every ingredient. SQL name = class name unless ``name=`` is given.

    Options: a class declares what it reads in ``options_spec`` (a tuple of
    :class:`IngredientOption`); a subclass adds its own to its parents' (a
    redeclared name replaces the parent's). Once any class in the hierarchy
    declares, its options are checked wherever they are given: constructor
    keywords here, class attributes when a subclass is defined, query keywords
    when the query is parsed (:func:`accepted_kwargs`) and their values when
    read (:meth:`setting`). A class that declares nothing (``options_spec`` left
    ``None`` all the way up) accepts any option, for ingredients that read
    ``**kwargs`` freely. Public class attributes of a declaring class are its
    options unless they are methods, constants (``UPPER_CASE``) or the framework's
    (``kind``, ``needs_model``, ``bare_call``).
    """

    kind: ClassVar[str] = "base"
    needs_model: ClassVar[bool] = False
    options_spec: ClassVar[tuple[IngredientOption, ...] | None] = None
    _declared: ClassVar[dict[str, IngredientOption] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._declared = _merge_declarations(cls)
        _check_class_attributes(cls)

    def __init__(self, name: str | None = None, **options: Any) -> None:
        self.name = name or type(self).__name__
        self.options = {key: self.checked(key, value, IN_CONSTRUCTOR)
                        for key, value in options.items()}

    @classmethod
    def declared_options(cls) -> dict[str, IngredientOption] | None:
        """Every option the class declares, its parents' included (None: it declares none)."""
        return None if cls._declared is None else dict(cls._declared)

    def checked(self, key: str, value: Any, where: str) -> Any:
        """``value`` of option ``key`` given ``where``, checked against the declarations."""
        return check_option(type(self), self.name, key, value, where)

    def setting(self, kwargs: dict[str, Any], key: str, default: Any = None) -> Any:
        """Query keyword > instance option > ``default`` (None counts as absent).

        A query keyword's value is checked against its declaration here (its name
        was checked when the query was parsed).
        """
        if kwargs.get(key) is not None:
            return self.checked(key, kwargs[key], IN_QUERY)
        if self.options.get(key) is not None:
            return self.options[key]
        return default

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.kind})>"


def _merge_declarations(cls: type[Ingredient]) -> dict[str, IngredientOption] | None:
    """The options declared along ``cls``'s MRO, base first (None: none declares)."""
    merged: dict[str, IngredientOption] | None = None
    for klass in reversed(cls.__mro__):
        spec = klass.__dict__.get("options_spec")
        if spec is None:
            continue
        merged = merged if merged is not None else {}
        for option in spec:
            if not isinstance(option, IngredientOption):
                raise IngredientError(f"{klass.__name__}.options_spec holds {option!r}",
                                      hint="declare each option as IngredientOption(name, ...)")
            merged[option.name] = option
    return merged


def check_option(cls: type[Ingredient], owner: str, key: str, value: Any, where: str) -> Any:
    """``value`` of option ``key`` given ``where`` to an ingredient of class ``cls``.

    Anything goes for a class that declares nothing; otherwise the name must be
    declared for that place (a did-you-mean hint otherwise) and the value typed.
    Query keywords the engine reads itself (``options=`` ...) are not options.
    """
    declared = cls._declared
    if declared is None or (where == IN_QUERY and key in ENGINE_QUERY_KWARGS.get(cls.kind, ())):
        return value
    option = declared.get(key)
    if option is None:
        places = [o.name for o in declared.values() if o.allowed(where)]
        raise IngredientOptionError(
            f"{owner} has no option {key!r}",
            hint=unknown_hint(key, places, f"{cls.__name__}'s {_LISTED[where]}"), option=key)
    if not option.allowed(where):
        raise IngredientOptionError(
            f"{owner}: option {key!r} cannot be given {where}",
            hint=f"give it {_places(option)}", option=key)
    return option.check(value, owner, where)


def _check_class_attributes(cls: type[Ingredient]) -> None:
    """Each public data attribute a declaring subclass sets is one of its options."""
    if cls._declared is None:
        return
    for key, value in vars(cls).items():
        if (key.startswith("_") or key.isupper() or key in FRAMEWORK_ATTRIBUTES
                or callable(value) or hasattr(value, "__get__")):
            continue
        check_option(cls, cls.__name__, key, value, AS_ATTRIBUTE)


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

    The declared options that may be given in a query, and the engine's own
    keywords for the ingredient's kind; ``None`` for a class that declares nothing.
    """
    declared = type(ingredient).declared_options()
    if declared is None:
        return None
    own = frozenset(o.name for o in declared.values() if o.query)
    return own | ENGINE_QUERY_KWARGS.get(ingredient.kind, frozenset())


class IngredientRegistry:
    """Case-insensitive name -> ingredient instance.

    ``identity``: the registered (name, ingredient id) pairs, kept up to date by
    every change; plans memoised for one registry are valid while it is equal.
    """

    def __init__(self, items: Any = ()) -> None:
        self._items: dict[str, Ingredient] = {}
        self.identity: tuple[tuple[str, int], ...] = ()
        for item in items:
            self.add(item)

    def add(self, item: type[Ingredient] | Ingredient) -> Ingredient:
        if isinstance(item, type) and issubclass(item, Ingredient):
            item = item()
        if not isinstance(item, Ingredient):
            raise IngredientError(
                f"{item!r} is not an ingredient",
                hint="pass an Ingredient subclass or an instance of one",
            )
        self._items[item.name.lower()] = item
        self.identity = tuple((i.name, id(i)) for i in self._items.values())
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
        r.identity = self.identity
        return r
