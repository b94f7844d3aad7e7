"""BlendSQL's SQLite-flavoured SQL as another backend's SQL (sqlglot), once per text.

Why at the backend and not in the engine: the engine plans and renders one
dialect (SQLite's, the one users write), so every rule and golden plan
stays the same; each statement is translated on its way to the database.
Translations are cached by text, so a query's repeated statements pay once.

What needs more than sqlglot's generator:

- parameters: ``:name`` and ``?`` become the driver's style (DuckDB
  ``$name`` / ``?``; psycopg ``%(name)s`` / ``%s``, with every other ``%``
  doubled because psycopg reads them as format characters);
- SQLite's ``rowid`` (also ``oid``, ``_rowid_``) of a table without such a column
  becomes PostgreSQL's ``ctid`` (the row's address, stable within a statement),
  so a query can name rows the same way on every backend;
- ``temp.<name>`` (SQLite's temp schema) becomes PostgreSQL's ``pg_temp``, and
  a bare ``<name>`` on Spark (its temporary views have no schema);
- parameters on Spark: ``:name`` and ``?`` as written (``spark.sql(text, args)``);
- ``json_array(..)`` (several-column values, ``plan.calls.tuple_value``)
  must come back as JSON *text*, as it does from SQLite (Spark has no
  ``json_array``: each value's JSON from ``to_json(array(x))``, joined);
- FTS5 ``t MATCH q``, ``rank`` and ``bm25(t)`` become the backend's
  full-text search (``FullText`` below), or a clear error where it has none;
- SQLite's ``x GLOB 'pattern'`` becomes a regular-expression match
  (PostgreSQL has no GLOB; DuckDB's negates a class with ``[!..]``, not
  ``[^..]``, and does not read a number as text); a pattern that is not a
  literal is refused with an error naming the backend;
- SQLite's typing where the backend knows its column types (``types``):
  double-quoted strings, text / number comparisons, ``avg`` / ``sum`` of text,
  integer division, ``total()``, booleans as integers; LIKE's ASCII-only case
  folding, ``SELECT DISTINCT .. ORDER BY`` a column not selected on PostgreSQL and
  Spark; on Spark also division by zero, booleans in SELECT lists, LIKE's escapes,
  ``upper`` / ``lower`` and ``typeof``, parameters typed by their values
  (``blendsql.db.sqlite_compat``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from blendsql.db.sqlite_compat import (
    Affinity,
    Types,
    distinct_order,
    like_case,
    mark_param_kinds,
    param_kinds,
    predicates_as_integers,
    quoted_strings,
    spark_casts,
    spark_functions,
)
from blendsql.errors import ExecutionError

_CACHE_SIZE = 512
#: SQLite's names of a row's id
_ROWID_NAMES = frozenset({"rowid", "oid", "_rowid_"})
_MARK = "__bsql_param_mark_{}__"
#: FTS5 operators and syntax characters, turned into spaces before a bag-of-words search
FTS5_SYNTAX = r'\b(OR|AND|NOT|NEAR)\b|[\"*():^{}+\-]'


class FullText:
    """How a backend answers FTS5's ``MATCH`` / ``rank`` / ``bm25``.

    ``match(table, alias, query)`` returns the predicate, ``score(table,
    alias, query)`` an expression ordered like FTS5's ``rank`` (lower is
    better). ``None`` from :meth:`unavailable` means it is available.
    """

    def unavailable(self, table: str) -> str | None:
        """Why MATCH on ``table`` cannot run here (None: it can)."""
        return None

    def match(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        raise NotImplementedError

    def score(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        raise NotImplementedError


class Transpiler:
    """SQLite-flavoured SQL -> ``dialect`` SQL (and its parameter style), cached."""

    def __init__(self, dialect: str, full_text: FullText | None = None,
                 read: str = "sqlite",
                 columns: Callable[[str], set[str] | None] | None = None,
                 types: Callable[[str], dict[str, str] | None] | None = None,
                 spelling: Callable[[str], str | None] | None = None) -> None:
        self.dialect = dialect
        self.read = read
        self.full_text = full_text
        # lower-case column names of a table (None: unknown), for SELECT aliases in WHERE
        self.columns = columns
        # a table's columns with the backend's declared types (None: unknown table), for
        # SQLite's typing (blendsql.db.sqlite_compat); cached per table, see forget()
        self.types = types
        self._schemas: dict[str, dict[str, str]] = {}
        # the catalog's spelling of a table named in any case (None: no such table), for a
        # backend that folds unquoted names to lower case (PostgreSQL); see _catalog_case
        self.spelling = spelling
        self._spellings: dict[str, str | None] = {}
        self._column_spellings: dict[str, dict[str, str]] = {}
        # (engine temp table, column) pairs holding only NULLs (see _untyped_lookups)
        self.null_columns: set[tuple[str, str]] = set()
        self._cache: OrderedDict[Any, tuple[str, list[str | None]]] = OrderedDict()

    def __call__(self, sql: str, params: Any = None) -> tuple[str, list[str | None]]:
        """(text for the driver, the parameters it names in order: a name or None for ``?``).

        ``params``, where given, are the values the statement will be bound to: the
        kinds (integer, real, text) of named ones type those parameters for SQLite's
        typing, as a backend that types a bound value statically (Spark: a literal)
        reads them; ``?`` stays untyped (a rewrite may repeat an operand).
        """
        kinds = param_kinds(params) if params is not None and self.types is not None else ()
        key: Any = (sql, kinds) if kinds else sql
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        out = self._translate(sql, dict(kinds))
        self._cache[key] = out
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def schema(self, table: str) -> dict[str, str] | None:
        """Lower-case column -> declared type of ``table`` (None: unknown), cached."""
        key = table.lower()
        hit = self._schemas.get(key)
        if hit is not None or self.types is None:
            return hit
        found = self.types(table)
        if not found:
            return None  # not cached: the table may be created later
        self._schemas[key] = {c.lower(): t for c, t in found.items()}
        return self._schemas[key]

    def forget(self, table: str) -> None:
        """Drop what is cached about ``table`` (an engine temp table being dropped)."""
        self._schemas.pop(table.lower(), None)
        self._spellings.pop(table.lower(), None)
        self._column_spellings.pop(table.lower(), None)

    def reset(self) -> None:
        """Forget every table's columns and every translation (a user's table changed)."""
        self._schemas.clear()
        self._spellings.clear()
        self._column_spellings.clear()
        self._cache.clear()

    def table_spelling(self, table: str) -> str | None:
        """The catalogue's spelling of ``table`` (any case; None: not a user table), cached."""
        key = table.lower()
        if key in self._spellings:
            return self._spellings[key]
        found = self.spelling(table) if self.spelling is not None else None
        self._spellings[key] = found  # a miss too: reset() forgets both when tables change
        return found

    def column_spellings(self, table: str) -> dict[str, str]:
        """Lower-case column -> the catalogue's spelling, for a user table (cached)."""
        key = table.lower()
        hit = self._column_spellings.get(key)
        if hit is None:
            found = self.types(table) if self.types is not None else None
            hit = {c.lower(): c for c in found or {}}
            self._column_spellings[key] = hit
        return hit

    def _catalog_case(self, tree: exp.Expression) -> None:
        """SQLite ignores the case of names; PostgreSQL folds unquoted ones to lower case,
        so a table or column the catalogue spells with capitals (``"PetType"``, as pandas'
        ``to_sql`` makes them) is written quoted, as the catalogue spells it.

        Resolved scope by scope, innermost first (:func:`sqlglot.optimizer.scope.traverse_scope`):
        a column is respelled only when it resolves to one user table's column (qualified
        by that table or its alias; unqualified, when every source of its scope is known
        and those that have the name agree on its spelling) or to a derived table's
        output named so. Columns of
        the engine's temp tables and of unknown sources are left as written, and so is an
        ORDER BY name that is an alias of the same SELECT (there the alias is meant).
        """
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        spelled: dict[int, str] = {}  # id(exp.Table) -> the catalogue's spelling
        for table in tree.find_all(exp.Table):
            if table.db or table.name.lower() in ctes or not isinstance(table.this, exp.Identifier):
                continue
            actual = self.table_spelling(table.name)
            if actual is None:
                continue
            spelled[id(table)] = actual
            if needs_respelling(table.this, actual):
                table.set("this", exp.to_identifier(actual, quoted=True))
        if not spelled:
            return
        try:
            scopes = traverse_scope(tree)
        except SqlglotError:
            return  # a shape sqlglot cannot scope: names stay as written
        outputs: dict[int, dict[str, str] | None] = {}
        seen: set[int] = set()
        for scope in scopes:
            sources: dict[str, dict[str, str] | None] = {}
            for name, source in scope.sources.items():
                if isinstance(source, exp.Table):
                    actual = spelled.get(id(source))
                    sources[name.lower()] = self.column_spellings(actual) if actual else None
                else:
                    sources[name.lower()] = outputs.get(id(getattr(source, "expression", None)))
            respell_scope(scope, sources, spelled, seen)
            outputs[id(scope.expression)] = output_names(scope.expression, sources)

    def column_set(self, table: str) -> set[str] | None:
        """Lower-case column names of ``table`` (None: unknown)."""
        if self.columns is not None:
            return self.columns(table)
        found = self.schema(table)
        return set(found) if found is not None else None

    def _translate(self, sql: str, kinds: dict[str, str] | None = None,
                   ) -> tuple[str, list[str | None]]:
        try:
            trees = [t for t in sqlglot.parse(sql, read=self.read) if t is not None]
        except SqlglotError as e:
            raise ExecutionError(f"SQL error: {str(e).splitlines()[0]}\n  in: {sql[:2000]}",
                                 hint="check the SQL") from None
        if len(trees) != 1:
            raise ExecutionError(f"expected one SQL statement, got {len(trees)}:\n  {sql[:2000]}",
                                 hint="run one statement at a time")
        tree: exp.Expression = trees[0]  # type: ignore[assignment]
        if kinds:
            mark_param_kinds(tree, kinds)
        self._rewrite(tree)
        names: list[str | None] = []
        for i, ph in enumerate(list(tree.find_all(exp.Placeholder))):
            names.append(ph.name if ph.name and ph.name != "?" else None)
            ph.replace(exp.column(_MARK.format(i)))
        text = tree.sql(dialect=self.dialect)
        if self.dialect == "postgres":
            text = text.replace("%", "%%")
        for i, name in enumerate(names):
            text = text.replace(_MARK.format(i), self._param(name), 1)
        return text, names

    def _param(self, name: str | None) -> str:
        if self.dialect == "postgres":
            return f"%({name})s" if name else "%s"
        if self.dialect == "spark":
            return f":{name}" if name else "?"
        return f"${name}" if name else "?"

    def _rewrite(self, tree: exp.Expression) -> None:
        if self.dialect == "postgres":
            if self.spelling is not None:
                self._catalog_case(tree)
            _rowid_as_ctid(tree, self.column_set)
            for table in tree.find_all(exp.Table):
                if table.db.lower() == "temp" and not table.catalog:
                    table.set("db", exp.to_identifier("pg_temp"))
        for fn in list(tree.find_all(exp.Anonymous, exp.JSONArray)):
            if isinstance(fn, exp.Anonymous) and fn.name.lower() != "json_array":
                continue
            args = [a.copy() for a in fn.expressions]
            if self.dialect == "spark":
                fn.replace(_spark_json_array(args))
                continue
            name = "json_build_array" if self.dialect == "postgres" else "json_array"
            text_type = "TEXT" if self.dialect == "postgres" else "VARCHAR"
            fn.replace(exp.cast(exp.Anonymous(this=name, expressions=args), text_type))
        if self.types is not None and self.read == "sqlite":
            typing = Types(lambda t: self.schema(t.name))
            quoted_strings(tree, typing)
            if self.dialect == "spark":
                spark_casts(tree, typing)
                predicates_as_integers(tree, typing)
            Affinity(typing, self.dialect).apply(tree)
            if self.dialect == "spark":
                spark_functions(tree, typing)
        if self.dialect in ("duckdb", "postgres", "spark") and self.read == "sqlite":
            like_case(tree, self.dialect)
        if self.dialect == "spark":
            # after the typing, which reads the engine's temp tables as SQLite's untyped ones
            _lookups_as_maps(tree)
            for table in tree.find_all(exp.Table):
                if table.db.lower() == "temp" and not table.catalog:
                    table.set("db", None)
        _text_arguments(tree)
        for select in list(tree.find_all(exp.Select)):
            _bare_columns(select)
        if self.null_columns:
            _untyped_lookups(tree, self.null_columns)
        if tree.find(exp.Glob) is not None:
            _globs_as_regex(tree, self.dialect)
        if self.dialect == "postgres":
            _alias_derived_tables(tree)
        if self.dialect in ("postgres", "spark"):
            for select in list(tree.find_all(exp.Select)):
                distinct_order(select)
        if self.dialect in ("postgres", "spark") and (self.columns is not None
                                                      or self.types is not None):
            for select in list(tree.find_all(exp.Select)):
                _inline_alias_refs(select, self.column_set)
        if tree.find(exp.Match) is not None or _mentions_fts(tree):
            for select in list(tree.find_all(exp.Select)):
                self._rewrite_fts(select)

    def _rewrite_fts(self, select: exp.Select) -> None:
        """MATCH / rank / bm25 of one SELECT scope."""
        own = [m for m in select.find_all(exp.Match)
               if m.find_ancestor(exp.Select) is select]
        if not own:
            return
        sources = _sources(select)
        ranked: dict[str, tuple[str, str, exp.Expression]] = {}
        for m in own:
            ref = m.this
            key = (ref.name if isinstance(ref, exp.Column) else ref.sql()).lower()
            table = sources.get(key)
            if table is None:
                raise ExecutionError(f"MATCH needs a table of this query on its left: "
                                     f"{m.sql('sqlite')}",
                                     hint="write <table> MATCH 'words' with a table of FROM")
            why = self.full_text.unavailable(table) if self.full_text else (
                f"full-text search (MATCH) is not available on {self.dialect}")
            if why is not None:
                raise ExecutionError(why, hint="use LIKE / instr(), or the SQLite backend "
                                     "(FTS5) for documents")
            assert self.full_text is not None
            alias = key
            m.replace(self.full_text.match(table, alias, m.expression.copy()))
            ranked[key] = (table, alias, m.expression)
        first = next(iter(ranked.values()))
        for col in list(select.find_all(exp.Column)):
            if col.name.lower() != "rank" or col.find_ancestor(exp.Select) is not select:
                continue
            # FTS5's rank: bare, or qualified with the matched table (``documents.rank``)
            which = first if not col.table else ranked.get(col.table.lower())
            if which is not None:
                col.replace(exp.paren(self.full_text.score(*which)))  # type: ignore[union-attr]
        for fn in list(select.find_all(exp.Anonymous)):
            if fn.name.lower() == "bm25" and fn.expressions:
                key = fn.expressions[0].name.lower()
                if key in ranked:
                    fn.replace(exp.paren(self.full_text.score(*ranked[key])))  # type: ignore[union-attr]


