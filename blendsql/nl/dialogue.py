"""Dialogue state: what the conversation's answers named, and what a follow-up points at.

After each answered turn the conversation records its :class:`Entity` list: the
rows the answer named (the projected label column of each of the first rows, with
the table it belongs to and that row's primary key), and the equality filters that
produced them (``country.Name = 'Netherlands'``). A follow-up is then resolved
against them *before* a program is written (:func:`resolve`):

- ``"and in France?"``, ``"what about Asia?"`` (ellipsis): a stored value of the
  column a filter of the previous program compared, put in that filter's place;
- ``"and its population?"``, ``"the second one's capital?"`` (a pronoun or an
  ordinal with columns of the referent's table): a lookup of those columns on the
  referent's key (``WHERE Code = 'RUS'``);
- ``"what are their populations?"``, ``"which of those are in Asia?"``, ``"how many of
  them are there?"`` (a plural pronoun, or "these countries"): the rows of the previous
  answer, by their keys: ``Code IN (SELECT Code FROM ...)``, the previous query itself
  giving them (also the rows it only counted; its filters stay, for a later ellipsis),
  else ``Code IN ('AUS', 'PNG')`` when the answer's every row is recorded; asked columns
  of them, those of them with a stored value, or how many;
- any other reference to one entity: the question handed to the parser says what
  the pronoun stands for (``[its = country with Code = 'RUS' (Name: Russian Federation)]``).

Each resolution carries a one-line ``note`` that the turn's reason and trace show.
Nothing here calls a model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from blendsql.db.backend import Backend, quote
from blendsql.errors import BlendSQLError
from blendsql.grammar.nodes import to_blendsql
from blendsql.nl.grounding import (
    _FOLLOW_UP_START,
    _GENERIC,
    _REFERRING,
    _STOP,
    _VAGUE_SUPERLATIVES,
    _WORD,
    IMPLIED_MEASURES,
    Grounding,
    ValueMention,
    content_words,
    implied_columns,
    label_column,
    name_words,
    singular,
)
from blendsql.nl.keys import foreign_keys, primary_key
from blendsql.nl.serialize import TableInfo

#: pronouns that point at one thing
SINGULAR = frozenset({"it", "its", "he", "she", "his", "her", "him", "that", "this"})
#: pronouns that point at several
PLURAL = frozenset({"they", "them", "their", "those", "these"})
ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "last": -1}
MAX_ENTITIES = 10


@dataclass
class Entity:
    """One thing an answer named: ``table.column`` = ``value`` in the row whose key is
    ``key`` = ``key_value`` (the same column and value when the table has no single key).
    ``via``: ``"row"`` (a row of the result) or ``"filter"`` (a condition of the program)."""

    table: str
    column: str
    value: Any
    key: str
    key_value: Any
    via: str = "row"

    def condition(self) -> str:
        """The SQL condition that selects this entity's row."""
        return f"{quote(self.key)} = {_literal(self.key_value)}"

    def describe(self) -> str:
        if self.key == self.column:
            return f"{self.table} with {self.column} = {_literal(self.value)}"
        return f"{self.table} with {self.key} = {_literal(self.key_value)} ({self.column}: {self.value})"


@dataclass
class Filter:
    """An equality condition of a program: ``table.column = value`` (``node``: the literal)."""

    table: str
    column: str
    value: Any
    node: exp.Literal = field(repr=False)


@dataclass
class DialogueState:
    """The entities of the last answer and the filters of its program."""

    program: str | None = None
    tree: exp.Expression | None = field(default=None, repr=False)
    entities: list[Entity] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    total: int | None = None  # how many rows the answer had (None: not known)

    @property
    def rows(self) -> list[Entity]:
        return [e for e in self.entities if e.via == "row"]


@dataclass
class Resolution:
    """How a follow-up was resolved: ``kind`` (``substitute``, ``lookup``, ``hint``),
    the ``program`` to run (substitute, lookup) or the ``question`` for the parser
    (hint), and a one-line ``note`` for the reason and the trace."""

    kind: str
    note: str
    program: str | None = None
    question: str | None = None
    entity: Entity | None = None
    referent: str | None = None  # what the reference stands for, in words

    def __post_init__(self) -> None:
        if self.referent is None and self.entity is not None:
            self.referent = self.entity.describe()


