"""Replacing computed calls by lookups of their outputs.

Why: the final SQL is the user's query with each call swapped for a
lookup of outputs computed beforehand, so the query keeps its exact
meaning and outputs travel as data (temp-table rows, bound parameters),
never as SQL text.
"""

from __future__ import annotations

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall


def temp_table(name: str) -> exp.Table:
    """``temp."<name>"`` as a table node."""
    return exp.Table(this=exp.to_identifier(name, quoted=True), db=exp.to_identifier("temp"))


def map_lookup(table: str, value: exp.Expression) -> exp.Expression:
    """``(SELECT v FROM temp.<table> WHERE k = <value>)``: the output for this row's value.

    A scalar subquery on the table's primary key: an index probe per row
    inside SQLite, no per-row Python. A missing or NULL value gives NULL.
    """
    sub = (exp.select("v").from_(temp_table(table))
           .where(exp.EQ(this=exp.column("k"), expression=value.copy())))
    return exp.Subquery(this=sub)


def join_lookup(table: str, left: exp.Expression, right: exp.Expression) -> exp.Expression:
    """``<right> = (lookup of <left> in the join's mapping)``: a join predicate."""
    return exp.EQ(this=right.copy(), expression=map_lookup(table, left))


def qa_param(name: str) -> exp.Expression:
    """A bound parameter ``:name`` holding a QA answer."""
    return exp.Placeholder(this=name)


def qa_list(table: str) -> exp.Expression:
    """``(SELECT v FROM temp.<table>)``: a list-valued answer, for ``x IN <<QA()>>``."""
    return exp.Subquery(this=exp.select("v").from_(temp_table(table)))


def replace_call(tree: exp.Expression, call_id: int, replacement: exp.Expression,
                 ) -> exp.Expression:
    """Copy of ``tree`` with call ``call_id`` replaced by ``replacement``.

    A list-valued replacement under ``IN`` (``x IN <<QA()>>``) becomes the
    IN's subquery.
    """
    out = tree.copy()
    for c in out.find_all(IngredientCall):
        if c.call_id != call_id:
            continue
        parent = c.parent
        if (isinstance(parent, exp.In) and c in parent.expressions
                and isinstance(replacement, exp.Subquery) and len(parent.expressions) == 1):
            parent.set("expressions", [])
            parent.set("query", replacement.copy())
        elif c is out:
            return replacement.copy()
        else:
            c.replace(replacement.copy())
        break
    return out
