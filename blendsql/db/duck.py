"""The DuckDB backend: ``.duckdb`` files, DuckDB connections, DataFrames, Parquet, CSV.

Read-only by construction where DuckDB allows it: a file is opened with
``read_only=True``; an in-memory database (built from DataFrames, Parquet
or CSV) and a connection handed in are guarded by statement type instead
(DuckDB's parser tells SELECT from INSERT / CREATE / SET / ATTACH ...), and
user statements that would create temp objects are refused, so one query
never changes what the next one sees. The engine's own rows live in the
``temp`` catalog under unguessable names and are dropped after each query.

Full-text search: DuckDB's ``fts`` extension, shipped for DuckDB 1.4 by the
``duckdb-ext-fts`` wheel (loaded from its file, never downloaded). ``t MATCH
q`` becomes ``fts_main_t.match_bm25(rowid, q)``; the index is built on
first use for an in-memory database and must exist already
(``PRAGMA create_fts_index``) in a read-only file.
"""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from sqlglot import exp

from blendsql.db.allowlist import (
    DUCKDB_FILE_READERS,
    DUCKDB_TABLE_FUNCTIONS,
    SEQUENCE_FUNCTIONS,
    Verdict,
    duckdb_verdict,
    refusal,
    sqlglot_calls,
)
from blendsql.db.backend import (
    Capabilities,
    Keys,
    information_schema_columns,
    require,
    source_module,
)
from blendsql.db.guarded import (
    GuardedBackend,
    as_type,
    engine_value,
    floats,
    short,
)
from blendsql.db.temp_rows import quote
from blendsql.db.transpile import FullText, Transpiler, words_only
from blendsql.errors import ExecutionError

