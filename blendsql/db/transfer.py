"""Copy a SQLite database into DuckDB or PostgreSQL, so one query runs on all three.

Why: the same tables on every backend are what lets a user (and the test
suite) run one BlendSQL query unchanged on SQLite, DuckDB and PostgreSQL.
Each column gets the type its values need: SQLite's declared affinity when
every stored value fits it (SQLite lets a TEXT cell sit in an INT column),
otherwise TEXT. FTS5 tables become plain tables with a full-text index
(DuckDB's ``fts``; PostgreSQL's GIN over ``to_tsvector``). Declared primary and
foreign keys are carried where the data satisfies them (:func:`sqlite_keys`):
a model reading the copy's schema sees the same joins as on SQLite.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blendsql.db.backend import Keys, create_statement, require
from blendsql.db.sqlite_compat import real_text
from blendsql.db.temp_rows import quote

_PG = {"BIGINT": "BIGINT", "DOUBLE": "DOUBLE PRECISION", "TEXT": "TEXT", "BLOB": "BYTEA"}
_DUCK = {"BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "TEXT": "VARCHAR", "BLOB": "BLOB"}


def _affinity(declared: str) -> str:
    """SQLite's affinity of a declared type (https://www.sqlite.org/datatype3.html §3.1),
    as the copy's type: INTEGER -> BIGINT, TEXT, BLOB, REAL -> DOUBLE, NUMERIC; '' for
    no declared type (values kept as stored)."""
    d = declared.upper()
    if "INT" in d:
        return "BIGINT"
    if any(k in d for k in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in d:
        return "BLOB"
    if not d.strip():
        return ""
    if any(k in d for k in ("REAL", "FLOA", "DOUB")):
        return "DOUBLE"
    return "NUMERIC"


def _fits(value: Any, kind: str) -> bool:
    if value is None:
        return True
    if kind == "BIGINT":
        return isinstance(value, int) and -(2**63) <= value < 2**63
    if kind == "DOUBLE":
        return isinstance(value, (int, float))
    if kind == "BLOB":
        return isinstance(value, bytes)
    return isinstance(value, str)


def column_kind(declared: str, values: Sequence[Any]) -> str:
    """BIGINT / DOUBLE / TEXT / BLOB for a SQLite column's declared type and values.

    The declared affinity when every stored value fits it; a NUMERIC column
    (``DECIMAL``, ``NUMERIC``, ``DATE`` ..) holds integers and reals as SQLite
    stored them: BIGINT when all are integers, DOUBLE when all are numbers (or
    there are none), TEXT when some value stayed text. Otherwise the narrowest
    type holding every value, TEXT at worst (a TEXT column never gets numbers:
    ``'007'`` stays ``'007'``, and SQLite compares it as text). What a typed
    column cannot keep: SQLite's storage class per value (in a column of
    integers and reals, ``x / 2`` divides the integers as integers in SQLite,
    all as reals in the copy; a number among texts becomes its text).
    """
    kind = _affinity(declared)
    if kind == "NUMERIC":
        if all(v is None for v in values):
            return "DOUBLE"
        kind = ""
    if kind and all(_fits(v, kind) for v in values):
        return kind
    for guess in ("BIGINT", "DOUBLE", "BLOB"):
        if any(v is not None for v in values) and all(_fits(v, guess) for v in values):
            return guess
    return "TEXT"


def _convert(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "TEXT" and not isinstance(value, str):
        if isinstance(value, float):
            return real_text(value)
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    if kind == "DOUBLE":
        return float(value)
    return value


def read_sqlite(path: str | Path) -> list[tuple[str, list[str], list[str], list[tuple], bool]]:
    """(table, columns, kinds, rows, is_fts) for every table of a SQLite file."""
    con = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    try:
        out = []
        tables = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND "
                             "name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
        fts = {n for n, sql in tables if sql and "using fts5" in sql.lower()}
        shadow = {f"{n}_{s}" for n in fts for s in ("data", "idx", "content", "docsize",
                                                     "config")}
        for name, _ in tables:
            if name in shadow:
                continue
            # table_xinfo: generated columns too (hidden 2 / 3), their values copied as data;
            # a virtual table's hidden columns (1: FTS5's own name and rank) are not data
            info = [r for r in con.execute(f"PRAGMA table_xinfo({quote(name)})").fetchall()
                    if r[6] != 1]
            cols = [r[1] for r in info]
            rows = con.execute(f"SELECT {', '.join(quote(c) for c in cols)} "
                               f"FROM {quote(name)}").fetchall()
            kinds = [column_kind(str(r[2] or ""), [row[i] for row in rows])
                     for i, r in enumerate(info)]
            rows = [tuple(_convert(v, k) for v, k in zip(row, kinds, strict=True))
                    for row in rows]
            out.append((name, cols, kinds, rows, name in fts))
        return out
    finally:
        con.close()


def sqlite_keys(path: str | Path) -> dict[str, Keys]:
    """Each table's declared primary key and foreign keys in a SQLite file.

    A foreign key naming a table or column that does not exist is left out; one that
    names no columns of its table (``REFERENCES t``) points at that table's primary key.
    Names are spelled as the referenced table declares them.
    """
    con = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        info = {n: con.execute(f"PRAGMA table_info({quote(n)})").fetchall() for n in names}
        columns = {n: [r[1] for r in rows] for n, rows in info.items()}
        primary = {n: tuple(r[1] for r in sorted((r for r in rows if r[5]), key=lambda r: r[5]))
                   for n, rows in info.items()}
        by_lower = {n.lower(): n for n in names}
        out: dict[str, Keys] = {}
        for n in names:
            groups: dict[int, list[tuple[Any, ...]]] = {}
            for r in con.execute(f"PRAGMA foreign_key_list({quote(n)})"):
                groups.setdefault(r[0], []).append(r)
            foreign = []
            for rows in groups.values():
                rows.sort(key=lambda r: r[1])
                ref = by_lower.get(str(rows[0][2]).lower())
                if ref is None:
                    continue
                cols = [_spelled(str(r[3]), columns[n]) for r in rows]
                ref_cols = ([_spelled(str(r[4]), columns[ref]) for r in rows]
                            if all(r[4] is not None for r in rows) else list(primary[ref]))
                if None in cols or None in ref_cols or len(ref_cols) != len(cols):
                    continue
                foreign.append((tuple(cols), ref, tuple(ref_cols)))
            out[n] = Keys(primary[n], tuple(foreign))  # type: ignore[arg-type]
        return out
    finally:
        con.close()


def _spelled(name: str, columns: Sequence[str]) -> str | None:
    """``name`` as ``columns`` spell it (case-insensitive), None when it is not one."""
    return next((c for c in columns if c.lower() == name.lower()), None)


def _dependency_order(tables: list[str], keys: dict[str, Keys]) -> list[str]:
    """Tables with those their foreign keys reference first (cycles: as they come)."""
    done: list[str] = []
    todo = list(tables)
    while todo:
        ready = [t for t in todo if all(ref in done or ref == t or ref not in todo
                                        for _, ref, _ in keys.get(t, Keys()).foreign)]
        if not ready:
            ready = todo[:1]
        done += ready
        todo = [t for t in todo if t not in ready]
    return done


def sqlite_to_duckdb(sqlite_path: str | Path, duckdb_path: str | Path) -> Path:
    """Write every table of a SQLite file into a new DuckDB file; returns its path."""
    duckdb = require("duckdb", "duckdb")
    import pandas as pd

    from blendsql.db.duck import _PANDAS, fts_extension

    target = Path(duckdb_path)
    con = duckdb.connect(str(target))
    try:
        fts_path = fts_extension()
        tables = {t[0]: t for t in read_sqlite(sqlite_path)}
        keys = sqlite_keys(sqlite_path)
        made: dict[str, tuple[str, ...]] = {}  # table -> its primary key in the copy
        for name in _dependency_order(list(tables), keys):
            _, cols, kinds, rows, is_fts = tables[name]
            types = [_DUCK[k] for k in kinds]
            columns = list(zip(cols, types, strict=True))
            frame = pd.DataFrame({f"c{i}": pd.array([r[i] for r in rows],
                                                    dtype=_PANDAS[t])  # type: ignore[call-overload]
                                  for i, t in enumerate(types)})
            # DuckDB checks keys on insert: a key the rows break (or a reference to a column
            # that is not its table's primary key) is dropped, the rows are kept
            want = keys.get(name, Keys())
            usable = Keys(want.primary, tuple(f for f in want.foreign
                                              if f[1] != name and made.get(f[1]) == f[2]))
            attempts = (usable, Keys(usable.primary), Keys())
            for n, attempt in enumerate(attempts, 1):
                try:
                    con.execute(create_statement(name, columns, attempt))
                    if rows:
                        con.register("__bsql_copy", frame)
                        con.execute(f"INSERT INTO {quote(name)} SELECT * FROM __bsql_copy")
                        con.unregister("__bsql_copy")
                except duckdb.Error:
                    con.execute(f"DROP TABLE IF EXISTS {quote(name)}")
                    if n == len(attempts):
                        raise  # not the keys: the table itself cannot be copied
                    continue
                made[name] = attempt.primary
                break
            if is_fts and fts_path is not None:
                con.execute(f"LOAD '{fts_path}'")
                text = ", ".join(f"'{c}'" for c, k in zip(cols, kinds, strict=True)
                                 if k == "TEXT")
                con.execute(f"PRAGMA create_fts_index('{name}', 'rowid', {text}, "
                            f"stemmer='none', stopwords='none', ignore='(\\.|[^a-z0-9])+')")
    finally:
        con.close()
    return target


def sqlite_to_postgres(sqlite_path: str | Path, url: str, *, lower_case: bool = False) -> None:
    """Write every table of a SQLite file into the PostgreSQL database at ``url``.

    Names keep their case (``"Singer_ID"``): the PostgreSQL backend writes a name the
    catalog spells with capitals quoted, so query text in any case finds it, as in
    SQLite. ``lower_case=True`` lower-cases them instead, for other PostgreSQL clients
    that write names unquoted.
    """
    psycopg = require("psycopg", "psycopg[binary]")
    keys = sqlite_keys(sqlite_path)
    with psycopg.connect(url) as con:
        for name, cols, kinds, rows, is_fts in read_sqlite(sqlite_path):
            if lower_case:
                name, cols = name.lower(), [c.lower() for c in cols]
            types = [_PG[k] for k in kinds]
            con.execute(f"CREATE TABLE {quote(name)} ("
                        + ", ".join(f"{quote(c)} {t}" for c, t in zip(cols, types, strict=True))
                        + ")")
            with con.cursor() as cur, cur.copy(
                    f"COPY {quote(name)} ({', '.join(quote(c) for c in cols)}) FROM STDIN") as cp:
                for row in rows:
                    cp.write_row(row)
            if is_fts:
                text = " || ' ' || ".join(f"coalesce({quote(c)}, '')"
                                         for c, k in zip(cols, kinds, strict=True)
                                         if k == "TEXT")
                con.execute(f"CREATE INDEX {quote(name + '_fts')} ON {quote(name)} "
                            f"USING gin (to_tsvector('simple', {text}))")
        _postgres_keys(con, keys, lower_case)


def _postgres_keys(con: Any, keys: dict[str, Keys], lower_case: bool) -> None:
    """Primary keys the rows satisfy, then foreign keys onto them (``NOT VALID``: rows that
    break a reference stay, as in SQLite); each refused one is left out."""
    import psycopg

    def name(n: str) -> str:
        return quote(n.lower() if lower_case else n)

    def names(cols: Sequence[str]) -> str:
        return ", ".join(name(c) for c in cols)

    made: dict[str, tuple[str, ...]] = {}
    for table, k in keys.items():
        if not k.primary:
            continue
        try:
            with con.transaction():
                con.execute(f"ALTER TABLE {name(table)} ADD PRIMARY KEY ({names(k.primary)})")
            made[table] = k.primary
        except psycopg.Error:
            pass
    for table, k in keys.items():
        for cols, ref, ref_cols in k.foreign:
            if made.get(ref) != ref_cols:
                continue
            try:
                with con.transaction():
                    con.execute(f"ALTER TABLE {name(table)} ADD FOREIGN KEY ({names(cols)}) "
                                f"REFERENCES {name(ref)} ({names(ref_cols)}) NOT VALID")
            except psycopg.Error:
                pass
