"""Build BlendSQL-ready SQLite databases from HybridQA tables or DataFrames.

The shape is always the same, so queries, prompts and examples carry over:
structured tables with SQL-friendly column names and real types, an FTS5
``documents(title, content)`` table of free text, and two small metadata
tables (``_columns``: original header text of each column; ``_tables``:
where each table came from).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd

from blendsql.db.documents import Docs, build_fts, is_missing, quote_ident
from blendsql.errors import ExecutionError

# cells that mean "no value" when a column is otherwise numeric
_MISSING = {"", "-", "–", "—", "n/a", "na", "none", "null", "?"}
_INT = re.compile(r"^[+-]?(\d+|\d{1,3}(,\d{3})+)$")
_REAL = re.compile(r"^[+-]?(\d+|\d{1,3}(,\d{3})+)?\.\d+$|^[+-]?\d+(\.\d+)?[eE][+-]?\d+$")

_LEADING_ID = re.compile(r'^\{\s*"table_id"\s*:\s*"((?:[^"\\]|\\.)*)"')

META_COLUMNS = "_columns"
META_TABLES = "_tables"


@dataclass(frozen=True)
class Column:
    """One loaded column: SQL name, original header text, SQLite type."""

    name: str
    original: str
    type: str


def sanitize_names(headers: Sequence[Any]) -> list[str]:
    """SQL-friendly, unique column names: lowercase, non-word runs -> ``_``.

    ``'Team ( s ) by season'`` -> ``team_s_by_season``; empty headers become
    ``col<i>``; a leading digit gets a ``c`` prefix; repeats get ``_2``, ``_3``.
    Plain names let users write ``w.school`` and ``'w::school'`` without quoting.
    """
    out: list[str] = []
    taken: set[str] = set()
    for i, h in enumerate(headers):
        base = re.sub(r"\W+", "_", str(h if h is not None else "").strip().lower()).strip("_")
        if not base:
            base = f"col{i}"
        if base[0].isdigit():
            base = "c" + base
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        out.append(name)
    return out


def _parse_number(cell: str, kind: str) -> int | float | None:
    """``'4,409'`` -> 4409 (INTEGER) / ``'4.2'`` -> 4.2 (REAL); None if not that kind."""
    s = cell.strip()
    if kind == "INTEGER":
        return int(s.replace(",", "")) if _INT.match(s) else None
    if _INT.match(s) or _REAL.match(s):
        return float(s.replace(",", ""))
    return None


def infer_type(cells: Iterable[Any]) -> str:
    """INTEGER / REAL when every non-missing cell parses as one, else TEXT.

    Typed columns make ``ORDER BY yards`` and ``yards > 12000`` mean what a
    user expects; a column with no values at all stays TEXT.
    """
    present = [str(c).strip() for c in cells if c is not None and str(c).strip().lower() not in _MISSING]
    if not present:
        return "TEXT"
    for kind in ("INTEGER", "REAL"):
        if all(_parse_number(c, kind) is not None for c in present):
            return kind
    return "TEXT"


def convert_cell(cell: Any, sql_type: str) -> Any:
    """A raw text cell as the value stored in a column of ``sql_type``."""
    if cell is None:
        return None
    if sql_type == "TEXT":
        return str(cell)
    s = str(cell).strip()
    if s.lower() in _MISSING:
        return None
    return _parse_number(s, sql_type)


def link_title(link: str) -> str:
    """Readable title of a wiki link path: ``/wiki/Phil_Stidham`` -> ``Phil Stidham``."""
    tail = link.rsplit("/wiki/", 1)[-1] if "/wiki/" in link else link.rsplit("/", 1)[-1]
    return unquote(tail).replace("_", " ").strip()


def _create_table(
    conn: sqlite3.Connection, table: str, columns: Sequence[Column], rows: Iterable[Sequence[Any]]
) -> None:
    """(Re)create ``table`` with typed columns and insert ``rows``."""
    t = quote_ident(table)
    conn.execute(f"DROP TABLE IF EXISTS {t}")
    cols = ", ".join(f"{quote_ident(c.name)} {c.type}" for c in columns)
    conn.execute(f"CREATE TABLE {t} ({cols})")
    marks = ", ".join("?" for _ in columns)
    conn.executemany(f"INSERT INTO {t} VALUES ({marks})", [tuple(r) for r in rows])


def _record_meta(
    conn: sqlite3.Connection, table: str, columns: Sequence[Column], source: Mapping[str, Any]
) -> None:
    """Remember original headers and provenance, so prompts and answers can show them."""
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {META_COLUMNS} "
        "(table_name TEXT, position INTEGER, name TEXT, original TEXT, type TEXT)"
    )
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {META_TABLES} (table_name TEXT PRIMARY KEY, source TEXT)"
    )
    conn.execute(f"DELETE FROM {META_COLUMNS} WHERE table_name = ?", (table,))
    conn.executemany(
        f"INSERT INTO {META_COLUMNS} VALUES (?, ?, ?, ?, ?)",
        [(table, i, c.name, c.original, c.type) for i, c in enumerate(columns)],
    )
    conn.execute(
        f"INSERT OR REPLACE INTO {META_TABLES} VALUES (?, ?)",
        (table, json.dumps(dict(source), ensure_ascii=False)),
    )


def _connect(path_or_conn: str | Path | sqlite3.Connection) -> sqlite3.Connection:
    if isinstance(path_or_conn, sqlite3.Connection):
        return path_or_conn
    return sqlite3.connect(str(path_or_conn))


def hybridqa_documents(table_record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The linked passages of a HybridQA table as ``{title, content}`` dicts, by link."""
    passages: Mapping[str, str] = table_record.get("passages") or {}
    return [{"title": link_title(link), "content": passages[link]} for link in sorted(passages)]


