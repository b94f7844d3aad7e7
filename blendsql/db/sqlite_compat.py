"""SQLite's meaning on typed backends (DuckDB, PostgreSQL, Spark): what ``Transpiler`` adds.

BlendSQL's SQL is SQLite's; a typed backend reads the same text differently
(or refuses it) in a few places. Each rewrite here makes the backend give
SQLite's answer, using the column types the backend knows (a ``schema``
lookup: table -> {lower-case column: the backend's type}), and only where
the backend would otherwise raise an error or answer differently:

- double-quoted strings: SQLite reads ``"Asia"`` as the string ``'Asia'`` when
  no column of that name is in scope (https://www.sqlite.org/lang_keywords.html);
  done only when every table of the statement has known columns;
- comparisons between text and numbers follow "Type Conversions Prior To
  Comparison" (https://www.sqlite.org/datatype3.html §4.2): a TEXT column
  compared with a number compares text (``horsepower > 150`` is
  ``horsepower > '150'``); a numeric column compared with text compares numbers
  where the text is a well-formed number, and otherwise the text is greater than
  any number (NaN on the backend, which sorts and compares the same way); with
  no conversion (two expressions), a number is less than any text;
- ``avg`` / ``sum`` / ``total`` and arithmetic over text read each value's
  numeric prefix, as SQLite does (``'12abc'`` is 12, ``'abc'`` is 0);
- ``/`` between two integers is integer division (``7 / 2`` is 3): DuckDB's
  ``//``; on PostgreSQL a ``sum`` of integers (NUMERIC there) is cast back to
  BIGINT first;
- booleans are integers: ``SUM(x > 1)``, ``(p) = 0``, ``1 - (p)``; a number read as
  a truth value (``WHERE 1 - (p)``) is ``<> 0``; ``total()`` is a float sum;
- LIKE folds ASCII letters only and has no escape character but ESCAPE's
  (:func:`like_case`); ``SELECT DISTINCT .. ORDER BY`` a column not selected, which
  PostgreSQL refuses (:func:`distinct_order`).

On Spark (whose ANSI mode raises where SQLite answers NULL, and whose comparisons
are BOOLEAN) also: ``/`` and ``%`` by zero are NULL (``DIV`` / ``try_divide`` /
``NULLIF``); a truth value in a SELECT list is SQLite's 1 / 0
(:func:`predicates_as_integers`); ``upper`` / ``lower`` fold ASCII letters only,
``typeof`` names SQLite's storage classes, ``p || ''`` of a truth value concatenates
1 / 0 (:func:`spark_functions`); LIKE's default escape (``\\``) is escaped
(:func:`like_case`); a parameter is typed by the value it is bound to
(:func:`mark_param_kinds`: Spark binds literals).

Types come from the backend's declared column types; an expression whose type
cannot be told (a parameter without its value, an unknown function, a table of
unknown columns) is left as written. What a copy cannot keep (SQLite's storage class per value,
see ``blendsql.db.transfer.column_kind``) stays different.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlglot import exp

#: SQLite's affinities (§3.1); NONE: an expression without one (a literal, a function)
NONE, BLOB, TEXT, NUMERIC, INTEGER, REAL = "none", "BLOB", "TEXT", "NUMERIC", "INTEGER", "REAL"
_NUMERIC_AFF = {NUMERIC, INTEGER, REAL}
#: value kinds as the backend stores them
INT, FLOAT, DEC, STR, BOOL = "int", "real", "num", "text", "bool"
_NUMBERS = {INT, FLOAT, DEC}

_INT_TYPES = {"BIGINT", "INTEGER", "INT", "INT2", "INT4", "INT8", "SMALLINT", "TINYINT",
              "HUGEINT", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT", "UHUGEINT",
              "INT16", "INT32", "INT64", "INT128", "LONG", "SHORT", "SIGNED"}
_FLOAT_TYPES = {"DOUBLE", "DOUBLE PRECISION", "REAL", "FLOAT", "FLOAT4", "FLOAT8"}
_TEXT_TYPES = {"VARCHAR", "TEXT", "CHARACTER VARYING", "CHARACTER", "CHAR", "BPCHAR",
               "STRING", "NVARCHAR", "NCHAR"}
#: SQLite's well-formed number (what numeric affinity converts), leading / trailing spaces ok
NUMBER_TEXT = r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$"
#: the numeric prefix SQLite reads from any text (sqlite3AtoF), as group 1
NUMBER_PREFIX = r"^\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
_NUMBER_RE = re.compile(NUMBER_TEXT)
_ROWID = {"rowid", "oid", "_rowid_"}
_DEPTH = 24


def backend_kind(declared: str) -> tuple[str, str] | None:
    """(affinity, kind) of a backend column type; None: a type left alone (DATE, JSON ..)."""
    base = declared.upper().split("(")[0].strip()
    if base in _INT_TYPES:
        return INTEGER, INT
    if base in _FLOAT_TYPES:
        return REAL, FLOAT
    if base in ("DECIMAL", "NUMERIC"):
        return NUMERIC, DEC
    if base in _TEXT_TYPES:
        return TEXT, STR
    if base in ("BOOLEAN", "BOOL", "LOGICAL"):
        return NUMERIC, BOOL
    return None


def declared_affinity(declared: str) -> str:
    """SQLite's affinity of a declared type name (https://www.sqlite.org/datatype3.html §3.1)."""
    d = declared.upper()
    if "INT" in d:
        return INTEGER
    if any(k in d for k in ("CHAR", "CLOB", "TEXT")):
        return TEXT
    if "BLOB" in d or not d.strip():
        return BLOB
    if any(k in d for k in ("REAL", "FLOA", "DOUB")):
        return REAL
    return NUMERIC


