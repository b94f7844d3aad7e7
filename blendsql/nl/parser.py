"""Natural-language question → BlendSQL program (BlendSQL §4 and appendix B).

The prompt holds what the ingredients do, the serialised schema with bridge
hints, a few annotated examples retrieved for this question (BM25 over the
pool, preferring examples on this schema; see ``fewshot``), earlier turns of a
conversation (if any) and the question. The fixed parts come first (guide,
then schema) so llama.cpp reuses their KV cache between questions on one
database.

Decoding (``decoding=``):
- ``"free"`` (default): the model writes as it naturally does; we clean the
  text and validate. Measured on Spider dev ids with Qwen2.5-Coder-1.5B this
  beats any grammar: a grammar that masks the model's natural next token
  (lower-case keywords, an alias, a scalar subquery) pushes it down the
  cheapest legal path (``SELECT TRUE ... WHERE TRUE = TRUE``).
- ``"permissive"``: a GBNF accepting the SQLite a model naturally writes
  (any keyword case, aliases, subqueries, set operations, arithmetic) with
  identifiers limited to this schema (``sql_grammar.build_permissive_grammar``).
- ``"grammar"``: the strict grammar of earlier releases (``build_grammar``).

Each program is then validated: our own parser, a dry run (``EXPLAIN`` on the
backend, translated to its SQL, with ingredient calls stubbed), type checks of
ingredient outputs in their context, and — for programs without ingredients —
a run under a time limit that flags an empty result or an error the database
raises only at run time. Every statement goes through the backend
(:mod:`blendsql.nl.source`): traced, read-only and time-limited. On
failure the program is regenerated with the error in the prompt, at most
``max_retries`` times; when every attempt fails only the empty-result check,
the last such program is kept (an empty answer can be right).

With ``candidates=k`` (k > 1), the model writes k programs from different material
(the nearest examples, then the next-nearest groups of examples, then none, then a
sampled decoding); the valid ones run under the time limit and the program of the
largest group of equal results is returned (:mod:`blendsql.nl.choice`; every
candidate and its votes are in ``ParseResult.candidates``).

With ``sketch=True``, on one table whose cells link to a documents table
(HybridQA), the model writes only a plain query whose row selection is kept,
and the program is built around it (:mod:`blendsql.nl.sketch`). Before
validation, text that cannot parse is cleaned of two classes of slips: a
stray ``}`` after ``}}`` and an apostrophe copied from a cell into a literal.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlglot import exp

from blendsql.db.backend import Backend
from blendsql.errors import BlendSQLError, OptionError, QueryTimeoutError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Constraint, Grammar, Text
from blendsql.nl.aggregate_checks import group_ranking
from blendsql.nl.choice import ProgramCandidate, choose, run_candidate
from blendsql.nl.dberrors import reads_database
from blendsql.nl.fewshot import Example, ExampleIndex, tables_read
from blendsql.nl.inputs import count_arg, model_arg, seconds_arg, text_arg
from blendsql.nl.repair import rebind_values, repair_names, schema_feedback, value_mismatch
from blendsql.nl.serialize import (
    TableInfo,
    bridge_hints,
    format_hints,
    list_tables,
    serialize_schema,
)
from blendsql.nl.source import as_backend, first_line
from blendsql.nl.sql_grammar import build_grammar, build_permissive_grammar

if TYPE_CHECKING:
    from blendsql.nl.sketch import PassageLayout

Decoding = Literal["free", "permissive", "grammar"]

INGREDIENT_GUIDE = """\
BlendSQL is SQLite SQL plus ingredients, calls to a language model written inside the query:
- {{LLMMap('question', 'table::column')}} answers the question for each value of the column;
  use it in WHERE or SELECT when the answer is not stored in the table
  (e.g. WHERE {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE).
- {{LLMQA('question', (SELECT ...), options='table::column')}} answers one question from the rows
  of a subquery, e.g. passages found with documents MATCH 'words'; options= restricts the
  answer to the values of a column.
Use plain SQL for everything the tables hold; most questions need no ingredient.
Answer with one query only, no explanation."""

PLAIN_GUIDE = "Write one SQLite query that answers the question. Answer with the query only, no explanation."

EMPTY_RESULT = "the query returned no rows"
RETRY_TEMPERATURE = 0.7


@dataclass
class Turn:
    """One earlier turn of a conversation, for context-dependent parsing."""

    utterance: str
    program: str | None = None


@dataclass(frozen=True)
class PromptContext:
    """The parts of a parser prompt that depend on the question and the database."""

    tables: list[TableInfo]
    schema: str
    hints: str
    examples: list[Example]
    guide: str


@dataclass
class ParseResult:
    program: str | None
    attempts: list[tuple[str, str | None]] = field(default_factory=list)  # (program, error)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repairs: int = 0  # attempts whose table / column names were repaired without the model
    repaired: list[tuple[str, str]] = field(default_factory=list)  # (as written, as repaired)
    # with ``Parser(candidates=k)``: every program written, its result's votes, the chosen one
    candidates: list[ProgramCandidate] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.program is not None


def load_examples(name: str | Sequence[str] = ("hybridqa", "spider")) -> list[Example]:
    """The annotated examples shipped in ``blendsql/nl/examples/<name>.json``.

    A file holds a list of examples, or an object with ``examples`` (and its
    ``source``, the licence note of the data the examples come from).
    """
    names = [name] if isinstance(name, str) else list(name)
    out: list[Example] = []
    for n in names:
        path = resources.files("blendsql.nl").joinpath("examples").joinpath(f"{n}.json")
        raw = json.loads(path.read_text(encoding="utf-8"))
        items = raw["examples"] if isinstance(raw, dict) else raw
        out += [Example(r["question"], r["program"], r.get("schema", ""), str(r.get("db", "")),
                        str(r.get("id", ""))) for r in items]
    return out


class Parser:
    """Writes BlendSQL for a question with ``model``."""

    def __init__(
        self,
        model: Model,
        *,
        examples: Sequence[Example] | None = None,
        n_examples: int = 3,
        max_retries: int = 2,
        decoding: Decoding | None = None,
        constrained: bool | None = None,
        n_rows: int = 3,
        max_tokens: int = 256,
        schema_budget_chars: int = 6000,
        schema_elements: int = 30,
        check_empty: bool = True,
        query_seconds: float = 5.0,
        plain_fallback: bool = True,
        check_values: bool = True,
        sketch: bool = False,
        sketch_max_rows: int = 6,
        sketch_context_chars: int = 2400,
        sketch_retries: int = 1,
        sketch_abstain: bool = False,
        repair: bool = True,
        candidates: int = 1,
    ) -> None:
        """``constrained`` is the older switch: True means ``decoding="grammar"``.
        ``plain_fallback``: one last attempt without examples when none validated.
        ``check_values``: feed back a condition on a text its column never holds.
        ``sketch``: on a table whose cells link to a documents table (HybridQA),
        the model writes a plain query whose row selection is kept and the program
        is built from a sketch (:mod:`blendsql.nl.sketch`); a selection of no row or
        more than ``sketch_max_rows`` gives way to full-text search of the passages;
        ``sketch_abstain``: the reader replies "unknown" when the rows and passages do
        not give the answer (so ``ask`` falls back to end-to-end QA).
        ``repair``: a wrong table or column name is first repaired against the real
        schema without a model call (off: the error goes to the retry prompt).
        ``candidates``: programs written per question (1: one, with its retries); more
        are chosen among by their results (see the module docstring), each extra one
        costing one or two model calls and one run of the query."""
        self.model = model_arg(model)
        self.examples = list(examples) if examples is not None else load_examples()
        self.index = ExampleIndex(self.examples)
        self.n_examples = count_arg(n_examples, "n_examples")
        self.max_retries = count_arg(max_retries, "max_retries")
        if decoding is None:
            decoding = "grammar" if constrained else "free"
        if decoding not in ("free", "permissive", "grammar"):
            raise OptionError(f"decoding must be 'free', 'permissive' or 'grammar', not {decoding!r}",
                              hint="'free' (validate and retry), 'permissive' or 'grammar' "
                              "(constrained decoding)", option="decoding")
        self.decoding: Decoding = decoding
        self.n_rows = count_arg(n_rows, "n_rows")
        self.max_tokens = count_arg(max_tokens, "max_tokens", minimum=1)
        self.schema_budget_chars = count_arg(schema_budget_chars, "schema_budget_chars", minimum=1)
        self.schema_elements = count_arg(schema_elements, "schema_elements", minimum=1)
        self.check_empty = check_empty
        self.query_seconds = seconds_arg(query_seconds, "query_seconds")
        self.plain_fallback = plain_fallback
        self.check_values = check_values
        self.sketch = sketch
        self.sketch_max_rows = count_arg(sketch_max_rows, "sketch_max_rows", minimum=1)
        self.sketch_context_chars = count_arg(sketch_context_chars, "sketch_context_chars", minimum=1)
        self.sketch_retries = count_arg(sketch_retries, "sketch_retries")
        self.sketch_abstain = sketch_abstain
        if not isinstance(repair, bool):
            raise OptionError(f"repair must be True or False, not {repair!r}", option="repair")
        self.repair = repair
        self.candidates = count_arg(candidates, "candidates", minimum=1)

    @property
    def constrained(self) -> bool:
        """True when decoding runs under a grammar."""
        return self.decoding != "free"

    def constraint(self, tables: list[TableInfo], registry: IngredientRegistry) -> Constraint:
        """The decoding constraint for this database (free text when ``decoding="free"``)."""
        if self.decoding == "grammar":
            return Grammar(build_grammar(tables, registry.names()), label="blendsql")
        if self.decoding == "permissive":
            return Grammar(build_permissive_grammar(tables, registry.names()), label="sqlite")
        return Text()

    def select_examples(self, question: str, tables: Sequence[TableInfo]) -> list[Example]:
        """The ``n_examples`` pool examples nearest to ``question`` on this schema."""
        names = {t.name for t in tables} | {c for t in tables for c in t.columns}
        return self.index.select(question, self.n_examples, names)

    def prompt(
        self, question: str, schema: str, hints: str = "", history: Sequence[Turn] = (),
        retry: tuple[str, str] | None = None, *, examples: Sequence[Example] | None = None,
        guide: str = INGREDIENT_GUIDE, tables: Sequence[TableInfo] = (),
        feedback: tuple[str, str] | None = None,
    ) -> str:
        """The full prompt text. Fixed parts first (guide, schema), so questions on
        one database share a cached prefix; the retrieved examples and the question last.
        ``feedback``: (a query the user rejected for this question, what they said).
        """
        shown = list(examples) if examples is not None else self.examples[: self.n_examples]
        names = {t.name.lower() for t in tables} | {c.lower() for t in tables for c in t.columns}
        parts = [guide, "", schema, ""]
        if shown:
            parts.append("-- Examples of questions and their queries:")
        for ex in shown:
            if ex.schema and not _fits(ex.program, names):
                parts.append("-- (on the tables " + ex.schema.replace("\n", "; ") + ")")
            parts += [f"-- Question: {ex.question}", f"{ex.program};", ""]
        if hints:
            parts.append(hints)
        for t in history:
            parts.append(f"-- Earlier question: {t.utterance}")
            if t.program:
                parts.append(f"-- Earlier query: {t.program};")
        parts.append("-- Using valid SQLite (BlendSQL), answer the following question for the "
                     "tables provided above.")
        parts.append(f"-- Question: {question}")
        if feedback is not None:
            parts.append(f"-- A query written earlier for this question was: "
                         f"{' '.join(feedback[0].split()).rstrip(';')};\n"
                         f"-- The user says it is wrong: {' '.join(feedback[1].split())}\n"
                         "-- Write the query the user wants.")
        if retry is not None:
            parts.append(f"-- A previous attempt was: {retry[0]}\n-- It failed: {retry[1]}\n"
                         "-- Write a corrected query.")
        parts.append("BlendSQL:")
        return "\n".join(parts)

    @reads_database("reading the database to parse the question")
    def parse(
        self,
        question: str,
        db: Any,
        registry: IngredientRegistry,
        history: Sequence[Turn] = (),
        *,
        feedback: tuple[str, str] | None = None,
    ) -> ParseResult:
        """Generate, validate and (on error) regenerate a program for ``question``.

        ``feedback``: (a query the user rejected for this question, what they said
        about it); the model writes the question's query anew with both in view,
        and the feedback's words also count when choosing the tables to show
        (feedback often names the table or column that was missing).

        When no attempt validates and examples were shown, one more attempt runs
        without them: a small model that keeps copying an example's tables or
        shape into a wrong program often writes a valid one from the schema alone.

        ``db``: a ``BlendSQL`` session, a backend, or a connection (SQLite, DuckDB,
        psycopg); every statement goes through its backend (traced, read-only,
        time-limited), held as one use of the session.
        """
        text_arg(question, "question")
        backend = as_backend(db)
        with backend.session():
            return self._parse(question, backend, registry, history, feedback)

    def _parse(self, question: str, db: Backend, registry: IngredientRegistry,
               history: Sequence[Turn], feedback: tuple[str, str] | None) -> ParseResult:
        if self.sketch and not history and feedback is None:
            from blendsql.nl.sketch import passage_layout

            layout = passage_layout(db)
            if layout is not None:
                return self.parse_sketch(question, db, layout, registry)
        ctx = self.context(question, db, registry, feedback, history)
        constraint = self.constraint(ctx.tables, registry)

        def run(shown: list[Example], tries: int, result: ParseResult,
                temperature: float = 0.0) -> ParseResult:
            return generate_program(
                self.model,
                lambda retry: self.prompt(question, ctx.schema, ctx.hints, history, retry, examples=shown,
                                          guide=ctx.guide, tables=ctx.tables, feedback=feedback),
                constraint, db, registry, result, tries=tries, max_tokens=self.max_tokens,
                check_empty=self.check_empty, query_seconds=self.query_seconds,
                check_values=self.check_values, repair=self.repair, temperature=temperature,
            )

        result = run(ctx.examples, self.max_retries + 1, ParseResult(None))
        if result.program is None and ctx.examples and self.plain_fallback:
            result = run([], 1, result)
        if self.candidates == 1:
            return result
        first = ProgramCandidate("nearest examples", result.program,
                                 None if result.program else "no valid program",
                                 prompt_tokens=result.prompt_tokens,
                                 completion_tokens=result.completion_tokens)
        result.candidates.append(first)
        for source, shown, temperature in self.variants(question, ctx):
            written = run(shown, 2, ParseResult(None), temperature)
            result.candidates.append(ProgramCandidate(
                source, written.program, None if written.program else "no valid program",
                prompt_tokens=written.prompt_tokens, completion_tokens=written.completion_tokens))
            result.prompt_tokens += written.prompt_tokens
            result.completion_tokens += written.completion_tokens
            result.attempts += written.attempts
            result.repairs += written.repairs
            result.repaired += written.repaired
        for cand in result.candidates:
            run_candidate(cand, db, registry, self.query_seconds)
        chosen = choose(result.candidates)
        if chosen is not None:
            result.program = chosen.program
        return result

    def variants(self, question: str, ctx: PromptContext) -> list[tuple[str, list[Example], float]]:
        """The material of candidates 2..k: (what it is, examples shown, temperature).

        Greedy decodings first: the next-nearest groups of ``n_examples`` examples
        (another reading of the pool), then no examples (the schema alone); then
        decodings sampled at ``RETRY_TEMPERATURE`` from each of those prompts, the
        nearest examples' first. Each prompt differs (a model samples with a fixed
        seed, so one prompt sampled twice gives one program twice); fewer than
        ``candidates - 1`` when the pool runs out."""
        n = self.n_examples  # 0: the user asked for no examples, so no variant shows any
        names = {t.name for t in ctx.tables} | {c for t in ctx.tables for c in t.columns}
        ranked = list(reversed(self.index.select(question, n * self.candidates, names))) if n else []
        groups: list[tuple[str, list[Example]]] = [
            (f"examples {start + 1}-{start + len(ranked[start:start + n])}",
             list(reversed(ranked[start:start + n]))) for start in range(n, len(ranked), n or 1)]
        if ctx.examples:
            groups.append(("no examples", []))
        greedy = [(name, shown, 0.0) for name, shown in groups]
        sampled = [(f"sampled, {name}", shown, RETRY_TEMPERATURE)
                   for name, shown in [("nearest examples", list(ctx.examples)), *groups]]
        return [*greedy, *sampled][: self.candidates - 1]

    def context(self, question: str, db: Any, registry: IngredientRegistry,
                feedback: tuple[str, str] | None = None, history: Sequence[Turn] = ()) -> PromptContext:
        """What the first prompt for ``question`` shows: tables, schema text, bridge
        hints, the retrieved examples and the guide.

        A follow-up (``history`` ends with a query) is read with the question it follows:
        the tables are chosen on both questions' words, and the tables the last query
        reads are always shown (the follow-up edits that query); the examples are chosen
        on the question's own words."""
        db = as_backend(db)
        last = history[-1] if history and history[-1].program else None
        topic = question if last is None else f"{last.utterance} {question}"
        tables = self.relevant_tables(topic if feedback is None else f"{topic} {feedback[1]}", db,
                                      keep=tables_read(last.program) if last and last.program else ())
        schema = serialize_schema(db, n_rows=self.n_rows, tables=[t.name for t in tables])
        hints = format_hints(bridge_hints(db, question))
        examples = self.select_examples(question, tables)
        guide = INGREDIENT_GUIDE if registry.names() else PLAIN_GUIDE
        return PromptContext(tables, schema, hints, examples, guide)

    @reads_database("reading the database to write the prompt")
    def first_prompt(self, question: str, db: Any, registry: IngredientRegistry,
                     history: Sequence[Turn] = (), *,
                     feedback: tuple[str, str] | None = None) -> str:
        """The prompt of the first attempt at ``question``, exactly as :meth:`parse`
        sends it (no model call): for inspecting or checking what the model sees."""
        text_arg(question, "question")
        backend = as_backend(db)
        with backend.session():
            ctx = self.context(question, backend, registry, feedback, history)
        return self.prompt(question, ctx.schema, ctx.hints, history, examples=ctx.examples,
                           guide=ctx.guide, tables=ctx.tables, feedback=feedback)

    def _sketch_rows(self, sql: str, db: Backend, layout: PassageLayout,
                     registry: IngredientRegistry | None) -> tuple[str, str, int]:
        """(query, its row filter, rows matched); a wrong column name is first
        repaired against the real schema (no model call). Raises on a bad query."""
        from blendsql.nl import sketch

        try:
            cond = sketch.row_filter(layout, sql)
            return sql, cond, sketch.count_rows(db, layout.table.name, cond, self.query_seconds)
        except BlendSQLError as e:
            fixed = repair_names(sql, list_tables(db), registry) if (
                registry is not None and _NAME_ERROR.search(first_line(e))) else None
            if fixed is None:
                raise
            cond = sketch.row_filter(layout, fixed)
            return fixed, cond, sketch.count_rows(db, layout.table.name, cond, self.query_seconds)

    def parse_sketch(self, question: str, db: Backend, layout: PassageLayout,
                     registry: IngredientRegistry | None = None) -> ParseResult:
        """The model writes a plain SQL query; its row selection (WHERE, and ORDER BY /
        LIMIT unless it aggregates) becomes the sketch's row filter (see
        :mod:`blendsql.nl.sketch`). A query that fails is regenerated with the error
        (``sketch_retries`` times); one whose conditions match no row keeps those that
        match; no row or too many gives way to full-text search of the passages."""
        from blendsql.nl import sketch

        result = ParseResult(None)
        retry: tuple[str, str] | None = None
        condition: str | None = None
        for _ in range(self.sketch_retries + 1):
            req = Request(prompt=sketch.query_prompt(db, layout, question, retry=retry),
                          constraint=Text(), max_tokens=96)
            resp = self.model.generate([req])[0]
            result.prompt_tokens += resp.usage.prompt_tokens
            result.completion_tokens += resp.usage.completion_tokens
            sql = escape_inner_quotes(clean_program(resp.text))
            try:
                sql, cond, n = self._sketch_rows(sql, db, layout, registry)
            except (sketch.SketchError, BlendSQLError) as e:
                error = str(e) if isinstance(e, sketch.SketchError) else first_line(e)
                if _NAME_ERROR.search(error):
                    error = schema_feedback(error, sql, list_tables(db))
                result.attempts.append((sql, error))
                retry = (sql, error)
                continue
            if n == 0:
                relaxed = sketch.relax(db, layout, sql, self.query_seconds)
                if relaxed is not None:
                    cond, n = relaxed, sketch.count_rows(db, layout.table.name, relaxed, self.query_seconds)
            narrowed = False
            if n > self.sketch_max_rows:  # too many to read whole: search the passages of these rows
                within = sketch.search_condition(layout, question, within=cond)
                if sketch.count_rows(db, layout.table.name, within, self.query_seconds):
                    cond, narrowed = within, True
            if not narrowed and not 0 < n <= self.sketch_max_rows:
                result.attempts.append((sql, EMPTY_RESULT if n == 0 else f"the query selects {n} rows"))
                break  # the model's reading of the question: search the passages instead
            result.attempts.append((sql, None))
            condition = cond
            break
        if condition is None:
            condition = sketch.search_condition(layout, question)
        result.program = sketch.build_program(layout, question, condition, self.sketch_context_chars,
                                              self.sketch_abstain)
        return result

    def relevant_tables(self, question: str, db: Any, keep: Iterable[str] = ()) -> list[TableInfo]:
        """All tables, or — when the schema would not fit the prompt budget — the
        tables of the schema elements CRUSH4SQL selects (document tables and the
        tables named in ``keep``, case-insensitively, always stay).
        """
        db = as_backend(db)
        tables = list_tables(db)
        if len(serialize_schema(db, n_rows=self.n_rows)) <= self.schema_budget_chars:
            return tables
        from blendsql.nl.schema_select import select_schema

        elements = [f"{t.name}.{c}" for t in tables if not t.is_documents for c in t.columns]
        chosen = select_schema(question, elements, self.model, budget=self.schema_elements)
        kept = {e.split(".", 1)[0].lower() for e in chosen} | {k.lower() for k in keep}
        return [t for t in tables if t.is_documents or t.name.lower() in kept]


