"""A conversation over one database (CoSQL, SUQL, SPLASH).

``Conversation(bsql).ask(utterance)`` decides the turn's dialogue act
(``acts.classify_act``), then either

- writes a query with the Parser, passing earlier turns (utterance +
  program) as history so a follow-up like "what about in 2010?" edits the
  last query, runs it, and answers with a template response that says what
  was searched and what came back (``respond``);
- asks a clarifying question when the schema shows the turn could mean
  several things that give different answers ("the biggest country": by
  population, by area or by GNP, each naming the row it puts first); the
  user's next turn picks one and the question is parsed with it;
- or replies without a query: greetings and thanks, and turns the database
  cannot answer. A turn is refused only when it names no table or column, is
  not a follow-up, and the model is sure (its probability that these tables
  cannot answer it, from a scored yes/no, ``grounding.RelevanceJudge``); a
  model whose probabilities do not separate questions about the schema from
  questions about nothing in it is not asked, and then a turn that names
  nothing in the database is refused. Trying beats refusing: every other
  turn is parsed.

``.correct(feedback)`` corrects the last query from plain-language feedback:
candidate queries written in up to three ways (the question alone, when
someone else wrote the rejected query; the rejected query edited as the
feedback says, see ``correct``; optionally the question anew with the rejected
query and the feedback in view), each run; the answer is the result most of
them agree on, ties going to the earlier source, never the rejected query
again (``choose_correction``). It
reports what changed and keeps every candidate in ``turn.candidates``.

``chat`` is the read-eval-print loop behind ``blendsql chat DB``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from blendsql.db.backend import DEFAULT_TIMEOUT, Backend
from blendsql.errors import BlendSQLError, OptionError
from blendsql.grammar.nodes import to_blendsql
from blendsql.nl.acts import SQL_ACTS, classify_act, shortcut_act
from blendsql.nl.ask import answer_value
from blendsql.nl.choice import digest_lines, row_texts
from blendsql.nl.correct import CorrectionExample, correct_query, explanation_lines, sql_diff
from blendsql.nl.dberrors import reads_database
from blendsql.nl.dialogue import DialogueState, Resolution, record, resolve
from blendsql.nl.grounding import (
    Grounding,
    Reading,
    RelevanceJudge,
    anchor_questions,
    follow_up_readings,
    ground,
    is_follow_up,
    is_reply,
    measure_ambiguity,
    pick_reading,
    tables_text,
)
from blendsql.nl.inputs import count_arg, text_arg
from blendsql.nl.parser import Parser, ParseResult
from blendsql.nl.parser import Turn as ParserTurn
from blendsql.nl.respond import (
    SOCIAL,
    answer_response,
    out_of_scope_response,
    schema_overview,
    tables_read,
)
from blendsql.nl.serialize import list_tables
from blendsql.nl.source import Session, recording
from blendsql.smoothie import Smoothie, TraceStep

if TYPE_CHECKING:
    import pandas as pd

_QUESTION_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|list|show|give|find|count|tell|name|"
    r"return|display|sort|order|of these|and|also|only|what about)\b", re.I)
_SOCIAL_ACTS = frozenset({"greeting", "goodbye", "thank_you", "affirm", "negate"})
_REFUSALS = ("not_related", "cannot_answer", "cannot_understand")


#: Where a correction's candidate queries can come from (see ``Conversation``).
CORRECTION_SOURCES = ("edit", "fresh", "guided")
#: The default, in order of preference: the question parsed afresh, then the rejected
#: query edited as the feedback says. The question is what the user wants; feedback
#: is often loose ("bedroom count" for a room count), so the edit answers when the
#: fresh parse fails, gives the rejected result again, or is skipped (the parser
#: wrote the rejected query: in a conversation, the edit is then the only source).
#: Chosen on 42 SPLASH dev items with the evaluation model (``benchmarks/splash.py
#: --policies``; ``results/splash_dev_qwen_candidates*``), items right: fresh then
#: edit 33, fresh alone 31 (the fresh-parse baseline), all three 31-32, edit then
#: fresh 29, edit alone 25.
DEFAULT_CORRECTION_SOURCES = ("fresh", "edit")


@dataclass
class Candidate:
    """One query a correction considered: where it came from, and how it ran."""

    source: str
    program: str | None
    error: str | None = None
    rows: int | None = None
    repeats_rejected: bool = False  # same result as the query the user rejected
    unchanged: bool = False  # the rejected query itself (written again): never an answer
    seconds: float = 0.0  # writing and running it
    chosen: bool = False
    smoothie: Smoothie | None = field(default=None, repr=False)
    key: tuple[str, ...] | None = field(default=None, repr=False)


def result_key(smoothie: Smoothie, sort: str | None = None) -> tuple[str, ...]:
    """The result as a digest of its sorted multiset of rows; for a query that sorts
    (``sort``: its outermost ORDER BY, see :func:`sort_clause`), also a digest of the
    rows in order and the clause itself.

    Why the order: when a query sorts, the order is part of its answer ("list the
    titles by air date"); feedback on such a result may be about the order alone,
    and the same rows sorted another way are then a new answer, not the rejected
    one. Compare keys with :func:`repeats`. A whole-number float is its integer
    (``3.0`` is ``3``: a column turns float when it holds a NULL, and two queries
    giving the same answer must agree). Kept as digests: candidates stay in the
    conversation's history, and a large result's row texts would stay with them."""
    rows = row_texts(smoothie.df.itertuples(index=False, name=None))
    key = (digest_lines(sorted(rows)),)
    return key if sort is None else key + (digest_lines(rows), sort)


def repeats(key: tuple[str, ...] | None, rejected: tuple[str, ...] | None) -> bool:
    """Whether a result (``key``) gives the ``rejected`` result again (keys of :func:`result_key`).

    The same rows repeat it, unless the new query sorts and the rejected one either
    did not ("sort them by age": a sort is what was asked for) or sorted another way:
    the rows in another order under another ORDER BY. Rows in another order under the
    same ORDER BY are ties put in another order by SQLite's plan: no new answer; nor
    are the same rows with the sort left out."""
    if key is None or rejected is None or key[0] != rejected[0]:
        return False
    if len(key) < 3:
        return True
    if len(rejected) < 3:
        return False
    return key[1] == rejected[1] or key[2] == rejected[2]


def sort_clause(program: str, bsql: Session) -> str | None:
    """``program``'s outermost ORDER BY as BlendSQL text (``None``: it does not sort, or does not parse)."""
    try:
        order = bsql.parse(program).args.get("order")
        return to_blendsql(order) if order is not None else None
    except BlendSQLError:
        return None


def choose_correction(candidates: Sequence[Candidate], rejected: tuple[str, ...] | None,
                      earlier: Collection[tuple[str, ...] | None] = ()) -> Candidate | None:
    """The candidate to answer with: valid, not a rejected result, most agreed on.

    Why: the user said the last result is wrong, so a query giving that same
    result again is the last resort, not an answer; so is one giving the result
    of a query they rejected ``earlier`` for the same question (a second
    correction must not go back to the first rejected query). Independent routes
    to a query (rewriting the old one, writing one anew with the feedback in
    view, writing one from the question alone) that land on the same result are
    more likely right than any one of them; a tie goes to the earlier source in
    ``candidates``' order. The rejected query written out again is no correction
    at all, whatever it returns. A rejected result is recognised by :func:`repeats`.
    """
    valid = [c for c in candidates
             if c.program is not None and c.error is None and c.key is not None and not c.unchanged]
    if not valid:
        return None
    refused = [rejected, *earlier]
    new = [c for c in valid if not any(repeats(c.key, r) for r in refused)] or valid
    # the vote is on the rows (two sorts of the same rows agree on what was found)
    rows = [c.key[0] if c.key else "" for c in new]
    votes = [rows.count(r) for r in rows]
    best = max(range(len(new)), key=lambda i: (votes[i], -i))
    return new[best]


@dataclass
class Turn:
    """One user turn and the system's reply.

    ``act`` is a CoSQL user act, or ``correct`` for a correction turn.
    ``question`` is what was parsed (the utterance, or a pending ambiguous
    question combined with the user's clarification). ``answer`` is the value
    the result denotes (``None`` when nothing was found).
    """

    utterance: str
    act: str
    response: str
    program: str | None = None
    smoothie: Smoothie | None = None
    answer: Any = None
    question: str | None = None
    error: str | None = None
    options: list[str] = field(default_factory=list)  # the readings a clarification offers
    readings: list[Reading] = field(default_factory=list, repr=False)
    reason: str | None = None  # why the turn was answered, refused or asked back
    previous_program: str | None = None  # for corrections: the query that was corrected
    diff: str | None = None  # for corrections: what changed
    source: str | None = None  # who wrote ``program``: "parser", "correction:<source>", None (given)
    candidates: list[Candidate] = field(default_factory=list)  # for corrections: every query tried
    # every statement of the turn, in order: the layer's reads (``details["source"] == "nl"``)
    # and each query run's own trace
    trace: list[TraceStep] = field(default_factory=list)

    @property
    def result(self) -> pd.DataFrame | None:
        """The result rows, if a query ran."""
        return self.smoothie.df if self.smoothie is not None else None

    @property
    def needs_clarification(self) -> bool:
        return self.act == "ambiguous" and self.program is None


class Conversation:
    """A dialogue with ``bsql``'s database (see module docstring).

    ``classify_acts=False`` skips the model's act choice (shortcuts still
    apply) and treats every other turn as a question, e.g. for benchmarks
    whose turns are all questions. ``history_turns`` bounds how many earlier
    query turns go into the parser prompt.
    """

    def __init__(self, bsql: Session, parser: Parser | None = None, *,
                 classify_acts: bool = True, history_turns: int = 3,
                 correction_examples: int = 3,
                 correction_pool: Sequence[CorrectionExample] | None = None,
                 correction_sources: Sequence[str] = DEFAULT_CORRECTION_SOURCES) -> None:
        """``correction_examples``: worked corrections shown to the model when correcting,
        the nearest ones from ``correction_pool`` (default: the shipped SPLASH dev pool);
        0: one fixed example. ``correction_sources``: where candidate corrections come
        from, in order of preference (each costs a model call): ``edit`` (the
        rejected query rewritten as the feedback says), ``fresh`` (the question
        alone; skipped when this conversation's parser wrote a query for the
        question: it would write a rejected one again), ``guided`` (the question written anew with the rejected query and the
        feedback in view). Default: fresh, then edit."""
        self.correction_examples = count_arg(correction_examples, "correction_examples")
        self.history_turns = count_arg(history_turns, "history_turns")
        if not isinstance(classify_acts, bool):
            raise OptionError(f"classify_acts must be True or False, not {classify_acts!r}",
                              hint="e.g. classify_acts=False", option="classify_acts")
        sources = tuple(correction_sources) if not isinstance(correction_sources, str) else ()
        unknown = [x for x in sources if x not in CORRECTION_SOURCES]
        if not sources or unknown or len(set(sources)) != len(sources):
            raise OptionError(f"correction_sources must be distinct names from {CORRECTION_SOURCES}, "
                              f"not {correction_sources!r}", hint="e.g. correction_sources=('guided', 'edit')")
        self.correction_sources = sources
        self.correction_pool = correction_pool
        self.bsql = bsql
        self._parser = parser
        self.classify_acts = classify_acts
        self.history: list[Turn] = []
        self.pending: Turn | None = None  # an ambiguous turn waiting for the user's answer
        self._judge: RelevanceJudge | None = None
        self.state = DialogueState()  # what the last answer named (see ``dialogue``)
        self._grounding: Grounding | None = None  # the turn being handled, as :meth:`_act` found it
        self._steps: list[TraceStep] = []  # the trace of the turn being handled

    @property
    def parser(self) -> Parser:
        """The Parser, created on first need so social turns never load a model."""
        if self._parser is None:
            self._parser = Parser(self.bsql.model)
        return self._parser

    @property
    def db(self) -> Backend:
        """The session's backend: every read of the conversation goes through it."""
        return self.bsql.db

    @contextmanager
    def _turn(self, stage: str) -> Iterator[list[TraceStep]]:
        """One turn as one use of the session, under its time limit, every statement
        recorded (the layer's reads here, each query's trace by :meth:`_execute`)."""
        steps: list[TraceStep] = []
        saved, self._steps = self._steps, steps
        try:
            with self.db.session(timeout=self.bsql.options.get("timeout", DEFAULT_TIMEOUT)), \
                    recording(self.db, steps, stage):
                yield steps
        finally:
            self._steps = saved

    def _execute(self, program: str) -> Smoothie:
        """Run ``program``; its trace (or the failed run's) joins the turn's."""
        try:
            smoothie = self.bsql.execute(program)
        except BlendSQLError as e:
            self._steps += e.trace or []
            raise
        self._steps += smoothie.trace
        return smoothie

    # -- turns ---------------------------------------------------------------------------

    @reads_database("reading the database for the conversation")
    def ask(self, utterance: str) -> Turn:
        """Handle one user utterance; the turn is appended to ``history``.

        Held as one use of the session (its lock): the turn reads the schema
        through the connection, which another thread must not share meanwhile.
        """
        text_arg(utterance, "utterance", allow_empty=True)  # an empty turn gets a reply, not an error
        with self._turn("conversation") as steps:
            turn = self._ask(utterance)
        turn.trace = steps
        return turn

    def _ask(self, utterance: str) -> Turn:
        utterance = utterance.strip()
        turn = self._resolve_pending(utterance) if self.pending is not None else None
        if turn is None:
            act, reason = self._act(utterance)
            turn = self._dispatch(utterance, act, reason)
        self.history.append(turn)
        return turn

    @reads_database("reading the database to correct the query")
    def correct(self, feedback: str, *, retries: int = 1) -> Turn:
        """Correct the last query from ``feedback``, run it and say what changed.

        See the module docstring for the candidates and the choice. An invalid
        candidate is regenerated ``retries`` times with its error. One use of the
        session, like :meth:`ask`.
        """
        text_arg(feedback, "feedback")
        count_arg(retries, "retries")
        with self._turn("correct") as steps:
            turn = self._correct(feedback, retries)
        turn.trace = steps
        return turn

    def _correct(self, feedback: str, retries: int) -> Turn:
        """Candidate queries from each of ``correction_sources``, each run, one chosen
        by :func:`choose_correction`; all of them are kept in ``turn.candidates``."""
        prev = self.last_query_turn()
        if prev is None or prev.program is None:
            turn = Turn(feedback, "correct", "There is no earlier query to correct yet. Ask a question first.")
            self.history.append(turn)
            return turn
        question = prev.question or prev.utterance
        turn = Turn(feedback, "correct", "", question=question, previous_program=prev.program)
        rejected = self._key(prev)
        # every earlier query for this question was rejected too: the first one, then each
        # correction the user corrected again
        chain = [t for t in self.history if t.program is not None and (t.question or t.utterance) == question]
        earlier = [self._key(t) for t in chain if t is not prev and t.smoothie is not None]
        programs = [t.program for t in chain if t.program is not None]
        parser_wrote = any(t.source == "parser" for t in chain)
        for source in self.correction_sources:
            if source == "fresh" and parser_wrote:
                continue  # the same parser on the same question writes a rejected query again
            t0 = time.perf_counter()
            cand = self._candidate(source, question, prev, feedback, retries, [rejected, *earlier], programs)
            cand.seconds = round(time.perf_counter() - t0, 2)
            turn.candidates.append(cand)
        chosen = choose_correction(turn.candidates, rejected, earlier)
        if chosen is None:
            tried = [c for c in turn.candidates if c.program is not None] or turn.candidates
            turn.error = (tried[0].error or "no query") if tried else (
                "no candidate source applies: 'fresh' is skipped for a query this conversation's "
                "parser wrote; add 'edit' or 'guided' to correction_sources")
            turn.response = (f"I could not write a corrected query ({turn.error}). "
                             f"The previous query stands: {prev.program}")
            self.history.append(turn)
            return turn
        chosen.chosen = True
        assert chosen.program is not None
        turn.program, turn.smoothie, turn.source = chosen.program, chosen.smoothie, f"correction:{chosen.source}"
        if chosen.smoothie is not None:
            self._remember(chosen.program, chosen.smoothie)
        turn.answer = answer_value(chosen.smoothie) if chosen.smoothie is not None else None
        turn.response = self._response(chosen.program, chosen.smoothie)
        turn.diff = sql_diff(prev.program, chosen.program)
        if turn.smoothie is not None:
            before = len(prev.smoothie.df) if prev.smoothie is not None else None
            sizes = f"{before} row(s) before, {len(turn.smoothie.df)} now" if before is not None else ""
            change = "The query did not change." if turn.diff == "no change" else f"I changed the query: {turn.diff}."
            turn.response = f"{change} {sizes + '. ' if sizes else ''}{turn.response}"
        self.history.append(turn)
        return turn

    def _candidate(self, source: str, question: str, prev: Turn, feedback: str, retries: int,
                   rejected: Collection[tuple[str, ...] | None], programs: Sequence[str]) -> Candidate:
        """One candidate correction from ``source``, written and run (errors recorded)."""
        assert prev.program is not None
        # the history shown to the parser leaves out every rejected query for this question
        earlier = [t for t in self.parser_history() if t.program not in programs]
        try:
            written = self._write(source, question, prev, feedback, retries, earlier)
        except BlendSQLError as e:  # e.g. the model timed out, a read of the schema failed
            return Candidate(source, None, f"{type(e).__name__}: {e.message}")
        if written.program is None:
            return Candidate(source, None, written.attempts[-1][1] if written.attempts else "no query")
        cand = Candidate(source, written.program)
        if any(sql_diff(p, written.program) == "no change" for p in programs):
            cand.unchanged, cand.error = True, "a rejected query written again"
            return cand  # not run
        try:
            cand.smoothie = self._execute(written.program)
        except BlendSQLError as e:
            cand.error = str(e)
            return cand
        cand.key = result_key(cand.smoothie, sort_clause(written.program, self.bsql))
        cand.rows = len(cand.smoothie.df)
        cand.repeats_rejected = any(repeats(cand.key, r) for r in rejected)
        return cand

    def _write(self, source: str, question: str, prev: Turn, feedback: str, retries: int,
               earlier: list[ParserTurn]) -> ParseResult:
        """The query ``source`` writes for the correction (not yet run)."""
        assert prev.program is not None
        if source == "edit":
            return correct_query(self.parser, self.db, self.bsql.registry, question, prev.program,
                                 feedback, retries=retries, n_examples=self.correction_examples,
                                 examples=self.correction_pool)
        if source == "guided":
            return self.parser.parse(question, self.db, self.bsql.registry, earlier,
                                     feedback=(prev.program, feedback))
        return self.parser.parse(question, self.db, self.bsql.registry, earlier)

    def _response(self, program: str, smoothie: Smoothie | None) -> str:
        """The template response for a result (as :meth:`_run` writes it)."""
        if smoothie is None:
            return ""
        try:
            tree = self.bsql.parse(program)
        except BlendSQLError:
            tree = None
        return answer_response(program, smoothie, tree)

    def last_query_turn(self) -> Turn | None:
        """The most recent turn that has a program."""
        return next((t for t in reversed(self.history) if t.program is not None), None)

    def parser_history(self) -> list[ParserTurn]:
        """Earlier query turns (question + program) for context-dependent parsing."""
        turns = [t for t in self.history if t.program is not None]
        kept = turns[-self.history_turns:] if self.history_turns else []
        return [ParserTurn(t.question or t.utterance, t.program) for t in kept]

    # -- internals -----------------------------------------------------------------------

    def _key(self, turn: Turn) -> tuple[str, ...] | None:
        """The :func:`result_key` of a turn's result (``None`` if it has none)."""
        if turn.smoothie is None or turn.program is None:
            return None
        return result_key(turn.smoothie, sort_clause(turn.program, self.bsql))

    def _act(self, utterance: str) -> tuple[str, str]:
        """The turn's act and why: a social shortcut, a question, or a decline.

        Decided on the question itself (``grounding.ground``), never on how many turns
        came before: a turn that names or implies a table or column is a question; so is
        one whose every content word is grounded (a stored value, a reference to an
        earlier answer that exists, a generic word of counting or ranking). A turn naming
        one column by a common word among words naming nothing is judged. Any other
        turn goes to the model (``RelevanceJudge``: the question alone against anchors
        scored once) and is declined from the calibrated threshold on; a turn none of
        whose words names anything here (and that refers to no earlier answer) is
        answered only when the model is sure, below ``sure_threshold``; the decline's
        kind (unrelated, not held, not understood) is the model's act choice among the
        three, also on the question alone.
        """
        self._grounding = None
        fast = shortcut_act(utterance)
        if fast is not None:
            return fast, "a fixed phrase"
        asked = "infer_sql" if self.last_query_turn() is not None else "inform_sql"
        tables = list_tables(self.db)
        g = self._grounding = ground(self.db, utterance, tables)  # also for resolving references
        if not self.classify_acts:
            return asked, "every turn is a question (classify_acts=False)"
        if g.named and not g.weakly_named:
            return asked, f"it names {', '.join(g.named[:4])}"
        if g.implied and not g.ungrounded:
            return asked, f"its words imply {', '.join(g.implied[:4])}"
        if g.referring and not g.ungrounded and self.state.program is not None:
            return asked, "it follows up the earlier answer"
        if g.values and not g.ungrounded:
            return asked, "it names stored values: " + ", ".join(
                f"'{v.phrase}' ({v.label})" for v in g.values[:3])
        if not g.ungrounded and self.state.program is not None:
            return asked, "every word of it is one of counting, ranking or referring back"
        rel = self._relevance_judge(tables).judge(utterance)
        missing = f" ({', '.join(g.ungrounded[:4])} name nothing here)" if g.ungrounded else ""
        if self._names_nothing(g):
            if rel.surely_answerable:
                return asked, (f"its words name little or nothing here, but the model is sure it is "
                               f"answerable: {rel.note}; sure below {rel.sure_threshold:.2f}")
            judged = (f"the model is not sure it is answerable: {rel.note}; answered only below "
                      f"{rel.sure_threshold:.2f}" if rel.informative else f"the model cannot judge it: {rel.note}")
            little = f"it names only {g.named[0]}" if g.named else "none of its words names anything in these tables"
            return self._decline(utterance), f"{little}{missing}, and {judged}"
        if rel.answerable:
            return asked, f"it names nothing in the schema, but the model judges it answerable: {rel.note}"
        why = (f"it names no table or column{missing}, and the model is sure the tables cannot answer it: "
               f"{rel.note}" if rel.informative else
               f"it names no table or column{missing}, and the model cannot judge it: {rel.note}")
        return self._decline(utterance), why

    def _names_nothing(self, g: Grounding) -> bool:
        """A question that names nothing in the tables (``Grounding.names_nothing``), or
        one column only by a common word (``weakly_named``), and refers to no earlier
        answer; a referring word counts only after an answer, and not beside a named thing
        the database holds no value for ("Who won it last year, the Super Bowl?")."""
        if not (g.names_nothing or g.weakly_named):
            return False
        return not (g.referring and self.state.program is not None and not g.proper)

    def _decline(self, utterance: str) -> str:
        """The decline's kind (unrelated, not held, not understood): the model's act choice
        among the three, on the question alone."""
        act = classify_act(self.bsql.model, utterance, schema_overview(self.db), [])
        return act if act in _REFUSALS else "not_related"

    def _relevance_judge(self, tables: Sequence[Any]) -> RelevanceJudge:
        """The judge of this conversation's database (its anchors scored once)."""
        if self._judge is None:
            self._judge = RelevanceJudge(self.bsql.model, tables_text(tables), anchor_questions(tables))
        return self._judge

    def _dispatch(self, utterance: str, act: str, reason: str) -> Turn:
        if act in SQL_ACTS:
            turn = Turn(utterance, act, "", question=utterance, reason=reason)
            if self._resolve_reference(turn):
                return turn
            if self.classify_acts:
                clarification = self._clarification(turn)
                if clarification is not None:
                    return clarification
            return self._answer(turn)
        if act in SOCIAL:
            return Turn(utterance, act, SOCIAL[act], reason=reason)
        g = self._grounding
        missing = g.ungrounded if g is not None else []
        return Turn(utterance, act, out_of_scope_response(self.db, act, missing), reason=reason)

    def _resolve_reference(self, turn: Turn) -> bool:
        """Resolve the turn's pronoun or ellipsis against the dialogue state
        (``dialogue.resolve``): a substitution or a lookup answers the turn at once
        (True); a hint rewrites ``turn.question`` for the parser. The resolution is
        in ``turn.reason`` and in the trace."""
        g = self._grounding
        if g is None or not g.referring:
            return False
        res = resolve(self.state, turn.utterance, g, list_tables(self.db), self.db)
        if res is None:
            return False
        self._note_resolution(turn, res)
        if res.program is not None:
            self._run(turn, res.program)
            if turn.smoothie is not None:
                turn.source = f"reference:{res.kind}"
                return True
            turn.program, turn.error = None, None  # the resolved program failed: the parser writes one
            turn.question = f"{turn.utterance} [{res.note}]"
            return False
        turn.question = res.question
        return False

    def _note_resolution(self, turn: Turn, res: Resolution) -> None:
        turn.reason = f"{turn.reason}; resolved: {res.note}"
        self._steps.append(TraceStep("plan", f"dialogue state: {res.note}", sql=res.program,
                                     details={"source": "nl", "resolution": res.kind,
                                              "referent": res.referent}))

    def _clarification(self, turn: Turn) -> Turn | None:
        """A vague ranking word answered from the schema, or asked back.

        A follow-up ranks the previous query's rows (``grounding.follow_up_readings``):
        one reading answers the turn at once; otherwise readings that put different
        rows first (``grounding.measure_ambiguity``) make a clarifying question and
        the turn becomes pending. None: the parser takes the turn."""
        last = self.last_query_turn()
        readings: list[Reading] = []
        if last is not None and last.program and is_follow_up(turn.utterance):
            try:
                previous = self.bsql.parse(last.program)
            except BlendSQLError:
                previous = None
            if previous is not None:
                readings = follow_up_readings(self.db, turn.utterance, last.question or last.utterance,
                                              previous)
            if len(readings) == 1:
                turn.reason = (f"{turn.reason}; its ranking word names no column, and "
                               f"{readings[0].label} is the one measure of the rows asked about")
                self._run(turn, readings[0].sql)
                turn.source = "follow-up ranking"
                return turn
        if not readings:
            subject = self._tables_read(last.program) if last is not None and last.program else []
            readings = measure_ambiguity(self.db, turn.utterance, subject)
        if not readings:
            return None
        options = [f"{r.label} ({r.top} first)" for r in readings]
        listed = ", ".join(options[:-1]) + f" or {options[-1]}"
        turn.act, turn.readings, turn.options = "ambiguous", readings, [r.label for r in readings]
        turn.response = f"That could mean several things. Did you mean ranked by {listed}?"
        turn.reason = (f"{turn.reason}; its ranking word names no column, and "
                       f"{len(readings)} columns put a different row first")
        self.pending = turn
        return turn

    def _tables_read(self, program: str) -> list[str]:
        """The tables ``program`` reads (the subject of a follow-up), in order."""
        try:
            return tables_read(self.bsql.parse(program))
        except BlendSQLError:
            return []

    def _resolve_pending(self, utterance: str) -> Turn | None:
        """Combine the pending ambiguous question with the user's answer (None: not an answer)."""
        pending = self.pending
        assert pending is not None
        self.pending = None
        fast = shortcut_act(utterance)
        if fast in ("greeting", "thank_you", "goodbye", "negate"):
            return None
        if not is_reply(utterance, pending.readings):
            return None  # a new question, not an answer to the one asked: a new turn
        chosen = pick_reading(utterance, pending.readings) if pending.readings else None
        if chosen is None and fast == "affirm" and pending.readings:
            chosen = pending.readings[0]
        if chosen is not None:
            question = f"{pending.utterance} (ranked by {chosen.label})"
        elif fast is None and (not pending.readings or ground(self.db, utterance).schema_grounded):
            question = f"{pending.utterance} (I mean {utterance})"  # a restatement
        else:
            return None
        turn = Turn(utterance, "inform_sql", "", question=question,
                    reason=f"the answer to the clarifying question: {question}")
        if chosen is not None and chosen.answers_turn:
            self._run(turn, chosen.sql)  # the previous rows ranked as the user chose
            turn.source = "follow-up ranking"
            return turn
        self._answer(turn)
        if turn.program is None and chosen is not None and chosen.sql:
            # the parser wrote nothing valid: answer with the ranking the user just chose
            turn.reason = f"{turn.reason}; the parser wrote no valid query, so the chosen ranking answers"
            turn.error = None
            self._run(turn, chosen.sql)
            turn.source = "clarification"
        return turn

    def _answer(self, turn: Turn) -> Turn:
        """Parse ``turn.question`` with history, run it and fill in the response."""
        assert turn.question is not None
        parsed = self.parser.parse(turn.question, self.db, self.bsql.registry, self.parser_history())
        if parsed.program is None:
            turn.error = parsed.attempts[-1][1] if parsed.attempts else "no program"
            turn.response = (f"Sorry, I could not write a valid query for that ({turn.error}). "
                             f"I can answer questions about: {schema_overview(self.db)}.")
            return turn
        self._run(turn, parsed.program)
        turn.source = "parser"
        return turn

    def _run(self, turn: Turn, program: str) -> None:
        """Execute ``program`` into ``turn``: smoothie, answer and a template response."""
        turn.program = program
        try:
            turn.smoothie = self._execute(program)
        except BlendSQLError as e:
            turn.error = str(e)
            turn.response = f"The query failed: {e.message}"
            return
        turn.answer = answer_value(turn.smoothie)
        turn.response = self._response(program, turn.smoothie)
        self._remember(program, turn.smoothie)

    def _remember(self, program: str, smoothie: Smoothie) -> None:
        """The dialogue state after an answer: the entities it named (``dialogue.record``)."""
        try:
            tree = self.bsql.parse(program)
            df = smoothie.df
            self.state = record(self.db, tree, program, df.head(10).to_numpy().tolist(),
                                [str(c) for c in df.columns], list_tables(self.db), total=len(df))
        except BlendSQLError:
            self.state = DialogueState(program)


# ---------------------------------------------------------------- the REPL

CHAT_HELP = """\
Ask questions about the database in plain language.
  :explain            explain the last query step by step
  :correct FEEDBACK   correct the last query, e.g. :correct use the treatments table
  :help               this text
  :quit               leave (also Ctrl-D)"""


def print_turn(turn: Turn, out: TextIO) -> None:
    """The reply, then the program (if any) on its own line; for a correction that
    weighed several candidates, one line each (what it was, how it ran, which won)."""
    print(f"bot: {turn.response}", file=out)
    if turn.program:
        print(f"program: {turn.program}", file=out)
    if len(turn.candidates) > 1:
        for c in turn.candidates:
            print(f"  candidate {c.source}: {candidate_outcome(c)}", file=out)
    out.flush()


def candidate_outcome(c: Candidate) -> str:
    """One candidate correction in a few words (for the chat transcript)."""
    if c.program is None:
        return f"no query ({c.error})"
    if c.unchanged:
        return "the rejected query again"
    if c.error is not None:
        return f"failed ({c.error})"
    same = ", the rejected result again" if c.repeats_rejected else ""
    return f"{c.rows} row(s){same}{' (chosen)' if c.chosen else ''}: {c.program}"


def chat(conv: Conversation, inp: TextIO, out: TextIO, *, prompt: str = "you: ",
         echo: bool = False) -> int:
    """Read utterances from ``inp`` until EOF, ``:quit`` or a goodbye; returns turns handled.

    ``echo`` repeats each input line after the prompt (for piped, non-tty
    input, so a transcript reads like a dialogue).
    """
    handled = 0
    while True:
        out.write(prompt)
        out.flush()
        line = inp.readline()
        if not line:
            out.write("\n")
            break
        text = line.strip()
        if echo:
            out.write(text + "\n")
        if not text:
            continue
        if text in (":quit", ":q", ":exit"):
            break
        if _command(conv, text, out):
            continue
        try:
            turn = conv.ask(text)
        except BlendSQLError as e:
            print(f"error: {e}", file=out)
            continue
        handled += 1
        print_turn(turn, out)
        if turn.act == "goodbye":
            break
    return handled


def _command(conv: Conversation, text: str, out: TextIO) -> bool:
    """Handle a ``:command`` line; False if ``text`` is an utterance."""
    if not text.startswith(":"):
        return False
    name, _, arg = text[1:].partition(" ")
    if name == "help":
        print(CHAT_HELP, file=out)
    elif name == "explain":
        last = conv.last_query_turn()
        if last is None or last.program is None:
            print("bot: there is no query to explain yet.", file=out)
        else:
            print("\n".join(explanation_lines(last.program, conv.bsql.registry)), file=out)
    elif name == "correct":
        if not arg.strip():
            print("bot: say what to change, e.g. :correct only count each dog once", file=out)
        else:
            try:
                print_turn(conv.correct(arg.strip()), out)
            except BlendSQLError as e:
                print(f"error: {e}", file=out)
    else:
        print(f"bot: unknown command :{name} (try :help)", file=out)
    return True
