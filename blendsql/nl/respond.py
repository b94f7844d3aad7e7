"""Template responses of the conversational layer (SUQL §4, CoSQL §5.2).

Responses are built from the program and its result, never by a model, so
they cannot invent values: they say what was searched (from ``explain``),
how many rows came back and the first few values, and say plainly when
nothing was found. Clarifying questions name candidate columns picked by
fuzzy matching of the utterance's words against the schema's column names.
"""

from __future__ import annotations

import re
from typing import Any

from rapidfuzz import fuzz
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


def _tables_of(tree: exp.Expr) -> list[str]:
    """Table names the query reads, in order of appearance, without duplicates."""
    return list(dict.fromkeys(t.name for t in tree.find_all(exp.Table) if t.name))


def describe_search(program: str, tree: exp.Expr | None = None) -> str:
    """One sentence: which tables were searched and for which rows (from ``explain``)."""
    if tree is None:
        try:
            from blendsql.nl.explain import _parse

            tree = _parse(program, None)
        except Exception:  # noqa: BLE001 - a description must never break a reply
            return f"I ran: {program}"
    tables = _tables_of(tree)
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
        return "I found nothing: no rows matched, so I have no answer to give."
    rows = df.head(MAX_SHOWN).to_numpy().tolist()
    if n == 1 and len(df.columns) == 1:
        value = rows[0][0]
        if value is None or (isinstance(value, float) and value != value):
            return "I found nothing: the result is empty (NULL)."
        return f"The answer is {_fmt(value)}."
    shown = ["; ".join(_fmt(v) for v in r) if len(r) > 1 else _fmt(r[0]) for r in rows]
    head = f"I found {n} row{'s' if n != 1 else ''}"
    more = f" (showing the first {len(shown)})" if n > len(shown) else ""
    cols = ", ".join(str(c) for c in df.columns)
    return f"{head} ({cols}){more}: " + " | ".join(shown) + "."


def answer_response(program: str, smoothie: Smoothie, tree: exp.Expr | None = None) -> str:
    """What was searched, then what came back."""
    return f"{describe_search(program, tree)} {summarise_result(smoothie)}"


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


def out_of_scope_response(db: Any, act: str) -> str:
    """A polite reply for not_related / cannot_answer / cannot_understand turns."""
    lead = {
        "not_related": "Sorry, that is not something this database can tell you.",
        "cannot_answer": "Sorry, the database does not hold that information.",
        "cannot_understand": "Sorry, I did not understand that.",
    }.get(act, "Sorry, I cannot answer that.")
    return f"{lead} I can answer questions about these tables: {schema_overview(db)}."


def candidate_columns(db: Any, utterance: str, k: int = 3,
                      threshold: float = 70.0) -> list[str]:
    """``table.column`` names that the utterance's words fuzzily mention, best first.

    With fewer than ``k`` matches the list is padded with other columns of the
    matched tables (numeric ones first: vague words like "best" or "top"
    usually mean a measure), or of the first table when nothing matched, so
    a clarifying question always offers concrete choices.
    """
    words = [w.lower() for w in _WORD.findall(utterance) if w.lower() not in _STOP and len(w) >= 3]
    scored: dict[str, float] = {}
    by_table: dict[str, list[tuple[str, bool]]] = {}
    for t in list_tables(db):
        if t.is_documents:
            continue
        for c in t.columns:
            name = f"{t.name}.{c}"
            numeric = any(x in t.type_of(c) for x in ("INT", "REAL", "NUM", "FLOA", "DOUB", "DEC"))
            by_table.setdefault(t.name, []).append((name, numeric))
            label = f"{t.name} {c}".replace("_", " ").lower()
            col_words = c.replace("_", " ").lower()
            best = max((max(fuzz.ratio(w, col_words), fuzz.partial_ratio(w, label) - 10)
                        for w in words), default=0.0)
            if best >= threshold:
                scored[name] = best
    ranked = sorted(scored, key=lambda n: (-scored[n], n))[:k]
    tables = list(dict.fromkeys(n.split(".", 1)[0] for n in ranked)) or list(by_table)[:1]
    pool = [(n, num) for t in tables for n, num in by_table.get(t, []) if n not in ranked]
    pool.sort(key=lambda p: not p[1])  # stable: numeric columns first, schema order kept
    return ranked + [n for n, _ in pool[: k - len(ranked)]]


def schema_mentions(db: Any, utterance: str, threshold: float = 85.0) -> list[str]:
    """Tables and ``table.column`` names that a word of the utterance names (near-exactly)."""
    words = [w.lower() for w in _WORD.findall(utterance) if w.lower() not in _STOP and len(w) >= 3]
    found = []
    for t in list_tables(db):
        for name, label in [(t.name, t.name), *((f"{t.name}.{c}", c) for c in t.columns)]:
            label = label.replace("_", " ").lower()
            if any(fuzz.ratio(w, label) >= threshold or fuzz.ratio(w.rstrip("s"), label) >= threshold
                   for w in words):
                found.append(name)
    return found


def clarify_question(db: Any, utterance: str) -> tuple[str, list[str]]:
    """A clarifying question naming candidate columns, and those columns."""
    cols = candidate_columns(db, utterance)
    if len(cols) == 1:
        return f"Do you mean {cols[0]}? Please tell me which column or meaning you have in mind.", cols
    options = ", ".join(cols[:-1]) + f" or {cols[-1]}"
    return f"Your question could mean several things. Which do you mean: {options}?", cols


SOCIAL = {
    "greeting": "Hello! Ask me a question about the database.",
    "thank_you": "You're welcome! Anything else?",
    "goodbye": "Goodbye!",
    "affirm": "Good. Ask me another question whenever you like.",
    "negate": "Okay. Could you rephrase what you are looking for?",
}
