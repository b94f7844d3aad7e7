"""Execution-guided choice among candidate programs (self-consistency over results).

A small model that writes one program for a question is often right on one reading of
the prompt and wrong on another; programs written from different material (other
retrieved examples, a sampled decoding) that land on the *same result rows* are more
likely right than any one of them. :func:`choose` groups valid candidates by their
result and picks the largest group; a tie goes to the group holding the earliest
candidate (the greedy decoding with the nearest examples, the model's most likely
program). A result with rows beats an empty one whatever the votes (an empty result is
what a wrong value or join gives; the parser already treats it as a soft failure).

Programs are run through the backend (traced, read-only) under the parser's time limit;
a program with ingredients is not run (that would cost model calls): it is keyed by its
parsed text, so only identical programs vote for it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from blendsql.errors import BlendSQLError, QueryTimeoutError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry
from blendsql.nl.source import as_backend, first_line
from blendsql.smoothie import TraceStep

#: rows read from a candidate's result to compare it (beyond this the results compare
#: on their first rows only)
MAX_ROWS = 2000


@dataclass
class ProgramCandidate:
    """One program the parser wrote for the question, and how it ran."""

    source: str  # what it was written from: "nearest examples", "examples 4-6", "sampled"
    program: str | None
    error: str | None = None  # why it is not a candidate (no valid program, a run error)
    key: str | None = None  # its result's digest (or its text's, with ingredients)
    rows: int | None = None  # result rows (None: not run)
    votes: int = 0  # candidates with the same result, itself included
    chosen: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0


def rows_key(rows: Iterable[Sequence[Any]]) -> str:
    """A digest of a result as a multiset of rows: the same rows in any order agree."""
    return digest_lines(sorted(row_texts(rows)))


def row_texts(rows: Iterable[Sequence[Any]]) -> list[str]:
    """Each row as text, a whole-number float as its integer (``3.0`` is ``3``: a column
    turns float when it holds a NULL, and two programs giving the same answer must agree)."""
    return [repr(tuple(int(v) if isinstance(v, float) and v.is_integer() else v for v in row))
            for row in rows]


def digest_lines(lines: Iterable[str]) -> str:
    """One SHA-256 digest of the lines, in their order."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", "backslashreplace") + b"\n")
    return digest.hexdigest()


def run_candidate(candidate: ProgramCandidate, db: Any, registry: IngredientRegistry,
                  seconds: float) -> None:
    """Fill ``candidate.key`` / ``rows`` (or ``error``) by running its program."""
    from blendsql.grammar import parse

    if candidate.program is None:
        return
    try:
        tree = parse(candidate.program, registry)
    except BlendSQLError as e:
        candidate.error = first_line(e)
        return
    if any(True for _ in tree.find_all(IngredientCall)):
        candidate.key = "program:" + hashlib.sha256(tree.sql().encode()).hexdigest()
        return
    if not isinstance(tree, exp.Query):
        candidate.error = "not a query"
        return
    probe = tree if tree.args.get("limit") is not None else tree.limit(MAX_ROWS)
    backend = as_backend(db)
    try:
        with backend.session(timeout=seconds):
            _, rows = backend.execute(probe.sql(dialect="sqlite"))
    except QueryTimeoutError:
        candidate.error = f"did not finish within {seconds:g} s"
        return
    except BlendSQLError as e:
        message = first_line(e)
        if "interrupted" in message:
            raise  # someone else stopped the connection: stop here too
        candidate.error = f"{backend.name} could not run it: {message}"
        return
    candidate.rows = len(rows)
    candidate.key = rows_key(rows)


def choose(candidates: Sequence[ProgramCandidate]) -> ProgramCandidate | None:
    """The candidate of the largest group of equal results (see the module docstring);
    fills each candidate's ``votes`` and marks the chosen one."""
    valid = [c for c in candidates if c.program is not None and c.error is None
             and c.key is not None]
    for c in valid:
        c.votes = sum(1 for d in valid if d.key == c.key)
    if not valid:
        return None
    best = max(range(len(valid)),
               key=lambda i: (valid[i].rows != 0, valid[i].votes, -i))
    valid[best].chosen = True
    return valid[best]


def choice_step(candidates: Sequence[ProgramCandidate]) -> TraceStep:
    """The trace step that shows the choice: each candidate, its votes, the chosen one."""
    chosen = next((c for c in candidates if c.chosen), None)
    summary = (f"chose the {chosen.source!r} program of {len(candidates)} candidates: "
               f"{chosen.votes} agree on its result" if chosen is not None
               else f"none of {len(candidates)} candidate programs ran")
    return TraceStep(
        "parse", summary,
        prompt_tokens=sum(c.prompt_tokens for c in candidates),
        completion_tokens=sum(c.completion_tokens for c in candidates),
        details={"source": "nl", "stage": "choice", "candidates": [
            {"source": c.source, "program": c.program, "error": c.error, "rows": c.rows,
             "votes": c.votes, "chosen": c.chosen} for c in candidates]})


__all__ = ["MAX_ROWS", "ProgramCandidate", "choice_step", "choose", "digest_lines", "row_texts",
           "rows_key", "run_candidate"]
