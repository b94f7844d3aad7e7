"""Checks of what users hand to the plain-language layer, before any model call.

A question of the wrong type, a parser without a model, a negative retry count
or an empty question is refused here, before it can fail deep inside
(``'NoneType' object has no attribute 'lower'``) or be answered anyway. Each
check raises :class:`~blendsql.errors.OptionError` naming the argument, with a
hint.
"""

from __future__ import annotations

from typing import Any

from blendsql.errors import OptionError


def text_arg(value: Any, name: str, *, allow_empty: bool = False) -> str:
    """``value`` when it is a string (non-blank unless ``allow_empty``)."""
    if not isinstance(value, str):
        raise OptionError(f"{name} must be a str, not {type(value).__name__}",
                          hint=f"pass the {name} as text, e.g. 'How many pets are there?'",
                          option=name)
    if not allow_empty and not value.strip():
        raise OptionError(f"{name} is empty", hint=f"pass a {name} with some words in it",
                          option=name)
    return value


def count_arg(value: Any, name: str, *, minimum: int = 0) -> int:
    """``value`` when it is an int >= ``minimum`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(f"{name} must be an int >= {minimum}, not {value!r}",
                          hint=f"e.g. {name}={max(minimum, 1)}", option=name)
    return value


def seconds_arg(value: Any, name: str) -> float:
    """``value`` when it is a finite number of seconds > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise OptionError(f"{name} must be a number of seconds > 0, not {value!r}",
                          hint=f"e.g. {name}=5", option=name)
    return float(value)


def model_arg(value: Any, name: str = "model") -> Any:
    """``value`` when it is a blendsql model."""
    from blendsql.models.base import Model

    if not isinstance(value, Model):
        raise OptionError(
            f"{name} must be a blendsql model, not {type(value).__name__}",
            hint="e.g. blendsql.models.LlamaCpp('model.gguf'), OpenAIModel(...), or "
            "FunctionModel(fn); BlendSQL(db, model=...) without a model uses the embedded one",
            option=name)
    return value
