"""The PostgreSQL backend (psycopg 3): ``postgresql://`` URLs and psycopg connections.

Read-only by the server: every user statement runs in its own ``BEGIN
READ ONLY`` transaction that is rolled back afterwards (committed only
with ``allow_writes=True``), so neither a write nor a session change
(``SET``, temp objects) survives it. The engine's own rows go to temp
tables created in autocommit (PostgreSQL refuses ``CREATE`` in a read-only
transaction): ``pg_temp`` only, names no user can guess, dropped after
each query. A handed-in connection must be idle (no open transaction);
its autocommit setting is restored after each use.

Full-text: ``t MATCH q`` becomes ``to_tsvector('simple', <t's text columns>)
@@ websearch_to_tsquery('simple', q)`` (FTS5's ``OR`` / quotes / ``-``
read the same way), ``rank`` / ``bm25(t)`` minus ``ts_rank`` (lower is
better, as in FTS5).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from blendsql.db.allowlist import (
    SEQUENCE_FUNCTIONS,
    Verdict,
    pg_verdict,
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
from blendsql.db.transpile import FullText, Transpiler
from blendsql.errors import ExecutionError

_TYPES = {"TEXT": "TEXT", "BLOB": "BYTEA", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE PRECISION",
          "BOOLEAN": "BOOLEAN", "INTEGER": "INTEGER", "NUMERIC": "NUMERIC",
          "DATE": "DATE", "TIMESTAMP": "TIMESTAMP"}
_READ_ROOTS = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Values)
#: PostgreSQL's type OID of NUMERIC (what AVG / SUM of integers return)
_NUMERIC_OID = 1700
_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?!ANALY[SZ]E\b|\()", re.IGNORECASE)


class _Planned(Exception):
    """``EXPLAIN`` planned the statement (rolls its read-only transaction back)."""


class _Canceller:
    """``interrupt()`` for the watchdog: cancel the running statement server-side."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def interrupt(self) -> None:
        cancel = getattr(self.conn, "cancel_safe", None) or self.conn.cancel
        cancel()


