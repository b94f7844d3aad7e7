"""DuckDB and PostgreSQL backends: read-only data, no leftovers, the same errors, FTS.

The user's data must be byte-identical after any query (failed ones too):
DuckDB files are compared by their bytes, PostgreSQL tables by an md5 of
every row; the engine's temp objects must be gone after each query.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ExecutionError, ParseError, UnsafeQueryError
from blendsql.ingredients import MapIngredient, QAIngredient

duckdb = pytest.importorskip("duckdb")

SPIDER = Path(__file__).resolve().parents[1] / "data" / "spider"
SINGERS = SPIDER / "concert_singer" / "concert_singer.sqlite"
QUERY = ("SELECT Name, Age FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
         "AND Age > 20 ORDER BY Age")
BAD = [
    ("SELECT nope FROM singer", ExecutionError),
    ("SELECT Name FROM singer WHERE {{StartsWith('J', singer.nope)}} = TRUE", ExecutionError),
    ("DELETE FROM singer", UnsafeQueryError),
    ("DROP TABLE singer", UnsafeQueryError),
    ("CREATE TEMP TABLE x AS SELECT 1", UnsafeQueryError),
    ("BEGIN", UnsafeQueryError),
    ("SELECT {{StartsWith('J', singer.Name)}} FROM singer WHERE", ParseError),
]


class StartsWith(MapIngredient):
    """True where str(value) starts with the question."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(v).startswith(str(question)) for v in values]


class FirstTitle(QAIngredient):
    """The first title of the context (the documents found by MATCH)."""

    def run(self, question: Any, context: Any, options: Any, **kwargs: Any) -> Any:
        return None if context is None or context.empty else str(context.iloc[0, 0])


def _session(source: Any) -> BlendSQL:
    return BlendSQL(source, ingredients=[StartsWith, FirstTitle])


def _names(df: pd.DataFrame) -> list[str]:
    return [str(v) for v in df.iloc[:, 0]]


@pytest.fixture(scope="module")
def duck_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from blendsql.db.transfer import sqlite_to_duckdb

    return sqlite_to_duckdb(SINGERS, tmp_path_factory.mktemp("duck") / "cs.duckdb")


@pytest.fixture(scope="module")
def pg_url(postgres_server: Any) -> str:
    from blendsql.db.transfer import sqlite_to_postgres

    url = str(postgres_server.create_db("backend_tests"))
    sqlite_to_postgres(SINGERS, url)
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE documents (title TEXT, content TEXT)")
        con.execute("INSERT INTO documents VALUES ('Sydney', 'Sydney is a city in Australia'), "
                    "('Bathurst', 'Bathurst lies 120 miles west of Sydney'), "
                    "('Paris', 'Paris is in France')")
    return url


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _want() -> list[str]:
    return _names(_session(str(SINGERS)).execute(QUERY).df)


# ------------------------------------------------------------------------- DuckDB


def test_duckdb_file_same_answer_read_only_and_unchanged(duck_file: Path, tmp_path: Path) -> None:
    """A .duckdb file: the SQLite answer, writes refused, the file's bytes unchanged."""
    copy = tmp_path / "cs.duckdb"
    shutil.copy(duck_file, copy)
    before = _sha(copy)
    bsql = _session(str(copy))
    assert type(bsql.db).__name__ == "DuckDBDatabase"
    assert _names(bsql.execute(QUERY).df) == _want()
    for sql, err in BAD:
        with pytest.raises(err):
            bsql.execute(sql)
    bsql.close()
    assert _sha(copy) == before


def test_duckdb_connection_keeps_no_temp_objects(duck_file: Path) -> None:
    """A handed-in DuckDB connection: answers, and no engine object left after a query."""
    con = duckdb.connect(str(duck_file), read_only=True)
    try:
        bsql = _session(con)
        assert _names(bsql.execute(QUERY).df) == _want()
        left = con.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone()
        views = con.execute("SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT "
                            "internal").fetchone()
        assert left == (0,) and views == (0,)
    finally:
        con.close()


