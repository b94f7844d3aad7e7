"""Full-text document tables (SQLite FTS5) and a small BM25 search helper.

Documents live next to the structured tables in the same SQLite file so a
BlendSQL query can retrieve them with plain SQL (``documents MATCH ...``,
``ORDER BY rank``) and hand the rows to an ingredient as context.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from blendsql.db.frames import rows_to_frame
from blendsql.errors import ExecutionError

TOKENIZERS = ("unicode61", "trigram", "porter", "ascii")
_WORD = re.compile(r"\w+", re.UNICODE)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Docs = pd.DataFrame | Sequence[Mapping[str, Any]] | Sequence[str]


def quote_ident(name: str) -> str:
    """Quote an SQL identifier so any user-given name is safe to splice into DDL."""
    return '"' + name.replace('"', '""') + '"'


def _docs_to_rows(docs: Docs) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Normalise the accepted document shapes to (columns, rows of text).

    A list of plain strings becomes a single ``content`` column; dicts may
    have different keys (the union is used, in first-seen order).
    """
    if isinstance(docs, pd.DataFrame):
        columns = [str(c) for c in docs.columns]
        records: list[Mapping[str, Any]] = [
            dict(zip(columns, r, strict=True)) for r in docs.itertuples(index=False, name=None)
        ]
    else:
        items = list(docs)
        if all(isinstance(d, str) for d in items):
            return ["content"], [(d,) for d in items]
        columns = []
        records = []
        for d in items:
            if not isinstance(d, Mapping):
                raise ExecutionError(
                    f"a document must be a dict or a string, got {type(d).__name__}",
                    hint="pass a DataFrame, a list of dicts (e.g. {'title': ..., 'content': ...}) "
                    "or a list of strings",
                )
            records.append(d)
            columns += [str(k) for k in d if str(k) not in columns]
    if not columns:
        columns = ["title", "content"]
    rows = [tuple(_as_text(r.get(c)) for c in columns) for r in records]
    return columns, rows


def is_missing(value: Any) -> bool:
    """None, NaN, NaT or pandas NA: a cell that should be SQL NULL."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # array-likes have no single truth value
        return False


def _as_text(value: Any) -> str | None:
    """FTS5 indexes text; NULL stays NULL, everything else becomes its string form."""
    return None if is_missing(value) else str(value)


def build_fts(
    conn: sqlite3.Connection,
    name: str,
    docs: Docs,
    tokenizer: str = "unicode61",
    *,
    replace: bool = True,
) -> int:
    """Create FTS5 table ``name`` holding ``docs``; returns the number of rows written.

    ``tokenizer``: ``unicode61`` (words, diacritics folded; the default),
    ``porter`` (English stemming), ``trigram`` (substring matching, good for
    names and partial words) or ``ascii``.
    """
    if tokenizer not in TOKENIZERS:
        raise ExecutionError(
            f"unknown FTS5 tokenizer {tokenizer!r}",
            hint=f"use one of: {', '.join(TOKENIZERS)}",
        )
    columns, rows = _docs_to_rows(docs)
    col_sql = ", ".join(quote_ident(c) for c in columns)
    if replace:
        conn.execute(f"DROP TABLE IF EXISTS {quote_ident(name)}")
    try:
        conn.execute(
            f"CREATE VIRTUAL TABLE {quote_ident(name)} USING fts5({col_sql}, tokenize={tokenizer!r})"
        )
    except sqlite3.OperationalError as e:
        raise ExecutionError(
            f"could not create FTS5 table {name!r}: {e}",
            hint="FTS5 needs SQLite >= 3.9 (trigram >= 3.34); "
            f"this Python has SQLite {sqlite3.sqlite_version}",
        ) from e
    marks = ", ".join("?" for _ in columns)
    conn.executemany(f"INSERT INTO {quote_ident(name)} ({col_sql}) VALUES ({marks})", rows)
    conn.commit()
    return len(rows)


def fts_query(text: str, *, operator: str = "OR") -> str:
    """Turn free user text into a safe FTS5 MATCH expression.

    Every word becomes a quoted string token, so FTS5 syntax in the input
    (``NEAR``, ``*``, ``:``, ``"``, ``AND``/``NOT``, parentheses) is treated as
    plain words. Words are joined with OR by default: BM25 then ranks the rows
    matching more and rarer words first. Returns ``""`` when there are no words.
    """
    if operator not in ("OR", "AND"):
        raise ValueError("operator must be 'OR' or 'AND'")
    words = _WORD.findall(text or "")
    seen: list[str] = []
    for w in words:
        if w.lower() not in (s.lower() for s in seen):
            seen.append(w)
    return f" {operator} ".join('"' + w.replace('"', '""') + '"' for w in seen)


def fts_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """Column names of a table (FTS5 virtual tables included)."""
    return [r[1] for r in conn.execute(f"PRAGMA table_info({quote_ident(table)})")]


def fts_tables(conn: sqlite3.Connection) -> list[str]:
    """Names of the FTS5 virtual tables in the main schema (the document tables).

    Schema serialisers use this to withhold document tables from prompts.
    """
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' "
        "AND lower(sql) LIKE '%using fts5%' ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def search(
    conn: sqlite3.Connection,
    table: str,
    query: str,
    k: int = 5,
    *,
    operator: str = "OR",
) -> pd.DataFrame:
    """Top-``k`` rows of FTS5 table ``table`` for free text ``query``, best first.

    Adds a ``score`` column (the BM25 score, negated so that higher is
    better). The user's text is escaped with :func:`fts_query`, so it can
    never be a malformed or injected MATCH expression.
    """
    if table not in fts_tables(conn):
        raise ExecutionError(
            f"{table!r} is not an FTS5 table",
            hint=f"document tables here: {', '.join(fts_tables(conn)) or '(none)'}",
        )
    columns = fts_columns(conn, table)
    match = fts_query(query, operator=operator)
    if not match or k <= 0:
        return rows_to_frame([*columns, "score"], [])
    t = quote_ident(table)
    cols = ", ".join(quote_ident(c) for c in columns)
    rows = conn.execute(
        f"SELECT {cols}, -bm25({t}) AS score FROM {t} WHERE {t} MATCH ? ORDER BY bm25({t}) LIMIT ?",
        (match, int(k)),
    ).fetchall()
    return rows_to_frame([*columns, "score"], rows)