_READ_TYPES = {"SELECT", "EXPLAIN"}
#: the start of an EXPLAIN statement, before the query it explains (or runs: ANALYZE)
_EXPLAIN = re.compile(r"\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.IGNORECASE)
#: what ``allow_writes=True`` lets a user statement do (never COPY: it reads and writes files)
_WRITE_TYPES = {"INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER"}
_TYPES = {"TEXT": "VARCHAR", "BLOB": "BLOB", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE",
          "BOOLEAN": "BOOLEAN", "INTEGER": "INTEGER", "NUMERIC": "HUGEINT",
          "DATE": "DATE", "TIMESTAMP": "TIMESTAMP"}
_PANDAS = {"VARCHAR": object, "BLOB": object, "BIGINT": "Int64", "DOUBLE": "Float64",
           "BOOLEAN": "boolean", "INTEGER": "Int64", "HUGEINT": object,
           "DATE": object, "TIMESTAMP": object}


def fts_extension() -> Path | None:
    """The ``fts`` extension file for the installed DuckDB, if ``duckdb-ext-fts`` has it."""
    import duckdb

    spec = importlib.util.find_spec("duckdb_ext")
    if spec is None or not spec.submodule_search_locations:
        return None
    version = f"v{duckdb.__version__}"
    for base in spec.submodule_search_locations:
        found = sorted(Path(base).glob(f"extensions/{version}/*/fts.duckdb_extension"))
        if found:
            return found[0]
    return None


class DuckFullText(FullText):
    """FTS5's MATCH / rank / bm25 through DuckDB's ``fts`` extension."""

    def __init__(self, db: DuckDBDatabase) -> None:
        self.db = db

    def unavailable(self, table: str) -> str | None:
        return self.db.fts_problem(table)

    def _bm25(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        fn = exp.Dot(this=exp.to_identifier(f"fts_main_{table}"),
                     expression=exp.Anonymous(this="match_bm25", expressions=[
                         exp.column("rowid", table=alias), words_only(query.copy())]))
        return fn

    def match(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        return exp.Not(this=exp.Is(this=self._bm25(table, alias, query), expression=exp.null()))

    def score(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        return exp.Neg(this=self._bm25(table, alias, query))


#: file suffixes DuckDB opens (a database file, or data it reads as a table)
_DUCK_FILES = (".duckdb", ".ddb", ".parquet", ".csv", ".tsv")


def _duck_file(path: str | Path) -> bool:
    return Path(str(path)).suffix.lower() in _DUCK_FILES


class DuckDBDatabase(GuardedBackend):
    """A DuckDB connection behind the backend interface (see the module docstring)."""

    json_collect = False
    capabilities = Capabilities(full_text=True)

    @classmethod
    def accepts(cls, source: Any) -> bool:
        """A DuckDB connection, a DuckDB / Parquet / CSV path, a DataFrame, or a dict with
        a value only DuckDB reads (a Parquet / CSV path or a polars frame)."""
        if source_module(source) == "duckdb":
            return True
        if isinstance(source, (str, Path)):
            return _duck_file(source)
        if source_module(source) == "polars" or isinstance(source, pd.DataFrame):
            return True
        if isinstance(source, Mapping):
            return any(_duck_file(v) if isinstance(v, (str, Path))
                       else source_module(v) == "polars" for v in source.values())
        return False
    name = "DuckDB"

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        duckdb = require("duckdb", "duckdb")
        super().__init__(allow_writes=allow_writes, dialect="duckdb",
                         transpiler=Transpiler("duckdb", DuckFullText(self),
                                               types=self.column_types))
        self._owns = True
        self._in_memory = False
        self._views: dict[str, str] = {}  # engine temp view -> its table (NULL columns)
        self.path: str | None = None
        #: files the session opened (Parquet / CSV views): file readers may read these only
        self._files: set[str] = set()
        #: the connection's functions, by name: their verdicts (see :meth:`function_verdicts`)
        self._verdicts: dict[str, list[Verdict]] | None = None
        #: lower-case names of the connection's tables and views (see :meth:`_is_relation`)
        self._relations: set[str] = set()
        if isinstance(source, duckdb.DuckDBPyConnection):
            self.conn = source
            self._owns = False
        elif isinstance(source, (str, Path)) and Path(source).suffix.lower() in (".duckdb",
                                                                                 ".ddb"):
            path = Path(source)
            if not path.exists():
                raise ExecutionError(f"database file not found: {path}", hint="check the path")
            try:
                self.conn = duckdb.connect(str(path), read_only=not allow_writes)
            except duckdb.Error as e:
                raise ExecutionError(f"cannot open {path}: {e}",
                                     hint="is it a DuckDB file of this DuckDB version?") from e
            self.path = str(path)
        else:
            self.conn = duckdb.connect(":memory:")
            self._in_memory = True
            self._load(source)
        self._fts_loaded = self._load_fts()

    # -- loading -------------------------------------------------------------------------

    def _load(self, source: Any) -> None:
        """Tables from DataFrames (pandas / polars) and views over Parquet / CSV files."""
        items: Mapping[Any, Any]
        if isinstance(source, Mapping):
            items = source
        elif isinstance(source, (str, Path)):
            items = {Path(source).stem: source}
        else:
            items = {"df": source}
        for name, value in items.items():
            self._load_one(str(name), value)

    def _load_one(self, name: str, value: Any) -> None:
        q = quote(name)
        if isinstance(value, (str, Path)):
            path = Path(value)
            if not path.exists():
                raise ExecutionError(f"file not found: {path}", hint="check the path")
            reader = "read_parquet" if path.suffix.lower() == ".parquet" else "read_csv_auto"
            self._files.add(str(path.resolve()))
            self.conn.execute(f"CREATE VIEW {q} AS SELECT * FROM "
                              f"{reader}('{_sql_string(str(path.resolve()))}')")
            return
        if not (isinstance(value, pd.DataFrame) or type(value).__module__.startswith("polars")):
            raise ExecutionError(f"table {name!r} is a {type(value).__name__}, not a DataFrame",
                                 hint="pass DataFrames (pandas or polars) or Parquet / CSV paths")
        view = f"__bsql_load_{self.token}"
        self.conn.register(view, registrable(value))
        try:
            self.conn.execute(f"CREATE TABLE {q} AS SELECT * FROM {quote(view)}")
        finally:
            self.conn.unregister(view)

    def _load_fts(self) -> bool:
        path = fts_extension()
        if path is None:
            return False
        try:
            self.conn.execute(f"LOAD '{_sql_string(str(path))}'")
        except Exception:  # noqa: BLE001 - a mismatched build: MATCH says it is unavailable
            return False
        return True

    # -- full text -----------------------------------------------------------------------

    def fts_tables(self) -> list[str]:
        _, rows = self.run_native("SELECT schema_name FROM duckdb_schemas() WHERE "
                                  "starts_with(schema_name, 'fts_main_') ORDER BY 1")
        return [r[0][len("fts_main_"):] for r in rows]

    def fts_problem(self, table: str) -> str | None:
        """Why ``table MATCH ..`` cannot run (None: it can; builds the index if it may)."""
        if not self._fts_loaded:
            import duckdb

            return (f"full-text search (MATCH) is not available on this DuckDB "
                    f"({duckdb.__version__}): the 'fts' extension is not installed for it "
                    f"(pip install duckdb-ext-fts ships it for DuckDB 1.4)")
        if table in self.fts_tables():
            return None
        if not (self._owns and self._in_memory):
            return (f"{table!r} has no full-text index in this DuckDB database "
                    f"(MATCH needs one; blendsql does not change your database)")
        with self.session(), self.engine():
            text_cols = [r[0] for r in self.conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                "AND data_type = 'VARCHAR' ORDER BY ordinal_position", [table]).fetchall()]
            if not text_cols:
                return f"{table!r} has no text column to search"
            cols = ", ".join(f"'{_sql_string(c)}'" for c in text_cols)
            self.conn.execute(f"PRAGMA create_fts_index('{_sql_string(table)}', 'rowid', "
                              f"{cols}, stemmer='none', stopwords='none', "
                              f"ignore='(\\.|[^a-z0-9])+')")
        return None

    # -- driver hooks ------------------------------------------------------------------

    def _interrupter(self) -> Any:
        return self.conn

    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        if user:
            self._check_statement(text)
        cur = self.conn.execute(text, binds) if binds is not None else self.conn.execute(text)
        if not cur.description:
            return [], []
        cols = [d[0] for d in cur.description]
        decimals = [i for i, d in enumerate(cur.description)
                    if str(d[1]).upper().startswith("DECIMAL")]
        return cols, floats(self.fetch_limited(cur.fetchmany, text), decimals)

    def _check_statement(self, text: str) -> None:
        """Refuse writes (unless allowed), temp objects, SET / ATTACH / PRAGMA / LOAD /
        COPY, and every call or table the allow-list refuses (:meth:`_check_calls`)."""
        try:
            statements = self.conn.extract_statements(text)
        except Exception:  # noqa: BLE001 - a syntax error: DuckDB reports it when run
            return
        for st in statements:
            kind = st.type.name
            if kind in _READ_TYPES or (kind in _WRITE_TYPES and self.allow_writes
                                       and not _creates_temp(text)):
                self._check_calls(str(st.query), kind, text)
                continue
            raise self.refused(kind, text)

    # -- the allow-list (blendsql.db.allowlist) ---------------------------------------

    def function_verdicts(self) -> dict[str, list[Verdict]]:
        """Each function of the connection's catalogue (``duckdb_functions()``) by name:
        its verdicts (one per kind / schema). Read once per connection, again when a
        statement names a function it does not list (one the application created since)."""
        if self._verdicts is None:
            rows = self.conn.execute(
                "SELECT DISTINCT lower(function_name), function_type, internal, "
                "coalesce(has_side_effects, false), schema_name FROM duckdb_functions()"
            ).fetchall()
            verdicts: dict[str, list[Verdict]] = {}
            for name, kind, internal, effects, schema in rows:
                verdicts.setdefault(name, []).append(
                    duckdb_verdict(name, kind, bool(internal), bool(effects), schema))
            self._verdicts = verdicts
        return self._verdicts

    def _value_call(self, name: str, schema: str) -> Verdict:
        """The verdict on calling ``name`` as a value (scalar, aggregate, window, macro)."""
        found = self.function_verdicts().get(name)
        if found is None:
            self._verdicts = None  # created since the catalogue was read?
            found = self.function_verdicts().get(name)
        if not found:
            return Verdict(name, False, "not in DuckDB's catalogue")
        if schema.startswith("fts_main_"):
            return Verdict(name, name == "match_bm25", "full-text search")
        if self.allow_writes and name in SEQUENCE_FUNCTIONS:
            return Verdict(name, True, "a sequence (writes allowed)")
        return next((v for v in found if v.allowed), found[0])

    def _table_call(self, name: str, args: list[Any]) -> Verdict:
        """The verdict on reading the table function ``name`` (its constant ``args``)."""
        if name in DUCKDB_TABLE_FUNCTIONS:
            return Verdict(name, True, "a generator or the catalogue")
        if name in DUCKDB_FILE_READERS and args and all(
                isinstance(a, str) and str(Path(a).resolve()) in self._files for a in args):
            return Verdict(name, True, "a file this session opened")
        if name in DUCKDB_FILE_READERS:
            return Verdict(name, False, "reads a file this session did not open")
        return Verdict(name, False, "not an allowed table function")

    def _is_relation(self, name: str) -> bool:
        """A table or view of the connection (else DuckDB would read the name as a file
        path or a Python variable: a replacement scan)."""
        if name.lower() in self._relations:
            return True
        rows = self.conn.execute(
            "SELECT lower(table_name) FROM duckdb_tables() UNION ALL "
            "SELECT lower(view_name) FROM duckdb_views()").fetchall()
        self._relations = {r[0] for r in rows}
        return name.lower() in self._relations

    def _not_a_relation(self, name: str, text: str) -> ExecutionError:
        """A table reference that names no table or view: refused before DuckDB reads it
        as a file (a name with a path's characters: an UnsafeQueryError) or as a Python
        variable of the caller (any other name: the error of a missing table)."""
        if any(c in name for c in "./\\:~"):
            return refusal(self.name, f"reads {name!r} as a table, which is no table or "
                           "view of the database (DuckDB would read the file)", text)
        # DuckDB's own wording of a missing table (the NL layer reads the name from it)
        return ExecutionError(f"DuckDB error: Catalog Error: Table with name {name} does not "
                              f"exist!\n  in: {short(text)}",
                              hint="check the table and column names")

    def _check_calls(self, statement: str, kind: str, text: str) -> None:
        """Every function a statement calls and every table it reads, by DuckDB's own
        parse (``json_serialize_sql``; sqlglot's for a statement DuckDB cannot
        serialise: a write, an EXPLAIN): refused by name unless the allow-list allows it."""
        if kind == "EXPLAIN":  # its query is judged (EXPLAIN ANALYZE runs it)
            explained = _EXPLAIN.match(statement)
            statement = statement[explained.end():] if explained else ""
        tree = _duck_parse(statement) if kind in ("SELECT", "EXPLAIN") else None
        if tree is None and kind in ("SELECT", "EXPLAIN"):
            raise refusal(self.name, "holds what blendsql cannot read (so cannot check its "
                          "function calls)", text)
        if tree is None:
            self._check_with_sqlglot(statement, text)
            return
        ctes = set(_cte_names(tree))
        for what, name, schema, args in _duck_refs(tree):
            if what == "table":
                if name.lower() not in ctes and not self._is_relation(name):
                    raise self._not_a_relation(name, text)
                continue
            verdict = (self._table_call(name, args) if what == "table_function"
                       else self._value_call(name, schema))
            if not verdict.allowed:
                raise refusal(self.name, f"calls {name}() ({verdict.why})", text)

    def _check_with_sqlglot(self, statement: str, text: str) -> None:
        import sqlglot

        try:
            tree = sqlglot.parse_one(statement, read="duckdb")
        except Exception:  # noqa: BLE001 - the statement was already accepted by DuckDB
            raise refusal(self.name, "holds what blendsql cannot read", text) from None
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            if isinstance(table.this, exp.Func) or table.find_ancestor(exp.Select) is None:
                continue  # a table function (judged below), or what the statement writes
            name = table.name
            if name and name.lower() not in ctes and not self._is_relation(name):
                raise self._not_a_relation(name, text)
        for name, node in sqlglot_calls(tree, "duckdb"):
            found = self.function_verdicts().get(name)
            if found is None and not isinstance(node, exp.Anonymous):
                continue  # sqlglot's syntax (CAST, EXTRACT ...): no function of its own
            in_from = isinstance(node.parent, exp.Table) or isinstance(node.parent, exp.From)
            verdict = (self._table_call(name, []) if in_from
                       else self._value_call(name, ""))
            if not verdict.allowed:
                raise refusal(self.name, f"calls {name}() ({verdict.why})", text)

    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        import duckdb

        if not isinstance(e, duckdb.Error):
            return None
        msg = str(e)
        if "read-only" in msg or "read only" in msg:
            return self.refused("a write on a read-only database", sql)
        hint = ("check the table and column names"
                if isinstance(e, (duckdb.CatalogException, duckdb.BinderException))
                else "check the SQL")
        return ExecutionError(f"DuckDB error: {msg}\n  in: {short(sql)}", hint=hint)

    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        duck_types = [_TYPES[t] for t in types]
        data = {f"c{i}": pd.array([as_type(r[i], types[i]) for r in rows],
                                  dtype=_PANDAS[t])  # type: ignore[call-overload]
                for i, t in enumerate(duck_types)}
        frame = pd.DataFrame(data, columns=list(data))
        view = f"__bsql_rows_{self.token}"
        select = ", ".join(f"CAST(c{i} AS {t}) AS {quote(c)}"
                           for i, (c, t) in enumerate(zip(columns, duck_types, strict=True)))
        nulls = [i for i, t in enumerate(types) if all(r[i] is None for r in rows)]
        table = f"{name}_rows" if nulls else name
        self.conn.register(view, frame)
        try:
            self._run(f"CREATE TEMP TABLE {quote(table)} AS SELECT {select} "
                      f"FROM {quote(view)}", (), engine_value)
        finally:
            self.conn.unregister(view)
        if nulls:
            # a column of NULLs only: a view gives it DuckDB's NULL type, which compares
            # with every type (as SQLite's untyped NULL does); a table would make it INTEGER
            cols = ", ".join(f"NULL AS {quote(c)}" if i in nulls else quote(c)
                             for i, c in enumerate(columns))
            self._views[name] = table
            with self._dropped_on_failure(name):
                self._run(f"CREATE TEMP VIEW {quote(name)} AS SELECT {cols} FROM "
                          f"temp.{quote(table)}", (), engine_value)

    def drop_temp_table(self, name: str) -> None:
        """As :meth:`GuardedBackend.drop_temp_table`; a table with a column of NULLs
        only is a view over ``<name>_rows`` (see :meth:`_store`): both are dropped."""
        table = self._views.pop(name, None)
        if table is None:
            super().drop_temp_table(name)
            return
        self.transpile.forget(name)
        self._drop_objects([f"DROP VIEW IF EXISTS temp.{quote(name)}",
                            f"DROP TABLE IF EXISTS temp.{quote(table)}"])

    # -- misc ----------------------------------------------------------------------------

    def tables(self) -> list[str]:
        _, rows = self.run_native(
            "SELECT table_name FROM duckdb_tables() WHERE NOT temporary AND schema_name = "
            "'main' AND database_name = current_database() UNION SELECT view_name FROM "
            "duckdb_views() WHERE NOT internal AND NOT temporary AND schema_name = 'main' "
            "AND database_name = current_database() ORDER BY 1")
        return [r[0] for r in rows]

    def keys(self, table: str) -> Keys:
        """Primary and foreign keys from ``duckdb_constraints()``."""
        _, rows = self.run_native(
            "SELECT constraint_type, constraint_column_names, referenced_table, "
            "referenced_column_names FROM duckdb_constraints() WHERE table_name = ? AND "
            "schema_name = 'main' AND database_name = current_database() AND constraint_type "
            "IN ('PRIMARY KEY', 'FOREIGN KEY') ORDER BY constraint_index", [table])
        return Keys.from_rows(rows, "PRIMARY KEY", "FOREIGN KEY")

    def column_types(self, table: str) -> dict[str, str] | None:
        """Columns of a table or view of this database or of ``temp`` with their types
        (None: no such table), for SQLite's typing in the translation
        (blendsql.db.sqlite_compat)."""
        rows = self.conn.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE lower(table_name) = "
            "lower(?) AND (database_name = 'temp' OR (database_name = current_database() AND "
            "schema_name = 'main')) ORDER BY column_index", [table]).fetchall()
        return {str(c): str(t) for c, t in rows} or None

    def table_columns(self, table: str) -> list[tuple[str, str]]:
        """Columns with their declared types (``VARCHAR``, ``BIGINT``, ``DECIMAL(10,2)``)."""
        return information_schema_columns(
            self, table, "table_schema = 'main' AND table_catalog = current_database()")



def registrable(frame: Any) -> Any:
    """A DataFrame DuckDB can register: pandas as is; polars through Arrow when pyarrow is
    installed, else through plain Python lists (polars' Arrow export needs pyarrow, and a
    user with polars alone should not get an ImportError from inside the engine)."""
    if isinstance(frame, pd.DataFrame):
        return frame
    try:
        import pyarrow  # noqa: F401 - only probing whether polars can export Arrow
    except ImportError:
        return pd.DataFrame(frame.to_dict(as_series=False), columns=list(frame.columns))
    return frame


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


def _creates_temp(text: str) -> bool:
    return bool(re.match(r"\s*CREATE\s+(OR\s+REPLACE\s+)?(TEMP|TEMPORARY)\b", text, re.I))


_PARSER: Any = None
_PARSER_LOCK = threading.Lock()


def _duck_parse(statement: str) -> Any:
    """DuckDB's own parse tree of one SELECT (``json_serialize_sql``, on a private
    in-memory connection: parsing reads no catalogue), or None when DuckDB cannot
    serialise the statement."""
    import duckdb

    global _PARSER
    with _PARSER_LOCK:
        if _PARSER is None:
            _PARSER = duckdb.connect(":memory:")
        out = _PARSER.execute("SELECT json_serialize_sql(?)", [statement]).fetchone()
    tree = json.loads(out[0]) if out else None
    if not isinstance(tree, dict) or tree.get("error"):
        return None
    return tree


def _cte_names(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        cte = node.get("cte_map")
        if isinstance(cte, dict):
            for item in cte.get("map") or []:
                yield str(item.get("key", "")).lower()
        for v in node.values():
            yield from _cte_names(v)
    elif isinstance(node, list):
        for v in node:
            yield from _cte_names(v)


def _duck_refs(node: Any) -> Iterator[tuple[str, str, str, list[Any]]]:
    """("call" | "table_function" | "table", name, schema, constant args) of each function
    call and table reference in DuckDB's serialised parse tree."""
    if isinstance(node, list):
        for v in node:
            yield from _duck_refs(v)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "BASE_TABLE":
        yield ("table", str(node.get("table_name", "")),
               str(node.get("schema_name") or node.get("catalog_name") or ""), [])
        return
    if kind == "TABLE_FUNCTION" and isinstance(node.get("function"), dict):
        fn = node["function"]
        children = fn.get("children") or []
        args = [c.get("value", {}).get("value") if c.get("class") == "CONSTANT" else None
                for c in children if isinstance(c, dict)]
        yield ("table_function", str(fn.get("function_name", "")).lower(),
               str(fn.get("schema") or ""), args)
        yield from _duck_refs(children)
        for key, v in node.items():
            if key != "function":
                yield from _duck_refs(v)
        return
    if node.get("class") == "WINDOW" and kind != "WINDOW_AGGREGATE":
        pass  # DuckDB's own window functions (row_number, lag ...): a kind of the parse
    elif "function_name" in node:
        yield ("call", str(node["function_name"]).lower(), str(node.get("schema") or ""), [])
    for v in node.values():
        yield from _duck_refs(v)
