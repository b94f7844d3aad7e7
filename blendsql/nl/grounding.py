"""What a user turn names in the database, and whether the database can answer it.

The conversation refuses a turn only when it is sure the database cannot
answer it, and asks back only when the schema shows that the turn could mean
several things that give different answers. Both decisions start here:

- :func:`schema_mentions`: the tables and columns a turn names (plurals,
  ``CamelCase`` and ``snake_case`` names and two-word names matched), the
  strongest evidence that a turn is about the database;
- :class:`RelevanceJudge`: the model's probability that a turn is *not*
  answerable from these tables (a scored yes/no), and whether the model's
  judgement is informative at all on this database: it must tell apart
  anchor questions built from the schema from anchors about nothing in it;
- :func:`measure_ambiguity`: a vague superlative ("the biggest country")
  over a table with several measures that rank a different row first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz
from sqlglot import exp

from blendsql.db.backend import is_text_type, quote
from blendsql.errors import BlendSQLError
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Choice
from blendsql.nl.serialize import TableInfo, list_tables
from blendsql.nl.source import as_backend

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
_STOP = frozenset({
    "the", "and", "was", "who", "what", "which", "when", "where", "how", "many", "much", "for",
    "from", "with", "that", "this", "did", "does", "are", "all", "show", "list", "give", "tell",
    "about", "their", "there", "those", "these", "have", "has", "one", "ones", "find", "please",
    "can", "you", "each", "every", "its", "his", "her", "they", "them", "than", "more", "less",
    "is", "of", "in", "on", "at", "to", "by", "an", "or", "be", "do", "me", "my", "it", "as",
    "any", "some", "number", "name", "names", "names'", "get", "want", "would", "like", "know",
})
#: words that make a turn refer back to the previous result ("which one is the biggest?")
_REFERRING = frozenset({
    "one", "ones", "it", "its", "they", "them", "their", "those", "these", "that", "this",
    "he", "she", "his", "her", "same", "above", "previous", "former", "latter",
})
_FOLLOW_UP_START = re.compile(r"^(and|also|only|just|now|then|what about|how about|of (these|those|them))\b",
                              re.I)
#: vague superlatives: they rank rows without saying by what (``desc``: largest first)
_VAGUE_SUPERLATIVES: dict[str, bool] = {
    **dict.fromkeys(("biggest", "largest", "greatest", "highest", "top", "best", "most",
                     "major", "leading", "bigger", "larger", "greater", "higher"), True),
    **dict.fromkeys(("smallest", "tiniest", "lowest", "least", "worst", "bottom",
                     "smaller", "lower", "fewest"), False),
}
_NUMERIC_TYPES = ("INT", "REAL", "NUM", "FLOA", "DOUB", "DEC")
#: the last word of a column that names or dates a row rather than measuring it
_ID_WORDS = frozenset({"id", "code", "key", "no", "year"})


# ---------------------------------------------------------------- names


def singular(word: str) -> str:
    """English singular of a lower-case noun (enough for matching schema names)."""
    for plural, single in (("ies", "y"), ("sses", "ss"), ("xes", "x"), ("ches", "ch"), ("shes", "sh")):
        if word.endswith(plural) and len(word) > len(plural) + 1:
            return word[: -len(plural)] + single
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def name_words(name: str) -> str:
    """A schema name as lower-case words: ``SurfaceArea`` → ``surface area``, ``song_name`` →
    ``song name``; each word singular."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    return " ".join(singular(w) for w in spaced.lower().split())


def content_words(utterance: str) -> list[str]:
    """The utterance's words that could name something (lower-case, singular, no stop words)."""
    words = [w.lower().strip("'") for w in _WORD.findall(utterance)]
    return [singular(w) for w in words if len(w) >= 3 and w not in _STOP]


def _phrases(utterance: str) -> list[str]:
    """Content words and adjacent pairs (``life expectancy`` names ``LifeExpectancy``)."""
    words = content_words(utterance)
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


def _names(label: str, phrases: Sequence[str], threshold: float) -> bool:
    """Whether one of ``phrases`` names ``label`` (both in :func:`name_words` form)."""
    joined = label.replace(" ", "")
    return any(fuzz.ratio(p, label) >= threshold or fuzz.ratio(p.replace(" ", ""), joined) >= threshold
               for p in phrases)