def _fits(program: str, names: set[str]) -> bool:
    """True when the program reads only tables of ``names`` and names something of it."""
    from blendsql.nl.fewshot import fits_schema, identifiers

    return fits_schema(program, names) and bool(identifiers(program) & names)


R = TypeVar("R", bound=ParseResult)


def generate_program(
    model: Model,
    prompt_for: Callable[[tuple[str, str] | None], str],
    constraint: Constraint,
    db: Any,
    registry: IngredientRegistry,
    result: R,
    *,
    tries: int,
    max_tokens: int,
    check_empty: bool = False,
    query_seconds: float = 5.0,
    repair: bool = True,
    check_values: bool = False,
    temperature: float = 0.0,
) -> R:
    """Generate, clean and validate a program; regenerate with the error, ``tries`` times.

    ``prompt_for(None)`` is the first prompt, ``prompt_for((program, error))`` a retry.
    Fills and returns ``result`` (program None when no attempt validated). With
    ``check_empty``, an empty result is fed back like an error, but a program
    whose only fault is an empty result is kept if nothing better comes. With
    ``repair``, a program naming a table or column the database lacks is first
    repaired against the real schema (``repair.repair_names``), which costs no
    model call; the retry prompt lists the real columns of the tables involved; a
    program that ranks by an aggregate but groups nothing is grouped by its selected
    columns (``aggregate_checks.group_ranking``).
    With ``check_empty`` a program without ingredients is also run to its first row,
    so an error SQLite raises only at run time is fed back too (:func:`run_check`).
    With ``check_values``, a condition comparing a column with a text it never
    holds but another column does (``repair.value_mismatch``) is first rebound to that
    column through the keys (``repair.rebind_values``, no model call), else fed back too,
    and kept like an empty result if nothing better comes. ``temperature``: of the first
    attempt (a retry repeating a failed program samples at ``RETRY_TEMPERATURE``).
    """
    db = as_backend(db)
    retry: tuple[str, str] | None = None
    fallback: str | None = None
    soft: set[str] = set()  # value findings: like an empty result, kept if nothing better comes
    repeated = False
    for _ in range(tries):
        # a model that repeated a failing program under greedy decoding will repeat it
        # again: sample instead (seeded, so runs stay reproducible)
        req = Request(prompt=prompt_for(retry), constraint=constraint, max_tokens=max_tokens,
                      temperature=RETRY_TEMPERATURE if repeated else temperature)
        resp = model.generate([req])[0]
        result.prompt_tokens += resp.usage.prompt_tokens
        result.completion_tokens += resp.usage.completion_tokens
        program = clean_program(resp.text)
        error = validate(program, db, registry)
        if error is not None and "'" in program:
            escaped = escape_inner_quotes(program)
            if escaped != program and validate(escaped, db, registry) is None:
                program, error = escaped, None
        if error is not None and repair and _NAME_ERROR.search(error):
            fixed, error = repair_program(program, error, db, registry)
            if fixed != program:
                result.repairs += 1
                result.repaired.append((program, fixed))
            program = fixed
        if error is not None and repair:
            grouped = group_ranking(program)  # ranks by an aggregate, groups nothing
            if grouped is not None and validate(grouped, db, registry) is None:
                result.repairs += 1
                result.repaired.append((program, grouped))
                program, error = grouped, None
        if error is None and check_empty:
            error = run_check(program, db, registry, query_seconds)
            if error == EMPTY_RESULT:
                fallback = fallback or program
        if error is None and check_values:
            error = value_mismatch(program, db, registry, list_tables(db), query_seconds)
            rebound = rebind_values(program, db, registry, list_tables(db), query_seconds) if error else None
            if rebound is not None and validate(rebound, db, registry) is None and (
                    not check_empty or run_check(rebound, db, registry, query_seconds) is None):
                # the question's value bound to the column that holds it (no model call)
                result.repairs += 1
                result.repaired.append((program, rebound))
                program, error = rebound, None
            if error:
                soft.add(error)
                fallback = fallback or program
        result.attempts.append((program, error))
        if error is None:
            result.program = program
            return result
        if retry is not None and retry[0] == program and (error == EMPTY_RESULT or error in soft):
            break  # the model insists: the empty result (or the compared text) is its answer
        repeated = retry is not None and retry[0] == program
        retry = (program, _feedback(error, program, db))
    result.program = fallback
    return result


