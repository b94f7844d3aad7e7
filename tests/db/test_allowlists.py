"""The reproduced attacks of issue 39, refused by each backend's allow-list.

- SQLite: ``fts3_tokenizer('simple', x'41..')`` (a pointer: the next read of the FTS
  table crashed the process), on a file and on a connection the user hands in
  (given back as it came); ``load_extension``.
- DuckDB: file readers, a path as a table, ``COPY``, settings.
- PostgreSQL: the server's files, settings, signals, locks.
- Spark: back-quoted ``reflect`` / ``java_method`` (they changed the JVM),
  ``text.`/etc/hostname``` (a file of the driver), ``TRANSFORM .. USING``.

Everywhere: names are read from the parsed query, so quoting and case do not
hide a call, and a string literal that spells one is data; the ordinary
functions (text, numbers, dates, JSON, aggregates, windows, full-text search)
are never refused.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blendsql import BlendSQL
from blendsql.errors import UnsafeQueryError

ROOT = Path(__file__).resolve().parents[2]
POINTER = "x'4141414141414141'"


def _fts_file(folder: Path) -> Path:
    path = folder / "fts.sqlite"
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE t (a INTEGER, s TEXT, d TEXT);"
                      "INSERT INTO t VALUES (1, 'Ab', '2024-01-02'), (2, 'cd', '2024-03-04');"
                      "CREATE VIRTUAL TABLE docs USING fts4(body);"
                      "CREATE VIRTUAL TABLE docs5 USING fts5(body);"
                      "INSERT INTO docs VALUES ('hello world');"
                      "INSERT INTO docs5 VALUES ('hello world');")
    con.commit()
    con.close()
    return path


# ------------------------------------------------------------------------------ SQLite

def test_fts3_tokenizer_is_refused_and_the_fts_table_still_reads(tmp_path: Path) -> None:
    """In a child process: before the allow-list, this crashed the interpreter."""
    path = _fts_file(tmp_path)
    attacks = [f"SELECT fts3_tokenizer('simple', {POINTER})",
               f"SELECT \"FTS3_TOKENIZER\" ( 'simple', {POINTER})",
               f"SELECT * FROM docs WHERE fts3_tokenizer('simple', {POINTER}) IS NULL"]
    script = textwrap.dedent(f"""
        import sqlite3
        from blendsql import BlendSQL
        from blendsql.errors import UnsafeQueryError

        def refused(bsql, sql):
            try:
                bsql.execute(sql)
            except UnsafeQueryError as e:
                assert "fts3_tokenizer" in str(e) and e.hint, e
                return True
            return False

        bsql = BlendSQL({str(path)!r})
        for sql in {attacks!r}:
            assert refused(bsql, sql), sql
        assert bsql.execute("SELECT body FROM docs WHERE docs MATCH 'hello'").df.shape == (1, 1)

        user = sqlite3.connect({str(path)!r})
        calls = []
        def mine(*args):
            calls.append(args)
            return sqlite3.SQLITE_OK
        user.set_authorizer(mine)
        handed = BlendSQL(user)
        assert refused(handed, {attacks[0]!r})
        calls.clear()
        assert user.execute("SELECT body FROM docs WHERE docs MATCH 'hello'").fetchall()
        assert calls, "the user's own authorizer is back on the connection"
        assert not user.in_transaction
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


@pytest.mark.parametrize("sql", [
    "SELECT load_extension('x')",
    "SELECT Load_Extension('x', 'entry')",
    "SELECT fts5('x')",
    "SELECT optimize(docs) FROM docs",
    "SELECT rtreenode(2, x'00')",
])
def test_sqlite_functions_outside_the_allow_list_are_refused(tmp_path: Path, sql: str) -> None:
    bsql = BlendSQL(str(_fts_file(tmp_path)))
    with pytest.raises(UnsafeQueryError, match="refused") as info:
        bsql.execute(sql)
    assert info.value.hint