def _cast_kind(to: exp.DataType) -> str | None:
    aff = declared_affinity(to.sql("sqlite"))
    return {INTEGER: INT, REAL: FLOAT, TEXT: STR}.get(aff)


def sqlite_number(text: str) -> exp.Expression | None:
    """The number SQLite's numeric affinity makes of a string (None: it stays text)."""
    if not _NUMBER_RE.match(text):
        return None
    t = text.strip()
    if re.fullmatch(r"[+-]?[0-9]+", t) and -(2**63) <= int(t) < 2**63:
        value: exp.Expression = exp.Literal.number(abs(int(t)))
        return exp.Neg(this=value) if int(t) < 0 else value
    f = float(t)
    if f in (float("inf"), float("-inf")):
        return None
    lit = exp.Literal.number(repr(abs(f)))
    return exp.Neg(this=lit) if f < 0 else lit


def sqlite_text(literal: exp.Literal) -> str:
    """SQLite's text of a numeric literal (an integer's digits; a real as ``%!.15g``)."""
    t = literal.this
    if re.fullmatch(r"[0-9]+", t) and int(t) < 2**63:
        return str(int(t))
    try:
        return real_text(float(t))
    except ValueError:
        return t


def real_text(value: float) -> str:
    """SQLite's text of a REAL (``CAST(x AS TEXT)``: ``%!.15g``): 0.1 + 0.2 is '0.3'."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Inf" if value > 0 else "-Inf"
    out = f"{value:.15g}"
    if "." not in out:
        mantissa, e, exponent = out.partition("e")
        out = f"{mantissa}.0{e}{exponent}"
    return out


class Types:
    """SQLite's affinity and the backend's value kind of expressions of one statement."""

    def __init__(self, schema: Callable[[exp.Table], dict[str, str] | None]) -> None:
        self.schema = schema

    # -- scopes ------------------------------------------------------------------------

    def _cte(self, table: exp.Table) -> exp.CTE | None:
        if table.db:
            return None
        name = table.name.lower()
        node: Any = table
        while node is not None:
            with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
            if with_ is not None:
                for cte in with_.expressions:
                    if cte.alias.lower() == name:
                        return cte
            node = node.parent
        return None

    def sources(self, select: exp.Select) -> dict[str, exp.Expression] | None:
        """Alias (lower case) -> Table / CTE / derived query of a SELECT; None: unknown kinds."""
        out: dict[str, exp.Expression] = {}
        from_ = select.args.get("from_")
        nodes = [from_.this] if from_ is not None else []
        nodes += [j.this for j in select.args.get("joins") or []]
        for node in nodes:
            if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
                cte = self._cte(node)
                out[(node.alias or node.name).lower()] = cte if cte is not None else node
            elif isinstance(node, exp.Subquery) and isinstance(node.this, exp.Query):
                out[node.alias.lower()] = node
            else:
                return None
        return out

    def columns(self, source: exp.Expression) -> dict[str, exp.Expression | str] | None:
        """Column name (lower) -> its expression (derived) or declared type (table)."""
        if isinstance(source, exp.Table):
            cols = self.schema(source)
            return dict(cols) if cols is not None else None
        query = source.this
        names: list[str] | None = None
        alias = source.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            names = [c.name.lower() for c in alias.columns]
        while isinstance(query, exp.SetOperation):
            query = query.this
        if not isinstance(query, exp.Select):
            return None
        if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star)
               for p in query.expressions):
            return None
        exprs = [p.this if isinstance(p, exp.Alias) else p for p in query.expressions]
        if names is None:
            names = [p.alias_or_name.lower() for p in query.expressions]
        return dict(zip(names, exprs, strict=False))

    def resolve(self, col: exp.Column, depth: int = 0,
                ) -> tuple[exp.Expression, exp.Expression | str] | None:
        """(source, its expression or declared type) for a column; None: cannot tell."""
        name = col.name.lower()
        select = col.find_ancestor(exp.Select)
        while select is not None and depth < _DEPTH:
            srcs = self.sources(select)
            if srcs is None:
                return None
            if col.table:
                src = srcs.get(col.table.lower())
                if src is not None:
                    cols = self.columns(src)
                    if cols is None or name not in cols:
                        return None
                    return src, cols[name]
            else:
                unknown = False
                for src in srcs.values():
                    cols = self.columns(src)
                    if cols is None:
                        unknown = True
                    elif name in cols:
                        return src, cols[name]
                if unknown:
                    return None
                for p in select.expressions:
                    if (isinstance(p, exp.Alias) and p.alias.lower() == name
                            and col.find_ancestor(exp.Alias) is not p):
                        return select, p.this
            outer = select.parent
            select = outer.find_ancestor(exp.Select) if outer is not None else None
        return None

    # -- what SQLite and the backend see -----------------------------------------------

    def affinity(self, e: exp.Expression, depth: int = 0) -> str | None:
        """SQLite's affinity of an expression (NONE for literals and functions)."""
        if depth > _DEPTH:
            return None
        if isinstance(e, exp.Paren):
            return self.affinity(e.this, depth + 1)
        if isinstance(e, exp.Cast):
            return declared_affinity(e.to.sql("sqlite"))
        if isinstance(e, exp.Subquery):
            first = _first_projection(e.this)
            return self.affinity(first, depth + 1) if first is not None else None
        if isinstance(e, exp.Column):
            found = self.resolve(e, depth)
            if found is None:
                return None
            src, what = found
            if isinstance(what, str):
                if isinstance(src, exp.Table) and src.db.lower() in ("temp", "pg_temp"):
                    return BLOB  # the engine's temp tables: untyped columns in SQLite
                kind = backend_kind(what)
                return kind[0] if kind is not None else None
            return self.affinity(what, depth + 1)
        return NONE

    def kind(self, e: exp.Expression, depth: int = 0) -> str | None:
        """The backend's kind of value (int / real / num / text); None: cannot tell."""
        if depth > _DEPTH:
            return None
        d = depth + 1
        if isinstance(e, exp.Literal):
            if e.is_string:
                return STR
            return INT if re.fullmatch(r"[0-9]+", e.this) else FLOAT
        if isinstance(e, (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)):
            return BOOL
        if isinstance(e, exp.Placeholder):
            return e.meta.get(_PARAM_KIND)
        if isinstance(e, (exp.Paren, exp.Neg, exp.Abs, exp.Max, exp.Min)):
            return self.kind(e.this, d)
        if isinstance(e, exp.Column):
            found = self.resolve(e, depth)
            if found is None:
                return None
            what = found[1]
            if isinstance(what, str):
                kind = backend_kind(what)
                return kind[1] if kind is not None else None
            return self.kind(what, d)
        if isinstance(e, exp.Cast):
            return _cast_kind(e.to)
        if isinstance(e, (exp.Count, exp.Length)):
            return INT
        if isinstance(e, exp.Avg):
            return FLOAT
        if isinstance(e, exp.Sum):
            inner = self.kind(e.this, d)
            return inner if inner in (INT, FLOAT, DEC) else None
        if isinstance(e, (exp.Upper, exp.Lower, exp.Trim, exp.Substring, exp.DPipe,
                          exp.Replace)):
            return STR
        if isinstance(e, exp.Subquery):
            first = _first_projection(e.this)
            return self.kind(first, d) if first is not None else None
        if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Div, exp.IntDiv)):
            left, right = self.kind(e.this, d), self.kind(e.expression, d)
            if left is None or right is None or STR in (left, right):
                return None
            if left == right == INT:
                return INT if not isinstance(e, exp.Div) or e.args.get("typed") else FLOAT
            return FLOAT
        if isinstance(e, (exp.Case, exp.Coalesce)):
            parts = ([i.args.get("true") for i in e.args.get("ifs") or []]
                     + [e.args.get("default")] if isinstance(e, exp.Case)
                     else [e.this, *e.expressions])
            kinds = {self.kind(p, d) for p in parts if p is not None
                     and not isinstance(p, exp.Null)}
            if len(kinds) == 1:
                return kinds.pop()
            if kinds and kinds <= _NUMBERS:
                return FLOAT
            return None
        return None


