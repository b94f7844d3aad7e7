"""Ask a question in plain language: parse, execute, fall back, answer.

``ask`` parses the question into a BlendSQL program and executes it. When the
program cannot be written, fails, finds nothing, or its answer says it cannot
answer, it falls back to end-to-end QA: the table and the top BM25 passages in
one prompt (the BlendSQL paper's fallback). The same end-to-end prompt is the
"end-to-end" baseline of the HybridQA benchmark.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blendsql.db.documents import fts_tables, search
from blendsql.errors import BlendSQLError
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Text
from blendsql.nl.parser import Parser, ParseResult, Turn
from blendsql.nl.serialize import list_tables
from blendsql.smoothie import Smoothie

if TYPE_CHECKING:
    from blendsql.blend import BlendSQL

_CANNOT = ("cannot answer", "can't answer", "not enough information", "unknown", "no answer")


@dataclass
class Answer:
    """What ``BlendSQL.ask`` returns."""

    answer: Any
    program: str | None
    smoothie: Smoothie | None
    fallback_used: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    attempts: list[tuple[str, str | None]] = field(default_factory=list)

    def __str__(self) -> str:
        via = "end-to-end fallback" if self.fallback_used else "program"
        return f"{self.answer}  (via {via}; program: {self.program or '-'})"


def answer_value(smoothie: Smoothie) -> Any:
    """The answer a result denotes: one cell, a list of values, or None when empty."""
    df = smoothie.df
    if df.empty or not len(df.columns):
        return None
    cells = [v for v in df.to_numpy().ravel().tolist() if v is not None and v == v]
    if not cells:
        return None
    return cells[0] if len(cells) == 1 else cells


def is_non_answer(value: Any) -> bool:
    """True for None, empty, or a model's "I cannot answer" text."""
    if value is None:
        return True
    if isinstance(value, str):
        low = value.strip().lower()
        return not low or any(p in low for p in _CANNOT)
    return False


def ask(
    bsql: BlendSQL,
    question: str,
    *,
    parser: Parser | None = None,
    fallback: bool = True,
    history: Sequence[Turn] = (),
) -> Answer:
    """Answer ``question`` over ``bsql``'s database (see module docstring)."""
    model = bsql.model
    parser = parser or Parser(model)
    parsed: ParseResult = parser.parse(question, bsql.db.conn, bsql.registry, history)
    out = Answer(None, parsed.program, None, False, parsed.prompt_tokens,
                 parsed.completion_tokens, attempts=parsed.attempts)
    if parsed.program is not None:
        try:
            out.smoothie = bsql.execute(parsed.program)
            out.answer = answer_value(out.smoothie)
            out.prompt_tokens += out.smoothie.meta.prompt_tokens
            out.completion_tokens += out.smoothie.meta.completion_tokens
        except BlendSQLError as e:
            out.error = str(e)
    else:
        out.error = parsed.attempts[-1][1] if parsed.attempts else "no program"
    if fallback and is_non_answer(out.answer):
        text, usage = end_to_end(bsql.db.conn, question, model)
        out.answer, out.fallback_used = text, True
        out.prompt_tokens += usage[0]
        out.completion_tokens += usage[1]
    return out


def end_to_end_prompt(
    conn: sqlite3.Connection, question: str, *, k: int = 3, table_chars: int = 3000,
    passage_chars: int = 600,
) -> str:
    """Table(s) and top-``k`` BM25 passages in one prompt, each truncated to a budget."""
    parts = []
    for t in list_tables(conn):
        if t.is_documents:
            continue
        df = _frame(conn, t.name)
        parts.append(f"Table {t.name}:\n" + df.to_csv(index=False)[:table_chars])
    for d in fts_tables(conn):
        hits = search(conn, d, question, k)
        for row in hits.drop(columns=["score"]).itertuples(index=False):
            parts.append("Passage: " + " | ".join(str(v) for v in row)[:passage_chars])
    parts += [f"Question: {question}", "Answer with a few words only.", "Answer:"]
    return "\n\n".join(parts)


def _frame(conn: sqlite3.Connection, table: str) -> Any:
    import pandas as pd

    cur = conn.execute(f'SELECT * FROM "{table}"')
    return pd.DataFrame(cur.fetchall(), columns=[c[0] for c in cur.description])


def end_to_end(conn: sqlite3.Connection, question: str, model: Model) -> tuple[str, tuple[int, int]]:
    """End-to-end QA: one prompt, a short free-text answer and (prompt, completion) tokens."""
    prompt = end_to_end_prompt(conn, question)
    resp = model.generate([Request(prompt=prompt, constraint=Text(), max_tokens=24, stop=("\n",))])[0]
    return resp.text.strip(), (resp.usage.prompt_tokens, resp.usage.completion_tokens)
