"""Natural-language question → BlendSQL program (BlendSQL §4 and appendix B).

The prompt holds what the ingredients do, a few annotated examples, the
serialised schema with bridge hints, earlier turns of a conversation (if any)
and the question. Decoding runs under a grammar of the dialect restricted to
this database, so even a small local model writes programs that parse. Each
program is then checked by our own grammar and a dry run (SQLite ``EXPLAIN``
with ingredient calls stubbed) and, on failure, regenerated with the error in
the prompt — at most ``max_retries`` times.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TypeVar

from sqlglot import exp

from blendsql.errors import BlendSQLError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Constraint, Grammar, Text
from blendsql.nl.serialize import (
    TableInfo,
    bridge_hints,
    format_hints,
    list_tables,
    serialize_schema,
)
from blendsql.nl.sql_grammar import build_grammar

INGREDIENT_GUIDE = """\
BlendSQL is SQLite SQL plus ingredients, calls to a language model written inside the query:
- {{LLMMap('question', 'table::column')}} answers the question for each value of the column;
  use it in WHERE or SELECT when the answer is not stored in the table
  (e.g. WHERE {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE).
- {{LLMQA('question', (SELECT ...), options='table::column')}} answers one question from the rows
  of a subquery, e.g. passages found with documents MATCH 'words'; options= restricts the
  answer to the values of a column.
Use plain SQL for everything the table holds. Answer with one query only."""


@dataclass(frozen=True)
class Example:
    """An annotated few-shot example: the schema it was written for, question, program."""

    question: str
    program: str
    schema: str = ""


@dataclass
class Turn:
    """One earlier turn of a conversation, for context-dependent parsing."""

    utterance: str
    program: str | None = None


@dataclass
class ParseResult:
    program: str | None
    attempts: list[tuple[str, str | None]] = field(default_factory=list)  # (program, error)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.program is not None


def load_examples(name: str = "hybridqa") -> list[Example]:
    """The annotated examples shipped in ``blendsql/nl/examples/<name>.json``."""
    path = resources.files("blendsql.nl").joinpath("examples").joinpath(f"{name}.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [Example(r["question"], r["program"], r.get("schema", "")) for r in raw]


class Parser:
    """Writes BlendSQL for a question with ``model``."""

    def __init__(
        self,
        model: Model,
        *,
        examples: Sequence[Example] | None = None,
        n_examples: int = 3,
        max_retries: int = 2,
        constrained: bool = True,
        n_rows: int = 3,
        max_tokens: int = 160,
        schema_budget_chars: int = 6000,
        schema_elements: int = 30,
    ) -> None:
        self.model = model
        self.examples = list(examples) if examples is not None else load_examples()
        self.n_examples = n_examples
        self.max_retries = max_retries
        self.constrained = constrained
        self.n_rows = n_rows
        self.max_tokens = max_tokens
        self.schema_budget_chars = schema_budget_chars
        self.schema_elements = schema_elements

    def prompt(
        self, question: str, schema: str, hints: str = "", history: Sequence[Turn] = (),
        retry: tuple[str, str] | None = None,
    ) -> str:
        """The full prompt text (fixed parts first, so calls share a cached prefix)."""
        parts = [INGREDIENT_GUIDE, ""]
        for ex in self.examples[: self.n_examples]:
            parts += [f"Schema:\n{ex.schema}", f"Question: {ex.question}", f"BlendSQL: {ex.program}", ""]
        parts += [f"Schema:\n{schema}"]
        if hints:
            parts.append(hints)
        for t in history:
            parts.append(f"Earlier question: {t.utterance}")
            if t.program:
                parts.append(f"Earlier BlendSQL: {t.program}")
        parts.append(f"Question: {question}")
        if retry is not None:
            parts.append(f"A previous attempt was: {retry[0]}\nIt failed with: {retry[1]}\nWrite a corrected query.")
        parts.append("BlendSQL:")
        return "\n".join(parts)

    def parse(
        self,
        question: str,
        conn: sqlite3.Connection,
        registry: IngredientRegistry,
        history: Sequence[Turn] = (),
    ) -> ParseResult:
        """Generate, validate and (on error) regenerate a program for ``question``."""
        tables = self.relevant_tables(question, conn)
        schema = serialize_schema(conn, n_rows=self.n_rows, tables=[t.name for t in tables])
        hints = format_hints(bridge_hints(conn, question))
        constraint = (
            Grammar(build_grammar(tables, registry.names()), label="blendsql")
            if self.constrained else Text()
        )
        return generate_program(
            self.model, lambda retry: self.prompt(question, schema, hints, history, retry),
            constraint, conn, registry, ParseResult(None),
            tries=self.max_retries + 1, max_tokens=self.max_tokens,
        )


    def relevant_tables(self, question: str, conn: sqlite3.Connection) -> list[TableInfo]:
        """All tables, or — when the schema would not fit the prompt budget — the
        tables of the schema elements CRUSH4SQL selects (document tables always stay).
        """
        tables = list_tables(conn)
        if len(serialize_schema(conn, n_rows=self.n_rows)) <= self.schema_budget_chars:
            return tables
        from blendsql.nl.schema_select import select_schema

        elements = [f"{t.name}.{c}" for t in tables if not t.is_documents for c in t.columns]
        chosen = select_schema(question, elements, self.model, budget=self.schema_elements)
        keep = {e.split(".", 1)[0] for e in chosen}
        return [t for t in tables if t.is_documents or t.name in keep]


R = TypeVar("R", bound=ParseResult)


def generate_program(
    model: Model,
    prompt_for: Callable[[tuple[str, str] | None], str],
    constraint: Constraint,
    conn: sqlite3.Connection,
    registry: IngredientRegistry,
    result: R,
    *,
    tries: int,
    max_tokens: int,
) -> R:
    """Generate, clean and validate a program; regenerate with the error, ``tries`` times.

    ``prompt_for(None)`` is the first prompt, ``prompt_for((program, error))`` a retry.
    Fills and returns ``result`` (program None when no attempt validated).
    """
    retry: tuple[str, str] | None = None
    for _ in range(tries):
        req = Request(prompt=prompt_for(retry), constraint=constraint, max_tokens=max_tokens)
        resp = model.generate([req])[0]
        result.prompt_tokens += resp.usage.prompt_tokens
        result.completion_tokens += resp.usage.completion_tokens
        program = clean_program(resp.text)
        error = validate(program, conn, registry)
        result.attempts.append((program, error))
        if error is None:
            result.program = program
            return result
        retry = (program, error)
    return result


def clean_program(text: str) -> str:
    """Strip code fences, a leading label and trailing semicolons from model output."""
    t = text.strip()
    if t.startswith("```"):
        t = t.strip("`")
        t = t[t.find("\n") + 1 :] if "\n" in t else t
        t = t.split("```")[0]
    for label in ("BlendSQL:", "SQL:", "sql"):
        if t.startswith(label):
            t = t[len(label) :]
    return t.strip().rstrip(";").strip()


def validate(program: str, conn: sqlite3.Connection, registry: IngredientRegistry) -> str | None:
    """None if ``program`` parses and its plain SQL compiles on ``conn``; else the error."""
    from blendsql.grammar import parse

    if not program:
        return "empty program"
    try:
        tree = parse(program, registry)
    except BlendSQLError as e:
        return str(e)
    subqueries = [a.this for c in tree.find_all(IngredientCall) for a in c.call_args
                  if isinstance(a, exp.Subquery)]
    for query in [tree, *subqueries]:
        stubbed = query.transform(lambda n: exp.Null() if isinstance(n, IngredientCall) else n)
        try:
            conn.execute("EXPLAIN " + stubbed.sql(dialect="sqlite"))
        except sqlite3.Error as e:
            return f"SQLite rejected the query: {e}"
    return None