ORDINARY_SQLITE = [
    "SELECT abs(-1), lower(s), upper(s), substr(s, 1, 1), coalesce(NULL, a), length(s), "
    "replace(s, 'A', 'a'), instr(s, 'b'), round(1.26, 1), trim(' x '), typeof(a), "
    "ifnull(NULL, 1), nullif(a, 2), hex(s), quote(s), printf('%d', a) FROM t",
    "SELECT count(*), sum(a), avg(a), min(a), max(a), total(a), group_concat(s) FROM t",
    "SELECT date(d), strftime('%Y', d), julianday(d), datetime(d, '+1 day') FROM t",
    "SELECT json_object('a', a), json_extract('{\"x\": 1}', '$.x'), json_array(1, 2), "
    "'{\"x\": 2}' ->> '$.x' FROM t",
    "SELECT row_number() OVER (ORDER BY a), rank() OVER (ORDER BY a), "
    "lag(a) OVER (ORDER BY a), dense_rank() OVER (ORDER BY a) FROM t",
    "SELECT body, snippet(docs), offsets(docs), matchinfo(docs) FROM docs "
    "WHERE docs MATCH 'hello'",
    "SELECT body, bm25(docs5), highlight(docs5, 0, '[', ']') FROM docs5 "
    "WHERE docs5 MATCH 'hello' ORDER BY rank",
    "SELECT 'fts3_tokenizer(' AS s, 'load_extension(x)' AS t",
    "SELECT s FROM t WHERE s LIKE 'a%' OR s GLOB 'c*'",
]


@pytest.mark.parametrize("sql", ORDINARY_SQLITE)
def test_ordinary_sqlite_functions_run(tmp_path: Path, sql: str) -> None:
    bsql = BlendSQL(str(_fts_file(tmp_path)))
    assert len(bsql.execute(sql).df) >= 1


def test_application_functions_of_a_handed_in_connection_still_run(tmp_path: Path) -> None:
    con = sqlite3.connect(_fts_file(tmp_path))
    con.create_function("double_it", 1, lambda x: 2 * x)
    bsql = BlendSQL(con)
    assert bsql.execute("SELECT double_it(a) AS v FROM t ORDER BY v").df["v"].tolist() == [2, 4]
    with pytest.raises(UnsafeQueryError):
        bsql.execute("SELECT fts3_tokenizer('simple')")
    assert con.execute("SELECT double_it(21)").fetchone() == (42,)


def test_file_functions_of_sqlite_extensions_are_refused_on_a_handed_in_connection(
        tmp_path: Path) -> None:
    """``readfile`` / ``writefile`` / ``edit`` (the shell's fileio extension, here stood in
    for by Python functions of those names) are refused by name, whoever registered them."""
    con = sqlite3.connect(_fts_file(tmp_path))
    for name in ("readfile", "writefile", "edit"):
        con.create_function(name, -1, lambda *a: "blendsql-marker")
    bsql = BlendSQL(con)
    for sql in ("SELECT readfile('/etc/hostname')", "SELECT writefile('x', 'y')",
                "SELECT EDIT('x')"):
        with pytest.raises(UnsafeQueryError, match="refused"):
            bsql.execute(sql)


# ------------------------------------------------------------------------------ DuckDB

@pytest.fixture
def duck(tmp_path: Path) -> Iterator[tuple[BlendSQL, Path, Path]]:
    pytest.importorskip("duckdb")
    from blendsql.db.duck import DuckDBDatabase

    marker = tmp_path / "marker.txt"
    marker.write_text("blendsql-marker-duck\n")
    csv = tmp_path / "opened.csv"
    csv.write_text("a,b\n1,2\n")
    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1, 2], "s": ["Ab", "cd"]}), "opened": csv})
    bsql = BlendSQL(db)
    yield bsql, marker, csv
    bsql.close()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_text('{m}')",
    'SELECT * FROM "READ_TEXT" (\'{m}\')',
    "SELECT * FROM read_blob('{m}')",
    "SELECT * FROM read_csv('{m}')",
    "SELECT * FROM read_csv_auto(['{c}', '{m}'])",
    "SELECT * FROM '{m}'",
    "SELECT * FROM glob('{d}/*')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT current_setting('threads')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM t WHERE a IN (SELECT length(content) FROM read_text('{m}'))",
    "EXPLAIN SELECT * FROM read_text('{m}')",
    "EXPLAIN ANALYZE SELECT * FROM read_text('{m}')",
    "explain /* x */ analyze SELECT * FROM read_text('{m}')",
])
def test_duckdb_file_readers_and_settings_are_refused(duck: Any, sql: str) -> None:
    bsql, marker, csv = duck
    sql = sql.format(m=marker, c=csv, d=marker.parent)
    with pytest.raises(UnsafeQueryError, match="refused"):
        bsql.db.run_native(sql)