def test_duckdb_dataframe_parquet_and_csv_inputs(tmp_path: Path) -> None:
    """A DataFrame, a Parquet file and a CSV file run through an in-memory DuckDB."""
    df = pd.DataFrame({"name": ["Joe", "Ann", "Jim", None], "age": [30, 40, 50, 60]})
    csv = tmp_path / "people.csv"
    df.to_csv(csv, index=False)
    parquet = tmp_path / "people.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_csv_auto('{csv}')) TO '{parquet}' (FORMAT PARQUET)")
    con.close()
    q = "SELECT name FROM {t} WHERE {{{{StartsWith('J', {t}.name)}}}} = TRUE ORDER BY age"
    assert _names(_session(df).execute(q.format(t="df")).df) == ["Joe", "Jim"]
    assert _names(_session(str(csv)).execute(q.format(t="people")).df) == ["Joe", "Jim"]
    assert _names(_session({"p": str(parquet)}).execute(q.format(t="p")).df) == ["Joe", "Jim"]


def test_duckdb_in_memory_refuses_writes_clearly() -> None:
    """In-memory data cannot be opened read-only: writes are refused by statement type."""
    bsql = _session(pd.DataFrame({"a": [1, 2]}))
    for sql in ("DELETE FROM df", "INSERT INTO df VALUES (3)", "UPDATE df SET a = 0",
                "CREATE TABLE x AS SELECT 1", "SET threads = 1", "ATTACH 'x.db' AS x"):
        with pytest.raises(UnsafeQueryError, match="refused"):
            bsql.execute(sql)
    assert bsql.execute("SELECT sum(a) FROM df").df.iloc[0, 0] == 3


def test_duckdb_full_text_match_and_rank() -> None:
    """MATCH / ORDER BY rank on DuckDB's fts extension, and LLMQA-style context from it."""
    from blendsql.db.duck import fts_extension

    if fts_extension() is None:
        pytest.skip("duckdb-ext-fts has no build for this DuckDB")
    docs = pd.DataFrame({"title": ["Sydney", "Bathurst", "Paris"],
                         "content": ["Sydney is a city in Australia",
                                     "Bathurst lies 120 miles west of Sydney",
                                     "Paris is in France"]})
    from blendsql.db.duck import DuckDBDatabase  # a dict of pandas frames is SQLite's by default

    bsql = _session(DuckDBDatabase({"documents": docs,
                                    "w": pd.DataFrame({"city": ["Bathurst", "Paris"]})}))
    got = bsql.execute("SELECT title FROM documents WHERE documents MATCH 'miles OR west' "
                       "ORDER BY rank").df
    assert _names(got) == ["Bathurst"]
    answer = bsql.execute(
        "SELECT city FROM w WHERE city = {{FirstTitle('Which?', (SELECT title FROM documents "
        "WHERE documents MATCH '120 miles' ORDER BY rank LIMIT 1))}}").df
    assert _names(answer) == ["Bathurst"]
    # FTS5's rank qualified with the matched table, in a joined scope (the NL sketch's form)
    joined = bsql.execute("SELECT w.city FROM w JOIN documents ON w.city = documents.title "
                          "WHERE documents MATCH 'city OR miles' ORDER BY documents.rank").df
    assert sorted(_names(joined)) == ["Bathurst"]


def test_duckdb_match_without_index_in_read_only_file_is_clear(duck_file: Path) -> None:
    """No FTS index in a read-only file: a blendsql error that says so (never a raw one)."""
    bsql = _session(str(duck_file))
    with pytest.raises(ExecutionError, match="full-text|MATCH"):
        bsql.execute("SELECT Name FROM singer WHERE singer MATCH 'joe'")


# ----------------------------------------------------------------------- PostgreSQL


