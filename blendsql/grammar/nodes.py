"""AST node for an ingredient call, living inside sqlglot's tree.

The whole query is one sqlglot (SQLite dialect) expression; each
``{{Name(args)}}`` / ``<<Name(args)>>`` is an :class:`IngredientCall` node in
it, so ordinary sqlglot traversal (``find_all``, ``transform``) sees calls
wherever SQL allows an expression.

Arguments:
- ``this``: the name as written (an ``exp.Identifier``);
- ``expressions``: positional arguments, each a sqlglot expression
  (``exp.Literal``, ``exp.Column``, ``exp.Subquery``, ``exp.Tuple``,
  ``exp.DPipe`` for ``||``, ``exp.Placeholder`` for ``?``, nested calls...);
- ``kwargs``: keyword arguments as a list of ``exp.PropertyEQ(this=Identifier, expression=...)``.

A paper-style column reference ``'t::c'`` is parsed into ``exp.Column(table=t,
this=c)`` with ``meta["quoted_form"] = True`` so it renders back as written.
Node meta: ``brace`` (``"{{"``, ``"<<"``, or ``""`` for a bare ``ANSWER(..)``), ``call_id`` (unique per parse,
in text order), ``join_form`` (True for ``JOIN {{LLMJoin(left_on=.., right_on=..)}}``),
``join_keys`` (join form only: how the two sides were written, e.g.
``["left_on", "right_on"]`` or ``[None, None]`` for positional), ``position``
(0-based offset of the call in the parsed text).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from sqlglot import exp
from sqlglot.dialects.sqlite import SQLite


class IngredientCall(exp.Expression, exp.Func):
    """``{{Name(arg, ..., key=value)}}`` as a node of the query AST.

    ``name``, ``key_name``, ``brace`` and ``call_id`` are read from the node
    together, once, and kept on it: a call's name never changes, and its id only
    through :meth:`renumber`. A copy of the node reads them again.
    """

    arg_types = {"this": True, "expressions": False, "kwargs": False}

    def _identity(self) -> dict[str, Any]:
        """Name, registry key, brace and id read from the node at once, kept on it."""
        kept = self.__dict__
        name = str(self.this.name)
        kept.update(name=name, key_name=name.lower(), brace=str(self.meta.get("brace", "{{")),
                    call_id=int(self.meta.get("call_id", -1)))
        return kept

    @cached_property
    def name(self) -> str:  # type: ignore[override]
        return str(self._identity()["name"])

    @cached_property
    def key_name(self) -> str:
        """Lower-cased name, the registry key."""
        return str(self._identity()["key_name"])

    @property
    def call_args(self) -> list[exp.Expression]:
        return list(self.expressions or [])

    @property
    def call_kwargs(self) -> dict[str, exp.Expression]:
        return {kw.this.name: kw.expression for kw in self.args.get("kwargs") or []}

    @cached_property
    def brace(self) -> str:
        return str(self._identity()["brace"])

    @cached_property
    def call_id(self) -> int:
        return int(self._identity()["call_id"])

    def renumber(self, call_id: int) -> None:
        """Give the call a new id (in its meta, which copies keep)."""
        self.meta["call_id"] = call_id
        self.__dict__["call_id"] = call_id


def _arg_sql(gen: Any, e: exp.Expression) -> str:
    if isinstance(e, exp.Column) and e.meta.get("quoted_form"):
        ref = ".".join(p.name for p in e.parts[:-1]) + "::" + e.name
        return "'" + ref.replace("'", "''") + "'"
    return str(gen.sql(e))


def _ingredient_sql(gen: Any, e: IngredientCall) -> str:
    args = e.call_args
    parts = [_arg_sql(gen, a) for a in args]
    # join form: left/right sides may have been written as left_on= / right_on=
    keys = e.meta.get("join_keys") if e.meta.get("join_form") else None
    if keys:
        for i, key in enumerate(keys[: len(parts)]):
            if key:
                parts[i] = f"{key}={parts[i]}"
        # keep positional arguments ahead of keyword ones
        named = [i < len(keys) and bool(keys[i]) for i in range(len(parts))]
        parts = [p for p, n in zip(parts, named, strict=True) if not n] + [p for p, n in zip(parts, named, strict=True) if n]
    parts += [f"{k}={_arg_sql(gen, v)}" for k, v in e.call_kwargs.items()]
    open_, close = {"<<": ("<<", ">>"), "": ("", "")}.get(e.brace, ("{{", "}}"))
    return f"{open_}{e.name}({', '.join(parts)}){close}"


class BlendSQLDialect(SQLite):
    """SQLite, plus rendering of ingredient calls back to BlendSQL text."""

    class Generator(SQLite.Generator):  # type: ignore[misc,valid-type]
        TRANSFORMS = {**SQLite.Generator.TRANSFORMS, IngredientCall: _ingredient_sql}

        def join_sql(self, expression: exp.Join) -> str:
            """The paper's ``JOIN {{LLMJoin(left_on=.., right_on=..)}}`` renders as written."""
            on = expression.args.get("on")
            if not (isinstance(on, IngredientCall) and on.meta.get("join_form")):
                return str(super().join_sql(expression))
            ops = [
                str(expression.args.get(k) or "").upper()
                for k in ("method", "side", "kind")
            ]
            op_sql = " ".join([o for o in ops if o] + ["JOIN"])
            return f"{self.seg(op_sql)} {_ingredient_sql(self, on)}"

        def tuple_sql(self, expression: exp.Tuple) -> str:
            """A one-element tuple keeps its comma, so it re-parses as a tuple."""
            if len(expression.expressions) == 1 and not expression.args.get("alias"):
                return f"({self.sql(expression.expressions[0])},)"
            return str(super().tuple_sql(expression))


def to_blendsql(tree: exp.Expression, pretty: bool = False) -> str:
    """Render an AST (with ingredient calls) back to BlendSQL text."""
    return str(tree.sql(dialect=BlendSQLDialect, pretty=pretty))
