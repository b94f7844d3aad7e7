"""Deterministic ingredients with exact plain-SQL twins, for differential tests.

Each ingredient is an ordinary Python function of its inputs, so a BlendSQL query
that uses it must return exactly the rows of a plain SQLite query that uses the
twin expression instead (the correctness contract of DESIGN.md §2). Every
ingredient also *records* what the engine handed it, so tests can check that the
planner passed the values the contract promises and nothing else.

SQLite semantics are mirrored on purpose (ASCII-only case mapping, ``trim``
removing spaces only, text rendering of numbers), because a twin that is only
"nearly" equal would make the suite report engine bugs that are not there.

=============  ======  ==================================================
ingredient     kind    twin
=============  ======  ==================================================
StartsWith     map     ``substr(CAST(x AS TEXT), 1, length(p)) = p``
Length         map     ``length(x)``
Upper          map     ``upper(x)``
Concat         map     ``CAST(a AS TEXT) || sep || CAST(b AS TEXT)`` (several columns)
CountRows      qa      ``(SELECT COUNT(*) FROM (<context subquery>))``
MaxOption      qa      ``(SELECT MAX(col) FROM t)``
FirstOption    qa      ``(SELECT MIN(col) FROM t)``
LowerJoin      join    ``lower(trim(a)) = lower(trim(b))`` (right key unique)
=============  ======  ==================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from blendsql.ingredients.base import Ingredient, JoinIngredient, MapIngredient, QAIngredient

_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def sqlite_text(value: Any) -> str:
    """Render a value the way ``CAST(value AS TEXT)`` does in SQLite.

    Why: the twins cast to text; Python's ``str`` agrees for str and int, and for
    the REAL values in the fixture databases (``307.0`` -> ``'307.0'``).
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def ascii_upper(text: str) -> str:
    """SQLite's built-in ``upper`` only maps ASCII letters; so do we."""
    return text.translate(_ASCII_UPPER)


def ascii_lower(text: str) -> str:
    """SQLite's built-in ``lower`` only maps ASCII letters; so do we."""
    return text.translate(_ASCII_LOWER)


def join_key(value: Any) -> str:
    """``lower(trim(x))`` in SQLite: trim removes spaces only, lower is ASCII only."""
    return ascii_lower(sqlite_text(value).strip(" "))


@dataclass
class Call:
    """One ``run`` invocation as the engine made it."""

    question: Any
    values: list[Any] = field(default_factory=list)
    right_values: list[Any] = field(default_factory=list)
    context: pd.DataFrame | None = None
    options: list[Any] | None = None


class Recorder(Ingredient):
    """Mixin keeping every call so tests can assert on what was passed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[Call] = []

    def passed(self, question: Any = None) -> list[Any]:
        """All values handed over (map values / join left values), in call order.

        ``question`` restricts to calls with that question (several call sites
        of one ingredient in one query differ by question).
        """
        out: list[Any] = []
        for call in self.calls:
            if question is None or call.question == question:
                out.extend(call.values)
        return out

    def passed_right(self) -> list[Any]:
        """Right-hand values handed to a join ingredient."""
        return [v for call in self.calls for v in call.right_values]


class StartsWith(Recorder, MapIngredient):
    """True where the value's text starts with the question (the prefix)."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.calls.append(Call(question, list(values)))
        prefix = "" if question is None else str(question)
        return [sqlite_text(v).startswith(prefix) for v in values]


class Length(Recorder, MapIngredient):
    """Number of characters of the value's text, like SQLite ``length``."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.calls.append(Call(question, list(values)))
        return [len(sqlite_text(v)) for v in values]


class Upper(Recorder, MapIngredient):
    """ASCII upper-casing of the value's text, like SQLite ``upper``."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.calls.append(Call(question, list(values)))
        return [ascii_upper(sqlite_text(v)) for v in values]


class Concat(Recorder, MapIngredient):
    """Several value columns joined by the question: ``Concat('|', a, b)``.

    Twin: ``CAST(a AS TEXT) || '|' || CAST(b AS TEXT)`` (NULL when a part is NULL).
    Each value it receives is a tuple; with one column, the value's text.
    """

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.calls.append(Call(question, list(values)))
        sep = "" if question is None else str(question)
        return [sep.join(sqlite_text(p) for p in v) if isinstance(v, tuple) else sqlite_text(v)
                for v in values]


class CountRows(Recorder, QAIngredient):
    """Number of rows of the context table (0 without context)."""

    def run(
        self,
        question: str | None,
        context: pd.DataFrame | None,
        options: list[Any] | None,
        **kwargs: Any,
    ) -> Any:
        self.calls.append(Call(question, context=context, options=options))
        return 0 if context is None else len(context)


def _present(options: list[Any] | None) -> list[Any]:
    """Options without NULLs (SQL MIN/MAX ignore NULLs)."""
    if options is None:
        raise ValueError("this ingredient needs options=")
    return [o for o in options if o is not None]


class MaxOption(Recorder, QAIngredient):
    """The largest option, like ``MAX(col)`` over a same-typed column."""

    def run(
        self,
        question: str | None,
        context: pd.DataFrame | None,
        options: list[Any] | None,
        **kwargs: Any,
    ) -> Any:
        self.calls.append(Call(question, context=context, options=options))
        present = _present(options)
        return max(present) if present else None


class FirstOption(Recorder, QAIngredient):
    """The smallest option, like ``MIN(col)`` over a same-typed column."""

    def run(
        self,
        question: str | None,
        context: pd.DataFrame | None,
        options: list[Any] | None,
        **kwargs: Any,
    ) -> Any:
        self.calls.append(Call(question, context=context, options=options))
        present = _present(options)
        return min(present) if present else None


class LowerJoin(Recorder, JoinIngredient):
    """Maps each left value to the right value with the same ``lower(trim(.))`` key.

    A join ingredient maps a left value to at most one right *value*, so the
    twin ``lower(trim(a)) = lower(trim(b))`` is only equivalent where distinct
    right values stay distinct after normalisation; the pairs are chosen so. Ties (which
    the pairs avoid) go to the smallest right value, to stay deterministic.
    """

    def run(
        self,
        left_values: list[Any],
        right_values: list[Any],
        question: str | None = None,
        **kwargs: Any,
    ) -> dict[Any, Any]:
        self.calls.append(Call(question, list(left_values), right_values=list(right_values)))
        by_key: dict[str, Any] = {}
        for right in sorted((r for r in right_values if r is not None), key=sqlite_text):
            by_key.setdefault(join_key(right), right)
        return {
            left: by_key[join_key(left)]
            for left in left_values
            if left is not None and join_key(left) in by_key
        }


ALL_INGREDIENTS: tuple[type[Recorder], ...] = (
    StartsWith,
    Length,
    Upper,
    Concat,
    CountRows,
    MaxOption,
    FirstOption,
    LowerJoin,
)


def fresh_ingredients() -> dict[str, Recorder]:
    """New instances (empty recordings) keyed by their SQL name."""
    return {cls.__name__: cls() for cls in ALL_INGREDIENTS}
