"""Output constraints a model must satisfy, and how to parse its text.

A constraint is data: backends compile it (GBNF for llama.cpp, guided
decoding / JSON schema / logit bias for OpenAI-compatible servers) and every
backend parses the raw text back into a Python value with ``parse``.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Constraint:
    """Base class. ``parse`` turns model text into a value or raises ValueError."""

    def parse(self, text: str) -> Any:
        return text.strip()

    def check(self, value: Any) -> Any:
        """An answer that is already a Python value, validated as strictly as text is parsed.

        Why: a backend (a ``FunctionModel``, a custom ``Model``, a cache entry)
        can hand back a typed value; it must not slip past the constraint that
        a text answer would have to satisfy. Returns the value in the same form
        ``parse`` produces; raises ``ValueError`` when it does not fit. Free
        text takes any scalar (numbers stay numbers), but not a container.
        """
        v = plain_scalar(value)
        if isinstance(v, str):
            return self.parse(v)
        if isinstance(v, bool) or (isinstance(v, (int, float)) and _finite(v)):
            return v
        raise ValueError(f"{_kind(value)} is not {self.describe()}")

    def describe(self) -> str:
        """Short human text for prompts and traces."""
        return "free text"

    def key(self) -> str:
        """Stable identity for caching."""
        return f"{type(self).__name__}:{self!r}"


@dataclass(frozen=True)
class Text(Constraint):
    """Unconstrained text, optionally bounded in length (characters)."""

    max_chars: int | None = None


@dataclass(frozen=True)
class Choice(Constraint):
    """Exactly one of ``options``."""

    options: tuple[str, ...] = ()

    def parse(self, text: str) -> Any:
        t = text.strip()
        if t in self.options:
            return t
        low = {o.lower(): o for o in self.options}
        if t.lower() in low:
            return low[t.lower()]
        raise ValueError(f"{t!r} is not one of {len(self.options)} options")

    def check(self, value: Any) -> Any:
        """A number or boolean counts when its text is an option (options are text)."""
        v = plain_scalar(value)
        if isinstance(v, bool):  # true / false, else the options' yes / no spelling
            for word in (("true", "yes") if v else ("false", "no")):
                try:
                    return self.parse(word)
                except ValueError:
                    continue
            raise ValueError(f"{v} is not one of {len(self.options)} options")
        if isinstance(v, float) and _finite(v) and v.is_integer():
            v = int(v)
        if isinstance(v, (str, int)) or (isinstance(v, float) and _finite(v)):
            return self.parse(str(v))
        raise ValueError(f"{_kind(value)} is not {self.describe()}")

    def describe(self) -> str:
        return "one of: " + ", ".join(self.options[:20]) + (" ..." if len(self.options) > 20 else "")


_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


@dataclass(frozen=True)
class Bool(Constraint):
    """true / false."""

    def parse(self, text: str) -> Any:
        t = text.strip().strip(".").lower()
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise ValueError(f"{text!r} is not a boolean")

    def check(self, value: Any) -> Any:
        v = plain_scalar(value)
        if isinstance(v, bool):
            return v
        if isinstance(v, str):
            return self.parse(v)
        if isinstance(v, int) and v in (0, 1):  # as the text "0" / "1" parses
            return bool(v)
        raise ValueError(f"{_kind(value)} is not a boolean")

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Int(Constraint):
    """A whole number."""

    def parse(self, text: str) -> Any:
        return int(text.strip().replace(",", ""))

    def check(self, value: Any) -> Any:
        v = plain_scalar(value)
        if isinstance(v, str):
            return self.parse(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float) and _finite(v) and v.is_integer():
            return int(v)
        raise ValueError(f"{_kind(value)} is not an integer")

    def describe(self) -> str:
        return "an integer"


@dataclass(frozen=True)
class Float(Constraint):
    """A number."""

    def parse(self, text: str) -> Any:
        f = float(text.strip().replace(",", ""))
        if not _finite(f):  # float() reads "nan" / "inf": not a number anyone can use
            raise ValueError(f"{text.strip()!r} is not a finite number")
        return f

    def check(self, value: Any) -> Any:
        v = plain_scalar(value)
        if isinstance(v, str):
            return self.parse(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v):
            try:
                return float(v)
            except OverflowError:
                raise ValueError(f"{v} is too large for a float") from None
        raise ValueError(f"{_kind(value)} is not a finite number")

    def describe(self) -> str:
        return "a number"


@dataclass(frozen=True)
class Date(Constraint):
    """An ISO date, YYYY-MM-DD (returned as the ISO string, as SQLite stores dates)."""

    def parse(self, text: str) -> Any:
        return _dt.date.fromisoformat(text.strip()).isoformat()

    def check(self, value: Any) -> Any:
        v = plain_scalar(value)
        if isinstance(v, str):
            return self.parse(v)
        if isinstance(v, _dt.datetime):
            if v.time() != _dt.time(0):
                raise ValueError(f"{v.isoformat()} is a time, not a date")
            return v.date().isoformat()
        if isinstance(v, _dt.date):
            return v.isoformat()
        raise ValueError(f"{_kind(value)} is not a date")

    def describe(self) -> str:
        return "a date as YYYY-MM-DD"


@dataclass(frozen=True)
class Regex(Constraint):
    """Text fully matching ``pattern`` (Python / ECMAScript-compatible subset)."""

    pattern: str = ".*"

    def parse(self, text: str) -> Any:
        t = text.strip()
        if re.fullmatch(self.pattern, t) is None:
            raise ValueError(f"{t!r} does not match /{self.pattern}/")
        return t

    def check(self, value: Any) -> Any:
        v = plain_scalar(value)
        if isinstance(v, float) and _finite(v) and v.is_integer():
            v = int(v)
        if isinstance(v, str) or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                  and _finite(v)):
            return self.parse(str(v))
        raise ValueError(f"{_kind(value)} is not {self.describe()}")

    def describe(self) -> str:
        return f"text matching /{self.pattern}/"


@dataclass(frozen=True)
class JsonSchema(Constraint):
    """A JSON value valid against ``schema`` (schema given as a JSON string for hashability)."""

    schema_json: str = "{}"

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.schema_json)

    @classmethod
    def of(cls, schema: dict[str, Any]) -> JsonSchema:
        return cls(json.dumps(schema, sort_keys=True))

    def parse(self, text: str) -> Any:
        return json.loads(text)

    def check(self, value: Any) -> Any:
        """Any JSON value (as for text, the schema itself is the decoder's job)."""
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{_kind(value)} is not a JSON value: {e}") from None
        return value

    def describe(self) -> str:
        return f"JSON matching {self.schema_json}"


@dataclass(frozen=True)
class ListOf(Constraint):
    """A JSON-style list of items, each satisfying ``item``, with length bounds."""

    item: Constraint = field(default_factory=Text)
    min_len: int = 0
    max_len: int | None = None

    def parse(self, text: str) -> Any:
        raw = json.loads(text)
        if not isinstance(raw, list):
            raise ValueError("not a list")
        if len(raw) < self.min_len or (self.max_len is not None and len(raw) > self.max_len):
            raise ValueError(f"list of length {len(raw)} is out of bounds")
        def text_of(x: Any) -> str:
            # JSON items are re-encoded whole; scalar items parse from their text
            return json.dumps(x) if isinstance(self.item, JsonSchema) or not isinstance(x, str) else x

        return [self.item.parse(text_of(x)) for x in raw]

    def check(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{_kind(value)} is not a list")
        if len(value) < self.min_len or (self.max_len is not None and len(value) > self.max_len):
            raise ValueError(f"list of length {len(value)} is out of bounds")
        return [self.item.check(x) for x in value]

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


@dataclass(frozen=True)
class Grammar(Constraint):
    """Text in the language of a GBNF grammar (e.g. the NL parser's BlendSQL subset).

    Backends without grammar support validate nothing here; the caller checks
    the text itself (the parser parses the program with the BlendSQL grammar).
    """

    gbnf: str = ""
    label: str = "grammar"

    def describe(self) -> str:
        return f"text in the {self.label} grammar"

    def check(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError(f"{_kind(value)} is not {self.describe()}")
        return value

    def key(self) -> str:
        import hashlib

        return f"Grammar:{self.label}:{hashlib.sha256(self.gbnf.encode()).hexdigest()[:16]}"


def plain_scalar(v: Any) -> Any:
    """numpy / Decimal scalars as the Python ``int`` / ``float`` / ``bool`` they stand for."""
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return float(v)
        return int(v) if v == v.to_integral_value() else float(v)
    item = getattr(v, "item", None)
    if item is not None and not isinstance(v, (str, bytes, list, tuple, dict)) and callable(item):
        try:
            out = item()
        except (TypeError, ValueError):
            return v
        return out if type(out) is not type(v) else v
    return v


def _finite(v: int | float) -> bool:
    return not isinstance(v, float) or math.isfinite(v)


def _kind(value: Any) -> str:
    """Short description of an unexpected answer for error messages."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + ('...' if len(text) > 60 else '')}"


def constraint_source(has_options: bool, return_type: Any, inferred: Any) -> str:
    """Which source decides an ingredient's output constraint, first match winning:
    ``"options"``, ``"return_type"``, ``"inferred"`` or ``"none"``.

    Why one place: the engine (building ``constraint=`` for any ingredient)
    and the built-in LLM ingredients (re-reading their keywords) both ask it,
    so a call with both ``options=`` and ``return_type=`` gets the same
    constraint from a custom ingredient as from ``LLMMap``. What the user wrote in the call beats what the planner inferred from the
    call's surroundings; a list of allowed values is the narrower statement,
    so it beats a type.
    """
    if has_options:
        return "options"
    if return_type is not None:
        return "return_type"
    if inferred is not None:
        return "inferred"
    return "none"


def constraint_from_return_type(name: str) -> Constraint:
    """Map a query's ``return_type='int'`` (etc.) to a constraint."""
    table: dict[str, Constraint] = {
        "bool": Bool(), "boolean": Bool(), "int": Int(), "integer": Int(),
        "float": Float(), "number": Float(), "numeric": Float(), "date": Date(),
        "str": Text(), "text": Text(), "string": Text(),
        "list": ListOf(Text()), "list[str]": ListOf(Text()), "list[int]": ListOf(Int()),
    }
    try:
        return table[name.strip().lower()]
    except KeyError:
        from blendsql.errors import IngredientError

        raise IngredientError(
            f"unknown return_type {name!r}", hint="use one of: " + ", ".join(sorted(table))
        ) from None