def _feedback(error: str, program: str = "", db: Backend | None = None) -> str:
    """The error as the retry prompt states it (an empty result gets a hint; a wrong
    name gets where the name really is and the real columns of the tables read)."""
    if error == EMPTY_RESULT:
        return (f"{EMPTY_RESULT}. Check the values in conditions against the example rows "
                "(spelling, case) and the joins; keep the query if no rows is the right answer.")
    if db is not None and _NAME_ERROR.search(error):
        return schema_feedback(error, program, list_tables(db))
    return error


_NAME_ERROR = re.compile(r"no such (?:column|table): ")


def repair_program(program: str, error: str, db: Any,
                   registry: IngredientRegistry) -> tuple[str, str | None]:
    """``program`` with its wrong table / column names repaired, and its new error
    (None when it now validates); the input unchanged when no repair helps."""
    db = as_backend(db)
    fixed = repair_names(program, list_tables(db), registry)
    if fixed is None:
        return program, error
    fixed_error = validate(fixed, db, registry)
    if fixed_error is not None and _NAME_ERROR.search(fixed_error) and fixed_error == error:
        return program, error
    return fixed, fixed_error


_FENCE = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)(?:```|$)", re.S)
_START = re.compile(r"\b(SELECT|WITH)\b", re.I)


def clean_program(text: str) -> str:
    """The query in model output: inside a code fence if there is one, without a
    leading label, prose before the first SELECT/WITH, or anything after the first
    statement's semicolon."""
    t = text.strip()
    fence = _FENCE.search(t)
    if fence:
        t = fence.group(1).strip()
    for label in ("BlendSQL:", "SQL:", "sql"):
        if t.startswith(label):
            t = t[len(label) :].strip()
    start = _START.search(t)
    if start and start.start() > 0 and not t.lstrip().startswith(("(", "{{", "<<")):
        t = t[start.start() :]
    t = _first_statement(t)
    if "{{" in t:
        t = drop_stray_braces(t)
    return t.strip().rstrip(";").strip()


def escape_inner_quotes(text: str) -> str:
    """Double an apostrophe inside a string literal that a word character follows.

    A closing quote is followed by a space, an operator, ``)`` or ``,`` — never
    directly by a letter or digit — so such a quote is an apostrophe copied from
    a cell (``'Men 's heavyweight'``, ``'O'Brien'``) that would otherwise end the
    literal and leave the text unparseable. Already doubled quotes stay as they are.
    """
    out: list[str] = []
    in_str = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "'":
            out.append(ch)
            i += 1
            continue
        if not in_str:
            in_str = True
            out.append(ch)
        elif i + 1 < n and text[i + 1] == "'":
            out.append("''")
            i += 1
        elif i + 1 < n and (text[i + 1].isalnum() or text[i + 1] == "_"):
            out.append("''")
        else:
            in_str = False
            out.append(ch)
        i += 1
    return "".join(out)


_STRAY_BRACE = re.compile(r"\}\}(\}+)")


def drop_stray_braces(text: str) -> str:
    """``}}}`` → ``}}`` outside string literals: a model closing an ingredient call
    with one brace too many (a parse error on an otherwise good program)."""
    parts = re.split(r"('(?:[^']|'')*')", text)
    return "".join(p if p.startswith("'") else _STRAY_BRACE.sub("}}", p) for p in parts)


def _first_statement(text: str) -> str:
    """Text up to the first semicolon outside quotes (the model may add a second query)."""
    quote: str | None = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == ";":
            return text[:i]
    return text


def validate(program: str, db: Any, registry: IngredientRegistry) -> str | None:
    """None if ``program`` parses, its ingredient outputs fit their context, no aggregate
    sits in another or in WHERE (:mod:`blendsql.nl.aggregate_checks`), its plain SQL compiles on ``db``'s backend (a dry run, translated to its SQL) and no
    subquery reads an outer column by accident (:mod:`blendsql.nl.column_checks`);
    else the error, worded for the retry prompt."""
    from blendsql.grammar import parse
    from blendsql.nl.aggregate_checks import aggregate_misuse
    from blendsql.nl.column_checks import outer_column_in_subquery

    if not program:
        return "empty program"
    try:
        tree = parse(program, registry)
    except BlendSQLError as e:
        return str(e)
    if not isinstance(tree, exp.Query):
        return "write one SELECT query (not another kind of statement)"
    misuse = ingredient_misuse(tree) or aggregate_misuse(tree)
    if misuse:
        return misuse
    subqueries = [a.this for c in tree.find_all(IngredientCall) for a in c.call_args
                  if isinstance(a, exp.Subquery)]
    backend = as_backend(db)
    for query in [tree, *subqueries]:
        stubbed = query.transform(lambda n: exp.Null() if isinstance(n, IngredientCall) else n)
        try:
            backend.dry_run(stubbed.sql(dialect="sqlite"))
        except BlendSQLError as e:
            return f"{backend.name} rejected the query: {first_line(e)}"
        outer = outer_column_in_subquery(stubbed, backend)
        if outer:
            return outer
    return None


def ingredient_misuse(tree: exp.Expression) -> str | None:
    """An ingredient output used against its type (a QA answer drawn from a column
    compared with TRUE, used as a condition, compared with another column or a
    constant), worded with the right shape for the retry prompt; see
    :mod:`blendsql.nl.program_checks`."""
    from blendsql.nl.program_checks import ingredient_type_errors

    return ingredient_type_errors(tree)


def run_check(program: str, db: Any, registry: IngredientRegistry,
              seconds: float) -> str | None:
    """Run a program without ingredients to its first row: ``EMPTY_RESULT`` when it
    returns none, the error when the database refuses it at run time (what a dry run
    lets through, e.g. SQLite's FTS5 ``MATCH`` under ``OR`` across a join: "unable to
    use function MATCH in the requested context"), else None.

    Runs through the backend (traced, read-only) under a time limit of ``seconds``
    for this use of the session; a query that runs out of time, one with
    ingredients, or one failing on the database's state (locked, I/O, memory)
    counts as fine; an interrupt from elsewhere is raised.
    """
    from blendsql.grammar import parse

    tree = parse(program, registry)
    if not isinstance(tree, exp.Query) or any(True for _ in tree.find_all(IngredientCall)):
        return None
    backend = as_backend(db)
    probe = tree if tree.args.get("limit") is not None else tree.limit(1)
    try:
        with backend.session(timeout=seconds):
            _, rows = backend.execute(probe.sql(dialect="sqlite"))
    except QueryTimeoutError:
        return None  # out of time: not the query's fault
    except BlendSQLError as e:
        message = first_line(e)
        if _NOT_THE_QUERY.search(message):
            return None  # the database's state (locked, I/O): not the query's fault
        if "interrupted" in message:
            raise  # someone else stopped the connection: stop here too
        return f"{backend.name} could not run the query: {message}"
    return None if rows else EMPTY_RESULT


_NOT_THE_QUERY = re.compile(r"locked|busy|disk I/O|out of memory|unable to open", re.I)


def is_empty(program: str, db: Any, registry: IngredientRegistry,
             seconds: float) -> bool:
    """True when a program without ingredients returns no rows (see :func:`run_check`;
    a query that fails or runs out of time counts as not empty)."""
    return run_check(program, db, registry, seconds) == EMPTY_RESULT
