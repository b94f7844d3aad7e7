"""Repair of misspelt table and column names in a generated program, without the model.

A small model often writes a name that is close to a real one but not it
(``pet_type`` for ``PetType``, ``petage`` for ``pet_age``, ``CAR_DATA`` for
``CARS_DATA``), or qualifies a real column with the alias of the wrong table
(``T2.name`` where ``name`` lives in ``T1``'s table). Asked again with the
SQLite error, it repeats the same name on every retry (measured on Spider with
Qwen2.5-Coder-1.5B: 18 of 85 questions ended without a valid program, most of
them this way). These names can be resolved against the real schema: a name
the database lacks is replaced only when exactly one real name in the query's
own tables is clearly nearest, so a repair never guesses between candidates.
What cannot be repaired this way (a column of a table the query does not
read) is described for the retry prompt by ``schema_feedback``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz
from sqlglot import exp

from blendsql.db.backend import Backend
from blendsql.errors import BlendSQLError
from blendsql.ingredients.base import IngredientRegistry
from blendsql.nl.serialize import TableInfo
from blendsql.nl.source import as_backend

MIN_SCORE = 85.0
_CAMEL = re.compile(r"[a-z]+|[A-Z][a-z]*|\d+")


@dataclass(frozen=True)
class Source:
    """A table read by one SELECT: the name used to qualify its columns, and the table."""

    ref: str
    table: TableInfo


def norm(name: str) -> str:
    """Lower case without separators: ``Pet_Type`` and ``PetType`` are the same name."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def words(name: str) -> set[str]:
    """The words of an identifier (snake_case and CamelCase split), lower-cased."""
    out: set[str] = set()
    for part in re.split(r"[^A-Za-z0-9]+", name):
        out.update(w.lower() for w in _CAMEL.findall(part))
    return out


def _is_abbreviation(short: str, long: str) -> bool:
    """True when ``short`` drops letters of ``long`` but keeps its first letter and
    last two (``contid`` for ``continentid``)."""
    if len(short) < 3 or len(short) >= len(long) or short[0] != long[0] or short[-2:] != long[-2:]:
        return False
    it = iter(long)
    return all(ch in it for ch in short)


def similarity(written: str, real: str) -> float:
    """How surely ``written`` means ``real`` (0-100).

    Equal apart from case and separators: 100. One is an abbreviation of the
    other: 92. The written name is one whole word of the real one (``age`` for
    ``pet_age``): 90. Otherwise the edit-distance ratio of the normalised names.
    """
    a, b = norm(written), norm(real)
    if not a or not b:
        return 0.0
    if a == b:
        return 100.0
    if _is_abbreviation(a, b) or _is_abbreviation(b, a):
        return 92.0
    if len(a) >= 3 and a in words(real):
        return 90.0
    return float(fuzz.ratio(a, b))


def best_match(written: str, candidates: Sequence[str]) -> str | None:
    """The one candidate clearly nearest to ``written`` (score >= MIN_SCORE, no tie), or None."""
    scored = sorted(((similarity(written, c), c) for c in candidates), reverse=True)
    if not scored or scored[0][0] < MIN_SCORE:
        return None
    if len(scored) > 1 and scored[1][0] >= scored[0][0] and norm(scored[1][1]) != norm(scored[0][1]):
        return None
    return scored[0][1]


def _has_column(t: TableInfo, name: str) -> bool:
    return any(c.lower() == name.lower() for c in t.columns)


def _sources(select: exp.Select, tables: dict[str, TableInfo]) -> list[Source]:
    """The tables this SELECT reads directly (FROM and JOINs), with their alias or name."""
    out = []
    for t in select.find_all(exp.Table):
        if t.parent_select is not select:
            continue
        info = tables.get(t.name.lower())
        if info is not None:
            out.append(Source((t.alias or t.name), info))
    return out


def _scopes(select: exp.Select, tables: dict[str, TableInfo]) -> list[Source]:
    """Sources of ``select`` first, then of the SELECTs around it (correlated references)."""
    out: list[Source] = []
    node: Any = select
    while node is not None:
        if isinstance(node, exp.Select):
            out += _sources(node, tables)
        node = node.parent
    return out


def _output_aliases(select: exp.Select) -> set[str]:
    return {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias) and e.alias}