def respell_scope(scope: Any, sources: dict[str, dict[str, str] | None],
                  spelled: dict[int, str], seen: set[int]) -> None:
    """Respell the columns ``scope`` owns (see ``Transpiler._catalog_case``): ``sources``
    maps each source name (lower case) to its columns' spellings, None when unknown."""
    select = scope.expression
    aliases = ({e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
               if isinstance(select, exp.Select) else set())
    for col in scope.columns:
        if id(col) not in seen and isinstance(col.this, exp.Identifier):
            _respell_column(col, scope, sources, spelled, seen, aliases)
    if not isinstance(select, exp.Select):
        return
    # names sqlglot's scope leaves out (HAVING / ORDER BY names a projection also has):
    # in ORDER BY the output, elsewhere the source column, as SQLite reads them
    outputs = output_names(select) or {}
    for clause in (select.args.get("having"), select.args.get("order")):
        for col in clause.find_all(exp.Column) if clause is not None else ():
            ident = col.this
            if (id(col) in seen or col.table or not isinstance(ident, exp.Identifier)
                    or col.find_ancestor(exp.Select) is not select):
                continue
            if isinstance(clause, exp.Order) and ident.name.lower() in outputs:
                seen.add(id(col))
                _set_spelling(col, outputs[ident.name.lower()])
            else:
                _respell_column(col, scope, sources, spelled, seen, aliases)
    for join in select.args.get("joins") or []:
        for i, ident in enumerate(join.args.get("using") or []):
            if isinstance(ident, exp.Identifier):
                actual = _one_spelling(ident.name.lower(), sources)
                if actual is not None and needs_respelling(ident, actual):
                    join.args["using"][i] = exp.to_identifier(actual, quoted=True)


def _respell_column(col: exp.Column, scope: Any, sources: dict[str, dict[str, str] | None],
                    spelled: dict[int, str], seen: set[int], aliases: set[str]) -> None:
    """One column of ``scope``: qualified by a source of it, or bare (see respell_scope);
    ``aliases``: the scope's SELECT aliases, lower case."""
    select = scope.expression
    name = col.this.name.lower()
    qualifier = col.args.get("table")
    if isinstance(qualifier, exp.Identifier):
        if col.args.get("db") or qualifier.name.lower() not in sources:
            return  # an outer scope's table: resolved there
        seen.add(id(col))
        table_actual = next((a for a in spelled.values() if a.lower() == qualifier.name.lower()),
                            None)
        if (table_actual is not None and needs_respelling(qualifier, table_actual)
                and qualifier.name.lower() not in _aliases_of(scope)):
            col.set("table", exp.to_identifier(table_actual, quoted=True))
        known = sources[qualifier.name.lower()]
        actual = known.get(name) if known is not None else None
    else:
        order = col.find_ancestor(exp.Order)
        if order is not None and order.parent is select and name in aliases:
            seen.add(id(col))
            return  # ORDER BY an alias of this SELECT
        if any(m is None for m in sources.values()):
            seen.add(id(col))
            return  # a source whose columns are unknown may hold the name
        if not any(m is not None and name in m for m in sources.values()):
            return  # not this scope's: an outer query's column
        seen.add(id(col))
        actual = _one_spelling(name, sources)
    if actual is not None:
        _set_spelling(col, actual)


def _one_spelling(name: str, sources: dict[str, dict[str, str] | None]) -> str | None:
    """The spelling of a bare column ``name`` when the known sources that have it agree on
    one (two sources with it: a USING column, or an ambiguity the database reports)."""
    hits = {m[name] for m in sources.values() if m is not None and name in m}
    return hits.pop() if len(hits) == 1 else None


def _set_spelling(col: exp.Column, actual: str) -> None:
    if needs_respelling(col.this, actual):
        col.set("this", exp.to_identifier(actual, quoted=True))


def _aliases_of(scope: Any) -> set[str]:
    """Lower-case aliases given to the tables of ``scope``."""
    return {t.alias.lower() for t in scope.tables if t.alias}


def output_names(select: Any, sources: dict[str, dict[str, str] | None] | None = None
                 ) -> dict[str, str] | None:
    """A SELECT's named output columns as PostgreSQL names them, keyed by lower case; a
    star brings its sources' columns (``sources`` as in respell_scope). None when a star
    over an unknown source leaves them unknown."""
    if not isinstance(select, exp.Select):
        return None
    out: dict[str, str] = {}
    for e in select.expressions:
        star_of = ("" if isinstance(e, exp.Star) else e.table.lower()
                   if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) else None)
        if star_of is not None:
            maps = [m for k, m in (sources or {}).items() if not star_of or k == star_of]
            if not maps or any(m is None for m in maps):
                return None
            for m in maps:
                out.update(m or {})
            continue
        ident = e.args.get("alias") if isinstance(e, exp.Alias) else (
            e.this if isinstance(e, exp.Column) else None)
        if not isinstance(ident, exp.Identifier):
            continue  # unnamed (PostgreSQL calls it ?column? / count): not referable
        out[ident.name.lower()] = ident.name if ident.quoted else ident.name.lower()
    return out