def _literal(v: Any) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def _table_of(col: exp.Column, aliases: dict[str, str], tables: dict[str, TableInfo],
              read: Sequence[str]) -> str | None:
    """The table a column of a program belongs to (its alias, or the one table read that has it)."""
    if col.table:
        name = aliases.get(col.table, col.table)
        return name if name in tables else None
    # an unqualified column belongs to a table of its own SELECT (a subquery's, not the outer's)
    select = col.parent_select
    own: list[str] = []
    if isinstance(select, exp.Select):
        source = select.args.get("from_") or select.args.get("from")
        for part in [source, *(select.args.get("joins") or [])]:
            if part is not None:
                own += [t.name for t in part.find_all(exp.Table)]
    for scope in (own, read):
        having = [t for t in dict.fromkeys(scope) if t in tables
                  and col.name.lower() in (c.lower() for c in tables[t].columns)]
        if len(having) == 1:
            return having[0]
        if having:
            return None
    return None


def record(db: Backend, tree: exp.Expression, program: str, rows: Sequence[Sequence[Any]],
           columns: Sequence[str], tables: Sequence[TableInfo], total: int | None = None) -> DialogueState:
    """The dialogue state after ``program`` (``tree``) answered with ``rows`` (the first
    rows of ``total``; None: ``rows`` are all)."""
    state = DialogueState(program, tree, total=len(rows) if total is None else total)
    if not isinstance(tree, exp.Select):
        return state
    by_name = {t.name: t for t in tables}
    read = [t.name for t in tree.find_all(exp.Table) if t.name]
    aliases = {t.alias_or_name: t.name for t in tree.find_all(exp.Table) if t.name}
    # the filters: equality of a column and a literal, anywhere in WHERE / ON
    for eq in tree.find_all(exp.EQ):
        col, lit = eq.this, eq.expression
        if isinstance(lit, exp.Column) and isinstance(col, exp.Literal):
            col, lit = lit, col
        if isinstance(col, exp.Column) and isinstance(lit, exp.Literal):
            table = _table_of(col, aliases, by_name, read)
            if table is not None:
                column = next((c for c in by_name[table].columns if c.lower() == col.name.lower()), col.name)
                value = lit.this if lit.is_string else _number(lit.this)
                state.filters.append(Filter(table, column, value, lit))
    # the rows: the first projected plain column that names a row
    proj = next(((i, p.unalias()) for i, p in enumerate(tree.expressions)
                 if isinstance(p.unalias(), exp.Column) and not isinstance(p.unalias().this, exp.Star)),
                None)
    if proj is not None and rows:
        i, col = proj
        table = _table_of(col, aliases, by_name, read)
        if table is not None and i < len(columns):
            column = next((c for c in by_name[table].columns if c.lower() == col.name.lower()), col.name)
            for r in rows[:MAX_ENTITIES]:
                if r[i] is not None:
                    state.entities.append(_entity(db, by_name[table], column, r[i], "row"))
    for f in state.filters:
        t = by_name[f.table]
        e = _entity(db, t, f.column, f.value, "filter")
        label = label_column(t)
        if e.key != e.column and label and label != f.column:
            # named by its label, as a reader names it ("Netherlands", not Code2 'NL')
            try:
                _, rows = db.execute(f"SELECT {quote(label)} FROM {quote(t.name)} WHERE {e.condition()}")
            except BlendSQLError:
                rows = []
            if len(rows) == 1 and rows[0][0] is not None:
                e = Entity(t.name, label, rows[0][0], e.key, e.key_value, "filter")
        if e.key != e.column or f.column == label or f.column in primary_key(db, t):
            state.entities.append(e)  # the filter picks one row
    return state


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _entity(db: Backend, t: TableInfo, column: str, value: Any, via: str) -> Entity:
    """``t``'s row where ``column`` = ``value``, named by its primary key when that is one
    column and the value picks one row; else by ``column`` itself."""
    pk = primary_key(db, t)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a pandas column with a NULL turns its integers into floats
    if len(pk) == 1 and pk[0] != column:
        try:
            _, rows = db.execute(f"SELECT {quote(pk[0])} FROM {quote(t.name)} WHERE {quote(column)} = ? "
                                 f"LIMIT 2", [value])
        except BlendSQLError:
            rows = []
        if len(rows) == 1:
            return Entity(t.name, column, value, pk[0], rows[0][0], via)
    return Entity(t.name, column, value, column, value, via)


