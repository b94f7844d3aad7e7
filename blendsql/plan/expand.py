"""Expanding alias and string ingredients before planning.

Why: an ``AliasIngredient`` is shorthand for another BlendSQL expression
and a ``StringIngredient`` produces SQL text; both must become part of the
one AST before planning, and their text is *parsed* (never concatenated
into the query string), so it cannot change the query's structure.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from blendsql.errors import IngredientError
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import AliasIngredient, IngredientRegistry, StringIngredient
from blendsql.plan.calls import find_calls, number_calls

MAX_DEPTH = 20


def expand_macros(tree: exp.Expression, registry: IngredientRegistry,
                  parse_expr: Callable[[str], exp.Expression],
                  evaluate: Callable[[exp.Expression], object]) -> exp.Expression:
    """Replace every alias / string call by the parsed expression it returns.

    ``parse_expr`` parses one BlendSQL expression; ``evaluate`` turns a
    literal argument into its Python value (string ingredients get values,
    alias ingredients get BlendSQL source text). Expansion repeats (an alias
    may expand to another alias) up to ``MAX_DEPTH`` rounds.
    """
    out = tree
    for _ in range(MAX_DEPTH):
        todo = [c for c in find_calls(out)
                if isinstance(registry.get(c.key_name), (AliasIngredient, StringIngredient))]
        if not todo:
            return number_calls(out)
        out = out.copy()
        for c in [x for x in find_calls(out) if x.call_id in {t.call_id for t in todo}]:
            c.replace(_expand_one(c, registry, parse_expr, evaluate))
    raise IngredientError("alias ingredients expand into each other without end",
                          hint=f"an alias may not (indirectly) expand to itself; stopped "
                          f"after {MAX_DEPTH} rounds")


def _expand_one(call: IngredientCall, registry: IngredientRegistry,
                parse_expr: Callable[[str], exp.Expression],
                evaluate: Callable[[exp.Expression], object]) -> exp.Expression:
    """Run one alias / string ingredient and parse what it returned."""
    ing = registry.get(call.key_name)
    try:
        if isinstance(ing, AliasIngredient):
            text = ing.run(*[to_blendsql(a) for a in call.call_args],
                           **{k: to_blendsql(v) for k, v in call.call_kwargs.items()})
        else:
            assert isinstance(ing, StringIngredient)
            text = ing.run(*[evaluate(a) for a in call.call_args],
                           **{k: evaluate(v) for k, v in call.call_kwargs.items()})
    except IngredientError:
        raise
    except Exception as e:  # noqa: BLE001 - user code: report, never leak
        raise IngredientError(f"ingredient {call.name} failed: {type(e).__name__}: {e}",
                              hint=f"check the arguments of {to_blendsql(call)}") from e
    if not isinstance(text, str):
        raise IngredientError(f"ingredient {call.name} returned {type(text).__name__}, not text",
                              hint="alias and string ingredients return BlendSQL / SQL text")
    node = parse_expr(text)
    return exp.Paren(this=node) if not isinstance(node, (exp.Column, exp.Literal,
                                                          IngredientCall)) else node


def qualify_by_alias(tree: exp.Expression) -> exp.Expression:
    """Rewrite ``'city::Name'`` to ``c.Name`` when the scope has ``FROM city AS c``.

    Why: the paper's quoted form names the table, but once a table is
    aliased SQLite only accepts the alias; the user meant that table's rows.
    """
    from blendsql.plan.calls import scope_of, source_names

    if not _needs_alias(tree):
        return tree
    out = tree.copy()
    for call in find_calls(out):
        scope = scope_of(call)
        if scope is None:
            continue
        sources = source_names(scope)
        by_table = {s.name.lower(): alias for alias, s in sources.items()
                    if isinstance(s, exp.Table) and s.name.lower() != alias}
        for col in call.find_all(exp.Column):
            t = col.table.lower() if col.table else ""
            if t and t not in sources and t in by_table:
                col.set("table", exp.to_identifier(by_table[t]))
    return out


def _needs_alias(tree: exp.Expression) -> bool:
    """True when some call names a table that its scope knows only by an alias."""
    from blendsql.plan.calls import scope_of, source_names

    for call in find_calls(tree):
        scope = scope_of(call)
        if scope is None:
            continue
        sources = source_names(scope)
        for col in call.find_all(exp.Column):
            if col.table and col.table.lower() not in sources:
                return True
    return False
