"""Explain a BlendSQL query as numbered plain-language steps (SPLASH §3.2).

Deterministic and template-based: no model is involved, so the same query
always gets the same explanation, and a user can check it against the query.
Steps follow the order in which SQL conceptually runs: CTEs, tables and
joins, filters, grouping, group filters, output, ordering, limits.
"""

from __future__ import annotations

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall

_CMP = {
    exp.EQ: "is",
    exp.NEQ: "is not",
    exp.GT: "is greater than",
    exp.GTE: "is at least",
    exp.LT: "is less than",
    exp.LTE: "is at most",
    exp.Like: "matches the pattern",
    exp.Glob: "matches the glob pattern",
    exp.Is: "is",
}
_AGG = {
    exp.Count: "the number of",
    exp.Sum: "the total",
    exp.Avg: "the average",
    exp.Min: "the smallest",
    exp.Max: "the largest",
}
_ARITH = {exp.Add: "plus", exp.Sub: "minus", exp.Mul: "times", exp.Div: "divided by"}


def explain(query: str | exp.Expr, registry: object | None = None) -> list[str]:
    """Numbered plain-language steps for a BlendSQL query (text or parsed AST)."""
    if not isinstance(query, (str, exp.Expr)):
        from blendsql.errors import QueryTypeError

        raise QueryTypeError(f"query must be a str or a parsed query, not {type(query).__name__}",
                             hint="pass the BlendSQL text, e.g. explain('SELECT * FROM w')")
    tree = _parse(query, registry) if isinstance(query, str) else query
    return [f"{i}. {s}" for i, s in enumerate(_steps(tree), start=1)]


def _parse(text: str, registry: object | None) -> exp.Expr:
    from blendsql.grammar import parse
    from blendsql.ingredients.base import IngredientRegistry

    if registry is None:
        registry = _default_registry()
    assert isinstance(registry, IngredientRegistry)
    return parse(text, registry)


def _default_registry() -> object:
    from blendsql.ingredients.base import IngredientRegistry

    try:
        from blendsql.ingredients.builtin import BUILTINS
    except ImportError:  # pragma: no cover - builtins always ship
        BUILTINS = []
    return IngredientRegistry(BUILTINS)


def _steps(tree: exp.Expr) -> list[str]:
    if isinstance(tree, exp.SetOperation):
        return _set_operation_steps(tree)
    if isinstance(tree, exp.Subquery):
        return _steps(tree.this)
    if not isinstance(tree, exp.Select):
        return [f"Run the statement: {tree.sql(dialect='sqlite')}"]
    return _select_steps(tree)


def _set_operation_steps(node: exp.SetOperation) -> list[str]:
    word = {
        exp.Union: "Combine the two results",
        exp.Intersect: "Keep only the rows found in both results",
        exp.Except: "Remove from the first result the rows found in the second",
    }
    verb = next((w for k, w in word.items() if isinstance(node, k)), "Combine the two results")
    keep_dups = isinstance(node, exp.Union) and node.args.get("distinct") is False
    return [
        "Compute the first result:" + _indent(_steps(node.left)),
        "Compute the second result:" + _indent(_steps(node.right)),
        verb + (" (keeping duplicates)." if keep_dups else "."),
    ]


def _indent(steps: list[str]) -> str:
    return "".join(f"\n   - {s}" for s in steps)


def _inline(steps: list[str]) -> str:
    """Steps as one clause: 'take X, then keep ..., then return Y'."""
    parts = [s.rstrip(".") for s in steps]
    parts = [p[:1].lower() + p[1:] for p in parts]
    return ", then ".join(parts)


def _select_steps(sel: exp.Select) -> list[str]:
    steps: list[str] = []
    with_ = sel.args.get("with_") or sel.args.get("with")
    for cte in (with_.expressions if with_ else []):
        steps.append(f"Define {cte.alias} as the result of:" + _indent(_steps(cte.this)))
    steps.extend(_from_steps(sel))
    where = sel.args.get("where")
    if where is not None:
        steps.append(f"Keep only the rows where {_cond(where.this)}.")
    group = sel.args.get("group")
    if group is not None:
        steps.append("Group the rows by " + _join_words([_words(e) for e in group.expressions]) + ".")
    having = sel.args.get("having")
    if having is not None:
        steps.append(f"Keep only the groups where {_cond(having.this)}.")
    steps.append(_output_step(sel))
    steps.extend(_order_limit_steps(sel))
    return steps


def _from_steps(sel: exp.Select) -> list[str]:
    from_ = sel.args.get("from_") or sel.args.get("from")
    if from_ is None:
        return []
    steps = [f"Start from {_source(from_.this)}."]
    for join in sel.args.get("joins") or []:
        steps.append(_join_step(join))
    return steps


def _source(node: exp.Expr) -> str:
    if isinstance(node, exp.Table):
        alias = f" (called {node.alias})" if node.alias and node.alias != node.name else ""
        return f"the table {node.name}{alias}"
    if isinstance(node, exp.Subquery):
        inner = _inline(_steps(node.this))
        alias = f" called {node.alias}" if node.alias else ""
        return f"an intermediate result{alias} ({inner})"
    return _words(node)


