"""Program sketches for a table with linked passages (HybridQA-shaped databases).

Why: on HybridQA a 1.5B model asked for a whole BlendSQL program writes plain
SQL returning a wrong cell, or an LLMQA call over the wrong passages. It is
good at one thing: the plain SQL query it naturally writes names the row(s)
the question is about (``WHERE w.role = 'Beth Lookner' AND w.year = 1998``,
``ORDER BY w.year DESC LIMIT 1``), even when its SELECT list is wrong. So the
model writes that query, the layer keeps only its row selection
(:func:`row_filter`) and builds the rest of the program from a fixed sketch::

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

When the model's query does not compile (after a retry with the error),
selects every row, no row (even after dropping the AND-ed conditions that
match nothing, :func:`relax`) or too many, the condition becomes the rows linked to the passages that best match
the question in full-text search (still a program: ``documents MATCH``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blendsql.db.backend import Backend, is_text_type
from blendsql.db.documents import fts_query
from blendsql.errors import BlendSQLError, ExecutionError
from blendsql.nl.serialize import TableInfo, bridge_hints, list_tables
from blendsql.nl.source import as_backend

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
    caption: str = ""  # the table's title and section, when the loader recorded them


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def link_on(layout_table: str, column: str, documents: str, title: str) -> str:
    """SQL condition: the cell names the passage — the title inside the cell (also
    with the cell's tokenised `` ,`` undone: ``Somerset , New Jersey``), or a cell
    of 4+ characters inside the title (``Seinfeld (TV series)``, ``FK Vojvodina``,
    ``Sunshine Coast Region``)."""
    cell = f"{_q(layout_table)}.{_q(column)}"
    doc = f"{_q(documents)}.{_q(title)}"
    return (f"(instr({cell}, {doc}) > 0 OR instr(replace({cell}, ' ,', ','), {doc}) > 0 "
            f"OR (length({cell}) >= 4 AND instr({doc}, {cell}) > 0))")


def passage_layout(db: Any) -> PassageLayout | None:
    """The layout when ``db`` holds exactly one table and one documents table
    (with ``title`` and ``content``) and some text cells name passages; else None
    (always None on a backend whose rows have no id a query can name)."""
    backend = as_backend(db)
    if not backend_has_rowid(backend):
        return None
    tables = list_tables(backend)
    docs = [t for t in tables if t.is_documents]
    plain = [t for t in tables if not t.is_documents]
    if len(docs) != 1 or len(plain) != 1:
        return None
    d, t = docs[0].name, plain[0]
    cols = {c.lower(): c for c in docs[0].columns}
    if "title" not in cols or "content" not in cols:
        return None
    title, content = cols["title"], cols["content"]
    n_rows, n_docs = backend.row_count(t.name), backend.row_count(d)
    if not n_rows or not n_docs or n_rows * n_docs > MAX_LINK_PROBE:
        return None
    linked = tuple(c for c in t.columns
                   if is_text_type(t.type_of(c)) and _links(backend, t.name, c, d, title))
    return PassageLayout(t, d, title, content, linked, table_caption(backend, t.name)) if linked else None


def backend_has_rowid(db: Backend) -> bool:
    """True where every table has a ``rowid`` the sketch can name rows by (PostgreSQL's
    ``ctid`` stands in for it, see ``blendsql.db.transpile``; Spark has none)."""
    return db.dialect in ("sqlite", "duckdb", "postgres")


def _links(db: Backend, table: str, column: str, documents: str, title: str) -> bool:
    """True when some cell of ``table.column`` names a passage of ``documents``."""
    _, rows = db.execute(f"SELECT 1 FROM {_q(table)} JOIN {_q(documents)} ON "
                         f"{link_on(table, column, documents, title)} LIMIT 1")
    return bool(rows)


def table_caption(db: Any, table: str) -> str:
    """``title — section`` of a table whose provenance a loader recorded (``_tables``,
    e.g. HybridQA's Wikipedia page); '' otherwise. Rows alone often do not say what
    the table lists ("the most recent song to win" what?)."""
    import json

    from blendsql.db.loaders import META_TABLES

    backend = as_backend(db)
    if META_TABLES not in backend.tables():
        return ""
    try:
        _, rows = backend.execute(f"SELECT source FROM {_q(META_TABLES)} WHERE table_name = ?",
                                  (table,))
        meta = json.loads(rows[0][0]) if rows and rows[0][0] else {}
    except (BlendSQLError, ValueError):
        return ""
    if not isinstance(meta, dict):
        return ""
    parts = [str(meta[k]).strip() for k in ("title", "section_title") if meta.get(k)]
    return " — ".join(p for p in parts if p)


def query_prompt(db: Any, layout: PassageLayout, question: str,
                 *, n_rows: int = 2, cell_chars: int = 30, max_hints: int = 4,
                 retry: tuple[str, str] | None = None) -> str:
    """A short prompt asking for a plain SQL query on the table.

    The model writes the query it naturally writes (chat models answer an
    instruction, they do not continue a ``WHERE``); only its row selection is
    kept (:func:`row_filter`). Compact on purpose (columns, two example rows with
    short cells, the cells the question mentions): the reader's prompt comes
    after it, and the two together should cost less than one prompt holding
    the whole table.
    """
    t = layout.table
    backend = as_backend(db)
    lines = [f"Table {t.name}" + (f" ({layout.caption})" if layout.caption else "") + " columns: " + ", ".join(
        f"{c} ({ty.lower() or 'any'})" for c, ty in zip(t.columns, t.types, strict=False))]
    _, rows = backend.sample_rows(t.name, n_rows)
    if rows:
        lines.append("Example rows:")
        lines += [" | ".join(_short(v, cell_chars) for v in r) for r in rows]
    for phrase, col, val in bridge_hints(backend, question, max_hints=max_hints):
        lines.append(f"-- '{phrase}' in the question may refer to {col} = {_lit(val)}")
    lines.append(f"Write one SQLite query on table {t.name} for the question. "
                 "Answer with the query only.")
    lines.append(f"Question: {question}")
    if retry is not None:
        lines.append(f"A previous query was: {retry[0]}\nIt failed: {retry[1]}\n"
                     "Write a corrected query.")
    lines.append("SQL:")
    return "\n".join(lines)


def _short(v: object, limit: int) -> str:
    s = "NULL" if v is None else " ".join(str(v).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


class SketchError(ValueError):
    """The model's query gives no row selection (worded for the retry prompt)."""


def row_filter(layout: PassageLayout, sql: str) -> str:
    """The rows ``sql`` selects, as a condition ``w.rowid IN (SELECT w.rowid ...)``.

    Keeps the query's WHERE and, unless it aggregates, its ORDER BY / LIMIT
    ("the most recent song" is ``ORDER BY year DESC LIMIT 1``); drops what it
    selects (the model often picks a wrong column when the answer sits in a
    passage). Raises :class:`SketchError` for a query that is not one SELECT on
    the table alone, or that selects every row.
    """
    import sqlglot
    from sqlglot import exp

    if "{{" in sql or "<<" in sql:
        raise SketchError("write plain SQL (no ingredient)")
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError as e:  # ParseError, TokenError (a literal cut off), ...
        raise SketchError(f"the query does not parse: {(str(e).splitlines() or [''])[0]}") from None
    name = layout.table.name
    if not isinstance(tree, exp.Select):
        raise SketchError(f"write one SELECT query on table {name}")
    others = {t.name for t in tree.find_all(exp.Table)} - {name}
    if others:
        raise SketchError(f"use only table {name} (no table {', '.join(sorted(others))})")
    where = tree.args.get("where")
    aggregates = tree.args.get("group") is not None or any(
        e.find(exp.AggFunc) is not None for e in tree.expressions)
    order, limit = tree.args.get("order"), tree.args.get("limit")
    keep_order = not aggregates and limit is not None
    if where is None and not keep_order:
        raise SketchError("the query selects every row")
    inner = exp.select(exp.column("rowid", table=name)).from_(name)
    if where is not None:
        inner.set("where", where.copy())
    if keep_order and limit is not None:
        if order is not None:
            inner.set("order", order.copy())
        inner.set("limit", limit.copy())
        if tree.args.get("offset") is not None:
            inner.set("offset", tree.args["offset"].copy())
    return f"{_q(name)}.rowid IN ({inner.sql(dialect='sqlite')})"


def relax(db: Any, layout: PassageLayout, sql: str, seconds: float = 5.0) -> str | None:
    """A weaker row filter when ``sql``'s WHERE matches nothing: the AND-ed conditions
    that each match some row (a small model adds a guessed value). None if none do."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return None
    where = tree.args.get("where")
    if where is None or not isinstance(where.this, exp.And):
        return None
    parts = list(where.this.flatten())
    table = layout.table.name
    backend = as_backend(db)
    good = [p for p in parts if _matches(backend, table, p.sql(dialect="sqlite"), seconds)]
    if not good or len(good) == len(parts):
        return None
    cond = exp.and_(*[p.copy() for p in good])
    inner = exp.select(exp.column("rowid", table=table)).from_(table).where(cond)
    return f"{_q(table)}.rowid IN ({inner.sql(dialect='sqlite')})"


def _matches(db: Backend, table: str, condition: str, seconds: float) -> bool:
    try:
        return count_rows(db, table, condition, seconds) > 0
    except BlendSQLError:
        return False


def count_rows(db: Any, table: str, condition: str, seconds: float = 5.0) -> int:
    """Rows of ``table`` matching ``condition``; raises an
    :class:`~blendsql.errors.ExecutionError` when it does not compile. A time limit
    (``seconds``, for this use of the session) keeps a bad condition from hanging."""
    if "{{" in condition or "<<" in condition or ";" in condition:
        raise ExecutionError("write a plain SQL condition (no ingredient, one statement)",
                             hint="the sketch keeps only the query's row selection")
    backend = as_backend(db)
    with backend.session(timeout=seconds):
        _, rows = backend.execute(f"SELECT COUNT(*) FROM {_q(table)} WHERE {condition}")
    return int(rows[0][0])


def search_condition(layout: PassageLayout, question: str, k: int = 3, within: str | None = None) -> str:
    """Rows linked to the ``k`` passages that best match ``question`` (FTS5, BM25),
    among the rows matching ``within`` when given (a selection too broad to read whole)."""
    t, d = _q(layout.table.name), _q(layout.documents)
    match = fts_query(question)
    on = " OR ".join(link_on(layout.table.name, c, layout.documents, layout.title) for c in layout.linked)
    among = f" AND ({within})" if within else ""
    return (f"{t}.rowid IN (SELECT {t}.rowid FROM {t} JOIN {d} ON {on} WHERE {d} MATCH {_lit(match)}{among} "
            f"ORDER BY {d}.rank LIMIT {int(k)})")


def row_text(layout: PassageLayout) -> str:
    """SQL text of a row as ``column: value; ...`` (NULL cells left out)."""
    t = _q(layout.table.name)
    parts = [f"ifnull({_lit(c + ': ')} || {t}.{_q(c)} || '; ', '')" for c in layout.table.columns]
    return " || ".join(parts)


#: the reader may abstain, so that ``ask`` falls back to end-to-end QA over the whole table
ABSTAIN_INSTRUCTIONS = ("Answer the question using the information below. Reply with the answer "
                        "only, without explanation. If the information does not give the answer, "
                        "reply: unknown")


def build_program(layout: PassageLayout, question: str, condition: str,
                  context_chars: int = 2400, abstain: bool = False) -> str:
    """The sketch's program: LLMQA over the matching rows and their linked passages.

    ``abstain``: the reader is told to reply "unknown" when the rows and passages do
    not give the answer (a non-answer, on which ``ask`` falls back to end-to-end QA).
    """
    t, d = _q(layout.table.name), _q(layout.documents)
    on = " OR ".join(link_on(layout.table.name, c, layout.documents, layout.title) for c in layout.linked)
    title, content = f"{d}.{_q(layout.title)}", f"{d}.{_q(layout.content)}"
    caption = f"SELECT {_lit('Table: ' + layout.caption)} AS text UNION ALL " if layout.caption else ""
    context = (f"{caption}SELECT {row_text(layout)} AS text FROM {t} WHERE {condition} "
               f"UNION ALL SELECT DISTINCT {title} || ': ' || {content} FROM {d} JOIN {t} ON {on} "
               f"WHERE {condition}")
    extra = f", instructions={_lit(ABSTAIN_INSTRUCTIONS)}" if abstain else ""
    return (f"SELECT {{{{LLMQA({_lit(question)}, ({context}), "
            f"context_chars={int(context_chars)}{extra})}}}}")