def schema_mentions(db: Any, utterance: str, threshold: float = 85.0,
                    tables: Sequence[TableInfo] | None = None) -> list[str]:
    """Tables and ``table.column`` names that a word (or two adjacent words) of the
    utterance names, near-exactly: "cities" names ``city``, "life expectancy"
    names ``country.LifeExpectancy``."""
    phrases = _phrases(utterance)
    if not phrases:
        return []
    found = []
    for t in tables if tables is not None else list_tables(db):
        if _names(name_words(t.name), phrases, threshold):
            found.append(t.name)
        found += [f"{t.name}.{c}" for c in t.columns if _names(name_words(c), phrases, threshold)]
    return found


def is_follow_up(utterance: str) -> bool:
    """Whether the turn refers back to an earlier result ("which one is the biggest?",
    "and in 2010?", "what about those in Asia?")."""
    if _FOLLOW_UP_START.match(utterance.strip()):
        return True
    return any(w.lower() in _REFERRING for w in _WORD.findall(utterance))


# ---------------------------------------------------------------- relevance

RELEVANCE_PROMPT = """\
Decide whether a database with the given tables can answer the question.

Tables: singer (name, country, age, song); concert (concert_name, year, stadium)
Question: How many singers are from France?
Answerable: yes
Question: What is the weather like in London today?
Answerable: no
Question: Which stadium held the most concerts?
Answerable: yes
Question: Tell me a joke about cats.
Answerable: no
Question: What is the average age of the singers?
Answerable: yes
Question: Who is the president of the United States?
Answerable: no

"""
#: anchors the database cannot answer, whatever it holds
UNRELATED_ANCHORS = ("Can you recommend a good recipe for pancakes?", "What time is it right now in Tokyo?",
                     "Please write a short poem about the sea.")
#: how far apart the model must put the two kinds of anchor to be trusted at all
MIN_SEPARATION = 0.2
#: the decline threshold before the anchors are scored, and its bounds once they are
DEFAULT_THRESHOLD = 0.5
THRESHOLD_BOUNDS = (0.35, 0.7)


def calibrated_threshold(answerable_max: float, unrelated_min: float) -> float:
    """Halfway between the two kinds of anchor, within :data:`THRESHOLD_BOUNDS`.

    Why: the evaluation model scores "What is the weather tomorrow in Paris?" 0.74-0.82
    and an off-schema sports question 0.65, anchors about the schema near 0 and unrelated
    anchors above 0.9; a fixed 0.75 sat inside that spread, so the decision moved with
    the model's state. The midpoint is as far from either kind as the model allows."""
    lo, hi = THRESHOLD_BOUNDS
    return min(hi, max(lo, (answerable_max + unrelated_min) / 2))


@dataclass
class Relevance:
    """The model's judgement of one turn: ``p_unanswerable`` (None: it could not
    score), and whether its judgements separate this schema's anchors (``informative``)."""

    p_unanswerable: float | None
    informative: bool
    note: str = ""
    threshold: float = DEFAULT_THRESHOLD
    sure_threshold: float = DEFAULT_THRESHOLD / 2

    @property
    def answerable(self) -> bool:
        """The model judges the question answerable (and its judgement counts)."""
        return self.informative and self.p_unanswerable is not None and self.p_unanswerable < self.threshold

    @property
    def surely_answerable(self) -> bool:
        """The model puts the question nearer the schema's anchors than halfway to the
        threshold: what a question naming nothing here needs to be answered."""
        return self.informative and self.p_unanswerable is not None and self.p_unanswerable < self.sure_threshold