def _join_step(join: exp.Join) -> str:
    kind = (join.side or "").lower()
    how = {"left": "Add matching rows from", "right": "Add rows from", "full": "Combine all rows with"}
    lead = how.get(kind, "Join with")
    on = join.args.get("on")
    using = join.args.get("using")
    target = _source(join.this)
    if on is not None:
        calls = list(on.find_all(IngredientCall))
        if calls and (on is calls[0] or calls[0].meta.get("join_form")):
            return f"{lead} {target}, {_join_ingredient(calls[0])}."
        return f"{lead} {target}, matching rows where {_cond(on)}."
    if using:
        cols = _join_words([u.name for u in using])
        return f"{lead} {target}, matching rows on {cols}."
    return f"{lead} {target} (every combination of rows)."


def _output_step(sel: exp.Select) -> str:
    items = [_output_item(e) for e in sel.expressions]
    distinct = " without duplicates" if sel.args.get("distinct") else ""
    return "Return " + _join_words(items) + distinct + "."


def _output_item(e: exp.Expr) -> str:
    if isinstance(e, exp.Alias):
        return f"{_words(e.this)} (as {e.alias})"
    if isinstance(e, exp.Star):
        return "all columns"
    return _words(e)


def _order_limit_steps(sel: exp.Select) -> list[str]:
    steps = []
    order = sel.args.get("order")
    if order is not None:
        keys = [
            f"{_words(o.this)} {'from highest to lowest' if o.args.get('desc') else 'from lowest to highest'}"
            for o in order.expressions
        ]
        steps.append("Sort by " + _join_words(keys) + ".")
    limit = sel.args.get("limit")
    offset = sel.args.get("offset")
    if offset is not None:
        k = _words(offset.expression)
        steps.append("Skip the first row." if k == "1" else f"Skip the first {k} rows.")
    if limit is not None:
        n = _words(limit.expression)
        steps.append("Keep only the first row." if n == "1" else f"Keep only the first {n} rows.")
    return steps


def _cond(e: exp.Expr) -> str:
    if isinstance(e, exp.Paren):
        return _cond(e.this)
    if isinstance(e, (exp.And, exp.Or)):
        return _connective(e)
    if isinstance(e, exp.Not):
        inner = e.this.this if isinstance(e.this, exp.Paren) else e.this
        if isinstance(inner, exp.In):
            return _in_words(inner, negated=True)
        if isinstance(inner, exp.Is) and not isinstance(inner.expression, exp.Not):
            return f"{_words(inner.this)} has a value"
        if isinstance(inner, exp.EQ):
            return _compare(exp.NEQ(this=inner.this, expression=inner.expression), _CMP[exp.NEQ])
        return f"it is not true that {_cond(e.this)}"
    if isinstance(e, exp.Between):
        return f"{_words(e.this)} is between {_words(e.args['low'])} and {_words(e.args['high'])}"
    if isinstance(e, exp.In):
        return _in_words(e)
    if isinstance(e, exp.Exists):
        return f"there is at least one row in ({_inline(_steps(e.this))})"
    if isinstance(e, exp.Is):
        neg = isinstance(e.expression, exp.Not)
        return f"{_words(e.this)} {'has a value' if neg else 'has no value'}"
    if isinstance(e, exp.Match) or _is_match(e):
        return f"the text of {_words(e.this)} matches the search {_words(e.expression)} (full-text search)"
    for kind, word in _CMP.items():
        if isinstance(e, kind):
            return _compare(e, word)
    return _words(e)


