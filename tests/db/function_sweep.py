"""Call every function a backend's catalogue lists in a read-only blendsql session.

Run by ``tests/db/test_function_sweep.py`` in a child process per backend, so a
function that crashes the process (a signal) is a reported failure, not the end
of the test run::

    python function_sweep.py BACKEND OUT.json MARKER_FILE [POSTGRES_URL]

BACKEND is ``sqlite``, ``duckdb``, ``postgres`` or ``spark``. Each function is
called with a few argument shapes (none, a string, a number, the marker file's
path, two arguments) through the session's one guarded path (``run_native``:
the backend's own SQL, under the read-only rules). Each call must either run,
fail with an ordinary SQL error (a ``BlendSQLError``), or be refused with
``UnsafeQueryError``; the marker file's content must never come back, and the
server's settings (PostgreSQL) and the JVM's system properties (Spark) must be
as before. The name being called is written to ``OUT.json.progress`` before each
call, so a crash names its function. ``OUT.json`` gets the counts and problems.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, UnsafeQueryError

#: how many seconds one call may run
CALL_TIMEOUT = 10.0


def shapes(marker: str) -> list[str]:
    """The argument lists each function is called with (SQL text)."""
    path = marker.replace("'", "''")
    return ["", "'x'", "1", f"'{path}'", "'x', 1"]


def external_entity(marker: Path) -> str:
    """An XML document whose entity is the marker file (XXE): an XML function that
    resolves it would return the file's content."""
    uri = marker.resolve().as_uri()
    return f"<!DOCTYPE a [<!ENTITY x SYSTEM \"{uri}\">]><a>&x;</a>".replace("'", "''")


def quoted(name: str, quote: str) -> str:
    """``name`` as an identifier (quoted, so an operator-like or keyword name is one)."""
    return quote + name.replace(quote, quote * 2) + quote


class Sweep:
    """Calls, their outcomes per function, and the problems found."""

    def __init__(self, bsql: BlendSQL, marker: Path, progress: Path) -> None:
        self.bsql = bsql
        self.secret = marker.read_text().strip()
        self.progress = progress
        self.outcomes: dict[str, set[str]] = {}
        self.problems: list[str] = []
        self.calls = 0

    def call(self, name: str, sql: str) -> str:
        """Run one statement; 'ran', 'error' or 'refused' (a problem is recorded)."""
        self.progress.write_text(sql)
        self.calls += 1
        try:
            _, rows = self.bsql.db.run_native(sql)
        except UnsafeQueryError:
            outcome = "refused"
        except BlendSQLError:
            outcome = "error"
        except Exception as e:  # noqa: BLE001 - what the sweep looks for
            self.problems.append(f"{sql}: not a blendsql error: {type(e).__name__}: {e}"[:300])
            outcome = "error"
        else:
            outcome = "ran"
            if self.secret in repr(rows):
                self.problems.append(f"{sql}: returned the marker file's content")
        self.outcomes.setdefault(name, set()).add(outcome)
        return outcome

    def run(self, names: Iterable[str], statements: Callable[[str], list[str]], *,
            until_ran: bool = False) -> None:
        """Each statement of each name; the next name after a refusal (by name: the other
        shapes are refused the same way) or, with ``until_ran``, after one that ran."""
        for name in names:
            for sql in statements(name):
                outcome = self.call(name, sql)
                if outcome == "refused" or (until_ran and outcome == "ran"):
                    break

    def report(self, backend: str, seconds: float) -> dict[str, Any]:
        functions = {n: o for n, o in self.outcomes.items() if not n.startswith("probe: ")}
        refused = sorted(n for n, o in functions.items() if "refused" in o)
        probes = {n: sorted(o) for n, o in self.outcomes.items() if n.startswith("probe: ")}
        return {"backend": backend, "functions": len(functions), "calls": self.calls,
                "allowed": len(functions) - len(refused), "refused": len(refused),
                "probes": probes, "refused_names": refused,
                "problems": self.problems, "seconds": round(seconds, 1)}


def sqlite_sweep(marker: Path, progress: Path) -> tuple[Sweep, Callable[[], list[str]]]:
    import sqlite3

    folder = marker.parent
    path = folder / "sweep.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE IF NOT EXISTS t (a INTEGER, s TEXT);"
                      "CREATE VIRTUAL TABLE IF NOT EXISTS d3 USING fts4(body);"
                      "CREATE VIRTUAL TABLE IF NOT EXISTS d5 USING fts5(body);"
                      "INSERT INTO t VALUES (1, 'x'); INSERT INTO d3 VALUES ('hello');"
                      "INSERT INTO d5 VALUES ('hello');")
    con.commit()
    con.close()
    user = sqlite3.connect(path, check_same_thread=False)  # a handed-in connection
    sweep = Sweep(BlendSQL(user), marker, progress)
    names = sorted({str(r[0]) for r in user.execute("SELECT name FROM pragma_function_list")})

    def statements(name: str) -> list[str]:
        fn = quoted(name, '"')
        return [f"SELECT {fn}({args})" for args in shapes(str(marker))] + [
            f"SELECT {fn}(d3) FROM d3 WHERE d3 MATCH 'hello'",
            f"SELECT {fn}(d5) FROM d5 WHERE d5 MATCH 'hello'"]

    sweep.run(names, statements)

    def after() -> list[str]:
        # the FTS tables still read (after fts3_tokenizer(name, pointer) this crashes) and
        # the user's connection is given back outside a transaction
        problems = []
        if user.execute("SELECT count(*) FROM d3 WHERE d3 MATCH 'hello'").fetchone() != (1,):
            problems.append("the FTS4 table no longer reads")
        if user.in_transaction:
            problems.append("the user's connection was left in a transaction")
        return problems

    return sweep, after