@dataclass
class RelevanceJudge:
    """Scores "can these tables answer this question?" with the model's probabilities.

    The anchors are scored once per judge: questions built from the schema
    (answerable by construction) and :data:`UNRELATED_ANCHORS` (about nothing a
    database holds). A model that does not score every unrelated anchor at least
    :data:`MIN_SEPARATION` above every schema anchor is not informative: its
    judgement is not used (the embedded 135M model scores both kinds near 0.5).
    """

    model: Model
    tables_text: str
    answerable_anchors: tuple[str, ...]
    _separation: float | None = field(default=None, init=False)
    _unscored: str | None = field(default=None, init=False)
    _threshold: float | None = field(default=None, init=False)
    _answerable_max: float | None = field(default=None, init=False)
    _scores: dict[str, float | None] = field(default_factory=dict, init=False, repr=False)

    def p_unanswerable(self, question: str) -> float | None:
        """P("no") for ``question``; a model that returns no probabilities (a server
        without ``logprobs``, a plain function) gives its answer as 1 or 0 (None: no answer)."""
        if question in self._scores:  # the same question gets the same score at every turn
            return self._scores[question]
        p = self._score(question)
        self._scores[question] = p
        return p

    def _score(self, question: str) -> float | None:
        prompt = f"{RELEVANCE_PROMPT}Tables: {self.tables_text}\nQuestion: {question}\nAnswerable:"
        resp = self.model.generate([Request(prompt=prompt, constraint=Choice(("yes", "no")),
                                            max_tokens=4, score=True)])[0]
        if not resp.scores or set(resp.scores) != {"yes", "no"}:
            self._unscored = resp.unscored or "no scores returned"
            answer = str(resp.value).lower() if resp.value is not None else None
            return {"yes": 0.0, "no": 1.0}.get(answer) if answer else None
        top = max(resp.scores.values())
        odds = {k: math.exp(v - top) for k, v in resp.scores.items()}
        return odds["no"] / (odds["yes"] + odds["no"])

    def separation(self) -> float | None:
        """How far apart the model puts the two kinds of anchor: the lowest P(no) of an
        unrelated anchor minus the highest of the schema's own (cached; None: unscored)."""
        if self._separation is None:
            yes = [self.p_unanswerable(q) for q in self.answerable_anchors]
            no = [self.p_unanswerable(q) for q in UNRELATED_ANCHORS]
            if not yes or any(p is None for p in [*yes, *no]):
                return None
            self._separation = min(no) - max(yes)  # type: ignore[type-var, operator]
            self._answerable_max = max(yes)  # type: ignore[type-var]
            self._threshold = calibrated_threshold(max(yes), min(no))  # type: ignore[type-var, arg-type]
        return self._separation

    @property
    def threshold(self) -> float:
        """The P(unanswerable) from which a question is declined: halfway between the
        highest-scored schema anchor and the lowest-scored unrelated anchor (scored once,
        on questions alone, so no turn of the dialogue moves it); see :func:`calibrated_threshold`."""
        self.separation()
        return self._threshold if self._threshold is not None else DEFAULT_THRESHOLD

    @property
    def sure_threshold(self) -> float:
        """Halfway between the highest-scored schema anchor and :attr:`threshold`: a
        question whose words name nothing in the tables is answered only below it (the
        evaluation model put "Please translate 'good morning' into Japanese." at 0.58
        under a threshold of 0.59: undecided, and nothing in the question points here)."""
        self.separation()
        if self._answerable_max is None:
            return self.threshold / 2
        return (self._answerable_max + self.threshold) / 2

    def judge(self, question: str) -> Relevance:
        sep = self.separation()
        p = self.p_unanswerable(question) if sep is not None else None
        if sep is None or p is None:
            return Relevance(None, False, f"the model gave no probabilities ({self._unscored})")
        informative = sep >= MIN_SEPARATION
        how = "" if self._unscored is None else f" (its answer, unscored: {self._unscored})"
        note = (f"P(unanswerable) {p:.2f}{how}; every unrelated anchor scores at least {sep:.2f} above "
                f"every question about the schema" if sep >= 0 else
                f"P(unanswerable) {p:.2f}; an unrelated anchor scores {-sep:.2f} below a question "
                f"about the schema")
        if not informative:
            note += f" (a separation under {MIN_SEPARATION}: not informative)"
        else:
            note += f"; declined from {self.threshold:.2f}"
        return Relevance(p, informative, note, self.threshold, self.sure_threshold)


def anchor_questions(tables: Sequence[TableInfo]) -> tuple[str, ...]:
    """Questions every database with these tables can answer: how many rows a table has."""
    plain = [t for t in tables if not t.is_documents] or list(tables)
    return tuple(f"How many entries are in the {t.name} table?" for t in plain[:2])