def test_duckdb_copy_is_refused_even_with_writes_allowed(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    from blendsql.db.duck import DuckDBDatabase

    out = tmp_path / "out.csv"
    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1]})}, allow_writes=True)
    with pytest.raises(UnsafeQueryError, match="COPY"):
        db.run_native(f"COPY t TO '{out}'")
    assert not out.exists()


def test_duckdb_writes_allowed_still_read_no_file(tmp_path: Path) -> None:
    """``allow_writes=True`` lets a statement change the user's tables, not read files."""
    pytest.importorskip("duckdb")
    from blendsql.db.duck import DuckDBDatabase

    secret = tmp_path / "secret.csv"
    secret.write_text("a\nblendsql-marker\n")
    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1]})}, allow_writes=True)
    for sql in (f"CREATE TABLE x AS SELECT * FROM '{secret}'",
                f"CREATE TABLE y AS SELECT * FROM read_csv('{secret}')",
                f"INSERT INTO t SELECT length(content) FROM read_text('{secret}')"):
        with pytest.raises(UnsafeQueryError, match="refused"):
            db.run_native(sql)
    db.run_native("INSERT INTO t SELECT a + 1 FROM t")
    assert db.run_native("SELECT count(*) FROM t")[1] == [(2,)]
    db.close()


def test_duckdb_ordinary_functions_and_the_opened_file_run(duck: Any) -> None:
    bsql, _, csv = duck
    for sql in [
        "SELECT abs(-1), lower(s), upper(s), substr(s, 1, 1), coalesce(NULL, a), length(s), "
        "replace(s, 'A', 'a'), instr(s, 'b'), round(1.26, 1), trim(' x '), typeof(a) FROM t",
        "SELECT count(*), sum(a), avg(a), min(a), max(a), group_concat(s) FROM t",
        "SELECT date('2024-01-02'), strftime('%Y', '2024-01-02'), "
        "json_extract('{\"x\": 1}', '$.x'), json_array(1, 2) FROM t",
        "SELECT row_number() OVER (ORDER BY a), rank() OVER (ORDER BY a), "
        "lag(a) OVER (ORDER BY a) FROM t",
        "SELECT 'read_text(' AS s",
        "SELECT * FROM opened",
    ]:
        assert len(bsql.execute(sql).df) >= 1, sql
    assert bsql.db.run_native(f"SELECT * FROM read_csv_auto('{csv}')")[1] == [(1, 2)]


# ------------------------------------------------------------------------------ PostgreSQL

@pytest.fixture(scope="module")
def pg_url(postgres_server: Any) -> str:
    import psycopg

    url = str(postgres_server.create_db("allowlist_tests"))
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE t (a int, s text, d date)")
        con.execute("INSERT INTO t VALUES (1, 'Ab', '2024-01-02'), (2, 'cd', '2024-03-04')")
    return url