def _repair_tables(tree: exp.Expression, tables: dict[str, TableInfo]) -> bool:
    """Rename unknown tables to the one clearly nearest real table. A renamed table
    without an alias keeps its written name as alias, so qualified columns still resolve."""
    ctes = {c.alias.lower() for c in tree.find_all(exp.CTE)}
    changed = False
    for t in list(tree.find_all(exp.Table)):
        name = t.name.lower()
        if not name or name in tables or name in ctes:
            continue
        real = best_match(t.name, [i.name for i in tables.values()])
        if real is None:
            continue
        if not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
        t.set("this", exp.to_identifier(real))
        changed = True
    return changed


def _repair_column(col: exp.Column, select: exp.Select, tables: dict[str, TableInfo]) -> bool:
    """Fix one column reference in place; True when it changed. A fix that would
    compare the column with itself (``T1.id = T1.id``) or make a join condition
    compare two columns of one table (``JOIN t2 ON T1.Id = T1.Maker``: the model
    joined the wrong table) is undone: the model must rewrite that join."""
    before = col.copy()
    if not _repair_column_once(col, select, tables):
        return False
    if _degenerate(col):
        col.replace(before)
        return False
    return True


def _degenerate(col: exp.Column) -> bool:
    """True when ``col`` is compared with itself, or with a column of the same table
    inside a JOIN's ON condition (no longer a join of two tables)."""
    cmp = col.parent
    if not isinstance(cmp, exp.Binary):
        return False
    if cmp.this == cmp.expression:
        return True
    a, b = cmp.this, cmp.expression
    same_table = (isinstance(a, exp.Column) and isinstance(b, exp.Column) and bool(a.table)
                  and a.table.lower() == b.table.lower())
    join = cmp.find_ancestor(exp.Join, exp.Select)
    return same_table and isinstance(join, exp.Join)


def _repair_column_once(col: exp.Column, select: exp.Select, tables: dict[str, TableInfo]) -> bool:
    sources = _scopes(select, tables)
    if not sources:
        return False
    qualifier = col.table
    if qualifier:
        owner = next((s for s in sources if s.ref.lower() == qualifier.lower()), None)
        if owner is None or _has_column(owner.table, col.name):
            return False
        local = _sources(select, tables) or sources
        holders = [s for s in local if _has_column(s.table, col.name)]
        if len(holders) == 1:  # the right column under the wrong alias
            col.set("table", exp.to_identifier(holders[0].ref))
            return True
        real = best_match(col.name, list(owner.table.columns))
        if real is not None:
            col.set("this", exp.to_identifier(real))
            return True
        return _move_to_nearest(col, local)
    if col.this.quoted:  # "text" in double quotes is SQLite's string fallback: leave it
        return False
    if col.name.lower() in _output_aliases(select) or any(_has_column(s.table, col.name) for s in sources):
        return False
    return _move_to_nearest(col, _sources(select, tables) or sources)


def _move_to_nearest(col: exp.Column, sources: Sequence[Source]) -> bool:
    """Rename ``col`` to the clearly nearest column of ``sources`` (qualified when the
    new name would be ambiguous)."""
    candidates = [(s, c) for s in sources for c in s.table.columns]
    real = best_match(col.name, [c for _, c in candidates])
    if real is None:
        return False
    owners = [s for s, c in candidates if c.lower() == real.lower()]
    col.set("this", exp.to_identifier(real))
    if len(owners) == 1 and (col.table or len({s.ref for s in sources}) > 1):
        col.set("table", exp.to_identifier(owners[0].ref))
    elif len(owners) > 1 and not col.table:
        return False
    return True


def repair_names(program: str, tables: Sequence[TableInfo], registry: IngredientRegistry) -> str | None:
    """``program`` with unknown table / column names replaced by the real names they
    clearly mean, or None when nothing could be repaired (or it does not parse)."""
    from blendsql.grammar import parse
    from blendsql.grammar.nodes import to_blendsql

    try:
        tree = parse(program, registry)
    except BlendSQLError:
        return None
    by_name = {t.name.lower(): t for t in tables}
    changed = _repair_tables(tree, by_name)
    for col in list(tree.find_all(exp.Column)):
        select = col.parent_select
        if isinstance(select, exp.Select) and col.name and _repair_column(col, select, by_name):
            changed = True
    return to_blendsql(tree) if changed else None