def tables_text(tables: Sequence[TableInfo], n_columns: int = 12) -> str:
    """``table (col, col, ...)`` for every table, for the relevance prompt."""
    return "; ".join(f"{t.name} ({', '.join(t.columns[:n_columns])})" for t in tables)


# ---------------------------------------------------------------- ambiguity


@dataclass
class Reading:
    """One meaning of a vague turn: rank ``table`` by ``column``, and the row it puts first
    (``top``, from ``sql``: the ranking itself, BlendSQL's SQL)."""

    table: str
    column: str
    top: str
    sql: str = ""
    answers_turn: bool = False  # ``sql`` is the whole answer (a follow-up's ranking), not a hint

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}"


def vague_superlative(utterance: str) -> tuple[str, bool] | None:
    """The first vague superlative of the turn and whether it ranks largest first."""
    for w in _WORD.findall(utterance.lower()):
        if w in _VAGUE_SUPERLATIVES:
            return w, _VAGUE_SUPERLATIVES[w]
    return None


def measure_columns(db: Any, t: TableInfo) -> list[str]:
    """Numeric columns of ``t`` that measure something: not keys, codes or years by name,
    and not holding only values of another table's id column (a foreign key)."""
    db = as_backend(db)
    out = []
    for c in t.columns:
        if not any(x in t.type_of(c) for x in _NUMERIC_TYPES) or _names_a_row(c):
            continue
        if not _references_an_id(db, t, c):
            out.append(c)
    return out


def _names_a_row(column: str) -> bool:
    """Whether a column is an id, code, key, number or year by its last word (``StuID``,
    ``country_code``, ``Code2``, ``IndepYear``; not ``Paid`` or ``Humidity``)."""
    words = name_words(column).split()
    return bool(words) and words[-1].rstrip("0123456789") in _ID_WORDS


def _id_columns(db: Any, exclude: str) -> list[tuple[str, str]]:
    return [(t.name, c) for t in list_tables(db) if t.name != exclude and not t.is_documents
            for c in t.columns if c.lower() in ("id", f"{t.name.lower()}id", f"{t.name.lower()}_id")]


def _references_an_id(db: Any, t: TableInfo, column: str) -> bool:
    """Whether every non-NULL value of ``t.column`` is an id of another table."""
    for other, idcol in _id_columns(db, t.name):
        sql = (f"SELECT COUNT({quote(column)}), SUM(CASE WHEN {quote(column)} IN "
               f"(SELECT {quote(idcol)} FROM {quote(other)}) THEN 1 ELSE 0 END) FROM {quote(t.name)}")
        row = _first_row(db, sql)
        if row is not None and row[0] and row[1] == row[0]:
            return True
    return False


def _first_row(db: Any, sql: str) -> tuple[Any, ...] | None:
    """The first row of ``sql`` (None: no row, or the statement failed on this backend)."""
    try:
        _, rows = db.execute(sql)
    except BlendSQLError:
        return None
    return tuple(rows[0]) if rows else None


def label_column(t: TableInfo) -> str | None:
    """The column that names a row (``name``/``title`` first, else the first text column)."""
    texts = [c for c in t.columns if not any(x in t.type_of(c) for x in _NUMERIC_TYPES)]
    for c in texts:
        if name_words(c) in ("name", "title") or name_words(c).endswith(" name"):
            return c
    return texts[0] if texts else None


