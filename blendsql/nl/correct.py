"""Correct a query from the user's plain-language feedback (SPLASH, Elgohary et al. 2020).

The prompt holds the schema, the question, the previous query, its
step-by-step explanation (``explain``: what the user actually read) and the
feedback; the model writes the corrected query with the Parser's decoding
(free text or one of its grammars). The query is validated like a parsed
one and regenerated once with the error on failure.

Worked examples: the ones nearest the question and its feedback (BM25) out
of a pool of SPLASH dev items (``examples/splash.json``: question, wrong
query, feedback, gold query that runs; never from test, which is reported),
each with our own explanation of its wrong query, as the user would read it.
Feedback comes in a few recurring shapes ("swap", "use X instead of Y",
"also find ...", "from step 2 ..."); a small model copies the nearest shape
far better than it follows an abstract instruction.

Layout: the prompt opens with exactly the parser's opening (its guide and
the schema), then the correction guide, the worked corrections and the item.
A correction usually follows a question on the same database, so the model's
KV cache already holds that opening and only the rest is evaluated: on a
Spider schema that is most of the prompt (about 2,000 of 2,700 tokens), and
prompt evaluation is where a one-thread CPU model spends its time.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from blendsql.db.backend import Backend
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.base import Model
from blendsql.nl.dberrors import reads_database
from blendsql.nl.explain import explain
from blendsql.nl.fewshot import BM25, tokens
from blendsql.nl.parser import INGREDIENT_GUIDE, PLAIN_GUIDE, Parser, ParseResult, generate_program
from blendsql.nl.serialize import list_tables, serialize_schema
from blendsql.nl.source import as_backend

CORRECTION_GUIDE = """\
A user asked a question about a SQLite database. A query was written for it and explained
to the user step by step. The user says what is wrong with it. Write the corrected query:
change what the feedback asks for and keep the rest. Answer with one query only.
"""

#: the worked example used when no pool is given (SPLASH dev)
DEFAULT_EXAMPLE_TEXT = """\
Question: Show the average room count of the apartments that have booking status code "Provisional".
Query: SELECT AVG(Apartments.bathroom_count) FROM Apartments JOIN Apartment_Bookings ON Apartments.apt_id = Apartment_Bookings.apt_id WHERE Apartment_Bookings.booking_status_code = 'Provisional'
Explanation:
1. Start from the table Apartments.
2. Join with the table Apartment_Bookings, matching rows where Apartments.apt_id is Apartment_Bookings.apt_id.
3. Keep only the rows where Apartment_Bookings.booking_status_code is 'Provisional'.
4. Return the average Apartments.bathroom_count.
Feedback: you should use room count instead of bathroom count.
Corrected query: SELECT AVG(Apartments.room_count) FROM Apartments JOIN Apartment_Bookings ON Apartments.apt_id = Apartment_Bookings.apt_id WHERE Apartment_Bookings.booking_status_code = 'Provisional'
"""


@dataclass(frozen=True)
class CorrectionExample:
    """One worked correction: the question, the wrong query, the feedback, the right query."""

    question: str
    program: str
    feedback: str
    corrected: str

    def render(self, registry: IngredientRegistry | None = None) -> str:
        lines = explanation_lines(self.program, registry)
        return "\n".join([f"Question: {self.question}", f"Query: {self.program}", "Explanation:",
                          *lines, f"Feedback: {self.feedback}",
                          f"Corrected query: {self.corrected}"]) + "\n"


@functools.lru_cache(maxsize=4)
def load_correction_examples(name: str = "splash") -> tuple[CorrectionExample, ...]:
    """The correction pool shipped in ``blendsql/nl/examples/<name>.json`` (empty if absent)."""
    path = resources.files("blendsql.nl").joinpath("examples").joinpath(f"{name}.json")
    if not path.is_file():
        return ()
    raw = json.loads(path.read_text(encoding="utf-8"))
    items = raw["examples"] if isinstance(raw, dict) else raw
    return tuple(CorrectionExample(r["question"], r["program"], r["feedback"], r["corrected"])
                 for r in items)


class CorrectionIndex:
    """A correction pool searchable by question and feedback (BM25)."""

    def __init__(self, pool: Sequence[CorrectionExample]) -> None:
        self.pool = list(pool)
        self._bm25 = BM25([tokens(f"{e.feedback} {e.question}") for e in self.pool])

    def select(self, question: str, feedback: str, k: int) -> list[CorrectionExample]:
        """The ``k`` nearest examples, best last (nearest the query being corrected)."""
        if k <= 0 or not self.pool:
            return []
        # the feedback says what kind of change is wanted: it counts twice
        scores = self._bm25.scores(tokens(f"{feedback} {feedback} {question}"))
        best = sorted(range(len(self.pool)), key=lambda i: (scores[i], -i), reverse=True)[:k]
        return [self.pool[i] for i in reversed(best)]


@functools.lru_cache(maxsize=4)
def _default_index(name: str) -> CorrectionIndex:
    return CorrectionIndex(load_correction_examples(name))


_TOKEN = re.compile(r"'[^']*'|\"[^\"]*\"|\w+|[^\w\s]")


@dataclass
class Correction(ParseResult):
    """The outcome of one correction: the program (None if none validated) and attempts."""


def explanation_lines(program: str, registry: IngredientRegistry | None = None) -> list[str]:
    """``explain(program)``, or a one-line fallback when the query cannot be explained."""
    try:
        return explain(program, registry)
    except Exception:  # noqa: BLE001 - explanation is context for the model, not essential
        return [f"1. Run the query: {program}"]


def prompt_opening(guide: str, schema: str) -> str:
    """The text a parser prompt with ``guide`` and ``schema`` starts with (``Parser.prompt``).

    The correction prompt starts with the same text, so after a question on the
    same database the model's cached prefix covers the whole schema."""
    return "\n".join([guide, "", schema, ""])