#: where a parameter's kind is kept on its node (sqlglot's ``meta``, kept by copies)
_PARAM_KIND = "bsql_kind"


def value_kind(value: Any) -> str | None:
    """The kind of a bound Python value (None: NULL or a kind the typing leaves alone)."""
    import decimal

    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, decimal.Decimal):
        return DEC
    return None


def param_kinds(params: Any) -> tuple[tuple[str, str], ...]:
    """(name, kind) of the values a statement's named parameters are bound to.

    Only named ones: a rewrite may repeat an operand (``numeric_affinity``), which
    repeats ``:name`` harmlessly but would shift every later ``?``.
    """
    if not isinstance(params, dict):
        return ()
    return tuple((str(key), kind) for key, value in sorted(params.items(),
                                                            key=lambda kv: str(kv[0]))
                 if (kind := value_kind(value)) is not None)


def mark_param_kinds(tree: exp.Expression, kinds: dict[str, str]) -> None:
    """Each named parameter of ``tree`` with the kind of its value, for :meth:`Types.kind`."""
    for ph in tree.find_all(exp.Placeholder):
        kind = kinds.get(ph.name) if ph.name and ph.name != "?" else None
        if kind is not None:
            ph.meta[_PARAM_KIND] = kind


def _first_projection(query: exp.Expression) -> exp.Expression | None:
    while isinstance(query, exp.SetOperation):
        query = query.this
    if not isinstance(query, exp.Select) or not query.expressions:
        return None
    first = query.expressions[0]
    if isinstance(first, exp.Star):
        return None
    return first.this if isinstance(first, exp.Alias) else first


# -- double-quoted strings -------------------------------------------------------------

def quoted_strings(tree: exp.Expression, types: Types) -> None:
    """``"Asia"`` naming no column (nor alias) of the statement becomes ``'Asia'``.

    Conservative: the names of every table, derived table and CTE of the whole
    statement count (not only the column's scope), and nothing is changed when
    a table's columns are unknown.
    """
    candidates = [c for c in tree.find_all(exp.Column)
                  if not c.table and isinstance(c.this, exp.Identifier) and c.this.quoted]
    if not candidates:
        return
    known = set(_ROWID)
    for select in tree.find_all(exp.Select):
        srcs = types.sources(select)
        if srcs is None:
            return
        known |= set(srcs)  # FTS5: ``"docs" MATCH 'q'`` names the table as a column
        for src in srcs.values():
            cols = types.columns(src)
            if cols is None:
                if isinstance(src, exp.Table):
                    return
                continue  # a derived table of SELECT *: its tables are in the statement
            known |= set(cols)
        known |= {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    for cte in tree.find_all(exp.CTE):
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias):
            known |= {c.name.lower() for c in alias.columns}
    for alias in tree.find_all(exp.TableAlias):
        known |= {c.name.lower() for c in alias.columns}
    for col in candidates:
        if col.name.lower() not in known and col.find_ancestor(exp.Select) is not None:
            col.replace(exp.Literal.string(col.name))