def _words(utterance: str) -> list[str]:
    """Lower-case words, a possessive's ``'s`` dropped ("the third singer's age")."""
    return [w.lower().removesuffix("'s").strip("'") for w in _WORD.findall(utterance)]


def _by_its_noun(column: str, t: TableInfo) -> bool:
    """A column named only by its table's noun and an id word (``singer.Singer_ID`` when a
    turn says "those singers"): not asked for."""
    own = set(name_words(t.name).split()) | {"id", "code", "key", "no"}
    return all(w in own for w in name_words(column).split())


def referent(state: DialogueState, utterance: str) -> tuple[Entity | None, str]:
    """The one entity a turn points at and the words that point (None: several, or none)."""
    words = _words(utterance)
    nouns = {"one"} | {singular(name_words(e.table).split()[-1]) for e in state.entities if e.table}
    for n, w in enumerate(words):
        # "the second one", "the first country" (not "most common first")
        if w in ORDINALS and state.rows and n + 1 < len(words) and singular(words[n + 1]) in nouns:
            i = ORDINALS[w]
            if -len(state.rows) <= i < len(state.rows):
                return state.rows[i], f"the {w} one"
    # "that" / "this" point only as "that one", "this country" (not "a population that is ...")
    said = [w for i, w in enumerate(words) if w in SINGULAR and (
        w not in ("that", "this") or (i + 1 < len(words) and singular(words[i + 1]) in nouns))]
    if not said or any(w in PLURAL for w in words):
        return None, ""
    rows = state.rows
    if len(rows) == 1:
        return rows[0], said[0]
    filtered = [e for e in state.entities if e.via == "filter"]
    if not rows and len(filtered) == 1:
        return filtered[0], said[0]
    return None, said[0]


def _asked_columns(g: Grounding, utterance: str, t: TableInfo) -> list[str] | None:
    """The columns of ``t`` a follow-up asks for ("and its population?"), when every
    content word of it names one (None: it asks for something else too)."""
    cols = [n.split(".", 1)[1] for n in [*g.named, *g.implied]
            if n.startswith(f"{t.name}.") and not _by_its_noun(n.split(".", 1)[1], t)]
    if not cols or g.values or g.ungrounded:
        return None
    labels = {c: name_words(c) for c in t.columns}
    for w in _words(utterance):
        w = singular(w)
        if (len(w) < 3 or w in _STOP or w in _GENERIC or w in _REFERRING or w in ORDINALS
                or w in name_words(t.name).split()):  # "that country"
            continue
        implies = implied_columns(None, w, [t], [w])  # "how old": the age
        if not any(w in labels[c].split() or labels[c].replace(" ", "") == w or f"{t.name}.{c}" in implies
                   for c in cols):
            return None  # another word: the parser writes it, with the referent in the question
    return list(dict.fromkeys(cols))


def _lookup(db: Backend | None, t: TableInfo, cols: list[str], entity: Entity,
            by_name: dict[str, TableInfo]) -> str | None:
    """One asked column that is a foreign key ("its TV channel": ``TV_series.Channel``
    references ``TV_Channel.id``): the referenced row's label, as a reader means it
    (None: not such a column; the plain lookup answers)."""
    if db is None or len(cols) != 1:
        return None
    for fk_cols, ref, ref_cols in foreign_keys(db, t):
        if fk_cols != (cols[0],) or len(ref_cols) != 1:
            continue
        other = next((x for n, x in by_name.items() if n.lower() == ref.lower()), None)
        label = label_column(other) if other is not None else None
        if other is None or label is None or label == ref_cols[0]:
            return None
        return (f"SELECT T2.{quote(label)} FROM {quote(t.name)} AS T1 JOIN {quote(other.name)} AS T2 "
                f"ON T1.{quote(cols[0])} = T2.{quote(ref_cols[0])} WHERE T1.{entity.condition()}")
    return None