def correction_prompt(schema: str, question: str, program: str, explanation: list[str],
                      feedback: str, retry: tuple[str, str] | None = None,
                      examples: Sequence[str] = (DEFAULT_EXAMPLE_TEXT,),
                      guide: str = PLAIN_GUIDE) -> str:
    """The full correction prompt: the parser's opening (``guide``, schema), then the
    correction guide, the worked corrections and the query to correct.

    ``examples``: rendered worked corrections (on other databases: they come after
    the schema, and the item after them says it is on the schema above)."""
    shots = [f"Example {i}\n{text}" for i, text in enumerate(examples, 1)]
    parts = [prompt_opening(guide, schema), CORRECTION_GUIDE, *shots,
             "Now the query to correct, on the schema above.", f"Question: {question}",
             f"Query: {program}", "Explanation:", *explanation, f"Feedback: {feedback}"]
    if retry is not None:
        parts.append(f"A previous correction was: {retry[0]}\nIt failed with: {retry[1]}")
    parts.append("Corrected query:")
    return "\n".join(parts)


@reads_database("reading the database to correct the query")
def correct_query(parser: Parser, db: Any, registry: IngredientRegistry,
                  question: str, program: str, feedback: str, *, retries: int = 1,
                  examples: Sequence[CorrectionExample] | None = None,
                  n_examples: int = 3) -> Correction:
    """Write a corrected query for ``feedback`` (see module docstring).

    ``examples``: the pool to pick worked corrections from (default: the shipped
    SPLASH dev pool); ``n_examples=0`` keeps the single fixed example. ``db``: a
    ``BlendSQL`` session, a backend or a connection (read as one use of the session)."""
    backend = as_backend(db)
    with backend.session():
        return _correct(parser, backend, registry, question, program, feedback, retries,
                        examples, n_examples)


def _correct(parser: Parser, db: Backend, registry: IngredientRegistry, question: str,
             program: str, feedback: str, retries: int,
             examples: Sequence[CorrectionExample] | None, n_examples: int) -> Correction:
    tables = list_tables(db)
    schema = serialize_schema(db, n_rows=parser.n_rows, tables=[t.name for t in tables])
    constraint = parser.constraint(tables, registry)
    explanation = explanation_lines(program, registry)
    index = _default_index("splash") if examples is None else CorrectionIndex(examples)
    chosen = index.select(question, feedback, n_examples)
    shots = [e.render(registry) for e in chosen] if chosen else [DEFAULT_EXAMPLE_TEXT]
    guide = INGREDIENT_GUIDE if registry.names() else PLAIN_GUIDE  # as Parser.parse chooses
    shots = fitting_shots(parser.model, shots, parser.max_tokens, lambda kept: correction_prompt(
        schema, question, program, explanation, feedback, None, kept, guide))
    return generate_program(
        parser.model,
        lambda retry: correction_prompt(schema, question, program, explanation, feedback, retry,
                                        shots, guide),
        constraint, db, registry, Correction(None),
        tries=retries + 1, max_tokens=parser.max_tokens,
    )


#: tokens kept free beyond the answer for a retry's error message
RETRY_TOKENS = 160


def fitting_shots(model: Model, shots: Sequence[str], max_tokens: int,
                  prompt: Callable[[Sequence[str]], str]) -> list[str]:
    """The first of ``shots`` (best first) whose ``prompt`` leaves room for the answer and
    a retry's error in the model's context window (all of them when it has none).

    Why: the embedded model's window is 2,048 tokens; three worked corrections and a
    schema overflow it, and a correction with fewer examples beats none at all."""
    window = model.context_window()
    kept = list(shots)
    if window is None:
        return kept
    while kept and model.count_tokens(prompt(kept)) + max_tokens + RETRY_TOKENS > window:
        kept.pop()
    return kept


def sql_diff(old: str, new: str) -> str:
    """A short token-level diff: ``- removed`` / ``+ added`` fragments, or 'no change'.

    Unquoted words compare case-insensitively, so ``Count`` -> ``COUNT`` is no change.
    """
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    key_a, key_b = [_key(t) for t in a], [_key(t) for t in b]
    parts = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=key_a, b=key_b, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            parts.append("- " + " ".join(a[i1:i2]))
        if op in ("insert", "replace"):
            parts.append("+ " + " ".join(b[j1:j2]))
    return "; ".join(parts) if parts else "no change"


def _key(token: str) -> str:
    return token if token[:1] in ("'", '"') else token.upper()
