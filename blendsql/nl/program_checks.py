"""Type checks of ingredient outputs in their context, for programs a model wrote.

A program can parse, compile and still never hold: measured on HybridQA with
Qwen2.5-Coder-1.5B, 10 of 12 programs compared an ``LLMQA`` answer drawn from
a column (``options='w::name'``) with ``TRUE``. Each check below finds one
such misuse in the AST and says, for the retry prompt, what shape is right.
The checks read only the tree (no database, no model), so they are cheap and
run before the program does.

What a call returns, by kind:
- ``LLMQA`` returns one value: a value of its ``options=`` column, or short
  free text. It is compared with a column, selected, or used as a value; it
  is not a truth value (a yes/no ``LLMQA`` compared with ``'Yes'`` is fine).
- ``LLMMap`` returns one value per row: with a yes/no question it is a truth
  value, compared with ``TRUE`` / ``FALSE`` or used as a predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall

_TRUTH_STRINGS = frozenset({"true", "false"})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ)
_BOOLEAN_PARENTS = (exp.Where, exp.Having, exp.And, exp.Or, exp.Not, exp.If)

Check = Callable[[exp.Expression], str | None]


def _is_qa(node: exp.Expression) -> bool:
    return isinstance(node, IngredientCall) and node.key_name == "llmqa"


def _unwrap(node: exp.Expression) -> exp.Expression:
    """The expression inside parentheses (``(x)`` is ``x``)."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _is_truth_literal(node: exp.Expression) -> bool:
    """TRUE / FALSE, or the strings 'true' / 'false' (a model's spelling of them)."""
    node = _unwrap(node)
    if isinstance(node, exp.Boolean):
        return True
    return isinstance(node, exp.Literal) and node.is_string and node.name.lower() in _TRUTH_STRINGS


def _options_column(call: IngredientCall) -> exp.Column | None:
    """The column an ``options=`` keyword names (``'w::name'`` or ``w.name``), if any."""
    opt = call.call_kwargs.get("options")
    return opt if isinstance(opt, exp.Column) else None


def _comparisons(tree: exp.Expression) -> Iterator[tuple[exp.Expression, exp.Expression]]:
    """The two sides of each comparison, in both orders."""
    for cmp in tree.find_all(*_COMPARISONS):
        a, b = _unwrap(cmp.this), _unwrap(cmp.expression)
        yield a, b
        yield b, a


def qa_compared_with_truth(tree: exp.Expression) -> str | None:
    """``{{LLMQA(...)}} = TRUE`` (or ``IS TRUE``, ``= 'true'``) never holds for a value."""
    for a, b in _comparisons(tree):
        if _is_qa(a) and _is_truth_literal(b):
            col = _options_column(a)  # type: ignore[arg-type]
            target = f"{col.table}.{col.name}" if col is not None and col.table else "a column"
            return ("LLMQA returns an answer (a value), not TRUE/FALSE: compare a column with it "
                    f"({target} = {{{{LLMQA(...)}}}}) or select it, instead of comparing it with TRUE")
    return None


def qa_as_predicate(tree: exp.Expression) -> str | None:
    """``WHERE {{LLMQA(...)}}`` (bare, or under AND / OR / NOT) tests the truth of a text."""
    for call in tree.find_all(IngredientCall):
        if not _is_qa(call):
            continue
        node: exp.Expression = call
        while isinstance(node.parent, exp.Paren):
            node = node.parent
        if isinstance(node.parent, _BOOLEAN_PARENTS) and node.arg_key in ("this", "expression"):
            return ("LLMQA returns an answer (a value), not a condition: write "
                    "column = {{LLMQA(..., options='table::column')}} to keep the rows it names, "
                    "or SELECT {{LLMQA(...)}} to return the answer")
    return None


def qa_options_mismatch(tree: exp.Expression) -> str | None:
    """``w.a = {{LLMQA(..., options='w::b')}}``: an answer drawn from column b rarely equals a."""
    for a, b in _comparisons(tree):
        if not (_is_qa(a) and isinstance(b, exp.Column)):
            continue
        col = _options_column(a)  # type: ignore[arg-type]
        if col is None or col.name.lower() == b.name.lower():
            continue
        if col.table and b.table and col.table.lower() != b.table.lower():
            continue  # another table's column: a join key may be spelt differently
        table = col.table or b.table
        return (f"LLMQA draws its answer from {col.name} (options='{table}::{col.name}') but it is "
                f"compared with {b.name}: use options='{table}::{b.name}' so the answer is one of "
                f"the values it is compared with")
    return None


def qa_compared_with_literal(tree: exp.Expression) -> str | None:
    """``{{LLMQA(..., options='w::c')}} = 'x'``: the options already fix the answer's values;
    comparing the answer with a constant drops the column that should hold it."""
    for a, b in _comparisons(tree):
        if not (_is_qa(a) and isinstance(b, exp.Literal) and not _is_truth_literal(b)):
            continue
        col = _options_column(a)  # type: ignore[arg-type]
        if col is None:
            continue
        ref = f"{col.table}.{col.name}" if col.table else col.name
        return (f"LLMQA with options='{col.table or 't'}::{col.name}' returns a value of {col.name}: "
                f"compare it with that column ({ref} = {{{{LLMQA(...)}}}}), not with the constant {b.sql()}")
    return None


CHECKS: tuple[Check, ...] = (
    qa_compared_with_truth,
    qa_as_predicate,
    qa_options_mismatch,
    qa_compared_with_literal,
)


def ingredient_type_errors(tree: exp.Expression) -> str | None:
    """The first misuse of an ingredient output's type in ``tree``, worded for a retry; else None."""
    for check in CHECKS:
        message = check(tree)
        if message:
            return message
    return None