# -- comparisons, aggregates, arithmetic, division -------------------------------------

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
#: operator -> result when a number is compared with text (SQLite: numbers sort first)
_NUMBER_VS_TEXT: dict[type[exp.Expression], bool] = {exp.EQ: False, exp.NEQ: True, exp.LT: True, exp.LTE: True,
                   exp.GT: False, exp.GTE: False}
_MIRROR: dict[type[exp.Expression], type[exp.Expression]] = {exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.LTE: exp.GTE,
           exp.GT: exp.LT, exp.GTE: exp.LTE}


def compare_affinity(left: str | None, right: str | None) -> str | None:
    """sqlite3CompareAffinity: the affinity both operands of a comparison get."""
    if left is None or right is None:
        return None
    if left != NONE and right != NONE:
        return NUMERIC if left in _NUMERIC_AFF or right in _NUMERIC_AFF else BLOB
    return right if left == NONE else left


def numeric_text(e: exp.Expression, dialect: str) -> exp.Expression:
    """SQLite's number of a text value: its numeric prefix, 0 when it has none."""
    pattern = exp.Literal.string(NUMBER_PREFIX)
    prefix: exp.Expression
    if dialect == "postgres":
        # (regexp_match(x, p))[1]: sqlglot keeps indexes 0-based and writes PostgreSQL's 1
        prefix = exp.Bracket(this=exp.paren(exp.Anonymous(this="regexp_match",
                                                          expressions=[e.copy(), pattern])),
                             expressions=[exp.Literal.number(0)])
    else:
        prefix = exp.Nullif(this=exp.RegexpExtract(this=e.copy(), expression=pattern,
                                                   group=exp.Literal.number(1)),
                            expression=exp.Literal.string(""))
    number = exp.Coalesce(this=exp.cast(prefix, "DOUBLE"),
                          expressions=[exp.Literal.number("0.0")])
    return exp.Case(ifs=[exp.If(this=exp.Is(this=e.copy(), expression=exp.null()),
                                true=exp.null())], default=number)


def _looks_numeric(e: exp.Expression) -> exp.Expression:
    return exp.RegexpLike(this=e.copy(), expression=exp.Literal.string(NUMBER_TEXT))


def numeric_affinity(e: exp.Expression) -> exp.Expression:
    """A text value under SQLite's numeric affinity, as a DOUBLE the backend compares.

    A well-formed number becomes that number; any other text stays text in
    SQLite, where it sorts after every number and equals none: here NaN,
    which DuckDB and PostgreSQL sort after every number and equal no number.
    """
    return exp.Case(ifs=[
        exp.If(this=_looks_numeric(e), true=exp.cast(exp.Trim(this=e.copy()), "DOUBLE")),
        exp.If(this=exp.not_(exp.Is(this=e.copy(), expression=exp.null())),
               true=exp.cast(exp.Literal.string("NaN"), "DOUBLE"))])


def _as_integer(e: exp.Expression) -> None:
    """A truth value as SQLite's integer (1 / 0 / NULL), in place."""
    e.replace(exp.cast(e.copy(), "INTEGER"))


def _null_or(a: exp.Expression, b: exp.Expression, value: exp.Expression) -> exp.Expression:
    either = exp.or_(exp.Is(this=a.copy(), expression=exp.null()),
                     exp.Is(this=b.copy(), expression=exp.null()))
    return exp.paren(exp.Case(ifs=[exp.If(this=either, true=exp.null())], default=value))