def measure_ambiguity(db: Any, utterance: str, subject: Sequence[str] = (),
                      max_options: int = 4) -> list[Reading]:
    """The readings of a vague superlative that put different rows first (empty: not ambiguous).

    Ambiguous when the turn ranks with a vague word ("the biggest country"),
    names no column of the table (a named column says what to rank by) and implies
    none with another word ("the most people": population), is about one table
    (named, or else the earlier query's ``subject`` tables), and two or more of
    that table's measures put a different row first. The measures the ranking word
    itself implies ("biggest": area, size or population) are the readings when the
    table has any, else every measure (up to ``max_options``, in schema order), each
    with the row it puts first. Every filter of the question that is a stored value
    of the table ("in Asia": ``Continent = 'Asia'``) is kept in each reading.
    """
    vague = vague_superlative(utterance)
    if vague is None:
        return []
    db = as_backend(db)
    tables = {t.name: t for t in list_tables(db)}
    named = schema_mentions(db, utterance, tables=list(tables.values()))
    about = [n for n in named if n in tables] or [s for s in subject if s in tables]
    if len(about) != 1 or any(n.startswith(f"{about[0]}.") for n in named):
        return []
    t = tables[about[0]]
    others = [w for w in _WORD.findall(utterance) if w.lower() != vague[0]]
    if any(n.startswith(f"{t.name}.") for n in implied_columns(db, utterance, [t], others)):
        return []  # another word says what to rank by
    label = label_column(t)
    if label is None:
        return []
    order = "DESC" if vague[1] else "ASC"
    filters = [v for v in value_mentions(db, utterance, [t]) if v.column != label]
    where = "".join(f" AND {quote(v.column)} = '{v.value.replace(chr(39), chr(39) * 2)}'" for v in filters)
    measures = measure_columns(db, t)
    hinted = [n.split(".", 1)[1] for n in implied_columns(db, utterance, [t], [vague[0]])]
    measures = [c for c in measures if c in hinted] or measures
    # "which country in Asia is the biggest?" asks for the top row and nothing more: a
    # reading's ranking is then the whole answer (any other word: the parser writes it)
    said = {w for v in filters for w in content_words(v.phrase)} | set(name_words(t.name).split())
    whole = all(w in said or w in _GENERIC or w == singular(vague[0]) or w in ("which", "what")
                for w in content_words(utterance))
    readings: list[Reading] = []
    for c in measures:
        sql = (f"SELECT {quote(label)} FROM {quote(t.name)} WHERE {quote(c)} IS NOT NULL{where} "
               f"ORDER BY {quote(c)} {order}, {quote(label)} LIMIT 1")
        row = _first_row(db, sql)
        if row is not None:
            readings.append(Reading(t.name, c, str(row[0]), sql, answers_turn=whole))
    if len({r.top for r in readings}) < 2:
        return []
    return readings[:max_options]


def follow_up_readings(db: Any, utterance: str, previous_question: str, previous: exp.Expr,
                       max_options: int = 4) -> list[Reading]:
    """Readings of a vague ranking follow-up ("which one is the biggest?") over the rows of
    the previous query: each measure of the table the previous question was about, ranking
    the previous query's rows (its joins and filters kept, its projection replaced by the
    table's label column). One reading answers the turn; several that put different rows
    first are a clarifying question. Empty when the turn names a column or another table,
    has no vague ranking word, or the previous query is not a plain SELECT (grouped,
    distinct, a set operation) over BlendSQL's SQL alone."""
    vague = vague_superlative(utterance)
    if vague is None or not isinstance(previous, exp.Select):
        return []
    if any(previous.args.get(k) for k in ("group", "having", "distinct", "with")):
        return []
    db = as_backend(db)
    tables = {t.name: t for t in list_tables(db)}
    if schema_mentions(db, utterance, tables=list(tables.values())):
        return []
    read = {t.name: t.alias_or_name for t in previous.find_all(exp.Table)}
    about = [n for n in schema_mentions(db, previous_question, tables=list(tables.values()))
             if n in tables and n in read] or [n for n in read if n in tables and len(read) == 1]
    derived = any(isinstance(src, exp.Subquery) or src.find(exp.Subquery) is not None
                  for src in [previous.args.get("from_") or previous.args.get("from"), *(previous.args.get("joins") or [])] if src)
    if len(about) != 1 or derived:  # a subquery in WHERE (a value bound through a key) is kept
        return []
    t, alias = tables[about[0]], read[about[0]]
    label = label_column(t)
    if label is None:
        return []
    readings = []
    for c in measure_columns(db, t):
        tree = previous.copy()
        tree.set("expressions", [_col(label, alias)])
        measure = _col(c, alias)
        tree = tree.where(exp.Not(this=exp.Is(this=measure.copy(), expression=exp.Null())))
        tree.set("order", exp.Order(expressions=[
            exp.Ordered(this=measure, desc=vague[1]),
            exp.Ordered(this=_col(label, alias))]))
        tree.set("limit", None)
        sql = tree.limit(1).sql(dialect="sqlite")
        try:
            _, rows = db.execute(sql)
        except BlendSQLError:
            return []  # e.g. an ingredient in the previous query: the parser follows up instead
        if rows:
            readings.append(Reading(t.name, c, str(rows[0][0]), sql, answers_turn=True))
    if len(readings) > 1 and len({r.top for r in readings}) < 2:
        return readings[:1]  # every measure agrees: one answer
    return readings[:max_options]


