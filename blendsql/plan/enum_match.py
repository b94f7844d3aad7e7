"""ENUM matching (SUQL §5.2): map a literal onto a small column vocabulary.

Why: ``WHERE cuisine = 'coffee'`` silently returns nothing when the column
spells it ``'Coffee & Tea'``. When a column has a small vocabulary (at most
``MAX_VALUES`` distinct values) that lacks the literal, the literal is
classified into one of the permitted values -- by a case/space-insensitive
match, else by embedding nearest neighbour above a threshold, or (``mode
"model"``) by the model under a ``Choice`` constraint -- and the comparison
is rewritten. It changes the query's meaning on purpose, so it is opt-in
(``BlendSQL(..., enum_match=True)``) and every rewrite is traced.

The rule itself is pure (AST in, AST out); the vocabulary and the
classifier are passed in, so it is tested without a database or a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.calls import scope_of, source_names

MAX_VALUES = 50
DEFAULT_THRESHOLD = 0.5

Vocabulary = Callable[[str, str], list[Any] | None]  # (table, column) -> values or None
Classifier = Callable[[str, list[str]], tuple[str | None, float, str]]


@dataclass(frozen=True)
class EnumRewrite:
    """One rewritten literal, for the trace."""

    table: str
    column: str
    literal: str
    replacement: str
    score: float
    how: str


def _inside_call(node: Any) -> bool:
    """Literals inside ingredient arguments are questions, not column values."""
    return node.find_ancestor(IngredientCall) is not None


def _column_table(col: exp.Column) -> str | None:
    """The base table a column of a comparison belongs to (None for derived sources)."""
    scope = scope_of(col)
    if scope is None:
        return None
    sources = source_names(scope)
    src = sources.get(col.table.lower()) if col.table else (
        next(iter(sources.values())) if len(sources) == 1 else None)
    if not isinstance(src, exp.Table) or src.args.get("db"):
        return None
    return src.name


def comparisons(tree: exp.Expression) -> list[tuple[exp.Column, exp.Literal]]:
    """``col = 'lit'`` / ``col != 'lit'`` / ``col IN ('a', 'b')`` pairs, outside ingredient args."""
    out: list[tuple[exp.Column, exp.Literal]] = []
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.In):
        if _inside_call(node):
            continue
        if isinstance(node, exp.In):
            if isinstance(node.this, exp.Column) and not node.args.get("query"):
                out += [(node.this, e) for e in node.expressions
                        if isinstance(e, exp.Literal) and e.is_string]
            continue
        left, right = node.this, node.expression
        if isinstance(left, exp.Literal) and isinstance(right, exp.Column):
            left, right = right, left
        if isinstance(left, exp.Column) and isinstance(right, exp.Literal) and right.is_string:
            out.append((left, right))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def match_enums(tree: exp.Expression, vocabulary: Vocabulary, classify: Classifier,
                ) -> tuple[exp.Expression, list[EnumRewrite]]:
    """Copy of ``tree`` with out-of-vocabulary literals mapped into the vocabulary.

    A literal that is already a value, a column with more than
    ``MAX_VALUES`` values or non-text values, and a literal the classifier
    cannot place (below its threshold) are left alone.
    """
    out = tree.copy()
    rewrites: list[EnumRewrite] = []
    for col, lit in comparisons(out):
        table = _column_table(col)
        if table is None:
            continue
        values = vocabulary(table, col.name)
        if not values or len(values) > MAX_VALUES or not all(isinstance(v, str) for v in values):
            continue
        text = str(lit.this)
        if text in values:
            continue
        choice, score, how = _exact_norm(text, values) or classify(text, list(values))
        if choice is None or choice == text:
            continue
        lit.replace(exp.Literal.string(choice))
        rewrites.append(EnumRewrite(table, col.name, text, choice, score, how))
    return out, rewrites


def _exact_norm(text: str, values: Sequence[str]) -> tuple[str, float, str] | None:
    """A case- and space-insensitive exact match, when unique."""
    hits = [v for v in values if _norm(v) == _norm(text)]
    return (hits[0], 1.0, "case-insensitive") if len(hits) == 1 else None


def embedding_classifier(embedder: Any, threshold: float = DEFAULT_THRESHOLD) -> Classifier:
    """Nearest vocabulary value by cosine similarity, if at least ``threshold``."""

    def classify(text: str, values: list[str]) -> tuple[str | None, float, str]:
        vecs = embedder.embed([text, *values])
        sims = np.asarray(vecs[1:] @ vecs[0])
        best = int(np.argmax(sims))
        score = float(sims[best])
        return (values[best] if score >= threshold else None), score, "embedding"

    return classify
