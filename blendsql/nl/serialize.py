"""Serialise a database schema for a parser prompt (BlendSQL §4.1, SUQL §5.2).

What a model needs to write a correct query, and no more:
- each table's ``CREATE TABLE`` statement, then ``n`` example rows, so the model
  sees real value formats;
- document tables (FTS5 virtual tables) by their CREATE statement only: their
  passages are long and are reached through ``MATCH`` or an ingredient;
- columns with a small vocabulary (≤ ``vocab_limit`` distinct values) with their
  values listed, so the model writes ``= 'Lunch'`` rather than ``= 'lunch time'``;
- "bridge" hints: question n-grams that fuzzily match cell values, telling the
  model which column holds a value the question mentions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz, process

from blendsql.nl.source import as_backend

_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True)
class TableInfo:
    name: str
    create_sql: str
    columns: tuple[str, ...]
    is_documents: bool
    types: tuple[str, ...] = ()  # declared column types ('' when none), as ``columns``

    def type_of(self, column: str) -> str:
        """The declared type of ``column`` in upper case ('' when unknown)."""
        return dict(zip(self.columns, self.types, strict=False)).get(column, "").upper()


def list_tables(db: Any) -> list[TableInfo]:
    """User tables and full-text document tables (FTS shadow and ``_``-named tables
    excluded), read through the backend (``db``: a BlendSQL, a backend or a connection)."""
    return [TableInfo(t.name, t.ddl, t.column_names, t.documents,
                      tuple(ty for _, ty in t.columns))
            for t in as_backend(db).schema()]


def serialize_schema(
    db: Any,
    *,
    n_rows: int = 3,
    vocab_limit: int = 10,
    tables: list[str] | None = None,
    cell_chars: int = 60,
) -> str:
    """The prompt text describing ``db``'s schema."""
    backend = as_backend(db)
    parts = []
    with backend.session():
        for t in list_tables(backend):
            if tables is not None and t.name not in tables:
                continue
            parts.append(t.create_sql + ";")
            if t.is_documents:
                continue
            rows = _example_rows(backend, t, n_rows, cell_chars)
            if rows:
                parts.append(rows)
            vocab = _vocab_lines(backend, t, vocab_limit)
            if vocab:
                parts.append(vocab)
    return "\n\n".join(parts)


def _example_rows(db: Any, t: TableInfo, n: int, cell_chars: int) -> str:
    if n <= 0:
        return ""
    _, rows = db.sample_rows(t.name, n)
    if not rows:
        return ""
    header = " | ".join(t.columns)
    body = "\n".join(" | ".join(_cell(v, cell_chars) for v in r) for r in rows)
    return f"/*\n{n} example rows:\nSELECT * FROM {t.name} LIMIT {n};\n{header}\n{body}\n*/"


def _cell(v: object, limit: int) -> str:
    s = "NULL" if v is None else str(v).replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _vocab_lines(db: Any, t: TableInfo, limit: int) -> str:
    """Columns whose values repeat and number at most ``limit`` (a real vocabulary)."""
    lines = []
    n_rows = db.row_count(t.name)
    for c in t.columns:
        vals = db.distinct_values(t.name, c, limit + 1)
        repeats = len(vals) < n_rows
        if 1 < len(vals) <= limit and repeats and all(isinstance(v, str) for v in vals):
            listed = ", ".join(repr(v) for v in vals)
            lines.append(f"-- {t.name}.{c} takes the values: {listed}")
    return "\n".join(lines)


def bridge_hints(
    db: Any,
    question: str,
    *,
    threshold: float = 85.0,
    max_hints: int = 8,
    max_values: int = 5000,
) -> list[tuple[str, str, str]]:
    """(question phrase, table.column, cell value) triples where they match fuzzily.

    Only text cells of non-document tables are considered; n-grams of 1-4 words.
    """
    grams = _ngrams(question)
    if not grams:
        return []
    backend = as_backend(db)
    hints: dict[str, tuple[float, str, str, str]] = {}
    with backend.session():
        for t in list_tables(backend):
            if t.is_documents:
                continue
            for c in t.columns:
                values = backend.distinct_values(t.name, c, max_values, text_lengths=(2, 80))
                if values:
                    _match_column(grams, values, f"{t.name}.{c}", threshold, hints)
    best = sorted(hints.values(), key=lambda h: -h[0])[:max_hints]
    return [(phrase, col, val) for _, phrase, col, val in best]


def _match_column(
    grams: list[str], values: list[str], column: str, threshold: float,
    hints: dict[str, tuple[float, str, str, str]],
) -> None:
    lowered = [v.lower() for v in values]
    for g in grams:
        hit = process.extractOne(g, lowered, scorer=fuzz.ratio, score_cutoff=threshold)
        if hit is None:
            continue
        score = float(hit[1]) + len(g) / 100  # prefer longer phrases on ties
        key = f"{column}={values[hit[2]]}"
        if key not in hints or hints[key][0] < score:
            hints[key] = (score, g, column, values[hit[2]])


def _ngrams(question: str, max_n: int = 4) -> list[str]:
    words = _WORD.findall(question.lower())
    grams = {" ".join(words[i : i + n]) for n in range(1, max_n + 1) for i in range(len(words) - n + 1)}
    return [g for g in grams if len(g) >= 3 and g not in _STOP]


_STOP = {
    "the", "and", "was", "who", "what", "which", "when", "where", "how", "many", "much",
    "for", "from", "with", "that", "this", "did", "does", "are", "is", "of", "in", "on",
    "has", "have", "had", "his", "her", "its", "their", "they", "name", "year", "one",
}


def format_hints(hints: list[tuple[str, str, str]]) -> str:
    """Hints as prompt lines."""
    return "\n".join(f"-- '{p}' in the question may refer to {c} = '{v}'" for p, c, v in hints)