def needs_respelling(ident: exp.Identifier, actual: str) -> bool:
    """Would PostgreSQL miss ``actual`` when given ``ident`` as written? (A quoted name must
    match exactly; an unquoted one is folded to lower case.)"""
    written = ident.name if ident.quoted else ident.name.lower()
    return written != actual


#: string functions whose first argument SQLite converts to text (numbers included)
_TEXT_FUNCS = (exp.Upper, exp.Lower, exp.Trim, exp.Substring, exp.Length, exp.StrPosition,
               exp.Like, exp.ILike)


def _text_arguments(tree: exp.Expression) -> None:
    """``upper(1)``, ``length(12)``, ``trim(id)``: SQLite reads a number as its text.

    Why a cast: typed backends have no ``upper(BIGINT)``; the text of a
    number is what SQLite would have used, so the answer stays the same.
    """
    for fn in reversed(list(tree.find_all(*_TEXT_FUNCS, bfs=False))):  # inner calls first
        arg = fn.this
        if arg is None or (isinstance(arg, exp.Literal) and arg.is_string):
            continue
        if isinstance(arg, exp.Cast) and arg.to.is_type(*exp.DataType.TEXT_TYPES):
            continue
        arg.replace(exp.cast(arg.copy(), "TEXT"))


def _spark_json_array(args: list[exp.Expression]) -> exp.Expression:
    """SQLite's ``json_array(a, b)`` on Spark: ``'[' || <a as JSON> || ',' || .. || ']'``.

    Why not ``to_json(array(a, b))``: an array has one element type, so Spark
    would turn ``(1, 'x')`` into ``["1","x"]``; each value is written on its own
    (``to_json(array(a))`` without its brackets: ``1``, ``"x"``, ``null``), so
    numbers stay numbers, as in SQLite's text.
    """
    parts = [exp.Anonymous(this="btrim", expressions=[
        exp.Anonymous(this="to_json", expressions=[exp.Array(expressions=[a])]),
        exp.Literal.string("[]")]) for a in args]
    joined = exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(","), *parts])
    return exp.Anonymous(this="concat", expressions=[exp.Literal.string("["), joined,
                                                     exp.Literal.string("]")])


