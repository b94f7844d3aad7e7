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
import sqlite3
from dataclasses import dataclass

from rapidfuzz import fuzz, process

_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True)
class TableInfo:
    name: str
    create_sql: str
    columns: tuple[str, ...]
    is_documents: bool


def list_tables(conn: sqlite3.Connection) -> list[TableInfo]:
    """User tables and FTS5 document tables (FTS shadow tables excluded)."""
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    fts = {n for n, s in rows if "USING FTS" in s.upper()}
    shadow = {f"{t}_{suffix}" for t in fts for suffix in ("data", "idx", "content", "docsize", "config")}
    out = []
    for name, sql in rows:
        if name in shadow or name.startswith("_"):
            continue
        cols = tuple(r[1] for r in conn.execute(f'PRAGMA table_info("{name}")'))
        out.append(TableInfo(name, sql.strip(), cols, name in fts))
    return out


def serialize_schema(
    conn: sqlite3.Connection,
    *,
    n_rows: int = 3,
    vocab_limit: int = 10,
    tables: list[str] | None = None,
    cell_chars: int = 60,
) -> str:
    """The prompt text describing ``conn``'s schema."""
    parts = []
    for t in list_tables(conn):
        if tables is not None and t.name not in tables:
            continue
        parts.append(t.create_sql + ";")
        if t.is_documents:
            continue
        rows = _example_rows(conn, t, n_rows, cell_chars)
        if rows:
            parts.append(rows)
        vocab = _vocab_lines(conn, t, vocab_limit)
        if vocab:
            parts.append(vocab)
    return "\n\n".join(parts)


def _example_rows(conn: sqlite3.Connection, t: TableInfo, n: int, cell_chars: int) -> str:
    if n <= 0:
        return ""
    cur = conn.execute(f'SELECT * FROM "{t.name}" LIMIT {int(n)}')
    rows = cur.fetchall()
    if not rows:
        return ""
    header = " | ".join(t.columns)
    body = "\n".join(" | ".join(_cell(v, cell_chars) for v in r) for r in rows)
    return f"/*\n{n} example rows:\nSELECT * FROM {t.name} LIMIT {n};\n{header}\n{body}\n*/"


def _cell(v: object, limit: int) -> str:
    s = "NULL" if v is None else str(v).replace("\n", " ")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _vocab_lines(conn: sqlite3.Connection, t: TableInfo, limit: int) -> str:
    """Columns whose values repeat and number at most ``limit`` (a real vocabulary)."""
    lines = []
    n_rows = conn.execute(f'SELECT COUNT(*) FROM "{t.name}"').fetchone()[0]
    for c in t.columns:
        vals = conn.execute(
            f'SELECT DISTINCT "{c}" FROM "{t.name}" WHERE "{c}" IS NOT NULL LIMIT {limit + 1}'
        ).fetchall()
        repeats = len(vals) < n_rows
        if 1 < len(vals) <= limit and repeats and all(isinstance(v[0], str) for v in vals):
            listed = ", ".join(repr(v[0]) for v in vals)
            lines.append(f"-- {t.name}.{c} takes the values: {listed}")
    return "\n".join(lines)


def bridge_hints(
    conn: sqlite3.Connection,
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
    hints: dict[str, tuple[float, str, str, str]] = {}
    for t in list_tables(conn):
        if t.is_documents:
            continue
        for c in t.columns:
            values = [
                r[0]
                for r in conn.execute(
                    f'SELECT DISTINCT "{c}" FROM "{t.name}" WHERE typeof("{c}") = \'text\' '
                    f'AND length("{c}") BETWEEN 2 AND 80 LIMIT {max_values}'
                )
            ]
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