def duckdb_sweep(marker: Path, progress: Path) -> tuple[Sweep, Callable[[], list[str]]]:
    import pandas as pd

    from blendsql.db.duck import DuckDBDatabase

    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1], "s": ["x"]})})
    sweep = Sweep(BlendSQL(db), marker, progress)
    rows = db.conn.execute("SELECT DISTINCT function_name, function_type FROM "
                           "duckdb_functions() ORDER BY 1, 2").fetchall()
    tables = {str(n) for n, kind in rows if kind in ("table", "table_macro")}
    names = sorted({str(n) for n, kind in rows if kind != "pragma"})

    def statements(name: str) -> list[str]:
        fn = quoted(name, '"')
        if name in tables:
            return [f"SELECT * FROM {fn}({args}) LIMIT 3" for args in shapes(str(marker))]
        return [f"SELECT {fn}({args})" for args in shapes(str(marker))]

    sweep.run(names, statements)
    return sweep, lambda: []


def postgres_sweep(marker: Path, progress: Path, url: str,
                   ) -> tuple[Sweep, Callable[[], list[str]]]:
    import psycopg

    def settings() -> dict[str, str]:
        with psycopg.connect(url, autocommit=True) as con:
            return {str(n): str(v) for n, v in con.execute(
                "SELECT name, setting FROM pg_settings WHERE context <> 'internal'")}

    before = settings()
    bsql = BlendSQL(url)
    bsql.db.timeout = CALL_TIMEOUT
    sweep = Sweep(bsql, marker, progress)
    pid = bsql.db.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    names = sorted({str(r[0]) for r in bsql.db.conn.execute(
        "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE p.prokind <> 'p'")})

    def statements(name: str) -> list[str]:
        fn = quoted(name, '"')
        return [f"SELECT {fn}({args})" for args in shapes(str(marker))]

    sweep.run(names, statements)
    xml = external_entity(marker)
    for sql in (f"SELECT xmlparse(document '{xml}')::text",
                f"SELECT xpath('/a/text()', xmlparse(document '{xml}'))::text",
                f"SELECT xpath('/a/text()', CAST('{xml}' AS xml))::text",
                f"SELECT CAST('{xml}' AS xml)::text"):
        sweep.call("probe: xml external entity", sql)

    def after() -> list[str]:
        problems = []
        changed = {k for k, v in settings().items() if before.get(k) != v}
        if changed:
            problems.append(f"server settings changed: {sorted(changed)}")
        if bsql.db.conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid:
            problems.append("the session's connection was replaced")
        return problems

    return sweep, after


def spark_sweep(marker: Path, progress: Path) -> tuple[Sweep, Callable[[], list[str]]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from spark_session import start_session

    spark = start_session()
    # pyspark logs every failed statement with its JVM stack (most calls of the sweep fail)
    logging.getLogger("SQLQueryContextLogger").disabled = True
    jvm_system = spark._jvm.java.lang.System

    def properties() -> dict[str, str]:
        props = jvm_system.getProperties()
        return {str(k): str(props.getProperty(k)) for k in props.stringPropertyNames()}

    before = properties()
    frames = {"t": spark.createDataFrame([(1, "x")], "a long, s string")}
    sweep = Sweep(BlendSQL(frames), marker, progress)
    names = sorted({str(r[0]) for r in spark.sql("SHOW FUNCTIONS").collect()})
    generators = {"range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
                  "posexplode_outer", "stack", "json_tuple", "read_files"}

    def statements(name: str) -> list[str]:
        fn = quoted(name, "`")
        out = [f"SELECT {fn}({args})" for args in shapes(str(marker))]
        if name in generators:
            out += [f"SELECT * FROM {fn}({args})" for args in shapes(str(marker))]
        return out

    sweep.run(names, statements, until_ran=True)  # ~80 ms a statement: one run is enough
    for fmt in ("text", "csv", "json", "parquet", "binaryFile"):
        sweep.call(f"probe: {fmt}.`path`", f"SELECT * FROM {fmt}.`{marker}`")
    xml = external_entity(marker)
    for fn in ("xpath_string", "xpath"):
        sweep.call("probe: xml external entity", f"SELECT {fn}('{xml}', 'a')")
    sweep.call("probe: xml external entity", f"SELECT from_xml('{xml}', 'a string')")

    def after() -> list[str]:
        now = properties()
        changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        return [f"JVM system properties changed: {changed}"] if changed else []

    return sweep, after


def main(argv: list[str]) -> int:
    backend, out, marker_file = argv[0], Path(argv[1]), Path(argv[2])
    progress = out.with_name(out.name + ".progress")
    t0 = time.perf_counter()
    if backend == "sqlite":
        sweep, after = sqlite_sweep(marker_file, progress)
    elif backend == "duckdb":
        sweep, after = duckdb_sweep(marker_file, progress)
    elif backend == "postgres":
        sweep, after = postgres_sweep(marker_file, progress, argv[3])
    elif backend == "spark":
        sweep, after = spark_sweep(marker_file, progress)
    else:
        raise SystemExit(f"unknown backend {backend}")
    sweep.problems += after()
    report = sweep.report(backend, time.perf_counter() - t0)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "refused_names"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
