"""Ask a question in plain language: parse, execute, fall back, answer.

``ask`` parses the question into a BlendSQL program and executes it. When the
program cannot be written, fails, finds nothing, or its answer says it cannot
answer, it falls back to end-to-end QA: the table and the top BM25 passages in
one prompt (the BlendSQL paper's fallback), kept compact: the rows most related
to the question and shorter passages (:data:`FALLBACK_PROMPT`), because the
program has already spent tokens. The paper's full-size prompt is the
"end-to-end" baseline of the HybridQA benchmark.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from blendsql.db.backend import DEFAULT_TIMEOUT
from blendsql.errors import BlendSQLError
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Text
from blendsql.nl.choice import ProgramCandidate, choice_step
from blendsql.nl.dberrors import reads_database
from blendsql.nl.inputs import text_arg
from blendsql.nl.parser import Parser, ParseResult, Turn
from blendsql.nl.serialize import list_tables
from blendsql.nl.source import Session, as_backend, recording, search_passages, table_frame
from blendsql.smoothie import Smoothie, TraceStep

_CANNOT = ("cannot answer", "can't answer", "not enough information", "unknown", "no answer")


@dataclass
class Answer:
    """What ``BlendSQL.ask`` returns.

    ``trace``: every statement the question cost, in order: the parser's reads
    and dry runs (``sql`` steps with ``details["source"] == "nl"``), the
    program's own trace (as in ``smoothie.trace``), then the fallback's reads.
    """

    answer: Any
    program: str | None
    smoothie: Smoothie | None
    fallback_used: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    attempts: list[tuple[str, str | None]] = field(default_factory=list)
    trace: list[TraceStep] = field(default_factory=list)
    # with ``Parser(candidates=k)``: the programs written and their votes (``ParseResult``)
    candidates: list[ProgramCandidate] = field(default_factory=list)

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


@reads_database("reading the database to answer the question")
def ask(
    bsql: Session,
    question: str,
    *,
    parser: Parser | None = None,
    fallback: bool = True,
    history: Sequence[Turn] = (),
) -> Answer:
    """Answer ``question`` over ``bsql``'s database, whatever its backend (see module
    docstring). One use of the session under its time limit (the ``timeout``
    option); every statement is in ``Answer.trace``."""
    text_arg(question, "question")
    model = bsql.model
    parser = parser or Parser(model)
    db = bsql.db
    with db.session(timeout=bsql.options.get("timeout", DEFAULT_TIMEOUT)):
        return _ask(bsql, question, model, parser, fallback, history)


def _ask(bsql: Session, question: str, model: Model, parser: Parser, fallback: bool,
         history: Sequence[Turn]) -> Answer:
    db = bsql.db
    steps: list[TraceStep] = []
    with recording(db, steps, "parse"):
        parsed: ParseResult = parser.parse(question, db, bsql.registry, history)
    out = Answer(None, parsed.program, None, False, parsed.prompt_tokens,
                 parsed.completion_tokens, attempts=parsed.attempts, trace=steps,
                 candidates=parsed.candidates)
    if parsed.candidates:
        steps.append(choice_step(parsed.candidates))
    if parsed.program is not None:
        try:
            out.smoothie = bsql.execute(parsed.program)
            steps += out.smoothie.trace
            out.answer = answer_value(out.smoothie)
            out.prompt_tokens += out.smoothie.meta.prompt_tokens
            out.completion_tokens += out.smoothie.meta.completion_tokens
        except BlendSQLError as e:
            steps += e.trace or []
            out.error = str(e)
    else:
        out.error = parsed.attempts[-1][1] if parsed.attempts else "no program"
    if fallback and is_non_answer(out.answer):
        with recording(db, steps, "fallback"):
            text, usage = end_to_end(db, question, model, compact=True)
        out.answer, out.fallback_used = text, True
        out.prompt_tokens += usage[0]
        out.completion_tokens += usage[1]
    return out


def end_to_end_prompt(
    db: Any, question: str, *, k: int = 3, table_chars: int = 3000,
    passage_chars: int = 600, rank_rows: bool = False, rank_sentences: bool = False,
) -> str:
    """Table(s) and top-``k`` BM25 passages in one prompt, each truncated to a budget.

    By default a table is its CSV cut at ``table_chars`` and a passage its
    first ``passage_chars`` characters (the BlendSQL paper's end-to-end
    baseline: what lies past the cut is never seen). ``rank_rows`` instead
    keeps whole rows, the ones most related to the question by BM25, in table
    order, and says how many were left out; ``rank_sentences`` keeps a
    passage's first sentence and its sentences most related to the question.
    """
    parts = []
    backend = as_backend(db)
    for t in list_tables(backend):
        if t.is_documents:
            continue
        df = table_frame(backend, t.name)
        body = ranked_csv(df, question, table_chars) if rank_rows else df.to_csv(index=False)[:table_chars]
        parts.append(f"Table {t.name}:\n" + body)
    for d in backend.fts_tables():
        hits = search_passages(backend, d, question, k)
        for row in hits.drop(columns=["score"]).itertuples(index=False):
            text = " | ".join(str(v) for v in row)
            parts.append("Passage: " + (ranked_sentences(text, question, passage_chars) if rank_sentences
                                        else text[:passage_chars]))
    parts += [f"Question: {question}", "Answer with a few words only.", "Answer:"]
    return "\n\n".join(parts)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def ranked_sentences(text: str, question: str, budget: int) -> str:
    """``text`` within ``budget`` characters: its first sentence (what the passage is
    about), then the sentences most related to the question by BM25, in text order.

    Why: an answer in a passage is often past a cut at the first few hundred
    characters ("... was owned by the Labatt Brewing Company" near the end).
    """
    from blendsql.retrieval.prefilter import bm25_scores

    if len(text) <= budget:
        return text
    sentences = _SENTENCE_END.split(text)
    if len(sentences) < 2:
        return text[:budget]
    scores = bm25_scores(question, sentences[1:])
    keep, used = {0}, len(sentences[0])
    for i in sorted(range(1, len(sentences)), key=lambda j: (-scores[j - 1], j)):
        if used + 1 + len(sentences[i]) <= budget:
            keep.add(i)
            used += 1 + len(sentences[i])
    return " ".join(sentences[i] for i in sorted(keep))[:budget]


def ranked_csv(df: Any, question: str, budget: int) -> str:
    """The table as CSV within ``budget`` characters: whole rows, most relevant first chosen.

    Why: a long table cut at a character budget loses every row past the cut,
    whatever the question asks about; a row cut in half misleads. Rows are
    scored by BM25 against the question, taken best first while they fit,
    and written in their table order under the header. A row that shares no
    word with the question is only taken after every row that does.
    """
    from blendsql.retrieval.prefilter import bm25_scores

    header, lines = _csv_lines(df)
    texts = [" ".join(str(v) for v in row) for row in df.itertuples(index=False)]
    scores = bm25_scores(question, texts)
    keep: list[int] = []
    used = len(header) + 1
    best_first = sorted(range(len(lines)), key=lambda j: (-scores[j], j))
    for i in best_first:
        if used + len(lines[i]) + 1 > budget:
            continue
        keep.append(i)
        used += len(lines[i]) + 1
    if not keep and best_first:  # no whole row fits: the best one, cut, rather than none
        return "\n".join([header, lines[best_first[0]][: max(0, budget - len(header) - 1)],
                          f"(1 of {len(lines)} rows shown, cut: the one most related to the question)"])
    out = [header] + [lines[i] for i in sorted(keep)]
    if len(keep) < len(lines):
        out.append(f"({len(keep)} of {len(lines)} rows shown: those most related to the question)")
    return "\n".join(out)


def _csv_lines(df: Any) -> tuple[str, list[str]]:
    """The CSV header and one CSV record per row (a record may hold quoted line breaks)."""
    import csv
    import io

    def record(values: Any) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(["" if v is None or v != v else v for v in values])
        return buf.getvalue()[:-1]

    return record(df.columns), [record(row) for row in df.itertuples(index=False, name=None)]


#: The fallback's budget (``ask``): the rows most related to the question, in about
#: 1,000 characters; three passages of 400, each its first sentence and then the
#: sentences most related to the question. Chosen on HybridQA dev ids without a
#: model call, by how often the gold answer is in the prompt: 98/150 at 642 prompt
#: tokens, against 100/150 at 889 for the paper's prompt, 92/150 with passages cut
#: by position and 86/150 with the table cut by position too. The fallback comes
#: after a program has already spent tokens, so it must cost less than the
#: end-to-end baseline it stands in for.
FALLBACK_PROMPT: dict[str, Any] = {"rank_rows": True, "table_chars": 1000, "passage_chars": 400, "k": 3,
                                   "rank_sentences": True}


@reads_database("reading the tables and passages for the prompt")
def end_to_end(db: Any, question: str, model: Model, *,
               compact: bool = False) -> tuple[str, tuple[int, int]]:
    """End-to-end QA: one prompt, a short free-text answer and (prompt, completion) tokens.

    ``compact``: the fallback's prompt (:data:`FALLBACK_PROMPT`) instead of the
    paper's end-to-end prompt. ``db``: a ``BlendSQL`` session, a backend or a
    connection (read as one use of the session).
    """
    backend = as_backend(db)
    with backend.session():
        prompt = end_to_end_prompt(backend, question, **(FALLBACK_PROMPT if compact else {}))
    resp = model.generate([Request(prompt=prompt, constraint=Text(), max_tokens=24, stop=("\n",))])[0]
    return resp.text.strip(), (resp.usage.prompt_tokens, resp.usage.completion_tokens)