class Affinity:
    """The comparison / aggregate / arithmetic / division rewrites of one statement."""

    def __init__(self, types: Types, dialect: str) -> None:
        self.types = types
        self.dialect = dialect

    def apply(self, tree: exp.Expression) -> None:
        for fn in list(tree.find_all(exp.Anonymous)):
            if fn.name.lower() == "total" and len(fn.expressions) == 1:
                # SQLite's total(): a float sum, 0.0 over no values
                fn.replace(exp.Coalesce(this=exp.cast(exp.Sum(this=fn.expressions[0].copy()),
                                                      "DOUBLE"),
                                        expressions=[exp.Literal.number("0.0")]))
        nodes: list[exp.Expression] = list(tree.find_all(
            *_COMPARISONS, exp.In, exp.Between, exp.Avg, exp.Sum, exp.Add, exp.Sub, exp.Mul,
            exp.Mod, exp.Div))
        # inner nodes first: an outer node's types see the rewritten operands
        nodes.sort(key=lambda n: -n.depth)
        for node in nodes:
            if node.parent is None and node is not tree:
                continue  # replaced together with an outer node
            if isinstance(node, _COMPARISONS):
                self._compare(node)
            elif isinstance(node, exp.In):
                self._in(node)
            elif isinstance(node, exp.Between):
                self._between(node)
            elif isinstance(node, (exp.Avg, exp.Sum)):
                self._aggregate(node)
            else:
                self._arithmetic(node)
        self._conditions(tree)

    # -- comparisons -------------------------------------------------------------------

    def _sides(self, left: exp.Expression, right: exp.Expression,
               ) -> tuple[str, str, str] | None:
        t = self.types
        aff = compare_affinity(t.affinity(left), t.affinity(right))
        if aff is None:
            return None
        kl, kr = t.kind(left), t.kind(right)
        if kl is None or kr is None:
            return None
        return aff, kl, kr

    def _compare(self, node: exp.Expression) -> None:
        left, right = node.this, node.expression
        sides = self._sides(left, right)
        if sides is None:
            return
        aff, kl, kr = sides
        if BOOL in (kl, kr) and {kl, kr} - {BOOL} <= _NUMBERS and kl != kr:
            _as_integer(left if kl == BOOL else right)  # SQLite's booleans are 1 / 0
            return
        if not ((kl in _NUMBERS and kr == STR) or (kl == STR and kr in _NUMBERS)):
            return
        number_left = kl in _NUMBERS
        num, text = (left, right) if number_left else (right, left)
        op = type(node) if number_left else _MIRROR[type(node)]
        if aff == TEXT:
            text_of = (exp.Literal.string(sqlite_text(num))
                       if isinstance(num, exp.Literal) else exp.cast(num.copy(), "TEXT"))
            num.replace(text_of)
            return
        constant = exp.true() if _NUMBER_VS_TEXT[op] else exp.false()
        if aff in _NUMERIC_AFF:
            if isinstance(text, exp.Literal):
                number = sqlite_number(text.this)
                if number is not None:
                    text.replace(number)
                    return
            else:
                text.replace(numeric_affinity(text))
                return
        node.replace(_null_or(num, text, constant))

    def _in(self, node: exp.In) -> None:
        left = node.this
        query = node.args.get("query")
        if query is not None:
            first = _first_projection(query.this) if isinstance(query, exp.Subquery) else None
            if first is None:
                return
            sides = self._sides(left, first)
            if sides is None:
                return
            aff, kl, kr = sides
            if aff == TEXT and kl in _NUMBERS and kr == STR:
                left.replace(exp.cast(left.copy(), "TEXT"))
            elif aff == TEXT and kl == STR and kr in _NUMBERS:
                first.replace(exp.cast(first.copy(), "TEXT"))
            elif aff in _NUMERIC_AFF and kl in _NUMBERS and kr == STR:
                first.replace(numeric_affinity(first))
            elif aff in _NUMERIC_AFF and kl == STR and kr in _NUMBERS:
                left.replace(numeric_affinity(left))
            return
        t = self.types
        left_aff, left_kind = t.affinity(left), t.kind(left)
        if left_aff is None or left_kind is None:
            return
        if left_aff == TEXT:
            for item in node.expressions:
                if isinstance(item, exp.Literal) and not item.is_string:
                    item.replace(exp.Literal.string(sqlite_text(item)))
        elif left_aff in _NUMERIC_AFF and left_kind in _NUMBERS:
            keep = []
            for item in list(node.expressions):
                if isinstance(item, exp.Literal) and item.is_string:
                    number = sqlite_number(item.this)
                    if number is None:
                        continue  # text never equals a number
                    keep.append(number)
                else:
                    keep.append(item)
            if len(keep) != len(node.expressions):
                if keep:
                    node.set("expressions", keep)
                else:
                    node.replace(_null_or(left, left, exp.false()))

    def _between(self, node: exp.Between) -> None:
        left = node.this
        for key in ("low", "high"):
            bound = node.args.get(key)
            if not isinstance(bound, exp.Literal):
                continue
            sides = self._sides(left, bound)
            if sides is None:
                continue
            aff, kl, kr = sides
            if aff == TEXT and kl == STR and kr in _NUMBERS:
                bound.replace(exp.Literal.string(sqlite_text(bound)))
            elif aff in _NUMERIC_AFF and kl in _NUMBERS and kr == STR:
                number = sqlite_number(bound.this)
                if number is not None:
                    bound.replace(number)

    # -- aggregates and arithmetic -----------------------------------------------------

    def _aggregate(self, node: exp.Expression) -> None:
        arg = node.this
        if arg is None or isinstance(arg, exp.Literal):
            return
        kind = self.types.kind(arg)
        if kind == STR:
            arg.replace(numeric_text(arg, self.dialect))
        elif kind == BOOL:
            _as_integer(arg)

    def _arithmetic(self, node: exp.Expression) -> None:
        t = self.types
        kinds = [t.kind(node.this), t.kind(node.expression)]
        if None in kinds:
            return
        if BOOL in kinds:
            for side, kind in zip((node.this, node.expression), kinds, strict=True):
                if kind == BOOL:
                    _as_integer(side)
            kinds = [INT if k == BOOL else k for k in kinds]
        if STR in kinds:
            for side, kind in zip((node.this, node.expression), kinds, strict=True):
                if kind == STR and not isinstance(side, exp.Literal):
                    side.replace(numeric_text(side, self.dialect))
                elif kind == STR:
                    number = sqlite_number(side.this)
                    side.replace(number if number is not None else exp.Literal.number(0))
            return
        if isinstance(node, exp.Div) and kinds == [INT, INT]:
            self._integer_division(node)

    def _conditions(self, tree: exp.Expression) -> None:
        """A number (or text) where a truth value is read: true when not zero, as in SQLite.

        PostgreSQL refuses ``WHERE 1 - x``; ``x <> 0`` means what SQLite means.
        """
        spots: list[exp.Expression] = []
        for node in tree.find_all(exp.Where, exp.Having, exp.If, exp.Connector, exp.Not):
            spots.append(node.this)
            if isinstance(node, exp.Connector):
                spots.append(node.expression)
        for join in tree.find_all(exp.Join):
            on = join.args.get("on")
            if on is not None:
                spots.append(on)
        for spot in spots:
            if spot is None or spot.parent is None:
                continue
            inner: Any = spot.unnest() if isinstance(spot, exp.Paren) else spot
            kind = self.types.kind(inner)
            if kind in _NUMBERS:
                value = spot.copy()
            elif kind == STR and not isinstance(inner, exp.Literal):
                value = numeric_text(spot, self.dialect)
            else:
                continue
            spot.replace(exp.paren(exp.NEQ(this=value, expression=exp.Literal.number(0))))

    def _integer_division(self, node: exp.Div) -> None:
        if self.dialect == "duckdb":
            node.replace(exp.IntDiv(this=node.this.copy(), expression=node.expression.copy()))
        elif self.dialect == "spark":
            # Spark's DIV truncates toward zero, as SQLite does; x / 0 is NULL in SQLite,
            # an error in Spark's ANSI mode
            node.replace(exp.IntDiv(this=node.this.copy(),
                                    expression=_nonzero(node.expression)))
        elif self.dialect == "postgres":
            for side in (node.this, node.expression):
                inner = side.unnest() if isinstance(side, exp.Paren) else side
                if isinstance(inner, exp.Sum):  # NUMERIC on PostgreSQL
                    side.replace(exp.cast(side.copy(), "BIGINT"))