def hybridqa_to_sqlite(
    table_record: Mapping[str, Any],
    path_or_conn: str | Path | sqlite3.Connection = ":memory:",
    *,
    table: str = "w",
    documents: str = "documents",
    tokenizer: str = "unicode61",
) -> sqlite3.Connection:
    """Write one HybridQA table as ``w`` (typed) plus its passages as FTS5 ``documents``.

    Column names are sanitised (:func:`sanitize_names`); the original header
    text is kept in ``_columns``; table id, title, section and url in ``_tables``.
    Returns the open connection (the one given, or a new one on the path).
    """
    header = list(table_record.get("header") or [])
    rows = [list(r) for r in table_record.get("rows") or []]
    if not header:
        raise ExecutionError(
            f"HybridQA table {table_record.get('table_id')!r} has no header",
            hint="pass a record from tables.jsonl (keys: table_id, header, rows, passages)",
        )
    width = len(header)
    rows = [(r + [None] * width)[:width] for r in rows]
    names = sanitize_names(header)
    columns = [
        Column(n, str(h), infer_type(r[i] for r in rows))
        for i, (n, h) in enumerate(zip(names, header, strict=True))
    ]
    conn = _connect(path_or_conn)
    typed = ([convert_cell(v, c.type) for v, c in zip(r, columns, strict=True)] for r in rows)
    _create_table(conn, table, columns, typed)
    source = {k: table_record.get(k) for k in ("table_id", "title", "section_title", "url")}
    source["source"] = "HybridQA / OTT-QA (MIT)"
    _record_meta(conn, table, columns, source)
    build_fts(conn, documents, hybridqa_documents(table_record) or [], tokenizer)
    conn.commit()
    return conn


def _find_tables_file(data_dir: str | Path) -> Path:
    base = Path(data_dir)
    for cand in (base, base / "tables.jsonl", base / "hybridqa" / "tables.jsonl"):
        if cand.is_file():
            return cand
    raise ExecutionError(
        f"no HybridQA tables.jsonl under {str(base)!r}",
        hint="point data_dir at the folder holding tables.jsonl (e.g. ../shared/data/hybridqa)",
    )