def _pg_checksums(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        tables = [r[0] for r in con.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
        sums = {t: con.execute(f'SELECT md5(coalesce(string_agg(x::text, \',\' ORDER BY '
                               f'x::text), \'\')) FROM "{t}" x').fetchone() for t in tables}
        sums["__schema__"] = con.execute(
            "SELECT string_agg(table_name || '.' || column_name || ':' || data_type, ',' "
            "ORDER BY table_name, column_name) FROM information_schema.columns WHERE "
            "table_schema = 'public'").fetchone()
    return sums


def test_postgres_same_answer_and_data_byte_identical(pg_url: str) -> None:
    """The SQLite answer on PostgreSQL; every table's rows identical after any query."""
    before = _pg_checksums(pg_url)
    bsql = _session(pg_url)
    assert type(bsql.db).__name__ == "PostgresDatabase"
    assert _names(bsql.execute(QUERY).df) == _want()
    for sql, err in BAD:
        with pytest.raises(err):
            bsql.execute(sql)
    bsql.close()
    assert _pg_checksums(pg_url) == before


def test_postgres_temp_tables_only_in_session_temp_schema_and_dropped(pg_url: str) -> None:
    """Engine rows go to pg_temp (nowhere else) and are dropped after the query."""
    seen: list[str] = []
    bsql = _session(pg_url)
    smoothie = bsql.execute(QUERY, rules_off={"static_filter"})  # the (value, output) table, not bound passing values
    seen = [s.sql or "" for s in smoothie.trace if s.kind == "temp_table"]
    assert seen and all("CREATE TEMP TABLE" in s for s in seen)
    left = bsql.db.conn.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON "
                                "n.oid = c.relnamespace WHERE c.relname LIKE '__bsql%'"
                                ).fetchone()
    assert left == (0,)
    bsql.close()


def test_postgres_handed_in_connection_given_back(pg_url: str) -> None:
    """A psycopg connection: autocommit restored; refused clearly inside a transaction."""
    import psycopg

    con = psycopg.connect(pg_url)
    try:
        bsql = _session(con)
        assert _names(bsql.execute(QUERY).df) == _want()
        assert con.autocommit is False
        con.execute("SELECT 1")  # now inside the user's transaction
        with pytest.raises(ExecutionError, match="inside a transaction"):
            bsql.execute(QUERY)
        con.rollback()
    finally:
        con.close()


def test_postgres_full_text_match_and_rank(pg_url: str) -> None:
    """MATCH / rank through tsvector / ts_rank, FTS5's OR kept."""
    bsql = _session(pg_url)
    got = bsql.execute("SELECT title FROM documents WHERE documents MATCH 'miles OR france' "
                       "ORDER BY rank, title").df
    assert sorted(_names(got)) == ["Bathurst", "Paris"]
    got = bsql.execute("SELECT title FROM documents WHERE documents MATCH 'sydney' "
                       "ORDER BY rank LIMIT 1").df
    assert _names(got) in (["Sydney"], ["Bathurst"])
    got = bsql.execute("SELECT d.title FROM documents AS d WHERE d MATCH 'miles OR france' "
                       "ORDER BY d.rank, d.title").df
    assert sorted(_names(got)) == ["Bathurst", "Paris"]
    bsql.close()


MORE_BAD = [
    "SELECT * FROM nope",
    "SELECT {{Nope('x', singer.Name)}} FROM singer",
    "SELECT Name FROM singer WHERE {{StartsWith('J', 'nope::Name')}} = TRUE",
    "SELECT Name FROM singer WHERE Age > ?",
    "INSERT INTO singer (Name) VALUES ('x')",
    "ALTER TABLE singer ADD COLUMN x INT",
    "SELECT Name FROM singer; SELECT 1",
]


def test_every_error_is_a_blendsql_error(pg_url: str, duck_file: Path) -> None:
    """The same bad query gets the same blendsql.errors class on each backend."""
    sessions = [_session(str(SINGERS)), _session(str(duck_file)), _session(pg_url)]
    for sql in MORE_BAD:
        classes = []
        for s in sessions:
            with pytest.raises(BlendSQLError) as info:
                s.execute(sql)
            classes.append(type(info.value))
        assert len(set(classes)) == 1, (sql, classes)
    for sql, err in BAD:
        classes = set()
        for s in sessions:
            with pytest.raises(BlendSQLError) as info:
                s.execute(sql)
            classes.add(type(info.value))
        assert classes == {err}, (sql, classes)


def test_dialect_lets_users_write_duckdb_sql() -> None:
    """``dialect="duckdb"``: DuckDB's own syntax (list literals) around ingredients.

    Read as SQLite's SQL, ``[30, 50]`` is a bracket-quoted identifier and the
    query fails; read as DuckDB's it is a list.
    """
    df = pd.DataFrame({"name": ["Joe", "Ann", "Jim"], "age": [30, 40, 50]})
    q = ("SELECT name FROM df WHERE {{StartsWith('J', df.name)}} = TRUE "
         "AND list_contains([30, 50], age) ORDER BY age")
    assert _names(BlendSQL(df, ingredients=[StartsWith], dialect="duckdb").execute(q).df) == [
        "Joe", "Jim"]
    plain = "SELECT name FROM df WHERE list_contains([30, 40], age) ORDER BY age"
    assert _names(BlendSQL(df, dialect="duckdb").execute(plain).df) == ["Joe", "Ann"]
    with pytest.raises(ExecutionError):
        BlendSQL(df, ingredients=[StartsWith]).execute(q)


def test_unknown_dialect_is_an_option_error() -> None:
    from blendsql.errors import OptionError

    with pytest.raises(OptionError, match="dialect"):
        BlendSQL(pd.DataFrame({"a": [1]}), dialect="klingon")


def test_time_limit_stops_a_duckdb_statement() -> None:
    """A statement past ``timeout`` is interrupted: QueryTimeoutError, and the session
    still answers the next query."""
    from blendsql.errors import QueryTimeoutError

    bsql = _session(pd.DataFrame({"a": [1, 2]}))
    endless = ("SELECT count(*) FROM range(100000000000) r(i), range(1000) s(j) "
               "WHERE i * j % 7 = 3")
    with pytest.raises(QueryTimeoutError):
        bsql.execute(endless, timeout=0.5)
    assert bsql.execute("SELECT sum(a) FROM df").df.iloc[0, 0] == 3


def test_time_limit_cancels_a_postgres_statement(pg_url: str) -> None:
    """PostgreSQL: the watchdog cancels the statement server-side; nothing stays open."""
    from blendsql.errors import QueryTimeoutError

    bsql = _session(pg_url)
    with pytest.raises(QueryTimeoutError):
        bsql.execute("SELECT pg_sleep(600)", timeout=0.5)
    assert _names(bsql.execute(QUERY).df) == _want()
    import psycopg

    assert bsql.db.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    bsql.close()


def test_percent_signs_survive_on_postgres(pg_url: str) -> None:
    """'%' in literals (LIKE patterns) reaches PostgreSQL as written, with or without params.

    psycopg reads '%' as a placeholder character; the translation doubles each one,
    which psycopg undoes only when parameters are passed (it was sent as '%%').
    """
    bsql = _session(pg_url)
    assert bsql.execute("SELECT 'a%' AS x").df.iloc[0, 0] == "a%"
    assert bsql.execute("SELECT 'a%' AS x WHERE 1 = ?", params=[1]).df.iloc[0, 0] == "a%"
    got = bsql.execute("SELECT Name FROM singer WHERE Name LIKE 'Jo%' AND "
                       "{{StartsWith('J', singer.Name)}} = TRUE ORDER BY Name").df
    want = _session(str(SINGERS)).execute("SELECT Name FROM singer WHERE Name LIKE 'Jo%' "
                                          "ORDER BY Name").df
    assert _names(got) == _names(want) and _names(got)
    bsql.close()


def test_cli_runs_on_duckdb_files_and_postgres_urls(duck_file: Path, pg_url: str) -> None:
    """``blendsql run DB QUERY`` with a .duckdb path or a postgresql:// URL (was: 'database
    file not found' for the URL)."""
    import io

    from blendsql import cli

    q = "SELECT Name FROM singer WHERE Age > 40 ORDER BY Name"
    outputs = []
    for db in (str(SINGERS), str(duck_file), pg_url):
        out, err = io.StringIO(), io.StringIO()
        rc = cli.main(["run", db, q, "--no-progress", "--format", "csv"], stdout=out,
                      stderr=err)
        assert rc == 0, err.getvalue()
        outputs.append(out.getvalue().splitlines()[1:])  # the header's case may differ
    assert outputs[0] and outputs[0] == outputs[1] == outputs[2]


def test_postgres_write_hidden_in_a_function_is_refused_by_the_server(pg_url: str) -> None:
    """A SELECT that writes through a function passes any statement-type check; the READ
    ONLY transaction refuses it (UnsafeQueryError), and the table stays empty."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("CREATE TABLE IF NOT EXISTS counter (n int)")
        con.execute("CREATE OR REPLACE FUNCTION bump() RETURNS int AS "
                    "$$ INSERT INTO counter VALUES (1) RETURNING 1 $$ LANGUAGE sql")
    bsql = _session(pg_url)
    with pytest.raises(UnsafeQueryError, match="read-only"):
        bsql.execute("SELECT bump()")
    with pytest.raises(UnsafeQueryError):
        bsql.execute("SELECT Name FROM singer WHERE {{StartsWith('J', singer.Name)}} = TRUE "
                     "AND bump() = 1")
    bsql.close()
    with psycopg.connect(pg_url, autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM counter").fetchone() == (0,)


def test_select_that_changes_session_state_is_refused(pg_url: str) -> None:
    """In-memory DuckDB cannot be read-only, and a rollback undoes neither nextval() nor
    setseed(): such calls are refused, so the next query sees the same sequence."""
    from blendsql.db.duck import DuckDBDatabase

    db = DuckDBDatabase({"t": pd.DataFrame({"a": [1]})})
    db.conn.execute("CREATE SEQUENCE s")
    duck = _session(db)
    pg = _session(pg_url)
    for bsql in (duck, pg):
        for sql in ("SELECT nextval('s') AS n", "SELECT setseed(0.5)",
                    "SELECT a FROM (SELECT 1 AS a) x WHERE NEXTVAL ('s') > 0"):
            with pytest.raises(UnsafeQueryError, match="refused"):
                bsql.execute(sql)
    assert db.conn.execute("SELECT nextval('s')").fetchone() == (1,)
    pg.close()


def test_transfer_copies_generated_columns_and_skips_fts_hidden_ones(tmp_path: Path) -> None:
    """A generated column is data in the copy; FTS5's hidden columns (its own name, rank)
    are not columns of the table."""
    import sqlite3

    from blendsql.db.transfer import read_sqlite

    src = tmp_path / "g.sqlite"
    con = sqlite3.connect(src)
    con.executescript("CREATE TABLE g (a INTEGER, b INTEGER, total INTEGER GENERATED ALWAYS AS "
                      "(a + b)); INSERT INTO g (a, b) VALUES (1, 2);"
                      "CREATE VIRTUAL TABLE documents USING fts5(title, content);"
                      "INSERT INTO documents VALUES ('t', 'c');")
    con.commit()
    con.close()
    tables = {name: (cols, rows) for name, cols, _, rows, _ in read_sqlite(src)}
    assert tables["g"] == (["a", "b", "total"], [(1, 2, 3)])
    assert tables["documents"] == (["title", "content"], [("t", "c")])
    from blendsql.db.transfer import sqlite_to_duckdb

    duck = _session(str(sqlite_to_duckdb(src, tmp_path / "g.duckdb")))
    assert duck.execute("SELECT total FROM g").df.iloc[0, 0] == 3


def test_postgres_names_with_capitals_are_found_in_any_case(postgres_server: Any) -> None:
    """Tables and columns spelled with capitals (pandas' ``to_sql`` makes them, quoted):
    the query's names in any case find them, as in SQLite; a CTE or SELECT alias of the
    same name is left alone; the plain-language schema shows the catalog's spelling."""
    import psycopg

    from blendsql.nl.serialize import serialize_schema

    url = str(postgres_server.create_db("capitals"))
    with psycopg.connect(url, autocommit=True) as con:
        con.execute('CREATE TABLE "Pets" ("PetID" integer, "PetType" text, pet_age integer)')
        con.execute("""INSERT INTO "Pets" VALUES (1, 'dog', 3), (2, 'cat', 5), (3, 'dog', 1)""")
        con.execute('CREATE TABLE "Owners" ("PetID" integer, "Name" text)')
        con.execute("""INSERT INTO "Owners" VALUES (1, 'Ann'), (3, 'Bo')""")
        con.execute('CREATE TABLE "Tags" ("V" text, "K" text)')  # the engine lookups' names
        con.execute("""INSERT INTO "Tags" VALUES ('apple', 'zzz'), ('banana', 'apple')""")
        con.execute('CREATE TABLE lower_pets (petid integer, v text, k text)')
        con.execute("INSERT INTO lower_pets VALUES (1, 'x', 'y'), (2, 'x', 'y')")
    bsql = _session(url)
    try:
        for sql in ("SELECT PetID FROM Pets WHERE PetType = 'dog' ORDER BY PetID",
                    "SELECT petid FROM pets WHERE pettype = 'dog' ORDER BY 1",
                    'SELECT "PETID" FROM "PETS" WHERE "pettype" = \'dog\' ORDER BY 1',
                    "SELECT p.PetID FROM Pets AS p JOIN Owners AS o ON p.PetID = o.PetID "
                    "ORDER BY o.Name",
                    "WITH owners AS (SELECT PetID FROM Pets WHERE PetType = 'dog') "
                    "SELECT PetID FROM owners ORDER BY PetID"):  # the CTE, not the table
            assert bsql.execute(sql).df.iloc[:, 0].tolist() == [1, 3], sql
        got = bsql.execute("SELECT PetType AS kind, COUNT(*) AS n FROM Pets GROUP BY kind "
                           "ORDER BY kind").df
        assert got.values.tolist() == [["cat", 1], ["dog", 2]]
        # scopes: derived tables, USING, correlated and lookup subqueries, a column two
        # tables spell differently, a GROUP BY alias SQLite reads as the column
        cases = {
            "SELECT t.PetID FROM (SELECT PetID FROM Pets WHERE PetType = 'dog') AS t "
            "ORDER BY t.PetID": [1, 3],
            "SELECT t.Age FROM (SELECT max(pet_age) AS Age FROM Pets) AS t": [5],
            "SELECT Name FROM Owners JOIN Pets USING (PetID) ORDER BY Name": ["Ann", "Bo"],
            "SELECT PetID FROM Pets WHERE PetID IN (SELECT PetID FROM Owners WHERE Name = 'Bo')": [3],
            "SELECT PetID FROM Pets p WHERE EXISTS (SELECT 1 FROM Owners o WHERE o.PetID = p.PetID "
            "AND o.Name = 'Ann')": [1],
            "SELECT pet_age / 2 AS pet_age FROM Pets GROUP BY pet_age ORDER BY 1": [0, 1, 2],
            "SELECT PetID FROM lower_pets WHERE petid IN (SELECT PetID FROM Pets WHERE "
            "PetType = 'cat')": [2],
        }
        for sql, want in cases.items():
            assert bsql.execute(sql).df.iloc[:, 0].tolist() == want, sql
        mapped = bsql.execute("SELECT Name FROM Owners WHERE {{StartsWith('A', Owners.Name)}} "
                              "= TRUE").df
        assert mapped["Name"].tolist() == ["Ann"]
        looked_up = bsql.execute("SELECT petid FROM lower_pets WHERE {{StartsWith('1', "
                                 "lower_pets.petid)}} = TRUE").df
        assert looked_up.iloc[:, 0].tolist() == [1]
        tagged = bsql.execute("SELECT V FROM Tags WHERE {{StartsWith('a', Tags.V)}} = TRUE").df
        assert tagged.iloc[:, 0].tolist() == ["apple"]  # the engine's own v / k stay its own
        schema = serialize_schema(bsql)
        assert 'CREATE TABLE "Pets" ("PetID" integer, "PetType" text, "pet_age" integer)' in schema
    finally:
        bsql.close()


def test_copies_carry_the_keys_the_rows_satisfy(tmp_path: Path, postgres_server: Any) -> None:
    """Primary and foreign keys reach the DuckDB and PostgreSQL copies and their schema
    text (the joins a model reads); a key the rows break is dropped, never the rows."""
    import sqlite3

    from blendsql.db.transfer import sqlite_keys, sqlite_to_duckdb, sqlite_to_postgres

    src = tmp_path / "k.sqlite"
    con = sqlite3.connect(src)
    con.executescript(
        "CREATE TABLE Team (TeamID INTEGER PRIMARY KEY, name TEXT);"
        "CREATE TABLE player (id INTEGER, team INTEGER, PRIMARY KEY (id), "
        "  FOREIGN KEY (team) REFERENCES team (teamid));"
        "CREATE TABLE dup (id INTEGER PRIMARY KEY, t INTEGER REFERENCES Team, x INTEGER "
        "  REFERENCES nowhere (id));"
        "INSERT INTO Team VALUES (1, 'a'), (2, 'b');"
        "INSERT INTO player VALUES (10, 1), (11, 2);"
        "INSERT INTO dup VALUES (1, 1, 0), (2, 9, 0);")  # team 9 does not exist
    con.commit()
    con.close()
    keys = sqlite_keys(src)
    assert keys["player"].primary == ("id",)
    assert keys["player"].foreign == ((("team",), "Team", ("TeamID",)),)
    assert keys["dup"].foreign == ((("t",), "Team", ("TeamID",)),)  # 'nowhere' left out
    duck = _session(str(sqlite_to_duckdb(src, tmp_path / "k.duckdb")))
    url = str(postgres_server.create_db("keys"))
    sqlite_to_postgres(src, url)
    pg = _session(url)
    try:
        for bsql in (duck, pg):
            ddl = {t.name: t.ddl for t in bsql.db.schema()}
            assert 'FOREIGN KEY ("team") REFERENCES "Team" ("TeamID")' in ddl["player"]
            assert 'PRIMARY KEY ("id")' in ddl["player"]
            assert bsql.execute("SELECT COUNT(*) FROM dup").df.iloc[0, 0] == 2  # rows kept
        duck_dup = {t.name: t.ddl for t in duck.db.schema()}["dup"]
        assert "FOREIGN KEY" not in duck_dup  # DuckDB checks it on insert: dropped
        pg_dup = {t.name: t.ddl for t in pg.db.schema()}["dup"]
        assert 'FOREIGN KEY ("t") REFERENCES "Team" ("TeamID")' in pg_dup  # NOT VALID: kept
    finally:
        duck.close()
        pg.close()
