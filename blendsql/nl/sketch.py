"""Program sketches for a table with linked passages (HybridQA-shaped databases).

Why: on HybridQA a 1.5B model asked for a whole BlendSQL program writes plain
SQL returning a wrong cell, or an LLMQA call over the wrong passages. It is
good at one small thing: a SQL condition naming the row(s) a question is
about (``w.role = 'Beth Lookner' AND w.year = 1998``). So the model writes
only that condition and the layer builds the rest of the program from a
fixed sketch::

    SELECT {{LLMQA('<question>', (
        SELECT <the row as text> AS text FROM w WHERE <condition>
        UNION ALL
        SELECT documents.title || ': ' || documents.content FROM documents
          JOIN w ON <a cell of w names the passage> WHERE <condition>),
        context_chars=...)}}

The reader then sees only the matching rows and the passages their cells link
to: fewer tokens than a prompt holding the whole table, and the right
passages, which BM25 over the question often misses. The result is an ordinary
BlendSQL program, executed and traced like any other.

When the model's condition does not compile, matches no row or matches too
many, the condition becomes the rows linked to the passages that best match
the question in full-text search (still a program: ``documents MATCH``).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass

from blendsql.db.documents import fts_columns, fts_query
from blendsql.nl.serialize import TableInfo, bridge_hints, list_tables

#: a cross join of table rows × passages larger than this is not probed for links
MAX_LINK_PROBE = 2_000_000


@dataclass(frozen=True)
class PassageLayout:
    """One table whose text cells name passages of one FTS5 documents table."""

    table: TableInfo
    documents: str
    title: str
    content: str
    linked: tuple[str, ...]  # text columns with at least one cell naming a passage


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def link_on(layout_table: str, column: str, documents: str, title: str) -> str:
    """SQL condition: the cell names the passage (the title inside the cell, or the
    cell followed by a disambiguation such as ``Seinfeld (TV series)``)."""
    cell = f"{_q(layout_table)}.{_q(column)}"
    doc = f"{_q(documents)}.{_q(title)}"
    return f"(instr({cell}, {doc}) > 0 OR {doc} LIKE {cell} || ' (%')"


def passage_layout(conn: sqlite3.Connection) -> PassageLayout | None:
    """The layout when ``conn`` holds exactly one table and one documents table
    (with ``title`` and ``content``) and some text cells name passages; else None."""
    tables = list_tables(conn)
    docs = [t for t in tables if t.is_documents]
    plain = [t for t in tables if not t.is_documents]
    if len(docs) != 1 or len(plain) != 1:
        return None
    d, t = docs[0].name, plain[0]
    cols = {c.lower(): c for c in fts_columns(conn, d)}
    if "title" not in cols or "content" not in cols:
        return None
    title, content = cols["title"], cols["content"]
    n_rows = conn.execute(f"SELECT COUNT(*) FROM {_q(t.name)}").fetchone()[0]
    n_docs = conn.execute(f"SELECT COUNT(*) FROM {_q(d)}").fetchone()[0]
    if not n_rows or not n_docs or n_rows * n_docs > MAX_LINK_PROBE:
        return None
    types = {r[1]: (r[2] or "").upper() for r in conn.execute(f"PRAGMA table_info({_q(t.name)})")}
    linked = tuple(
        c for c in t.columns
        if "TEXT" in types.get(c, "") and conn.execute(
            f"SELECT 1 FROM {_q(t.name)} JOIN {_q(d)} ON {link_on(t.name, c, d, title)} LIMIT 1"
        ).fetchone()
    )
    return PassageLayout(t, d, title, content, linked) if linked else None


def condition_prompt(conn: sqlite3.Connection, layout: PassageLayout, question: str,
                     *, n_rows: int = 2, cell_chars: int = 30, max_hints: int = 4,
                     retry: tuple[str, str] | None = None) -> str:
    """A short prompt whose completion is a WHERE condition on the table.

    Compact on purpose (columns, two example rows with short cells, the cells
    the question mentions): the reader's prompt comes after it, and the two
    together should cost less than one prompt holding the whole table.
    """
    t = layout.table
    types = [r[2] or "" for r in conn.execute(f"PRAGMA table_info({_q(t.name)})")]
    lines = [f"Table {t.name} columns: " + ", ".join(
        f"{c} ({ty.lower() or 'any'})" for c, ty in zip(t.columns, types, strict=False))]
    rows = conn.execute(f"SELECT * FROM {_q(t.name)} LIMIT {int(n_rows)}").fetchall()
    if rows:
        lines.append("Example rows:")
        lines += [" | ".join(_short(v, cell_chars) for v in r) for r in rows]
    for phrase, col, val in bridge_hints(conn, question, max_hints=max_hints):
        lines.append(f"-- '{phrase}' in the question may refer to {col} = {_lit(val)}")
    lines.append(f"Write the SQLite condition that selects the row(s) of {t.name} the question is "
                 f"about, using only its columns.")
    lines.append(f"Question: {question}")
    if retry is not None:
        lines.append(f"A previous condition was: {retry[0]}\nIt failed: {retry[1]}\n"
                     "Write a corrected condition.")
    lines.append(f"SELECT * FROM {t.name} WHERE")
    return "\n".join(lines)


def _short(v: object, limit: int) -> str:
    s = "NULL" if v is None else " ".join(str(v).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


_LEAD = re.compile(r"^\s*(?:```\w*\s*)?(?:SELECT\b.*?\bWHERE\b)?", re.I | re.S)
_TAIL = re.compile(r"\b(?:ORDER\s+BY|GROUP\s+BY|LIMIT)\b.*$", re.I | re.S)


def clean_condition(text: str) -> str:
    """The condition in a completion: without a repeated ``SELECT ... WHERE``, a code
    fence, a trailing ``;`` or clause that is not part of a condition."""
    t = text.strip().split("\n", 1)[0] if not text.strip().startswith("```") else text.strip()
    t = _LEAD.sub("", t, count=1).replace("```", "")
    t = t.split(";", 1)[0]
    t = _TAIL.sub("", t)
    return t.strip()


def count_rows(conn: sqlite3.Connection, table: str, condition: str, seconds: float = 5.0) -> int:
    """Rows of ``table`` matching ``condition``; raises ``sqlite3.Error`` when it does
    not compile. A time limit (``conn.interrupt``) keeps a bad condition from hanging."""
    if "{{" in condition or "<<" in condition or ";" in condition:
        raise sqlite3.OperationalError("write a plain SQL condition (no ingredient, one statement)")
    timer = threading.Timer(seconds, conn.interrupt)
    timer.start()
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {_q(table)} WHERE {condition}").fetchone()[0])
    finally:
        timer.cancel()


def search_condition(layout: PassageLayout, question: str, k: int = 3) -> str:
    """Rows linked to the ``k`` passages that best match ``question`` (FTS5, BM25)."""
    t, d = _q(layout.table.name), _q(layout.documents)
    match = fts_query(question)
    on = " OR ".join(link_on(layout.table.name, c, layout.documents, layout.title) for c in layout.linked)
    return (f"{t}.rowid IN (SELECT {t}.rowid FROM {t} JOIN {d} ON {on} WHERE {d} MATCH {_lit(match)} "
            f"ORDER BY {d}.rank LIMIT {int(k)})")


def row_text(layout: PassageLayout) -> str:
    """SQL text of a row as ``column: value; ...`` (NULL cells left out)."""
    t = _q(layout.table.name)
    parts = [f"ifnull({_lit(c + ': ')} || {t}.{_q(c)} || '; ', '')" for c in layout.table.columns]
    return " || ".join(parts)


def build_program(layout: PassageLayout, question: str, condition: str,
                  context_chars: int = 2400) -> str:
    """The sketch's program: LLMQA over the matching rows and their linked passages."""
    t, d = _q(layout.table.name), _q(layout.documents)
    on = " OR ".join(link_on(layout.table.name, c, layout.documents, layout.title) for c in layout.linked)
    title, content = f"{d}.{_q(layout.title)}", f"{d}.{_q(layout.content)}"
    context = (f"SELECT {row_text(layout)} AS text FROM {t} WHERE {condition} "
               f"UNION ALL SELECT DISTINCT {title} || ': ' || {content} FROM {d} JOIN {t} ON {on} "
               f"WHERE {condition}")
    return (f"SELECT {{{{LLMQA({_lit(question)}, ({context}), "
            f"context_chars={int(context_chars)})}}}}")