@pytest.mark.parametrize("sql", [
    "SELECT pg_read_file('/etc/hostname')",
    'SELECT "PG_READ_FILE"(\'/etc/hostname\')',
    "SELECT pg_catalog.pg_read_binary_file('/etc/hostname')",
    "SELECT * FROM pg_ls_dir('.')",
    "SELECT lo_import('/etc/hostname')",
    "SELECT set_config('work_mem', '1MB', false)",
    "SELECT pg_terminate_backend(pg_backend_pid())",
    "SELECT pg_cancel_backend(1)",
    "SELECT pg_reload_conf()",
    "SELECT pg_advisory_lock(1)",
    "SELECT txid_current()",
    "SELECT current_setting('data_directory')",
    "SELECT query_to_xml('SELECT pg_read_file(''/etc/hostname'')', true, true, '')",
    "SELECT a FROM t WHERE a IN (SELECT length(pg_read_file('/etc/hostname')))",
])
def test_postgres_server_functions_are_refused(pg_url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as con:
        before = con.execute("SELECT name, setting FROM pg_settings").fetchall()
    bsql = BlendSQL(pg_url)
    pid = bsql.db.conn.info.backend_pid
    with pytest.raises(UnsafeQueryError, match="refused") as info:
        bsql.db.run_native(sql)
    assert info.value.hint
    assert bsql.db.conn.info.backend_pid == pid
    assert bsql.execute("SELECT count(*) AS n FROM t").df["n"].tolist() == [2]
    bsql.close()
    with psycopg.connect(pg_url, autocommit=True) as con:
        assert con.execute("SELECT name, setting FROM pg_settings").fetchall() == before


def test_postgres_ordinary_functions_run(pg_url: str) -> None:
    bsql = BlendSQL(pg_url)
    for sql in [
        "SELECT abs(-1), lower(s), upper(s), substr(s, 1, 1), coalesce(NULL, a), length(s), "
        "replace(s, 'A', 'a'), instr(s, 'b'), round(1.26, 1), trim(' x ') FROM t",
        "SELECT count(*), sum(a), avg(a), min(a), max(a), group_concat(s) FROM t",
        "SELECT date(d), strftime('%Y', d) FROM t",
        "SELECT row_number() OVER (ORDER BY a), rank() OVER (ORDER BY a), "
        "lag(a) OVER (ORDER BY a) FROM t",
        "SELECT 'pg_read_file(' AS s",
    ]:
        assert len(bsql.execute(sql).df) >= 1, sql
    for sql in ["SELECT strpos(s, 'b'), json_build_object('a', a) ->> 'a', now(), "
                "date_trunc('day', d), to_char(d, 'YYYY'), extract(year FROM d) FROM t",
                "SELECT * FROM generate_series(1, 3)"]:
        assert bsql.db.run_native(sql)[1], sql
    bsql.close()


# ------------------------------------------------------------------------------ Spark

@pytest.fixture
def spark_bsql(spark_session: Any) -> Iterator[BlendSQL]:
    frames = {"t": spark_session.createDataFrame([(1, "Ab"), (2, "cd")], "a long, s string")}
    bsql = BlendSQL(frames)
    yield bsql
    bsql.close()


@pytest.mark.parametrize("sql", [
    "SELECT `reflect`('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT reflect('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT `java_method`('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT JAVA_METHOD ('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT try_reflect('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT system.builtin.reflect('java.lang.System', 'setProperty', 'blendsql.k', 'v')",
    "SELECT a FROM t WHERE a IN (SELECT length(`reflect`('java.lang.System', "
    "'setProperty', 'blendsql.k', 'v')))",
    "WITH c AS (SELECT reflect('java.lang.System', 'setProperty', 'blendsql.k', 'v') AS x) "
    "SELECT * FROM c",
    "SELECT transform(array(1), x -> java_method('java.lang.System', 'setProperty', "
    "'blendsql.k', 'v'))",
])
def test_spark_java_calls_are_refused_and_the_jvm_is_unchanged(
        spark_bsql: BlendSQL, spark_session: Any, sql: str) -> None:
    system = spark_session._jvm.java.lang.System
    with pytest.raises(UnsafeQueryError, match="refused") as info:
        spark_bsql.db.run_native(sql)
    assert info.value.hint
    assert system.getProperty("blendsql.k") is None


@pytest.mark.parametrize("sql", [
    "SELECT * FROM text.`/etc/hostname`",
    "SELECT * FROM `text`.`/etc/hostname`",
    "SELECT * FROM TEXT.`/etc/hostname`",
    "SELECT * FROM csv.`/etc/hostname`",
    "SELECT * FROM IDENTIFIER('text.`/etc/hostname`')",
    "SELECT * FROM t WHERE s IN (SELECT value FROM json.`/etc/hostname`)",
    "SELECT * FROM read_files('/etc/hostname')",
    "SELECT TRANSFORM(s) USING 'cat' AS (x) FROM t",
    "ADD JAR 'evil.jar'",
    "CREATE TEMPORARY FUNCTION f AS 'org.example.F'",
    "SET spark.sql.ansi.enabled = false",
])
def test_spark_files_and_programs_are_refused(spark_bsql: BlendSQL, sql: str) -> None:
    with pytest.raises(UnsafeQueryError, match="refused"):
        spark_bsql.db.run_native(sql)


def test_spark_string_literal_naming_a_function_is_data(spark_bsql: BlendSQL) -> None:
    assert spark_bsql.execute("SELECT 'reflect(' AS s").df["s"].tolist() == ["reflect("]
    assert spark_bsql.db.run_native("SELECT 'java_method(x)' AS s, 1 AS `reflect`")[1] == [
        ("java_method(x)", 1)]


def test_spark_ordinary_functions_run(spark_bsql: BlendSQL) -> None:
    for sql in [
        "SELECT abs(-1), lower(s), upper(s), substr(s, 1, 1), coalesce(NULL, a), length(s), "
        "replace(s, 'A', 'a'), instr(s, 'b'), round(1.26, 1), trim(' x ') FROM t",
        "SELECT count(*), sum(a), avg(a), min(a), max(a) FROM t",
        "SELECT date('2024-01-02'), strftime('%Y', '2024-01-02') FROM t",
        "SELECT row_number() OVER (ORDER BY a), rank() OVER (ORDER BY a), "
        "lag(a) OVER (ORDER BY a) FROM t",
    ]:
        assert len(spark_bsql.execute(sql).df) >= 1, sql
    assert spark_bsql.db.run_native(
        "SELECT get_json_object('{\"x\": 1}', '$.x'), date_format(current_date(), 'y'), "
        "explode(array(1, 2)), * FROM range(2)")[1]


# ------------------------------------------------------------------------------ spellings

_SPACE = st.sampled_from(["", " ", "\n\t", " /* ( */ ", " -- x\n"])
_PLACES = [
    "SELECT {call}",
    "SELECT a FROM t WHERE a IN (SELECT length({call}))",
    "WITH c AS (SELECT {call} AS v) SELECT * FROM c",
    "SELECT CASE WHEN a > 0 THEN {call} END FROM t",
]


@st.composite
def _spelling(draw: st.DrawFn, names: list[str], quotes: list[tuple[str, str]],
              args: str) -> tuple[str, str]:
    """A call of one of ``names`` in random case, quoting and spacing, somewhere in a
    statement; and the same text as a string literal (which must run)."""
    name = draw(st.sampled_from(names))
    cased = "".join(c.upper() if draw(st.booleans()) else c for c in name)
    left, right = draw(st.sampled_from(quotes))
    call = f"{left}{cased}{right}{draw(_SPACE)}({draw(_SPACE)}{args})"
    place = draw(st.sampled_from(_PLACES))
    literal = "'" + call.replace("'", "''").replace("--", "- -") + "'"
    return place.format(call=call), place.format(call=literal)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_spelling(["fts3_tokenizer", "load_extension"],
                 [("", ""), ('"', '"'), ("[", "]"), ("`", "`")], "'simple', x'41'"))
def test_sqlite_spellings_of_a_refused_call_are_refused(case: tuple[str, str]) -> None:
    """Case, quoting, comments and whitespace never hide a call; a literal is data."""
    con = sqlite3.connect(":memory:")
    con.execute("CREATE TABLE t (a INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    bsql = BlendSQL(con)
    call, literal = case
    with pytest.raises(UnsafeQueryError, match="refused"):
        bsql.db.run_native(call)
    bsql.db.run_native(literal)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(_spelling(["read_text", "read_blob", "current_setting", "getvariable"],
                 [("", ""), ('"', '"')], "'x'"))
def test_duckdb_spellings_of_a_refused_call_are_refused(case: tuple[str, str]) -> None:
    pytest.importorskip("duckdb")
    from blendsql.db.duck import DuckDBDatabase

    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1]})})
    call, literal = case
    with pytest.raises(UnsafeQueryError, match="refused"):
        db.run_native(call)
    db.run_native(literal)
    db.close()