#: words that make a plural follow-up more than the previous rows' columns, a count or a
#: narrowing by a stored value: an aggregate, a sort, a ranking, a comparison, a
#: complement, a grouping (the parser writes it, the previous query in its history)
_OPERATIONS = frozenset({
    "average", "avg", "mean", "total", "sum", "minimum", "maximum", "min", "max", "distinct",
    "different", "unique", "order", "ordered", "sort", "sorted", "rank", "ranked", "each", "per",
    "other", "others", "except", "not", "without", "than", "most", "least", "top", "number",
    "count", "group", "grouped", "between", "above", "below", "over", "under", "before", "after",
    *_VAGUE_SUPERLATIVES, *(w for w in IMPLIED_MEASURES if w.endswith("est")),
})
#: "which of those ...": a narrowing of the previous rows, not a new value in a filter's place
_AMONG = re.compile(r"\b(of|among) (those|them|these|the ones)\b", re.I)
#: "also show their ...": the previous columns and the new ones
_ALSO = re.compile(r"\b(also|too|as well|along with|in addition)\b", re.I)
#: verbs that link a plural referent to a stored value ("which of those are located in Asia?")
_LINKING = frozenset({"located", "based", "situated", "found", "lie", "belong", "come", "held", "made",
                      "live", "living", "work", "working", "born", "which", "what", "many", "are", "is",
                      "of"})


def plural_word(utterance: str) -> str | None:
    """The words of a turn that point at several rows ("those", "them", "these countries"), or None."""
    words = _words(utterance)
    for i, w in enumerate(words):
        if w in PLURAL:
            nxt = words[i + 1] if i + 1 < len(words) else ""
            return f"{w} {nxt}" if w in ("these", "those") and nxt and nxt not in _STOP else w
    return None


def _own_tables(tree: exp.Select) -> list[exp.Table]:
    """The tables of ``tree``'s own FROM and JOINs (not its subqueries')."""
    source = tree.args.get("from_") or tree.args.get("from")
    parts = [source, *(tree.args.get("joins") or [])]
    return [p.this for p in parts if p is not None and isinstance(p.this, exp.Table)]


def rows_table(state: DialogueState, tables: dict[str, TableInfo]) -> TableInfo | None:
    """The table whose rows the previous answer gave (its named rows' table), or counted
    (the first table of a query that projects no row, ``SELECT COUNT(*) FROM city ...``)."""
    named = {e.table for e in state.rows}
    if len(named) == 1:
        return tables.get(named.pop())
    if named or not isinstance(state.tree, exp.Select):
        return None
    own = _own_tables(state.tree)
    return tables.get(own[0].name) if own else None


def key_condition(state: DialogueState, t: TableInfo, key: str) -> tuple[str, str] | None:
    """The condition that selects the previous answer's rows of ``t`` by ``key``, and how
    to say it: the previous query's own rows as a subquery (its filters stay in the
    program, so a later "and in Bristol?" can put a new value in their place), else, for
    a query that is no plain SELECT over ``t`` once, the keys of its rows listed when
    every row was recorded (None: neither)."""
    rows = [e for e in state.rows if e.table == t.name]
    n = f"{state.total} " if rows and state.total == len(rows) else ""
    said = f"the {n}{t.name} rows of the previous answer" if rows else f"the {t.name} rows the previous query counted"
    tree = state.tree
    own = [x for x in _own_tables(tree) if x.name == t.name] if isinstance(tree, exp.Select) else []
    if isinstance(tree, exp.Select) and len(own) == 1 and not any(
            tree.args.get(k) for k in ("group", "having", "distinct", "with")):
        sub = tree.copy()
        sub.set("expressions", [exp.Column(this=exp.to_identifier(key, quoted=True),
                                           table=exp.to_identifier(own[0].alias_or_name))])
        if sub.args.get("limit") is None:
            sub.set("order", None)
        return f"{quote(key)} IN ({to_blendsql(sub)})", said
    if rows and len(rows) == state.total and all(e.key == key for e in rows):
        keys = ", ".join(dict.fromkeys(_literal(e.key_value) for e in rows))
        return f"{quote(key)} IN ({keys})", said
    return None