class PgFullText(FullText):
    """FTS5's MATCH / rank / bm25 as PostgreSQL text search."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def unavailable(self, table: str) -> str | None:
        return None if self.db.text_columns(table) else f"{table!r} has no text column to search"

    def _vector(self, table: str, alias: str) -> exp.Expression:
        cols = [exp.column(c, table=alias, quoted=True) for c in self.db.text_columns(table)]
        joined = exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(" "), *cols])
        return exp.Anonymous(this="to_tsvector", expressions=[exp.Literal.string("simple"),
                                                              joined])

    def _query(self, query: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this="websearch_to_tsquery",
                             expressions=[exp.Literal.string("simple"), query.copy()])

    def match(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        # ts_match_vq is the function behind PostgreSQL's ``tsvector @@ tsquery``
        return exp.Anonymous(this="ts_match_vq", expressions=[self._vector(table, alias),
                                                              self._query(query)])

    def score(self, table: str, alias: str, query: exp.Expression) -> exp.Expression:
        return exp.Neg(this=exp.Anonymous(this="ts_rank", expressions=[
            self._vector(table, alias), self._query(query)]))


class PostgresDatabase(GuardedBackend):
    """A PostgreSQL connection behind the backend interface (see the module docstring)."""

    name = "PostgreSQL"
    capabilities = Capabilities(full_text=True)

    @classmethod
    def accepts(cls, source: Any) -> bool:
        """A psycopg connection or a ``postgresql://`` / ``postgres://`` URL."""
        if source_module(source) == "psycopg":
            return True
        return isinstance(source, str) and source.split("://", 1)[0] in ("postgresql",
                                                                         "postgres")

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        psycopg = require("psycopg", "psycopg[binary]")
        super().__init__(allow_writes=allow_writes, dialect="postgres",
                         transpiler=Transpiler("postgres", PgFullText(self),
                                               types=self.column_types,
                                               spelling=self.table_spelling))
        self._owns = True
        self._text_columns: dict[str, list[str]] = {}
        self._saved_autocommit: bool | None = None
        #: the server's functions by name: their verdicts (see :meth:`function_verdicts`)
        self._verdicts: dict[str, list[Verdict]] | None = None
        if isinstance(source, psycopg.Connection):
            self.conn = source
            self._owns = False
        else:
            try:
                self.conn = psycopg.connect(str(source), autocommit=True, connect_timeout=30)
            except psycopg.Error as e:
                raise ExecutionError(f"cannot connect to PostgreSQL: {e}",
                                     hint="check the postgresql:// URL (host, port, user, "
                                     "database) and that the server runs") from None

    # -- sessions ------------------------------------------------------------------------

    def _begin_use(self) -> None:
        """A handed-in connection: idle required; autocommit on while we use it."""
        if self._owns:
            return
        import psycopg

        status = self.conn.info.transaction_status
        if status != psycopg.pq.TransactionStatus.IDLE:
            raise ExecutionError(
                "the PostgreSQL connection handed to BlendSQL is inside a transaction",
                hint="commit or roll back first: blendsql runs each statement in its own "
                "READ ONLY transaction")
        self._saved_autocommit = self.conn.autocommit
        self.conn.autocommit = True

    def _end_use(self) -> None:
        if self._saved_autocommit is not None:
            try:
                self.conn.autocommit = self._saved_autocommit
            except Exception:  # noqa: BLE001 - closed meanwhile
                pass
            self._saved_autocommit = None

    # -- driver hooks --------------------------------------------------------------------

    def _interrupter(self) -> Any:
        return _Canceller(self.conn)

    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        if user:
            self._check_statement(text)
        conn = self.conn
        if binds is None:  # the text has every '%' doubled: psycopg undoes that with params
            binds = {}
        if not user:
            cur = conn.execute(text, binds, prepare=False)
            return self._result(cur, text)
        conn.execute("BEGIN READ WRITE" if self.allow_writes else "BEGIN READ ONLY")
        ok = False
        try:
            cur = conn.execute(text, binds, prepare=False)
            out = self._result(cur, text)
            ok = True
            return out
        finally:
            conn.execute("COMMIT" if ok and self.allow_writes else "ROLLBACK")

    def _result(self, cur: Any, text: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if cur.description is None:
            return [], []
        cols = [d.name for d in cur.description]
        numeric = [i for i, d in enumerate(cur.description) if d.type_code == _NUMERIC_OID]
        return cols, floats(self.fetch_limited(cur.fetchmany, text), numeric)

    def _check_statement(self, text: str) -> None:
        """Only queries unless writes are allowed (temp objects and SET never); a plain
        ``EXPLAIN`` (no ANALYZE: it plans, never runs) is judged by its statement; every
        function call by the allow-list (:meth:`_check_calls`)."""
        import sqlglot

        explained = _EXPLAIN.match(text)
        body = text[explained.end():] if explained is not None else text
        try:
            tree = sqlglot.parse_one(body, read="postgres")
        except Exception:  # noqa: BLE001 - not readable here: the server says why, or refused
            self._unreadable(body, text)
            return
        if isinstance(tree, _READ_ROOTS):
            self._check_calls(tree, text)
            return
        if self.allow_writes and isinstance(tree, (exp.Insert, exp.Update, exp.Delete,
                                                   exp.Create, exp.Drop, exp.Alter)):
            temp = tree.find(exp.TemporaryProperty) is not None
            if not temp:
                self._check_calls(tree, text)
                return
        raise self.refused(type(tree).__name__.upper(), text)

    def _unreadable(self, body: str, text: str) -> None:
        """A statement sqlglot cannot read (so its calls cannot be checked): the server's
        own error when it is not valid SQL (``EXPLAIN`` plans it in a read-only
        transaction, runs nothing), else refused."""
        import psycopg

        try:
            with self.conn.transaction():
                self.conn.execute("SET TRANSACTION READ ONLY")
                self.conn.execute(f"EXPLAIN {body}", prepare=False)
                raise _Planned
        except psycopg.Error as e:
            err = self._driver_error(e, text)
            if err is not None:
                raise err from None
        except _Planned:
            pass
        raise refusal(self.name, "holds SQL blendsql cannot read (so cannot check its "
                      "function calls)", text)

    def function_verdicts(self) -> dict[str, list[Verdict]]:
        """Each function of the server's catalogue (``pg_proc``) by name: its verdicts (one
        per overload). Read once per connection, again when a statement names a function
        it does not list (one created since)."""
        if self._verdicts is None:
            rows = self.conn.execute(
                "SELECT lower(p.proname), n.nspname, p.prokind, p.provolatile, p.proretset, "
                "EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass "
                "AND d.objid = p.oid AND d.deptype = 'e') FROM pg_proc p JOIN pg_namespace n "
                "ON n.oid = p.pronamespace", prepare=False).fetchall()
            verdicts: dict[str, list[Verdict]] = {}
            for name, schema, kind, volatility, retset, extension in rows:
                verdicts.setdefault(name, []).append(
                    pg_verdict(name, schema, kind, volatility, bool(extension), bool(retset)))
            self._verdicts = verdicts
        return self._verdicts

    def _check_calls(self, tree: exp.Expression, text: str) -> None:
        """Every function the statement calls (sqlglot's parse of the text the server
        runs) is allowed by every overload of its name, or the statement is refused."""
        for name, node in sqlglot_calls(tree, "postgres"):
            found = self.function_verdicts().get(name)
            if found is None and isinstance(node, exp.Anonymous):
                self._verdicts = None  # created since the catalogue was read?
                found = self.function_verdicts().get(name)
            if found is None:
                continue  # sqlglot's syntax (CAST, EXTRACT ...), or no such function
            if self.allow_writes and name in SEQUENCE_FUNCTIONS:
                continue
            bad = next((v for v in found if not v.allowed), None)
            if bad is not None:
                raise refusal(self.name, f"calls {name}() ({bad.why})", text)

    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        import psycopg

        if not isinstance(e, psycopg.Error):
            return None
        msg = str(e).strip()
        if "read-only transaction" in msg:
            return self.refused("a write in a read-only transaction", sql)
        missing = isinstance(e, (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn,
                                 psycopg.errors.UndefinedFunction))
        return ExecutionError(f"PostgreSQL error: {msg}\n  in: {short(sql)}",
                              hint="check the table and column names" if missing
                              else "check the SQL")

    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        for i, c in enumerate(columns):
            if all(r[i] is None for r in rows):  # see transpile._untyped_lookups
                self.transpile.null_columns.add((name, c))
        cols = ", ".join(f"{quote(c)} {_TYPES[t]}" for c, t in zip(columns, types, strict=True))
        self._run(f"CREATE TEMP TABLE {quote(name)} ({cols})", (), engine_value)
        with self._dropped_on_failure(name):
            with self.conn.cursor() as cur, cur.copy(
                    f"COPY pg_temp.{quote(name)} FROM STDIN") as copy:
                for r in rows:
                    copy.write_row([as_type(v, t) for v, t in zip(r, types, strict=True)])
            if primary_key is not None:
                self._run(f"CREATE INDEX ON temp.{quote(name)} ({quote(primary_key)})", (),
                          engine_value)
            self.conn.execute(f"ANALYZE pg_temp.{quote(name)}")

    # -- schema --------------------------------------------------------------------------

    def column_types(self, table: str) -> dict[str, str] | None:
        """Columns of a user table, view or temp table with their types (None: no such
        table), for SQLite's typing in the translation (blendsql.db.sqlite_compat)."""
        rows = self.conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE "
            "lower(table_name) = lower(%s) AND table_schema = ANY(current_schemas(true)) "
            "ORDER BY ordinal_position", [table]).fetchall()
        return {str(c): str(t) for c, t in rows} or None

    def keys(self, table: str) -> Keys:
        """Primary and foreign keys from ``pg_constraint`` (columns in key order)."""
        _, rows = self.run_native(
            "SELECT con.contype, ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH "
            "ORDINALITY AS k(n, i) JOIN pg_attribute a ON a.attrelid = con.conrelid AND "
            "a.attnum = k.n ORDER BY k.i), ref.relname, ARRAY(SELECT a.attname FROM "
            "unnest(con.confkey) WITH ORDINALITY AS k(n, i) JOIN pg_attribute a ON "
            "a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i) FROM pg_constraint con "
            "JOIN pg_class rel ON rel.oid = con.conrelid JOIN pg_namespace ns ON ns.oid = "
            "rel.relnamespace LEFT JOIN pg_class ref ON ref.oid = con.confrelid WHERE "
            "rel.relname = %s AND ns.nspname = ANY(current_schemas(false)) AND con.contype IN "
            "('p', 'f') ORDER BY con.contype DESC, con.conname", [table])
        return Keys.from_rows(rows, "p", "f")

    def table_spelling(self, table: str) -> str | None:
        """How the catalog spells a user table or view named ``table`` in any case (None:
        no such table, or several that differ only in case)."""
        import psycopg

        try:
            rows = self.conn.execute(
                "SELECT DISTINCT table_name FROM information_schema.tables WHERE "
                "lower(table_name) = lower(%s) AND table_schema = ANY(current_schemas(false))",
                [table]).fetchall()
        except psycopg.Error:
            return None  # the names stay as written; the statement itself reports the error
        return str(rows[0][0]) if len(rows) == 1 else None

    def text_columns(self, table: str) -> list[str]:
        if table not in self._text_columns:
            rows = self.conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "AND table_schema = ANY(current_schemas(false)) AND data_type IN "
                "('text', 'character varying', 'character') ORDER BY ordinal_position",
                [table]).fetchall()
            self._text_columns[table] = [r[0] for r in rows]
        return self._text_columns[table]

    def tables(self) -> list[str]:
        _, rows = self.run_native(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "ANY(current_schemas(false)) ORDER BY 1")
        return [r[0] for r in rows]

    def fts_tables(self) -> list[str]:
        _, rows = self.run_native(
            "SELECT DISTINCT tablename FROM pg_indexes WHERE schemaname = "
            "ANY(current_schemas(false)) AND indexdef ILIKE %s ORDER BY 1", ["%to_tsvector%"])
        return [r[0] for r in rows]

    def table_columns(self, table: str) -> list[tuple[str, str]]:
        """Columns with their declared types (``text``, ``bigint``, ``double precision``)."""
        return information_schema_columns(
            self, table, "table_schema = ANY(current_schemas(false))", marker="%s")

