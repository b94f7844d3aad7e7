"""Output constraints a model must satisfy, and how to parse its text.

A constraint is data: backends compile it (GBNF for llama.cpp, guided
decoding / JSON schema / logit bias for OpenAI-compatible servers) and every
backend parses the raw text back into a Python value with ``parse``.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Constraint:
    """Base class. ``parse`` turns model text into a value or raises ValueError."""

    def parse(self, text: str) -> Any:
        return text.strip()

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

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Int(Constraint):
    """A whole number."""

    def parse(self, text: str) -> Any:
        return int(text.strip().replace(",", ""))

    def describe(self) -> str:
        return "an integer"


@dataclass(frozen=True)
class Float(Constraint):
    """A number."""

    def parse(self, text: str) -> Any:
        return float(text.strip().replace(",", ""))

    def describe(self) -> str:
        return "a number"


@dataclass(frozen=True)
class Date(Constraint):
    """An ISO date, YYYY-MM-DD (returned as the ISO string, as SQLite stores dates)."""

    def parse(self, text: str) -> Any:
        return _dt.date.fromisoformat(text.strip()).isoformat()

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

    def key(self) -> str:
        import hashlib

        return f"Grammar:{self.label}:{hashlib.sha256(self.gbnf.encode()).hexdigest()[:16]}"


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