# -- Spark -----------------------------------------------------------------------------

def _nonzero(e: exp.Expression) -> exp.Expression:
    """``NULLIF(e, 0)``: a divisor of zero gives NULL, as in SQLite (not Spark's error)."""
    if isinstance(e, exp.Literal) and not e.is_string and float(e.this) != 0:
        return e.copy()
    return exp.Nullif(this=e.copy(), expression=exp.Literal.number(0))


_TRUTH = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)


def predicates_as_integers(tree: exp.Expression, types: Types) -> None:
    """A truth value in a SELECT list as SQLite's integer 1 / 0 / NULL (Spark).

    SQLite has no boolean type: ``SELECT a > 1`` gives 1 or 0, and so does the
    column of a derived table that an outer query reads (``SUM(f)``, ``f + 1``,
    ``f = 1``). Spark's comparisons are BOOLEAN; cast to INT, the rows and the
    types downstream are SQLite's. A column of Spark's BOOLEAN type (a user's,
    an ingredient's output) is left as stored. An unnamed projection keeps the
    name SQLite gives it (its text).
    """
    for select in list(tree.find_all(exp.Select)):
        for proj in list(select.expressions):
            value = proj.this if isinstance(proj, exp.Alias) else proj
            inner = value.unnest() if isinstance(value, exp.Paren) else value
            if not isinstance(inner, _TRUTH):
                continue
            cast = exp.cast(value.copy(), "INT")
            if isinstance(proj, exp.Alias):
                proj.set("this", cast)
            else:
                proj.replace(exp.alias_(cast, value.sql("sqlite"), quoted=True))


def spark_casts(tree: exp.Expression, types: Types) -> None:
    """SQLite's ``CAST`` and multi-argument ``max`` / ``min`` on Spark (before :class:`Affinity`).

    - ``CAST(x AS INTEGER)`` is a 64-bit integer (Spark's INT has 32 bits);
      ``CAST(x AS NUMERIC)`` keeps a real's fraction (Spark's DECIMAL(10, 0)
      rounds it): DOUBLE; text cast to a number reads its numeric prefix, as
      SQLite does (``'12abc'`` is 12, ``'n/a'`` 0), where Spark's ANSI mode raises;
    - ``max(a, b)`` / ``min(a, b)`` are NULL when an argument is NULL (Spark's
      ``greatest`` / ``least`` skip NULLs).
    """
    for cast in list(tree.find_all(exp.Cast)):
        if isinstance(cast, exp.TryCast):
            continue
        aff = declared_affinity(cast.to.sql("sqlite"))
        if aff not in _NUMERIC_AFF:
            continue
        target = "BIGINT" if aff == INTEGER else "DOUBLE"
        value = cast.this
        if types.kind(value) == STR and not isinstance(value, exp.Literal):
            value = numeric_text(value, "spark")
        elif isinstance(value, exp.Literal) and value.is_string:
            prefix = re.match(NUMBER_PREFIX, value.this)
            number = sqlite_number(prefix.group(1)) if prefix else None
            value = number if number is not None else exp.Literal.number(0)
        cast.replace(exp.cast(value.copy(), target))
    for node in list(tree.find_all(exp.Greatest, exp.Least)):
        if node.args.get("ignore_nulls"):
            continue
        args = [node.this, *node.expressions]
        if len(args) < 2 or any(_positional(a) for a in args):
            continue
        any_null = exp.or_(*[exp.Is(this=exp.paren(a.copy()), expression=exp.null())
                             for a in args])
        node.replace(exp.paren(exp.Case(ifs=[exp.If(this=any_null, true=exp.null())],
                                        default=node.copy())))


#: Spark's type names (``typeof``) -> SQLite's storage classes
_SPARK_CLASSES = {"bigint": "integer", "int": "integer", "smallint": "integer",
                  "tinyint": "integer", "boolean": "integer", "double": "real",
                  "float": "real", "string": "text", "binary": "blob", "void": "null"}
_ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"