_QUESTION = re.compile(r"^(what|which|who|whom|whose|when|where|why|how|list|show|give|find|count|tell|"
                       r"name|return|display|is|are|does|do|did|can|could)\b", re.I)


def is_reply(utterance: str, readings: Sequence[Reading]) -> bool:
    """Whether a turn answers a clarifying question that offered ``readings``: it picks
    an option (a column's name, "the second one", "yes") or restates briefly what was
    meant; a turn shaped as a question of its own, with words beyond the options', is a
    new turn ("What is the population of France?" after "did you mean population
    or surface area?")."""
    words = content_words(utterance)
    option_words = {w for r in readings for w in name_words(r.column).split()} | {
        w for r in readings for w in name_words(r.table).split()}
    other = [w for w in words if w not in option_words and w not in _GENERIC and w not in _REFERRING
             and w not in ("mean", "meant", "ranked", "rank", "by", "yes", "yeah", "please", "option")]
    asks = bool(_QUESTION.match(utterance.strip())) or utterance.strip().endswith("?")
    if readings and pick_reading(utterance, readings) is not None:
        return not (asks and other)
    return not asks and len(other) <= 3


def _col(name: str, table: str) -> exp.Column:
    """``table.name`` quoted only where a name needs it: a quoted alias would not match the
    unquoted one on a backend that folds case (PostgreSQL reads ``T1`` as ``t1``)."""
    return exp.Column(this=exp.to_identifier(name), table=exp.to_identifier(table))


def pick_reading(reply: str, readings: Sequence[Reading]) -> Reading | None:
    """The reading a reply to a clarifying question chooses ("population", "the second one",
    "by surface area"), or None."""
    ordinals = {"first": 0, "1": 0, "second": 1, "2": 1, "third": 2, "3": 2, "last": len(readings) - 1}
    words = [w.lower() for w in _WORD.findall(reply)] + re.findall(r"\d", reply)
    phrases = _phrases(reply)
    scored = [(max((max(fuzz.ratio(p, name_words(r.column)),
                        fuzz.ratio(p.replace(" ", ""), name_words(r.column).replace(" ", "")))
                    for p in phrases), default=0.0), i) for i, r in enumerate(readings)]
    best, i = max(scored, default=(0.0, -1))
    if best >= 80:
        return readings[i]
    for w in words:
        if w in ordinals and 0 <= ordinals[w] < len(readings):
            return readings[ordinals[w]]
    return None


# ---------------------------------------------------------------- grounding a question

