"""Template responses of the conversational layer (SUQL §4, CoSQL §5.2).

Responses are built from the program and its result, never by a model, so
they cannot invent values: they say what was searched (from ``explain``),
how many rows came back and the first few values, and say plainly when
nothing was found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from blendsql.nl.explain import explain
from blendsql.nl.serialize import list_tables
from blendsql.smoothie import Smoothie

MAX_SHOWN = 5
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']+")
_STOP = {
    "the", "and", "was", "who", "what", "which", "when", "where", "how", "many", "much", "for",
    "from", "with", "that", "this", "did", "does", "are", "all", "show", "list", "give", "tell",
    "about", "their", "there", "those", "these", "have", "has", "one", "ones", "best", "most",
    "find", "me", "please", "can", "you", "each", "every",
}
_STEP = re.compile(r"^\d+\.\s*")


def tables_read(tree: exp.Expr) -> list[str]:
    """Table names the query reads, in order of appearance, without duplicates."""
    return list(dict.fromkeys(t.name for t in tree.find_all(exp.Table) if t.name))


def without_aliases(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` whose columns name their tables, not the query's aliases
    (``T2.Name`` → ``country.Name``): a reply speaks the user's schema."""
    aliases = {t.alias: t.name for t in tree.find_all(exp.Table) if t.alias and t.name}
    if not aliases:
        return tree
    tree = tree.copy()
    for col in tree.find_all(exp.Column):
        if col.table in aliases:
            col.set("table", exp.to_identifier(aliases[col.table]))
    return tree


def describe_search(program: str, tree: exp.Expr | None = None) -> str:
    """One sentence: which tables were searched and for which rows (from ``explain``)."""
    if tree is None:
        try:
            from blendsql.nl.explain import _parse

            tree = _parse(program, None)
        except Exception:  # noqa: BLE001 - a description must never break a reply
            return f"I ran: {program}"
    tree = without_aliases(tree)
    tables = tables_read(tree)
    where = "the table " + tables[0] if len(tables) == 1 else "the tables " + ", ".join(tables)
    steps = [_STEP.sub("", s) for s in explain(tree)]
    filters = [s[len("Keep only the rows where "):].rstrip(".") for s in steps
               if s.startswith("Keep only the rows where ")]
    if filters:
        return f"I searched {where} for rows where {' and '.join(filters)}."
    return f"I looked at {where}." if tables else "I computed the query without reading a table."


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "NULL"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def summarise_result(smoothie: Smoothie) -> str:
    """The result in words: nothing found, one value, or a count and the first few rows."""
    df = smoothie.df
    n = len(df)
    if n == 0 or not len(df.columns):
        return "I found nothing: no rows matched."
    rows = df.head(MAX_SHOWN).to_numpy().tolist()
    if n == 1 and len(df.columns) == 1:
        value = rows[0][0]
        if value is None or (isinstance(value, float) and value != value):
            return "I found nothing: the value is not recorded (NULL)."
        return f"The answer is {_fmt(value)}."
    shown = ["; ".join(_fmt(v) for v in r) if len(r) > 1 else _fmt(r[0]) for r in rows]
    head = f"I found {n} row{'s' if n != 1 else ''}"
    more = f" (showing the first {len(shown)})" if n > len(shown) else ""
    cols = ", ".join(str(c) for c in df.columns)
    return f"{head} ({cols}){more}: " + " | ".join(shown) + "."


def answer_response(program: str, smoothie: Smoothie, tree: exp.Expr | None = None) -> str:
    """The answer first, then one short sentence on where it came from."""
    return f"{summarise_result(smoothie)} {describe_search(program, tree)}"


def schema_overview(db: Any, n_columns: int = 4, n_tables: int = 8) -> str:
    """Tables and a few of their columns, e.g. ``singer (name, country, age, ...)``."""
    parts = []
    tables = list_tables(db)
    for t in tables[:n_tables]:
        cols = ", ".join(t.columns[:n_columns]) + (", ..." if len(t.columns) > n_columns else "")
        parts.append(f"{t.name} ({cols})")
    if len(tables) > n_tables:
        parts.append(f"and {len(tables) - n_tables} more tables")
    return "; ".join(parts)


def out_of_scope_response(db: Any, act: str, missing: Sequence[str] = ()) -> str:
    """A polite reply for not_related / cannot_answer / cannot_understand turns: one line
    of reason (the question's words that name nothing in these tables), then what the
    tables hold."""
    lead = {
        "not_related": "Sorry, that is not something this database can tell you.",
        "cannot_answer": "Sorry, the database does not hold that information.",
        "cannot_understand": "Sorry, I did not understand that.",
    }.get(act, "Sorry, I cannot answer that.")
    if missing and act != "cannot_understand":
        words = list(missing[:3])
        listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" or {words[-1]}"
        lead += f" Nothing in these tables records {listed}."
    return f"{lead} I can answer questions about these tables: {schema_overview(db)}."


SOCIAL = {
    "greeting": "Hello! Ask me a question about the database.",
    "thank_you": "You're welcome! Anything else?",
    "goodbye": "Goodbye!",
    "affirm": "Good. Ask me another question whenever you like.",
    "negate": "Okay. Could you rephrase what you are looking for?",
}