def spark_functions(tree: exp.Expression, types: Types) -> None:
    """SQLite's meaning of functions and operators Spark reads its own way.

    - ``x / y`` (not both integers, see :class:`Affinity`) and ``x % y``: NULL
      when ``y`` is 0, as in SQLite (Spark's ANSI mode raises an error):
      ``try_divide``, ``x % NULLIF(y, 0)``;
    - ``upper`` / ``lower`` fold ASCII letters only (SQLite without ICU):
      ``translate``;
    - ``typeof(x)`` names SQLite's storage class (``integer``, ``real``,
      ``text``, ``blob``, ``null``), mapped from Spark's type of the value;
    - ``p || 'x'`` of a truth value ``p`` concatenates SQLite's 1 / 0, not
      Spark's ``true`` / ``false``;
    - ``substr(x, 0, n)`` and ``substr(x, p, -n)`` with literal numbers, as SQLite
      counts them (:func:`_sqlite_substr`).
    """
    for sub in list(tree.find_all(exp.Substring)):
        _sqlite_substr(sub)
    nodes = list(tree.find_all(exp.Div, exp.Mod, exp.Upper, exp.Lower, exp.Typeof,
                               exp.DPipe))
    nodes.sort(key=lambda n: -n.depth)  # inner nodes first: an outer one copies them
    for node in nodes:
        if isinstance(node, exp.Div):
            node.replace(exp.Anonymous(this="try_divide", expressions=[
                node.this.copy(), node.expression.copy()]))
        elif isinstance(node, exp.Mod):
            if types.kind(node.expression) in _NUMBERS:
                node.set("expression", _nonzero(node.expression))
        elif isinstance(node, (exp.Upper, exp.Lower)):
            letters = (_ASCII_LOWER, _ASCII_UPPER)
            src, dst = letters if isinstance(node, exp.Upper) else letters[::-1]
            node.replace(exp.Anonymous(this="translate", expressions=[
                exp.cast(node.this.copy(), "TEXT"), exp.Literal.string(src),
                exp.Literal.string(dst)]))
        elif isinstance(node, exp.Typeof):
            if not _positional(node.this):
                node.replace(_storage_class(node.this, types.kind(node.this)))
        else:
            for side in (node.this, node.expression):
                if types.kind(side) == BOOL:
                    _as_integer(side)


def _int_literal(e: exp.Expression | None) -> int | None:
    """The value of an integer literal (``3``, ``-3``); None: anything else."""
    if isinstance(e, exp.Neg):
        inner = _int_literal(e.this)
        return -inner if inner is not None else None
    if isinstance(e, exp.Literal) and not e.is_string and re.fullmatch(r"[0-9]+", e.this):
        return int(e.this)
    return None


def _sqlite_substr(node: exp.Substring) -> None:
    """SQLite's ``substr`` where Spark counts differently, for literal positions.

    SQLite's start 0 stands before the first character (``substr('abc', 0, 2)``
    is ``'a'``), Spark's is the first; a negative length takes the characters
    before the start (``substr('abcd', 3, -2)`` is ``'ab'``), Spark's gives ''.
    """
    start, length = _int_literal(node.args.get("start")), node.args.get("length")
    n = _int_literal(length) if length is not None else None
    if start is None or (length is not None and n is None):
        return
    if n is not None and n < 0:
        # the -n characters before position start (1-based; start 0 is before the first)
        first = start + n if start > 0 else start + n - 1
        if start < 0 or first < -(2**31):
            return  # counted from the end: left to Spark
        take = -n if first >= 1 else -n + first - 1
        node.set("start", exp.Literal.number(max(first, 1)))
        node.set("length", exp.Literal.number(max(take, 0)))
    elif start == 0:
        node.set("start", exp.Literal.number(1))
        if n is not None:
            node.set("length", exp.Literal.number(max(n - 1, 0)))


def _positional(e: exp.Expression) -> bool:
    """Whether ``e`` holds a ``?``, which a rewrite must not repeat (it would shift the
    values of every later ``?``)."""
    return any(not ph.name or ph.name == "?" for ph in e.find_all(exp.Placeholder))


def _storage_class(e: exp.Expression, kind: str | None) -> exp.Expression:
    """SQLite's ``typeof(e)`` on Spark: NULL is 'null' whatever its column's type; a value
    is named by its kind where the typing knows it, else by Spark's type name (a DECIMAL
    of scale 0 is 'integer', of another scale 'real')."""
    static = {INT: "integer", BOOL: "integer", FLOAT: "real", STR: "text"}.get(kind or "")
    by_type: exp.Expression
    if static is not None:
        by_type = exp.Literal.string(static)
    else:
        spark_type = exp.Anonymous(this="typeof", expressions=[e.copy()])
        decimal = exp.Case(ifs=[exp.If(
            this=exp.RegexpLike(this=spark_type.copy(),
                                expression=exp.Literal.string(r"^decimal\(\d+,\s*0\)$")),
            true=exp.Literal.string("integer"))], default=exp.Literal.string("real"))
        by_type = exp.Case(this=exp.Substring(this=spark_type.copy(),
                                              start=exp.Literal.number(1),
                                              length=exp.Literal.number(7)),
                           ifs=[exp.If(this=exp.Literal.string("decimal"), true=decimal)],
                           default=spark_type.copy())
        by_type = exp.Case(this=spark_type, ifs=[
            exp.If(this=exp.Literal.string(name), true=exp.Literal.string(cls))
            for name, cls in _SPARK_CLASSES.items()], default=by_type)
    operand = e.copy() if isinstance(e, (exp.Column, exp.Paren)) else exp.paren(e.copy())
    return exp.Case(ifs=[exp.If(this=exp.Is(this=operand, expression=exp.null()),
                                true=exp.Literal.string("null"))], default=by_type)