def _globs_as_regex(tree: exp.Expression, dialect: str) -> None:
    """``x GLOB 'p'`` as ``CAST(x AS TEXT) ~ '<p as an anchored regex>'``.

    Why a regex and not LIKE: GLOB is case-sensitive and has character classes
    (``[A-C]``, ``[^0-9]``), which LIKE has not; both backends' regular
    expressions have both. The cast: SQLite matches a number by its text, as
    for LIKE.
    """
    backend = {"postgres": "PostgreSQL", "duckdb": "DuckDB", "spark": "Spark"}.get(dialect,
                                                                                 dialect)
    for glob in list(tree.find_all(exp.Glob)):
        pattern = glob.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise ExecutionError(
                f"GLOB with a pattern that is not a literal cannot run on {backend}: "
                f"{glob.sql('sqlite')}",
                hint="write the pattern as a string literal (it is translated to a regular "
                f"expression), or write {backend}'s own SQL with dialect='{dialect}'")
        subject = glob.this.copy()
        if not (isinstance(subject, exp.Cast) and subject.to.is_type(*exp.DataType.TEXT_TYPES)):
            subject = exp.cast(subject, "TEXT")
        glob.replace(exp.RegexpLike(this=subject,
                                    expression=exp.Literal.string(glob_regex(pattern.this))))


