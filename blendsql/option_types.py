"""Typed keyword options shared by model providers and ingredients: type checks,
command-line text to values, and did-you-mean suggestions.

A leaf module (it imports nothing from blendsql), so ``blendsql.models`` and
``blendsql.ingredients`` can both declare their options with it without
depending on each other or on the session's options (``blendsql.options``).
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: the CLI's words for booleans
_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a misspelt ``name`` (difflib, case-insensitive), or None."""
    by_lower = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), sorted(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def unknown_hint(name: str, known: Iterable[str], accepts: str, limit: int = 20) -> str:
    """``did you mean X? <accepts>: a, b, c`` for an unknown option ``name`` (at most
    ``limit`` names listed)."""
    names = list(dict.fromkeys(known))
    near = suggest(name, names)
    shown = sorted(names[:limit]) if len(names) > limit else sorted(names)
    listed = ", ".join(shown) + (", ..." if len(names) > limit else "") if names else "nothing"
    return (f"did you mean {near!r}? " if near else "") + f"{accepts}: {listed}"


def has_type(value: Any, types: tuple[Any, ...]) -> bool:
    """``isinstance`` with three conveniences: ``bool`` is not a number (``n_ctx=True`` is
    a mistake), an ``int`` is a ``float``, and a list and a tuple stand for each other
    (a query writes ``('a', 'b')``, the engine hands over a list)."""
    if not types or object in types:
        return True
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    if isinstance(value, (list, tuple)) and (list in types or tuple in types):
        return True
    if isinstance(value, (str, os.PathLike)) and Path in types:
        return True
    return isinstance(value, tuple(t for t in types if isinstance(t, type)))


def describe_types(types: tuple[Any, ...]) -> str:
    """The accepted types in words, e.g. ``int or float``."""
    return " or ".join(dict.fromkeys(getattr(t, "__name__", str(t)) for t in types)) or "any"


def from_text(text: str, types: tuple[Any, ...]) -> Any:
    """A value typed from command-line text by the option's declared types.

    Raises ``ValueError`` (with a readable message) when the text is not one of them.
    ``bool``: true/yes/on/1 or false/no/off/0; numbers: as written; ``Path``: with ``~``
    expanded; ``str``: as is. Undeclared (``object``): a JSON literal, else the text.
    """
    stripped = text.strip()
    low = stripped.lower()
    if bool in types and low in _TRUE | _FALSE:
        return low in _TRUE
    if int in types and _is_int(stripped):
        return int(stripped)
    if float in types:
        return _float(stripped)
    if int in types and str not in types:
        raise ValueError(f"{text!r} is not an integer")
    if bool in types and str not in types:
        raise ValueError(f"{text!r} is not true or false")
    if Path in types:
        return Path(stripped).expanduser()
    if str in types:
        return text
    if not types or object in types:
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    raise ValueError(f"{describe_types(types)} cannot be given as text")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value
