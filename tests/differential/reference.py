"""A row-by-row reference meaning for map ingredients, independent of the engine.

The correctness contract says a query means what it would mean if every
ingredient were an ordinary SQL function. For map ingredients that is directly
runnable: register each one as a SQLite user function and rewrite the call
blocks into function calls. Tests use this to check that each *twin* is really
equivalent to its BlendSQL query (so a failing engine test points at the
engine, not at a wrong twin). It is a test oracle only: a small scanner over
the fixture queries, not a parser for user input.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from .ingredients import Concat, Length, StartsWith, Upper

MAP_INGREDIENTS = {cls.__name__.lower(): cls for cls in (StartsWith, Length, Upper, Concat)}
ALL_NAMES_RE = re.compile(r"(?:\{\{|<<)\s*([A-Za-z_]\w*)\s*\(")
PAPER_REF_RE = re.compile(r"^'(\w+)::(\w+)'$")


def ingredient_names(query: str) -> set[str]:
    """Lower-cased names of every ingredient block in ``query``."""
    return {m.group(1).lower() for m in ALL_NAMES_RE.finditer(query)}


def is_map_only(query: str) -> bool:
    """True when every ingredient in the query is a map the oracle can run."""
    names = ingredient_names(query)
    return bool(names) and names <= set(MAP_INGREDIENTS)


def _string_end(text: str, start: int) -> int:
    """Index just past the SQL string literal opening at ``start`` ('' escapes)."""
    i = start + 1
    while i < len(text):
        if text[i] == "'":
            if i + 1 < len(text) and text[i + 1] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    raise ValueError(f"unterminated string in {text!r}")


def _matching_paren(text: str, open_idx: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_idx``, skipping strings."""
    depth, i = 0, open_idx
    while i < len(text):
        ch = text[i]
        if ch == "'":
            i = _string_end(text, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced parentheses in {text!r}")


def to_reference_sql(query: str, inside: bool = False) -> str:
    """Rewrite ``{{Name(args)}}`` / ``<<Name(args)>>`` into ``bsql_name(args)``.

    Inside a call, a ``'t::c'`` literal becomes the column ``"t"."c"``.
    """
    out: list[str] = []
    i = 0
    while i < len(query):
        ch = query[i]
        if ch == "'":
            end = _string_end(query, i)
            literal = query[i:end]
            ref = PAPER_REF_RE.match(literal) if inside else None
            out.append(f'"{ref.group(1)}"."{ref.group(2)}"' if ref else literal)
            i = end
            continue
        match = ALL_NAMES_RE.match(query, i)
        if match and match.group(1).lower() in MAP_INGREDIENTS:
            close = "}}" if query.startswith("{{", i) else ">>"
            paren = match.end() - 1
            end = _matching_paren(query, paren)
            args = to_reference_sql(query[paren + 1 : end], inside=True)
            rest = query[end + 1 :].lstrip()
            if not rest.startswith(close):
                raise ValueError(f"missing {close} after call in {query!r}")
            out.append(f"bsql_{match.group(1).lower()}({args})")
            i = len(query) - len(rest) + len(close)
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _as_sql_function(cls: type) -> Any:
    """A SQLite user function running the ingredient on one value (NULL -> NULL)."""

    def fn(*args: Any) -> Any:
        question, value = (None, args[0]) if len(args) == 1 else (args[0], args[1])
        if len(args) > 2:  # several value columns: a tuple, NULL if any part is NULL
            value = None if any(a is None for a in args[1:]) else tuple(args[1:])
        if value is None:
            return None
        return cls().run(question, [value])[0]

    return fn


def register_maps(con: sqlite3.Connection) -> None:
    """Make every map ingredient callable as ``bsql_<name>(...)`` on ``con``."""
    for name, cls in MAP_INGREDIENTS.items():
        con.create_function(f"bsql_{name}", -1, _as_sql_function(cls), deterministic=True)