def glob_regex(pattern: str) -> str:
    """SQLite's GLOB pattern as an anchored regular expression (PostgreSQL's and RE2's).

    ``*`` any text (line breaks too: ``(?s)``), ``?`` one character, ``[..]`` a
    class (``[^..]`` negated, a ``]`` first in the class is literal); everything
    else stands for itself.
    """
    out, i, n = ["(?s)^"], 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and (close := _class_end(pattern, i)) > 0:
            out.append(_glob_class(pattern[i + 1:close]))
            i = close
        else:
            out.append(ch if ch.isalnum() else "\\" + ch)
        i += 1
    return "".join(out) + "$"


def _class_end(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start`` (-1: none, a literal ``[``)."""
    j = start + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1  # a ']' first in the class is one of its characters
    close = pattern.find("]", j)
    return close


def _glob_class(body: str) -> str:
    negated = body.startswith("^")
    chars = body[1:] if negated else body
    escaped = "".join("\\" + c if c in "\\[]" else c for c in chars)
    return "[" + ("^" if negated else "") + escaped + "]"


def _untyped_lookups(tree: exp.Expression, nulls: set[tuple[str, str]]) -> None:
    """Lookups into an engine column of NULLs only, written without its (unknown) type.

    Why: SQLite's NULL compares with anything; a typed backend must give the
    column a type, which then clashes with the other side (``text = integer``).
    The results do not depend on the type: ``(SELECT v ..)`` is NULL, and
    ``x IN (SELECT v FROM t)`` is FALSE when ``t`` is empty, else NULL.
    """
    for sub in list(tree.find_all(exp.Subquery)):
        inner = sub.this
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            continue
        src = inner.args.get("from_")
        col = inner.expressions[0]
        if (src is None or not isinstance(src.this, exp.Table) or inner.args.get("joins")
                or not isinstance(col, exp.Column)
                or (src.this.name, col.name) not in nulls):
            continue
        parent = sub.parent
        if isinstance(parent, exp.In) and parent.args.get("query") is sub:
            probe = exp.select(exp.Literal.number(1)).from_(src.this.copy())
            parent.replace(exp.paren(exp.Case(
                ifs=[exp.If(this=exp.Exists(this=probe), true=exp.null())],
                default=exp.false())))
        else:
            sub.replace(exp.null())


def _lookups_as_maps(tree: exp.Expression) -> None:
    """The engine's lookups ``(SELECT v FROM temp.t WHERE k = <x>)`` as map reads on Spark:
    ``try_element_at((SELECT map_from_entries(collect_list(struct(k, v))) FROM t), <x>)``.

    Why: Spark allows a correlated scalar subquery only in a filter, a projection
    or an aggregate, and there only aggregated (not in ORDER BY, JOIN .. ON, GROUP
    BY); the map subquery is not correlated, so it may stand anywhere, and Spark
    computes it once. The same value: ``k`` is the table's key (one row per
    value); a value without a row gives NULL, as the subquery does.
    """
    # inner lookups first: an outer one copies its key expression
    for sub in reversed(list(tree.find_all(exp.Subquery, bfs=False))):
        inner = sub.this
        if not isinstance(inner, exp.Select) or len(inner.expressions) != 1:
            continue
        src, where = inner.args.get("from_"), inner.args.get("where")
        col = inner.expressions[0]
        if (src is None or where is None or not isinstance(src.this, exp.Table)
                or src.this.db.lower() != "temp" or inner.args.get("joins")
                or not isinstance(col, exp.Column) or col.name != "v" or col.table):
            continue
        cond = where.this
        if not (isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column)
                and cond.this.name == "k" and not cond.this.table):
            continue
        entries = exp.Anonymous(this="map_from_entries", expressions=[exp.Anonymous(
            this="collect_list", expressions=[exp.Anonymous(
                this="struct", expressions=[exp.column("k"), exp.column("v")])])])
        mapping = exp.Subquery(this=exp.select(entries).from_(src.this.copy()))
        sub.replace(exp.Anonymous(this="try_element_at",
                                  expressions=[mapping, cond.expression.copy()]))


def _bare_columns(select: exp.Select) -> None:
    """SQLite's bare columns in a grouped SELECT, as ``MIN(..)`` for typed backends.

    Why: SQLite lets ``SELECT a AS n, COUNT(*) .. GROUP BY f(a)`` name ``a``
    outside the GROUP BY (any row of the group supplies it); the engine's late
    maps rely on it (every ``a`` of a group maps to the same value). DuckDB
    and PostgreSQL refuse it; ``MIN`` picks one of the same rows. Not done
    when the SELECT uses MIN / MAX (there SQLite takes the bare value from the
    min / max row, which MIN would not reproduce).
    """
    group = select.args.get("group")
    if group is None or not group.expressions:
        return
    if any(isinstance(n, (exp.Min, exp.Max)) and n.find_ancestor(exp.Select) is select
           for p in select.expressions for n in p.find_all(exp.Min, exp.Max)):
        return
    keys = {g.sql() for g in group.expressions}
    names = {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)}
    aliases = {p.alias.lower() for p in select.expressions if isinstance(p, exp.Alias)}
    # GROUP BY 2 groups by the second output column
    ordinals = {int(g.name) - 1 for g in group.expressions
                if isinstance(g, exp.Literal) and not g.is_string and g.name.isdigit()}
    for i, proj in enumerate(select.expressions):
        if i in ordinals:
            continue
        value = proj.this if isinstance(proj, exp.Alias) else proj
        if value.sql() in keys or (isinstance(proj, exp.Alias) and
                                   proj.alias.lower() in {k.lower() for k in keys}):
            continue
        bare = [c for c in value.find_all(exp.Column)
                if not c.find_ancestor(exp.AggFunc, exp.Subquery, exp.Window)
                and c.sql() not in keys and c.name.lower() not in names
                and not (not c.table and c.name.lower() in aliases - {proj.alias_or_name.lower()})]
        if not bare or isinstance(value, exp.Star):
            continue
        wrapped = exp.Min(this=value.copy())
        if isinstance(proj, exp.Alias):
            proj.set("this", wrapped)
        else:
            select.expressions[i].replace(exp.alias_(wrapped, proj.alias_or_name, quoted=True)
                                          if isinstance(value, exp.Column) else wrapped)


def _alias_derived_tables(tree: exp.Expression) -> None:
    """``FROM (SELECT ..)`` needs an alias on PostgreSQL 15; SQLite's does not."""
    for i, sub in enumerate(list(tree.find_all(exp.Subquery))):
        if not sub.alias and isinstance(sub.parent, (exp.From, exp.Join)):
            sub.set("alias", exp.TableAlias(this=exp.to_identifier(f"__bsql_sq{i}")))


def _inline_alias_refs(select: exp.Select,
                       columns: Callable[[str], set[str] | None]) -> None:
    """SQLite lets WHERE / GROUP BY / HAVING name a SELECT alias; PostgreSQL does not.

    A bare name that is an alias of this SELECT and no column of its tables
    (SQLite prefers a real column) is replaced by the aliased expression.
    """
    aliases = {a.alias.lower(): a.this for a in select.expressions
               if isinstance(a, exp.Alias) and a.alias}
    if not aliases:
        return
    known: set[str] = set()
    for table in select.find_all(exp.Table):
        if table.find_ancestor(exp.Select) is not select:
            continue
        cols = columns(table.name)
        if cols is None:
            return  # a CTE or an unknown table: leave the text as written
        known |= cols
    for key in ("where", "group", "having"):
        part = select.args.get(key)
        if part is None:
            continue
        for col in list(part.find_all(exp.Column)):
            name = col.name.lower()
            if (not col.table and name in aliases and name not in known
                    and col.find_ancestor(exp.Select) is select):
                col.replace(exp.paren(aliases[name].copy()))


def _rowid_as_ctid(tree: exp.Expression, column_set: Callable[[str], set[str] | None]) -> None:
    """``t.rowid`` as ``t.ctid`` where ``t`` is a table known to have no column of that name.

    A bare ``rowid`` is resolved when its SELECT reads one table. Derived
    tables, unknown tables and tables with a real ``rowid`` column are left alone.
    """
    rowids = [c for c in tree.find_all(exp.Column) if c.name.lower() in _ROWID_NAMES]
    for column in rowids:
        select = column.find_ancestor(exp.Select)
        if select is None:
            continue
        sources = _sources(select)
        if column.table:
            table = sources.get(column.table.lower())
        else:
            tables = set(sources.values())
            table = tables.pop() if len(tables) == 1 else None
        columns = column_set(table) if table else None
        if columns is not None and column.name.lower() not in columns:
            column.set("this", exp.to_identifier("ctid"))


def _mentions_fts(tree: exp.Expression) -> bool:
    return any(f.name.lower() == "bm25" for f in tree.find_all(exp.Anonymous))


def _sources(select: exp.Select) -> dict[str, str]:
    """Alias or name (lower case) -> table name of the tables this SELECT reads."""
    out: dict[str, str] = {}
    from_ = select.args.get("from_")
    nodes = [from_.this] if from_ is not None else []
    nodes += [j.this for j in select.args.get("joins") or []]
    for node in nodes:
        if isinstance(node, exp.Table):
            out[node.name.lower()] = node.name
            if node.alias:
                out[node.alias.lower()] = node.name
    return out


def bind(names: list[str | None], params: Any) -> Any:
    """The driver's parameters for a translated statement (named: a dict; ``?``: a list)."""
    if not names:
        return None
    if all(n is None for n in names):
        if isinstance(params, dict):
            raise ExecutionError("the statement uses '?' but parameters were given by name",
                                 hint="pass params as a list for '?'")
        return list(params or ())
    if not isinstance(params, dict):
        values = list(params or ())
        if any(n is None for n in names):
            raise ExecutionError("a statement cannot mix '?' and named parameters",
                                 hint="use one style")
        return dict(zip([n for n in names if n], values, strict=False))
    missing = sorted({n for n in names if n and n not in params})
    if missing:
        raise ExecutionError(f"no value bound for parameter :{missing[0]}",
                             hint="pass params={...} with a value for every :name")
    return {n: params[n] for n in dict.fromkeys(n for n in names if n)}


def words_only(expr: exp.Expression) -> exp.Expression:
    """An FTS5 query expression with its operators and syntax turned into spaces."""
    return exp.Anonymous(this="regexp_replace", expressions=[
        expr, exp.Literal.string(FTS5_SYNTAX), exp.Literal.string(" "),
        exp.Literal.string("g")])