def _projected(state: DialogueState, t: TableInfo) -> list[str]:
    """The previous query's plain projected columns that are ``t``'s (for "also show ...")."""
    if not isinstance(state.tree, exp.Select):
        return []
    out = []
    for p in state.tree.expressions:
        col = p.unalias()
        if isinstance(col, exp.Column) and not isinstance(col.this, exp.Star):
            out += [c for c in t.columns if c.lower() == col.name.lower()]
    return out


def _plural(state: DialogueState, utterance: str, g: Grounding, tables: dict[str, TableInfo],
            db: Backend) -> Resolution | None:
    """A plural reference resolved against the previous answer's rows (see module docstring)."""
    said = plural_word(utterance)
    t = rows_table(state, tables) if said else None
    if said is None or t is None:
        return None
    noun = said.split()[1:]
    if noun and singular(noun[0]) not in name_words(t.name).split():
        return None  # "those cities" after an answer about countries
    pk = primary_key(db, t)
    if len(pk) != 1:
        return None
    cond = key_condition(state, t, pk[0])
    if cond is None:
        return None
    where, rows = cond
    label = label_column(t) or pk[0]
    note = f"'{said}' = {rows} ({where})"
    count = utterance.strip().lower().startswith("how many")
    words = _words(utterance)
    if any(w in _OPERATIONS for w in words[2 if count else 0:]) or re.search(r"\d", utterance):
        return None
    cols = None if count else _asked_columns(g, utterance, t)
    if not count and ("name" in words or "names" in words) and not g.values and not g.ungrounded:
        # "what are their names?": "name" is no column's whole name, the label is meant
        cols = [label, *(c for c in cols or [] if c != label)]
    if cols:
        shown = [*_projected(state, t), *cols] if _ALSO.search(utterance) else cols
        program = f"SELECT {', '.join(quote(c) for c in dict.fromkeys(shown))} FROM {quote(t.name)} WHERE {where}"
        return Resolution("rows", note, program=program, referent=rows)
    values = [v for v in g.values if v.table == t.name]
    said_words = {w for v in values for w in content_words(v.phrase)} | set(name_words(t.name).split())
    rest = [w for w in content_words(utterance) if w not in said_words and w not in _GENERIC
            and w not in _REFERRING and w not in _LINKING]
    named = [n for n in g.named if n != t.name and not ("." in n and _by_its_noun(n.split(".", 1)[1], t))]
    if rest or named or len(values) != len(g.values):
        return None  # another word: the parser writes it, with the previous query in its history
    narrow = "".join(f" AND {_any_column(phrase, values)}" for phrase in dict.fromkeys(v.phrase for v in values))
    if not count and not narrow:
        return None
    select = "COUNT(*)" if count else quote(label)
    program = f"SELECT {select} FROM {quote(t.name)} WHERE {where}{narrow}"
    return Resolution("rows", note, program=program, referent=rows)


def _any_column(phrase: str, values: Sequence[ValueMention]) -> str:
    """The condition that a row holds ``phrase``'s value: in any column that stores it
    ("Micronesia": a ``Region`` and a ``LocalName``)."""
    conds = [f"{quote(v.column)} = {_literal(v.value)}" for v in values if v.phrase == phrase]
    return conds[0] if len(conds) == 1 else "(" + " OR ".join(conds) + ")"


