"""Few-shot examples retrieved per question (BM25 over an annotated pool).

A small model copies the shape of the examples it is shown far more reliably
than it follows instructions, so the examples should look like the answer:
questions worded like this one, on tables like these. Each pool example is
scored by BM25 between its question and the new one, then boosted by how much
of its program names tables and columns of the current database (an example
on the same schema shows real joins and spellings). Examples whose program
names a table absent here are shown with their own schema; the rest without,
since the prompt already holds this schema.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of in on at to for by with from and or is are was were be been do does did "
    "what which who whom whose how many much show list give return find all each every "
    "me their its his her that this these those there".split()
)
_SQL_WORDS = frozenset(
    "select from where join on as and or not in group by order having limit asc desc count "
    "sum avg min max distinct like between is null union intersect except case when then "
    "else end inner left outer cast t1 t2 t3 t4".split()
)


@dataclass(frozen=True)
class Example:
    """An annotated few-shot example: the schema it was written for, question, program.

    ``db`` names the database the example was written on and ``id`` the example
    itself, so an evaluation can keep an item's own database out of its prompt.
    """

    question: str
    program: str
    schema: str = ""
    db: str = ""
    id: str = ""


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens without stop words, crudely stemmed (plural ``s``)."""
    out = []
    for w in _TOKEN.findall(text.lower()):
        if w in _STOP:
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def identifiers(program: str) -> set[str]:
    """Lower-cased identifier-like words of a program, string literals and SQL words removed."""
    no_strings = re.sub(r"'(?:[^']|'')*'", " ", program)
    return {w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", no_strings.lower())
            if w not in _SQL_WORDS}


class BM25:
    """Okapi BM25 over short documents (k1=1.2, b=0.75)."""

    def __init__(self, docs: Sequence[Iterable[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(d) for d in docs]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: Iterable[str]) -> list[float]:
        q = list(dict.fromkeys(query))
        out = []
        for d, length in zip(self.docs, self.lengths, strict=True):
            s = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1.0))
            for t in q:
                f = d.get(t)
                if f:
                    s += self.idf[t] * f * (self.k1 + 1) / (f + norm)
            out.append(s)
        return out


def tables_read(program: str) -> set[str]:
    """Lower-cased names after FROM / JOIN (the tables a program reads; aliases excluded)."""
    return {m.lower() for m in re.findall(r"\b(?:FROM|JOIN)\s+([A-Za-z_][A-Za-z0-9_]*)", program, re.I)}


def fits_schema(program: str, schema_names: set[str]) -> bool:
    """True when every table the program reads is among ``schema_names`` (lower-cased)."""
    return bool(schema_names) and tables_read(program) <= schema_names


def schema_overlap(program: str, schema_names: set[str]) -> float:
    """Share of a program's identifiers that name a table or column of this schema."""
    ids = identifiers(program)
    if not ids:
        return 0.0
    return len(ids & schema_names) / len(ids)


class ExampleIndex:
    """A pool of examples, searchable by question and schema fit."""

    def __init__(self, pool: Sequence[Example]) -> None:
        self.pool = list(pool)
        self._bm25 = BM25([tokens(e.question) for e in self.pool])

    def select(self, question: str, k: int, schema_names: Iterable[str] = ()) -> list[Example]:
        """The ``k`` best examples for ``question``, best last (nearest the question).

        Examples whose tables all exist here come first (one reading a table
        this database lacks leads a small model to copy that table: measured on
        Spider, "no such table: song" three times over); within each group,
        score = BM25(question) × (1 + 2·schema overlap). Near-duplicate programs
        are shown once (a second copy teaches nothing new).
        """
        if k <= 0 or not self.pool:
            return []
        names = {n.lower() for n in schema_names}
        bm = self._bm25.scores(tokens(question))
        scored = []
        for i, (ex, s) in enumerate(zip(self.pool, bm, strict=True)):
            fit = schema_overlap(ex.program, names) if names else 0.0
            fits = fits_schema(ex.program, names)
            scored.append((fits, s * (1 + 2 * fit) + fit * 0.1, -i, ex))
        scored.sort(key=lambda t: (t[0], t[1], t[2]), reverse=True)
        chosen: list[Example] = []
        seen: set[str] = set()
        for _, _, _, ex in scored:
            key = " ".join(ex.program.lower().split())
            if key in seen:
                continue
            seen.add(key)
            chosen.append(ex)
            if len(chosen) == k:
                break
        return list(reversed(chosen))