#: words that imply a measure without naming its column ("the most people": population),
#: each as the words a column's name would contain
IMPLIED_MEASURES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("people", "person", "populous", "populated", "inhabitant", "resident",
                     "crowded"), ("population",)),
    **dict.fromkeys(("big", "biggest", "bigger", "large", "largest", "larger", "small", "smallest",
                     "smaller", "size", "tiniest", "vast", "huge"), ("area", "size", "population")),
    **dict.fromkeys(("rich", "richest", "richer", "wealthy", "wealthiest", "poor", "poorest",
                     "poorer", "wealth"), ("gnp", "gdp", "income", "wealth", "salary", "net worth")),
    **dict.fromkeys(("old", "oldest", "older", "young", "youngest", "younger"), ("age",)),
    **dict.fromkeys(("expensive", "cheap", "cheapest", "costly", "pricey"), ("price", "cost")),
    **dict.fromkeys(("long", "longest", "longer", "short", "shortest"), ("length", "duration")),
    **dict.fromkeys(("tall", "tallest", "taller"), ("height",)),
    **dict.fromkeys(("heavy", "heaviest", "heavier", "light", "lightest"), ("weight",)),
    **dict.fromkeys(("live", "lived", "living", "longevity"), ("life expectancy",)),
    **dict.fromkeys(("speak", "spoken", "speaks", "tongue"), ("language",)),
}
#: words that carry no subject of their own: counting, ranking, ordering, referring
_GENERIC = frozenset({
    "total", "average", "avg", "sum", "count", "listed", "list", "number", "amount", "first",
    "second", "third", "fourth", "fifth", "last", "next", "previous", "also", "only", "just",
    "different", "distinct", "exist", "sorted", "sort", "order", "descending", "ascending",
    "display", "return", "show", "give", "what", "about", "same", "other", "another", "both",
    "either", "neither", "between", "greater", "fewer", "maximum", "minimum", "max", "min",
    "mean", "value", "record", "entry", "row", "result", "answer", "all", "there", "here",
    "information", "detail", "data", "database", "table", "column", "then", "now", "instead",
    "again", "too", "whole", "overall", "respectively", "per", "ever", "currently", "known",
    "lot", "much", "many", "few", "several", "rank", "ranked", "top", "bottom", "item",
    # the query's own operations: sorting, filtering, comparing, combining (no subject)
    "id", "ids", "increasing", "decreasing", "alphabetical", "alphabetically", "limit", "filter",
    "duplicate", "unique", "among", "below", "above", "after", "before", "earliest", "latest",
    "none", "not", "add", "intersect", "union", "except", "common", "popular", "time", "once",
    "twice", "include", "including", "exclude", "excluding", "without", "were", "been", "being",
    "over", "under",
})


@dataclass
class ValueMention:
    """A phrase of a question that is a stored value of ``table.column``."""

    phrase: str
    table: str
    column: str
    value: str

    @property
    def label(self) -> str:
        return f"{self.table}.{self.column}"


@dataclass
class Grounding:
    """What a question's words name in the database, decided without a model.

    ``named``: tables and columns it names; ``implied``: columns its words imply
    ("people": ``country.Population``); ``values``: its phrases that are stored
    values; ``referring``: it points back at an earlier answer ("its", "that one",
    "and in France?"); ``ungrounded``: its content words that are none of these
    (nor generic words of counting and ranking): what the database may not hold.
    """

    named: list[str] = field(default_factory=list)
    implied: list[str] = field(default_factory=list)
    values: list[ValueMention] = field(default_factory=list)
    referring: bool = False
    ungrounded: list[str] = field(default_factory=list)
    matched: list[str] = field(default_factory=list)
    proper: list[str] = field(default_factory=list)

    @property
    def schema_grounded(self) -> bool:
        """It names or implies a table or column."""
        return bool(self.named or self.implied)

    @property
    def names_nothing(self) -> bool:
        """Some of its words name nothing here and none names anything: no table, column,
        word of one, implied measure or stored value ("Please translate 'good morning'
        into Japanese."). A referring word alone does not ground it."""
        return bool(self.ungrounded) and not (self.named or self.implied or self.values or self.matched)

    @property
    def weakly_named(self) -> bool:
        """It names one column by a single common word ("year", "score", "price") and
        nothing else here, among two or more words that name nothing ("What year did the
        Berlin Wall fall?"): not enough to answer without the model's judgement."""
        if len(self.named) != 1 or "." not in self.named[0] or self.values or len(self.ungrounded) < 2:
            return False
        return len(name_words(self.named[0].split(".", 1)[1]).split()) == 1


def implied_columns(db: Any, utterance: str, tables: Sequence[TableInfo] | None = None,
                    words: Sequence[str] | None = None) -> list[str]:
    """``table.column`` names the question's words imply without naming them: "people"
    implies every column named ``population``, "biggest" those named ``area``, ``size``
    or ``population``, "richest" ``GNP`` (see :data:`IMPLIED_MEASURES`)."""
    said = [w.lower() for w in (words if words is not None else _WORD.findall(utterance))]
    stems = {s for w in said for s in IMPLIED_MEASURES.get(w, IMPLIED_MEASURES.get(singular(w), ()))}
    if not stems:
        return []
    out = []
    for t in tables if tables is not None else list_tables(db):
        if t.is_documents:
            continue
        for c in t.columns:
            label = name_words(c)
            padded = f" {label} "
            if any(f" {s} " in padded or label.replace(" ", "") == s.replace(" ", "") for s in stems):
                out.append(f"{t.name}.{c}")
    return out