def _chain(e: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The operands of a run of the same connective, e.g. ``a OR b OR c`` -> [a, b, c].

    Parentheses around an operand of the same kind are looked through: they do not
    change the meaning of a chain of one connective.
    """
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, kind) and isinstance(e, exp.Connector):
        return _chain(e.left, kind) + _chain(e.right, kind)
    return [e]


def _connective(e: exp.And | exp.Or) -> str:
    """AND / OR in words, grouped so that no two queries read the same.

    Why: ``(a OR b) AND c`` and ``a OR (b AND c)`` must not read alike, nor a chain
    of three ORs as "either either ...". A correction is written against this
    text, so an ambiguous explanation invites the wrong fix. A chain of one
    connective reads flat ("a, b and c"; "either a or b"; "at least one of: a, b
    or c"); an operand of the other connective is put in brackets.
    """
    kind = type(e)
    parts = []
    for operand in _chain(e, kind):
        text = _cond(operand)
        inner = operand.this if isinstance(operand, exp.Paren) else operand
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, (exp.And, exp.Or)):
            text = f"({text})"
        parts.append(text)
    if kind is exp.And:
        return " and ".join(parts)
    if len(parts) == 2:
        return f"either {parts[0]} or {parts[1]}"
    return "at least one of: " + _join_words(parts, last="or")


def _is_match(e: exp.Expr) -> bool:
    return type(e).__name__.lower() in {"match", "matchagainst"}


def _compare(e: exp.Expr, word: str) -> str:
    left, right = e.this, e.expression
    if isinstance(right, exp.Boolean) and isinstance(left, IngredientCall):
        return f"{_ingredient(left)} is {'true' if right.this else 'false'}"
    if isinstance(left, exp.Boolean) and isinstance(right, IngredientCall):
        return f"{_ingredient(right)} is {'true' if left.this else 'false'}"
    return f"{_words(left)} {word} {_words(right)}"


def _in_words(e: exp.In, negated: bool = False) -> str:
    query = e.args.get("query")
    if query is not None:
        inner = _inline(_steps(query.this if isinstance(query, exp.Subquery) else query))
        verb = "does not appear" if negated else "appears"
        return f"{_words(e.this)} {verb} in the result of ({inner})"
    values = _join_words([_words(v) for v in e.expressions], "or")
    return f"{_words(e.this)} is {'not ' if negated else ''}one of {values}"


def _words(e: exp.Expr | None) -> str:
    if e is None:
        return ""
    if isinstance(e, IngredientCall):
        return _ingredient(e)
    if isinstance(e, exp.Column):
        return e.name if not e.table else f"{e.table}.{e.name}"
    if isinstance(e, exp.Literal):
        return f"'{e.this}'" if e.is_string else str(e.this)
    if isinstance(e, exp.Boolean):
        return "true" if e.this else "false"
    if isinstance(e, exp.Null):
        return "NULL"
    if isinstance(e, exp.Star):
        return "all columns"
    if isinstance(e, exp.Paren):
        return _words(e.this)
    if isinstance(e, exp.Alias):
        return _words(e.this)
    if isinstance(e, exp.Count) and isinstance(e.this, exp.Star):
        return "the number of rows"
    for kind, word in _AGG.items():
        if isinstance(e, kind):
            inner = e.this
            if isinstance(inner, exp.Distinct):
                return f"{word} distinct {_join_words([_words(x) for x in inner.expressions])}"
            return f"{word} {_words(inner)}" if word != "the number of" else f"the number of {_words(inner)} values"
    for op, word in _ARITH.items():
        if isinstance(e, op):
            return f"{_words(e.args['this'])} {word} {_words(e.args['expression'])}"
    if isinstance(e, exp.DPipe):
        return f"{_words(e.left)} followed by {_words(e.right)}"
    if isinstance(e, exp.Case):
        return _case_words(e)
    if isinstance(e, exp.Subquery):
        return f"the result of ({_inline(_steps(e.this))})"
    if isinstance(e, exp.Placeholder):
        return "the given parameter"
    if isinstance(e, (exp.And, exp.Or, exp.Not, exp.In, exp.Between, *_CMP)):
        return _cond(e)
    return e.sql(dialect="sqlite")


def _case_words(e: exp.Case) -> str:
    parts = [f"{_words(i.this) if not isinstance(i.this, exp.Condition) else _cond(i.this)} gives "
             f"{_words(i.args.get('true'))}" for i in e.args.get("ifs") or []]
    default = e.args.get("default")
    tail = f", otherwise {_words(default)}" if default is not None else ""
    return "a value that is: when " + "; when ".join(parts) + tail


def _ingredient(call: IngredientCall) -> str:
    """An ingredient call in words: which model task, over what."""
    args = call.call_args
    kw = call.call_kwargs
    name = call.name
    question = next((a for a in args if isinstance(a, exp.Literal) and a.is_string), kw.get("question"))
    q = f" the question '{question.this}'" if isinstance(question, exp.Literal) else ""
    others = [a for a in args if a is not question]
    if "left_on" in kw or "right_on" in kw or call.meta.get("join_form"):
        return _join_ingredient(call)
    subject = _join_words([_words(a) for a in others]) if others else "the data"
    opts = kw.get("options")
    tail = f", choosing from {_words(opts)}" if opts is not None else ""
    if name.upper() == "ANSWER" and len(args) >= 2:
        return f"the language model's answer to '{_words(args[1]).strip(chr(39))}' from {_words(args[0])} (ANSWER)"
    if name.upper() == "SUMMARY":
        return f"a language-model summary of {subject} (SUMMARY)"
    said = f"the language model's answer to{q}" if q else "the language model's output"
    if any(isinstance(a, exp.Subquery) for a in others):
        return f"{said} using {subject}{tail} ({name})"
    return f"{said} for each {subject}{tail} ({name})"


def _join_ingredient(call: IngredientCall) -> str:
    """A join ingredient: which two columns it aligns."""
    kw = call.call_kwargs
    pos = [a for a in call.call_args if not (isinstance(a, exp.Literal) and a.is_string)]
    left = kw.get("left_on", pos[0] if pos else None)
    right = kw.get("right_on", pos[1] if len(pos) > 1 else None)
    return f"matching {_words(left)} to {_words(right)} with the language model ({call.name})"


def _join_words(items: list[str], last: str = "and") -> str:
    items = [i for i in items if i]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {last} " + items[-1]