def schema_feedback(error: str, program: str, tables: Sequence[TableInfo]) -> str:
    """The retry message for a wrong name: the SQLite error, then where the name
    really is (another table: join it) and the real columns of the tables the program reads."""
    m = re.search(r"no such (column|table): ([\w.]+)", error)
    if not m:
        return error
    kind, name = m.group(1), m.group(2).split(".")[-1]
    read = {t.lower() for t in re.findall(r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)", program, re.I)}
    lines = [error]
    if kind == "column":
        homes = [t.name for t in tables if _has_column(t, name)]
        if homes:
            lines.append(f"{name} is a column of {', '.join(homes)}"
                         + ("" if read & {h.lower() for h in homes} else ": join that table")
                         + "; qualify it with that table's alias.")
    for t in tables:
        if t.name.lower() in read:
            lines.append(f"{t.name} has the columns: {', '.join(t.columns)}.")
    if kind == "table":
        lines.append("The tables are: " + ", ".join(t.name for t in tables) + ".")
    return "\n-- ".join(lines)


# ---------------------------------------------------------------- values in conditions


def _column_home(col: exp.Column, tables: dict[str, TableInfo]) -> tuple[str, str] | None:
    """(table, column) a column reference reads, resolved through the aliases in scope."""
    select = col.parent_select
    if not isinstance(select, exp.Select):
        return None
    sources = _scopes(select, tables)
    if col.table:
        holders = [s for s in sources if s.ref.lower() == col.table.lower()]
    else:
        holders = [s for s in sources if _has_column(s.table, col.name)]
    if len(holders) != 1 or not _has_column(holders[0].table, col.name):
        return None
    real = next(c for c in holders[0].table.columns if c.lower() == col.name.lower())
    return holders[0].table.name, real


def _literal_conditions(tree: exp.Expression) -> list[tuple[exp.Column, str]]:
    """``column = 'text'`` and ``column IN ('text', ...)`` conditions of a program."""
    out: list[tuple[exp.Column, str]] = []
    for eq in tree.find_all(exp.EQ):
        for a, b in ((eq.this, eq.expression), (eq.expression, eq.this)):
            if isinstance(a, exp.Column) and isinstance(b, exp.Literal) and b.is_string:
                out.append((a, b.this))
    for cond in tree.find_all(exp.In):
        if isinstance(cond.this, exp.Column):
            out += [(cond.this, v.this) for v in cond.expressions
                    if isinstance(v, exp.Literal) and v.is_string]
    return out


class _OutOfTime(Exception):
    """The value search used up its time (no finding)."""


def _holds(db: Backend, table: str, column: str, value: str, nocase: bool,
           deadline: float = float("inf")) -> list[str]:
    """Up to two stored values of ``table.column`` equal to ``value`` (ignoring case if asked)."""
    if time.monotonic() > deadline:
        raise _OutOfTime
    return [str(v) for v in db.distinct_values(table, column, 2, equal_to=value, nocase=nocase)]


def _read_program(program: str, db: Any, registry: IngredientRegistry,
                  tables: Sequence[TableInfo],
                  ) -> tuple[exp.Expression, Backend, dict[str, TableInfo]] | None:
    """The program's tree, the backend and the tables by lower-cased name (documents
    tables left out); None when the program does not parse."""
    from blendsql.grammar import parse

    try:
        tree = parse(program, registry)
    except BlendSQLError:
        return None
    return tree, as_backend(db), {t.name.lower(): t for t in tables if not t.is_documents}


def value_mismatch(program: str, db: Any, registry: IngredientRegistry,
                   tables: Sequence[TableInfo], seconds: float = 2.0) -> str | None:
    """A text a condition compares a column with that the column never holds, but
    another column does (or the same column in another case): the sign of a
    condition on the wrong column (``flights.Airline = 'United Airlines'`` where
    flights stores airline ids and airlines holds the names). None when every
    compared text occurs, or occurs nowhere (no evidence of a wrong column).

    Reads through the backend, each statement and the search as a whole within
    ``seconds``; running out of time (or any database error) means no finding.
    """
    read = _read_program(program, db, registry, tables)
    if read is None:
        return None
    tree, backend, by_name = read
    try:
        with backend.session(timeout=seconds):
            return _mismatch(backend, tree, by_name, time.monotonic() + seconds)
    except (BlendSQLError, _OutOfTime):
        return None


def _mismatch(db: Backend, tree: exp.Expression, by_name: dict[str, TableInfo],
              deadline: float) -> str | None:
    """:func:`value_mismatch`'s search, inside the time-limited use of the session."""
    for col, value in _literal_conditions(tree):
        home = _column_home(col, by_name)
        if home is None or not value or _holds(db, *home, value, False, deadline):
            continue
        same = _holds(db, *home, value, True, deadline)
        if same:
            return (f"'{value}' is not a value of {home[0]}.{home[1]}; it is written "
                    f"'{same[0]}' there.")
        others = [f"{t.name}.{c}" for t in by_name.values() for c in t.columns
                  if (t.name, c) != home and _holds(db, t.name, c, value, True, deadline)]
        if others:
            return (f"'{value}' is not a value of {home[0]}.{home[1]}; it is a value of "
                    f"{', '.join(others[:3])}: compare that column (join its table).")
    return None


def rebind_values(program: str, db: Any, registry: IngredientRegistry,
                  tables: Sequence[TableInfo], seconds: float = 2.0) -> str | None:
    """``program`` with each condition ``T.col = 'text'`` whose column never holds the text
    rebound to the column that does, through the join the keys give: ``city.Name = 'Japan'``
    (no city is named Japan; ``country.Name`` holds it; ``city.CountryCode`` references
    ``country.Code``) becomes ``city.CountryCode IN (SELECT Code FROM country WHERE Name =
    'Japan')``; a value of a referencing table (``country.Name = 'English'``, held by
    ``countrylanguage.Language``) becomes ``country.Code IN (SELECT CountryCode FROM
    countrylanguage WHERE Language = 'English')``. None: nothing to rebind (every text
    is held, or no one-key path leads to a column that holds it).

    Why: a value of the question is evidence of the column it belongs to; a small model
    often compares it with the label column of the table it counts, and keeps doing so
    when told. The rewrite keeps the rest of the program as written.
    """
    from blendsql.grammar import parse
    from blendsql.grammar.nodes import to_blendsql
    from blendsql.nl.keys import foreign_keys

    read = _read_program(program, db, registry, tables)
    if read is None:
        return None
    tree, backend, by_name = read
    deadline = time.monotonic() + seconds
    changed = False
    try:
        with backend.session(timeout=seconds):
            links = {t.name: foreign_keys(backend, t) for t in by_name.values()}
            for eq in list(tree.find_all(exp.EQ)):
                col, lit = eq.this, eq.expression
                if not (isinstance(col, exp.Column) and isinstance(lit, exp.Literal) and lit.is_string):
                    continue
                home = _column_home(col, by_name)
                if home is None or not lit.this or _holds(backend, *home, lit.this, True, deadline):
                    continue
                sub = _rebound(backend, home, lit.this, links, by_name, deadline)
                if sub is None:
                    continue
                mine, query = sub
                target = exp.column(mine, table=col.table) if col.table else exp.column(mine)
                eq.replace(exp.In(this=target, query=exp.Subquery(this=parse(query, registry))))
                changed = True
    except (BlendSQLError, _OutOfTime):
        return None
    return to_blendsql(tree) if changed else None


def _rebound(db: Backend, home: tuple[str, str], value: str,
             links: dict[str, list[tuple[tuple[str, ...], str, tuple[str, ...]]]],
             by_name: dict[str, TableInfo], deadline: float) -> tuple[str, str] | None:
    """(column of ``home``'s table, subquery of the keys whose rows hold ``value``) over one
    single-column foreign key either way, the first table (in schema order) whose column
    holds the value exactly."""
    from blendsql.db.backend import quote

    table = home[0]
    paths: list[tuple[str, str, str]] = []  # (home column, other table, other key column)
    for cols, ref, ref_cols in links.get(table, []):
        if len(cols) == 1 and len(ref_cols) == 1:
            paths.append((cols[0], ref, ref_cols[0]))
    for other, fks in links.items():
        for cols, ref, ref_cols in fks:
            if ref.lower() == table.lower() and len(cols) == 1 and len(ref_cols) == 1 and other != table:
                paths.append((ref_cols[0], other, cols[0]))
    for mine, other, key in paths:
        t = by_name.get(other.lower())
        if t is None:
            continue
        for c in t.columns:
            held = _holds(db, t.name, c, value, False, deadline)
            if held:
                lit = "'" + value.replace("'", "''") + "'"
                return mine, f"SELECT {quote(key)} FROM {quote(t.name)} WHERE {quote(c)} = {lit}"
    return None