# -- LIKE ------------------------------------------------------------------------------

_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FOLD = str.maketrans(_ASCII_UPPER, _ASCII_UPPER.lower())


def _ascii_lower(e: exp.Expression) -> exp.Expression:
    """SQLite's case folding for LIKE: ASCII letters only."""
    return exp.Anonymous(this="translate", expressions=[
        exp.cast(e.copy(), "TEXT"), exp.Literal.string(_ASCII_UPPER),
        exp.Literal.string(_ASCII_UPPER.lower())])


def like_case(tree: exp.Expression, dialect: str) -> None:
    """SQLite's ``LIKE``: ASCII letters match either case; no escape character but ESCAPE's.

    DuckDB's and PostgreSQL's LIKE are case-sensitive: a literal ASCII pattern
    becomes ``ILIKE`` (the same matches: only an ASCII letter of the pattern is
    folded), any other both sides folded with ``translate``. PostgreSQL reads
    ``\\`` as LIKE's escape by default, SQLite does not: ``ESCAPE ''``.
    """
    for like in list(tree.find_all(exp.Like)):
        pattern = like.expression
        negate = like.args.get("negate")
        literal = isinstance(pattern, exp.Literal) and pattern.is_string
        if literal and not re.search("[A-Za-z]", pattern.this):
            new: exp.Expression = like  # no letter to fold
        elif literal and pattern.this.isascii():
            new = exp.ILike(this=like.this.copy(), expression=pattern.copy(), negate=negate)
        else:
            folded = (exp.Literal.string(pattern.this.translate(_FOLD))
                      if isinstance(pattern, exp.Literal) and pattern.is_string
                      else _ascii_lower(pattern))
            new = exp.Like(this=_ascii_lower(like.this), expression=folded, negate=negate)
        if (dialect == "postgres" and not isinstance(like.parent, exp.Escape)
                and not (literal and "\\" not in pattern.this)):
            new = exp.Escape(this=new.copy() if new is like else new,
                             expression=exp.Literal.string(""))
        if new is not like:
            like.replace(new)
        if dialect == "spark":
            _spark_escapes(new)


def _spark_escapes(like: exp.Expression) -> None:
    """SQLite's escapes in a Spark LIKE / ILIKE (``like``, in place).

    Without ESCAPE, SQLite's LIKE has no escape character, Spark's has ``\\``:
    each backslash of the pattern is doubled (a literal pattern's text, any
    other through ``replace``). With ``ESCAPE 'c'``, SQLite reads ``c`` before any
    character as that character; Spark refuses ``c`` before anything but ``%``,
    ``_`` and ``c``: a literal pattern drops those escapes.
    """
    pattern = like.expression
    literal = isinstance(pattern, exp.Literal) and pattern.is_string
    escape = like.parent if isinstance(like.parent, exp.Escape) else None
    if escape is None:
        if literal:
            if "\\" in pattern.this:
                pattern.replace(exp.Literal.string(pattern.this.replace("\\", "\\\\")))
        else:
            like.set("expression", exp.Anonymous(this="replace", expressions=[
                pattern.copy(), exp.Literal.string("\\"), exp.Literal.string("\\\\")]))
        return
    char = escape.expression
    if not (literal and isinstance(char, exp.Literal) and char.is_string
            and len(char.this) == 1):
        return
    text, c, out, i = pattern.this, char.this, [], 0
    while i < len(text):
        if text[i] == c and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(c + nxt if nxt in ("%", "_", c) else nxt)
            i += 2
            continue
        out.append(text[i])
        i += 1
    pattern.replace(exp.Literal.string("".join(out)))


# -- SELECT DISTINCT .. ORDER BY <not selected> ----------------------------------------

def distinct_order(select: exp.Select) -> None:
    """``SELECT DISTINCT a .. ORDER BY x`` (``x`` not selected) for PostgreSQL.

    SQLite (and DuckDB) sort the distinct rows by ``x`` of one of each row's
    source rows; PostgreSQL refuses the query. Written as ``GROUP BY a ..
    ORDER BY MIN(x)`` (``MAX`` for DESC): each distinct row once, sorted by its
    first key among its source rows.
    """
    distinct = select.args.get("distinct")
    order = select.args.get("order")
    if (distinct is None or distinct.args.get("on") is not None or order is None
            or select.args.get("group") is not None or not select.expressions):
        return
    projections = select.expressions
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and p.is_star)
           or p.find(exp.AggFunc, exp.Window) is not None for p in projections):
        return
    selected = {(p.this if isinstance(p, exp.Alias) else p).sql().lower() for p in projections}
    names = {p.alias_or_name.lower() for p in projections}
    loose = []
    for o in order.expressions:
        key = o.this
        if isinstance(key, exp.Literal) and not key.is_string:
            continue  # ORDER BY 2: an output column
        if key.sql().lower() in selected or (isinstance(key, exp.Column) and not key.table
                                             and key.name.lower() in names):
            continue
        if key.find(exp.AggFunc, exp.Window, exp.Subquery) is not None:
            return
        loose.append(o)
    if not loose:
        return
    for o in loose:
        agg = exp.Max if o.args.get("desc") else exp.Min
        o.set("this", agg(this=o.this.copy()))
    select.set("distinct", None)
    select.set("group", exp.Group(expressions=[
        (p.this if isinstance(p, exp.Alias) else p).copy() for p in projections]))
