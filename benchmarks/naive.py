"""A naive row-by-row evaluator: the cost baseline of the call-economy benchmark.

Why it exists: "how many values would an ingredient see without any
optimisation?" must be a measured number, not an estimate. This evaluator
runs every ingredient call of a query on *every* row of the FROM/JOIN product
of the SELECT scope the call sits in - no WHERE pushdown, no de-duplication,
no early stop under LIMIT, one ingredient invocation per row (as SQLite would
call a non-deterministic user function per row). It really invokes the
ingredient, so a recording ingredient counts what it was handed.

It only counts work; it does not produce the query's rows (the plain-SQL twin
does that in the benchmark). Supported: map and QA calls whose scope reads
base tables, joins and CTEs without ingredients; anything else raises
:class:`NaiveUnsupported` rather than guessing a number.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.grammar.parser import parse
from blendsql.ingredients.base import IngredientRegistry, MapIngredient, QAIngredient

# Clauses dropped from a scope to get its FROM/JOIN product.
_FILTER_ARGS = ("where", "group", "having", "order", "limit", "offset", "distinct", "qualify")


class NaiveUnsupported(Exception):
    """The naive evaluator cannot count this call honestly (so it reports nothing)."""


@dataclass
class NaiveCall:
    """Work the naive evaluator did for one ingredient call site."""

    ingredient: str
    kind: str  # "map" or "qa"
    values_passed: int  # map: rows handed over; qa: one per invocation (as Meta counts)
    calls: int  # ingredient invocations (one per row)
    product_sql: str  # the SQL whose rows the call was evaluated on


def _literal(node: exp.Expression | None) -> Any:
    """Python value of a literal argument (question strings); None otherwise."""
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else node.to_py()
    return None


def product_sql(call: IngredientCall, root: exp.Expression, projection: exp.Expression) -> str:
    """``SELECT <projection> FROM <the call's FROM/JOINs>`` with every filter removed.

    Why: the naive evaluator calls the ingredient on each row of the product,
    whatever the WHERE / LIMIT say. CTEs of the root are kept (without them a
    scope reading a CTE would not run) as long as they contain no ingredient.
    """
    scope = call.parent_select
    if scope is None:
        raise NaiveUnsupported("ingredient call outside a SELECT")
    product = scope.copy()
    for arg in _FILTER_ARGS:
        product.set(arg, None)
    product.set("expressions", [projection.copy()])
    if product.find(IngredientCall) is not None:
        raise NaiveUnsupported("ingredient inside the FROM/JOIN of its own scope")
    with_ = root.args.get("with_") or root.args.get("with")
    if with_ is not None and scope is not root and not product.args.get("with_"):
        if with_.find(IngredientCall) is not None:
            raise NaiveUnsupported("CTE with ingredients feeding another scope")
        product.set("with_", with_.copy())
    if product.args.get("from_") is None and product.args.get("from") is None:
        return str(exp.select(projection.copy()).sql(dialect="sqlite"))
    return str(product.sql(dialect="sqlite"))


def _context(conn: sqlite3.Connection, node: exp.Expression | None) -> pd.DataFrame | None:
    """A QA context argument evaluated as plain SQL (once per invocation, naively)."""
    if node is None:
        return None
    inner = node.this if isinstance(node, exp.Subquery) else node
    if not isinstance(inner, exp.Query):
        return None
    if inner.find(IngredientCall) is not None:
        raise NaiveUnsupported("QA context with ingredients")
    return pd.read_sql_query(inner.sql(dialect="sqlite"), conn)


def _run_map(conn: sqlite3.Connection, root: exp.Expression, call: IngredientCall,
             ing: MapIngredient) -> NaiveCall:
    """Call a map ingredient once per product row (NULLs and duplicates included)."""
    args = call.call_args
    q_idx, v_idx = ing.bind(args, call.call_kwargs)
    question = _literal(args[q_idx]) if q_idx is not None else None
    sql = product_sql(call, root, args[v_idx])
    rows = conn.execute(sql).fetchall()
    for (value,) in rows:
        ing.run(question, [value], model=None, db=conn, constraint=None)
    return NaiveCall(ing.name, "map", len(rows), len(rows), sql)


def _run_qa(conn: sqlite3.Connection, root: exp.Expression, call: IngredientCall,
            ing: QAIngredient) -> NaiveCall:
    """Call a QA ingredient once per product row, re-evaluating its context each time."""
    args = call.call_args
    question = _literal(args[0]) if args else None
    ctx_node = args[1] if len(args) > 1 else call.call_kwargs.get("context")
    sql = product_sql(call, root, exp.Literal.number(1))
    n = len(conn.execute(sql).fetchall())
    for _ in range(n):
        ing.run(question, _context(conn, ctx_node), None, model=None, db=conn, constraint=None)
    return NaiveCall(ing.name, "qa", n, n, sql)


def naive_evaluate(conn: sqlite3.Connection, query: str,
                   registry: IngredientRegistry) -> list[NaiveCall]:
    """Evaluate every ingredient call of ``query`` row by row; return the work per call."""
    root = parse(query, registry)
    out: list[NaiveCall] = []
    for call in root.find_all(IngredientCall):
        ing = registry.get(call.name)
        if isinstance(ing, MapIngredient):
            out.append(_run_map(conn, root, call, ing))
        elif isinstance(ing, QAIngredient):
            out.append(_run_qa(conn, root, call, ing))
        else:
            raise NaiveUnsupported(f"{call.name}: only map and QA ingredients are counted")
    return out


def naive_totals(calls: list[NaiveCall]) -> dict[str, int]:
    """Summed values passed and invocations over a query's calls."""
    return {"values_passed": sum(c.values_passed for c in calls),
            "calls": sum(c.calls for c in calls)}