def _value_phrases(utterance: str, max_n: int = 3) -> list[str]:
    words = [w.strip("'.-") for w in re.findall(r"[A-Za-z0-9][A-Za-z0-9'.-]*", utterance)]
    out = []
    for n in range(max_n, 0, -1):
        for i in range(len(words) - n + 1):
            gram = " ".join(words[i:i + n])
            parts = [w.lower() for w in words[i:i + n]]
            if len(gram) < 3 or parts[0] in _STOP or parts[-1] in _STOP or parts[0] in _GENERIC:
                continue
            out.append(gram)
    return out


def value_mentions(db: Any, utterance: str, tables: Sequence[TableInfo] | None = None,
                   max_mentions: int = 6) -> list[ValueMention]:
    """Phrases of the question (1-3 words, longest first) that equal a stored text value of
    some column, ignoring case: "Netherlands" is ``country.Name`` = ``'Netherlands'``.
    A phrase found in a column is not looked up again inside a longer one already bound."""
    db = as_backend(db)
    phrases = _value_phrases(utterance)
    if not phrases:
        return []
    lowered = list(dict.fromkeys(p.lower() for p in phrases))
    found: list[ValueMention] = []
    for t in tables if tables is not None else list_tables(db):
        if t.is_documents:
            continue
        for c in t.columns:
            declared = t.type_of(c)
            if any(x in declared for x in _NUMERIC_TYPES) or (declared and not is_text_type(declared)):
                continue
            marks = ", ".join("?" for _ in lowered)
            sql = (f"SELECT DISTINCT {quote(c)} FROM {quote(t.name)} "
                   f"WHERE lower({quote(c)}) IN ({marks}) LIMIT 20")
            try:
                _, rows = db.execute(sql, lowered)
            except BlendSQLError:
                continue
            for (v,) in rows:
                if isinstance(v, str):
                    phrase = next(p for p in phrases if p.lower() == v.lower())
                    found.append(ValueMention(phrase, t.name, c, v))
    # a phrase inside a longer bound phrase ("York" in "New York") is not a mention of its own
    longer = [m.phrase.lower() for m in found]
    found = [m for m in found if not any(m.phrase.lower() in x and m.phrase.lower() != x for x in longer)]
    found.sort(key=lambda m: (-len(m.phrase), phrases.index(m.phrase)))
    return found[:max_mentions]


def ground(db: Any, utterance: str, tables: Sequence[TableInfo] | None = None) -> Grounding:
    """What the question names in the database (see :class:`Grounding`); no model."""
    db = as_backend(db)
    tables = list(tables) if tables is not None else list_tables(db)
    named = schema_mentions(db, utterance, tables=tables)
    words = [w.lower().strip("'") for w in _WORD.findall(utterance)]
    implied = implied_columns(db, utterance, tables, words)
    values = value_mentions(db, utterance, tables)
    value_words = {singular(w.lower()) for v in values for w in _WORD.findall(v.phrase)}
    labels = [name_words(t.name) for t in tables] + [name_words(c) for t in tables for c in t.columns]
    ungrounded, matched = [], []
    for w in content_words(utterance.replace("'s ", " ")):
        if (w in value_words or w in _GENERIC or w in _REFERRING or w in _VAGUE_SUPERLATIVES
                or w in IMPLIED_MEASURES or w.isdigit()):
            continue
        if any(_names(lab, [w], 85.0) or w in lab.split() for lab in labels):
            matched.append(w)
            continue
        ungrounded.append(w)
    referring = bool(_FOLLOW_UP_START.match(utterance.strip())) or any(w in _REFERRING for w in words)
    said = _WORD.findall(utterance)[1:]  # the first word is capitalised as a sentence's
    proper = [w for w in said if w[0].isupper() and singular(w.lower().strip("'")) in ungrounded]
    return Grounding(named, implied, values, referring, list(dict.fromkeys(ungrounded)),
                     list(dict.fromkeys(matched)), list(dict.fromkeys(proper)))