def load_hybridqa(
    data_dir: str | Path, table_ids: Iterable[str] | None = None
) -> Iterator[dict[str, Any]]:
    """Stream HybridQA table records from ``tables.jsonl`` (optionally only ``table_ids``).

    Records come in file order; with ``table_ids`` the scan stops once all are
    found, so picking a few tables out of the 70 MB file stays cheap.
    Feed a record to :func:`hybridqa_to_sqlite` to get a database.
    """
    wanted = set(table_ids) if table_ids is not None else None
    with _find_tables_file(data_dir).open(encoding="utf-8") as f:
        for line in f:
            if wanted is not None and not wanted:
                return
            if not line.strip():
                continue
            if wanted is not None:
                # cheap pre-filter on the leading table_id before parsing the large line
                m = _LEADING_ID.match(line)
                if m and json.loads(f'"{m.group(1)}"') not in wanted:
                    continue
            record = json.loads(line)
            if wanted is not None:
                if record.get("table_id") not in wanted:
                    continue
                wanted.discard(record["table_id"])
            yield record


def _sql_type(series: pd.Series) -> str:
    """SQLite type of a DataFrame column from its dtype (text columns are inferred)."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_integer_dtype(series.dtype):
        return "INTEGER"
    if pd.api.types.is_float_dtype(series.dtype):
        non_null = series.dropna()
        if len(non_null) and all(float(v).is_integer() for v in non_null):
            return "INTEGER"  # ints with NaN holes are floats in pandas
        return "REAL"
    if pd.api.types.is_datetime64_any_dtype(series.dtype):
        return "TEXT"
    return infer_type(series.tolist())


def _py_value(value: Any, sql_type: str) -> Any:
    """A DataFrame cell as a plain Python value sqlite3 can bind."""
    if is_missing(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if sql_type == "INTEGER" and isinstance(value, float):
        return int(value)
    if isinstance(value, str) and sql_type != "TEXT":
        return convert_cell(value, sql_type)
    if not isinstance(value, (int, float, str, bytes)):
        return str(value)
    return value


def from_frames(
    frames: Mapping[str, pd.DataFrame],
    documents: pd.DataFrame | Sequence[Mapping[str, Any]] | Docs | None = None,
    path: str | Path | sqlite3.Connection = ":memory:",
    *,
    documents_table: str = "documents",
    tokenizer: str = "unicode61",
) -> sqlite3.Connection:
    """A BlendSQL-ready database from your own DataFrames (and documents).

    Each frame becomes a table with sanitised column names and SQLite types
    (numbers stored as text, like ``'1,200'``, are typed too); ``documents``
    (a DataFrame / list of dicts with ``title`` and ``content``, or a list of
    strings) becomes an FTS5 table. ``path`` may also be an open connection.
    Returns the open connection.
    """
    conn = _connect(path)
    for table, df in frames.items():
        if not isinstance(df, pd.DataFrame):
            raise ExecutionError(
                f"frames[{table!r}] is a {type(df).__name__}, not a DataFrame",
                hint="pass {'table_name': pandas.DataFrame, ...}",
            )
        names = sanitize_names(list(df.columns))
        columns = [
            Column(n, str(orig), _sql_type(df.iloc[:, i]))
            for i, (n, orig) in enumerate(zip(names, df.columns, strict=True))
        ]
        rows = (
            [_py_value(v, c.type) for v, c in zip(r, columns, strict=True)]
            for r in df.itertuples(index=False, name=None)
        )
        _create_table(conn, table, columns, rows)
        _record_meta(conn, table, columns, {"source": "DataFrame"})
    if documents is not None:
        build_fts(conn, documents_table, documents, tokenizer)
    conn.commit()
    return conn


def column_map(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    """SQL column name -> original header text for a loaded table."""
    try:
        rows = conn.execute(
            f"SELECT name, original FROM {META_COLUMNS} WHERE table_name = ? ORDER BY position",
            (table,),
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    return {r[0]: r[1] for r in rows}


def example_db_path() -> Path:
    """Path of the bundled example database (one HybridQA table + its passages).

    Built by ``scripts/build_example_db.py``; shipped as package data.
    """
    from importlib.resources import files

    path = Path(str(files("blendsql").joinpath("data").joinpath("example.db")))
    if not path.is_file():
        raise ExecutionError(
            f"the bundled example database is missing ({path})",
            hint="reinstall blendsql, or rebuild it with scripts/build_example_db.py",
        )
    return path