#: how a follow-up says a comparison ("how about at least 4?"), longest phrase first
_COMPARISONS: tuple[tuple[str, type[exp.Expression]], ...] = (
    ("at least", exp.GTE), ("no less than", exp.GTE), ("or more", exp.GTE), ("at most", exp.LTE),
    ("no more than", exp.LTE), ("or less", exp.LTE), ("or fewer", exp.LTE), ("more than", exp.GT),
    ("greater than", exp.GT), ("larger than", exp.GT), ("higher than", exp.GT), ("over", exp.GT),
    ("above", exp.GT), ("less than", exp.LT), ("fewer than", exp.LT), ("smaller than", exp.LT),
    ("lower than", exp.LT), ("under", exp.LT), ("below", exp.LT), ("exactly", exp.EQ),
    ("equal to", exp.EQ))
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _number_ellipsis(state: DialogueState, utterance: str, g: Grounding) -> Resolution | None:
    """"How about at least 4?", "what about 2010?": the one number of an ellipsis in the
    place of the previous query's one number compared with a column (and the comparison the
    words say in place of its operator). None: not such a turn, or not one such number."""
    text = utterance.strip()
    numbers = _NUMBER.findall(text)
    if (not _FOLLOW_UP_START.match(text) or len(numbers) != 1 or g.named or g.values
            or not isinstance(state.tree, exp.Select)):
        return None
    rest = [w for w in content_words(_NUMBER.sub(" ", text)) if w not in _GENERIC and w not in _REFERRING
            and w not in ("least", "most", "exactly", "equal", "fewer", "greater", "larger", "higher",
                          "lower", "smaller", "no", "or", "than")]
    if rest:
        return None  # another word: the parser writes it
    tree = state.tree.copy()
    compared = [c for c in tree.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ)
                if isinstance(c.expression, exp.Literal) and not c.expression.is_string
                and isinstance(c.this, (exp.Column, exp.Count, exp.AggFunc))]
    if len(compared) != 1:
        return None
    old = compared[0]
    lowered = " " + re.sub(r"[^\w\s]", " ", text.lower()) + " "
    op = next((kind for phrase, kind in _COMPARISONS if f" {phrase} " in lowered), type(old))
    value = exp.Literal.number(numbers[0])
    old.replace(op(this=old.this.copy(), expression=value))
    return Resolution("substitute", f"{numbers[0]} takes the place of {old.sql(dialect='sqlite')} "
                      "in the previous query", program=to_blendsql(tree))


def resolve(state: DialogueState, utterance: str, g: Grounding,
            tables: Sequence[TableInfo], db: Backend | None = None) -> Resolution | None:
    """Resolve a follow-up's reference against the dialogue state (None: nothing to resolve)."""
    if state.program is None or not g.referring:
        return None
    by_name = {t.name: t for t in tables}
    # ellipsis: "and in France?" puts a new value in the place of the previous filter's
    if (_FOLLOW_UP_START.match(utterance.strip()) and g.values and not g.named and state.tree is not None
            and not _AMONG.search(utterance)):
        for v in g.values:
            same = [f for f in state.filters if f.table == v.table and str(f.value).lower() != v.value.lower()]
            # the filter on the value's own column, else one on another column of its table
            # (``Code2 = 'DE'`` and "and in France?": ``Name = 'France'`` in its place)
            hit = next((f for f in same if f.column == v.column), same[0] if len(same) == 1 else None)
            if hit is not None:
                tree = state.tree.copy()
                for eq in list(tree.find_all(exp.EQ)):
                    col, lit = eq.this, eq.expression
                    if isinstance(col, exp.Literal):
                        col, lit = lit, col
                    if (isinstance(col, exp.Column) and isinstance(lit, exp.Literal) and lit.is_string
                            and lit.this == hit.value and col.name.lower() == hit.column.lower()):
                        new_col = exp.Column(this=exp.to_identifier(v.column), table=col.args.get("table"))
                        eq.replace(exp.EQ(this=new_col, expression=exp.Literal.string(v.value)))
                program = to_blendsql(tree)
                return Resolution("substitute", f"'{v.phrase}' takes the place of {hit.table}.{hit.column} = "
                                  f"{_literal(hit.value)} in the previous query", program=program)
    number = _number_ellipsis(state, utterance, g)
    if number is not None:
        return number
    entity, words = referent(state, utterance)
    if entity is None:
        return _plural(state, utterance, g, by_name, db) if db is not None else None
    t = by_name.get(entity.table)
    if t is None:
        return None
    cols = _asked_columns(g, utterance, t)
    note = f"'{words}' = the {entity.describe()}"
    if cols:
        select = ", ".join(quote(c) for c in cols)  # what was asked for, as a gold query would
        looked = _lookup(db, t, cols, entity, by_name) or (
            f"SELECT {select} FROM {quote(t.name)} WHERE {entity.condition()}")
        return Resolution("lookup", note, program=looked, entity=entity)
    return Resolution("hint", note, question=f"{utterance} [{note}]", entity=entity)


__all__ = ["DialogueState", "Entity", "Filter", "Resolution", "key_condition", "plural_word", "record",
           "referent", "resolve", "rows_table"]
