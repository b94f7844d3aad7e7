"""What going distributed costs on one machine (issue 25): Spark vs DuckDB vs SQLite on the
plain part of a BlendSQL query over ``--rows`` (10M) rows.

The data: one synthetic table ``t(id INTEGER, cat TEXT, v TEXT, x INTEGER)``, generated
by DuckDB from ``range()`` with fixed arithmetic (``--seed`` shifts it; no random
generator, so every run and every engine holds the same rows): ``cat`` takes 1000
values (``c000`` .. ``c999``), ``v`` 100,000 (``v000000`` .. ``v099999``), ``x`` is
0 .. 999, uniform. It is written once per run, under a temp folder, as a Parquet folder
(``--parts`` files), and each backend gets it in its own storage, timed apart (build
times): a SQLite file (rows read from the Parquet by DuckDB, ``executemany`` in chunks;
no index), a DuckDB file (``CREATE TABLE .. AS SELECT * FROM read_parquet``), and for
Spark the Parquet folder itself registered as the temporary view ``t`` of a
``SparkSession`` (``local[2]``, then ``local[1]``; ``--spark-masters``).

The query (``--x-below`` 10 keeps 1% of the rows)::

    SELECT t.cat, COUNT(*) AS n FROM t
    WHERE t.x < 10 AND {{EndsWith('7', t.v)}} = TRUE
    GROUP BY t.cat ORDER BY t.cat

``EndsWith`` is a user map ingredient without a model (True where the value's text ends
with the question), so the plain part is all there is to time: BlendSQL runs the filter
on the engine, hands the ingredient only the distinct ``v`` that survive it, and runs the
rest on the engine. Its twin, the same rows with the ingredient's rule written in SQL
(``t.v LIKE '%7'``), runs directly on each engine (``sqlite3``, ``duckdb``,
``spark.sql(..).collect()``). Per backend, side by side in one run, after one warm-up of
each, ``--repeat`` rounds of (twin, BlendSQL) alternating, medians of wall time:

- ``plain_ms`` (the twin on the engine) and ``blendsql_ms`` (``BlendSQL(..).execute``
  with the backend's source: the SQLite path, the DuckDB connection, the SparkSession);
- ``overhead_ms`` = blendsql - plain (what BlendSQL adds on that engine: the filter read
  once for the candidate values, the ingredient, the temp rows, the final query), and
  where BlendSQL's time went (the trace's seconds by step kind);
- ratios Spark / SQLite, Spark / DuckDB, DuckDB / SQLite, of plain and of BlendSQL.

Checked (the run fails otherwise): every result of every round, twin or BlendSQL, on
every backend, is the same rows; the ingredient was called once per query with exactly
the distinct surviving values (``Meta.values_passed`` = ``COUNT(DISTINCT v)`` under the
filter), recorded beside the table's row and distinct counts.

    python benchmarks/plain_backends.py [--rows 10000000] [--repeat 3]
        [--backends sqlite duckdb spark] [--spark-masters 'local[2]' 'local[1]']

Writes benchmarks/results/plain_backends.json (``--out``): the run record of
``benchmarks/protocol.py`` (command, commit, machine, CPU, date), the load average
before, after and after each backend, the build times and the table above.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients import MapIngredient  # noqa: E402
from blendsql.smoothie import Smoothie  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "plain_backends.json"
CATS = 1000
VALUES = 100_000
X_RANGE = 1000
SUFFIX = "7"
QUERY = ("SELECT t.cat, COUNT(*) AS n FROM t WHERE t.x < {x_below} AND "
         "{{{{EndsWith('" + SUFFIX + "', t.v)}}}} = TRUE GROUP BY t.cat ORDER BY t.cat")
TWIN = ("SELECT t.cat, COUNT(*) AS n FROM t WHERE t.x < {x_below} AND "
        "t.v LIKE '%" + SUFFIX + "' GROUP BY t.cat ORDER BY t.cat")
#: the table's rows as DuckDB computes them from ``range()``: ``{seed}`` shifts each column
ROWS_SQL = (
    "SELECT CAST(i AS INTEGER) AS id, "
    "printf('c%03d', (i * 2654435761 + 1 + {seed} * 7919) % 1000003 % " + str(CATS) + ") AS cat, "
    "printf('v%06d', (i * 40503 + 7 + {seed} * 104729) % 1000033 % " + str(VALUES) + ") AS v, "
    "CAST((i * 7919 + 3 + {seed} * 31) % " + str(X_RANGE) + " AS INTEGER) AS x "
    "FROM range({lo}, {hi}) r(i)")
SQLITE_CHUNK = 200_000


class EndsWith(MapIngredient):
    """True where the value's text ends with the question (no model: the rule itself)."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [str(v).endswith(str(question)) for v in values]


def query(x_below: int) -> str:
    return QUERY.format(x_below=int(x_below))


def twin(x_below: int) -> str:
    return TWIN.format(x_below=int(x_below))


Rows = list[tuple[str, int]]


def canonical(rows: Iterable[Sequence[Any]]) -> Rows:
    """Result rows as (cat, count), sorted: the form every backend's answer is compared in."""
    return sorted((str(r[0]), int(r[1])) for r in rows)


def smoothie_rows(s: Smoothie) -> Rows:
    return canonical(s.df.astype(object).itertuples(index=False, name=None))


# ------------------------------------------------------------------ data


def generate(folder: Path, rows: int, seed: int = 0, parts: int = 8) -> dict[str, Any]:
    """The table as a Parquet folder of ``parts`` files (consecutive id ranges); its counts."""
    import duckdb

    if rows < 1 or parts < 1:
        raise ValueError("rows and parts must be positive")
    folder.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        bounds = [rows * k // parts for k in range(parts + 1)]
        for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            if hi > lo:
                sql = ROWS_SQL.format(seed=int(seed), lo=lo, hi=hi)
                target = str(folder / f"part-{k:05d}.parquet").replace("'", "''")
                con.execute(f"COPY ({sql}) TO '{target}' (FORMAT parquet)")
        n, cats, values, xs = con.execute(
            f"SELECT COUNT(*), COUNT(DISTINCT cat), COUNT(DISTINCT v), COUNT(DISTINCT x) "
            f"FROM {parquet_glob(folder)}").fetchone() or (0, 0, 0, 0)
    finally:
        con.close()
    return {"rows": n, "distinct_cat": cats, "distinct_v": values, "distinct_x": xs,
            "parquet_files": len(list(folder.glob("*.parquet"))),
            "parquet_mb": round(sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6, 1)}


def parquet_glob(folder: Path) -> str:
    """``read_parquet('<folder>/*.parquet')`` for DuckDB (files read in name order)."""
    text = str(folder / "*.parquet").replace("'", "''")
    return f"read_parquet('{text}')"


def build_duckdb(parquet: Path, path: Path) -> float:
    """A DuckDB file holding ``t``; seconds."""
    import duckdb

    t0 = time.perf_counter()
    con = duckdb.connect(str(path))
    try:
        con.execute(f"CREATE TABLE t AS SELECT * FROM {parquet_glob(parquet)}")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    return time.perf_counter() - t0


def build_sqlite(parquet: Path, path: Path) -> float:
    """A SQLite file holding ``t`` (no index), rows inserted in chunks; seconds."""
    import duckdb

    t0 = time.perf_counter()
    src = duckdb.connect()
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("CREATE TABLE t (id INTEGER, cat TEXT, v TEXT, x INTEGER)")
        cur = src.execute(f"SELECT id, cat, v, x FROM {parquet_glob(parquet)}")
        while True:
            chunk = cur.fetchmany(SQLITE_CHUNK)
            if not chunk:
                break
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", chunk)
        con.commit()
    finally:
        con.close()
        src.close()
    return time.perf_counter() - t0


def surviving_values(parquet: Path, x_below: int) -> dict[str, int]:
    """Rows that pass the plain filter and their distinct ``v``: what the ingredient should see."""
    import duckdb

    con = duckdb.connect()
    try:
        rows, values = con.execute(
            f"SELECT COUNT(*), COUNT(DISTINCT v) FROM {parquet_glob(parquet)} "
            f"WHERE x < {int(x_below)}").fetchone() or (0, 0)
    finally:
        con.close()
    return {"rows_passing_filter": rows, "distinct_values_passing_filter": values}


# ------------------------------------------------------------------ measuring


def trace_ms(s: Smoothie) -> dict[str, float]:
    """BlendSQL's time by trace step kind (sql, ingredient, temp_table, parse, plan), in ms."""
    out: dict[str, float] = defaultdict(float)
    for step in s.trace:
        out[step.kind] += step.seconds * 1000
    return {k: round(v, 1) for k, v in sorted(out.items())}


def measure(name: str, plain: Callable[[], Rows], blend: Callable[[], Smoothie],
            repeat: int, expected_values: int | None = None,
            want: Rows | None = None) -> dict[str, Any]:
    """One warm-up of each, then ``repeat`` rounds (plain, BlendSQL); medians and checks.

    Every result must equal the first twin's rows (and ``want`` when given); every
    BlendSQL run must have called the ingredient once with ``expected_values`` values.
    """
    plain_ms: list[float] = []
    blend_ms: list[float] = []
    reference: Rows | None = want
    last: Smoothie | None = None
    passed: set[int] = set()

    def check(rows: Rows, what: str) -> None:
        nonlocal reference
        if reference is None:
            reference = rows
        if rows != reference:
            missing = sorted(set(reference) - set(rows))[:5]
            extra = sorted(set(rows) - set(reference))[:5]
            raise AssertionError(f"{name}: {what} differs from the reference "
                                 f"({len(rows)} vs {len(reference)} rows; missing {missing}, "
                                 f"unexpected {extra})")

    for i in range(repeat + 1):
        t0 = time.perf_counter()
        rows = plain()
        seconds = time.perf_counter() - t0
        check(rows, "the plain twin")
        t0 = time.perf_counter()
        s = blend()
        b_seconds = time.perf_counter() - t0
        check(smoothie_rows(s), "BlendSQL's result")
        if s.meta.ingredient_calls != 1:
            raise AssertionError(f"{name}: {s.meta.ingredient_calls} ingredient calls, want 1")
        if expected_values is not None and s.meta.values_passed != expected_values:
            raise AssertionError(f"{name}: the ingredient saw {s.meta.values_passed} values, "
                                 f"want the {expected_values} distinct surviving ones")
        passed.add(s.meta.values_passed)
        last = s
        if i:  # round 0 is the warm-up
            plain_ms.append(seconds * 1000)
            blend_ms.append(b_seconds * 1000)
        print(f"  {name} round {i}{' (warm-up)' if not i else ''}: plain {seconds * 1000:.0f} ms, "
              f"BlendSQL {b_seconds * 1000:.0f} ms", file=sys.stderr, flush=True)
    assert last is not None and reference is not None
    plain_med, blend_med = statistics.median(plain_ms), statistics.median(blend_ms)
    return {
        "backend": name,
        "plain_ms": round(plain_med, 1),
        "blendsql_ms": round(blend_med, 1),
        "overhead_ms": round(blend_med - plain_med, 1),
        "blendsql_over_plain": round(blend_med / plain_med, 3) if plain_med else None,
        "plain_ms_all": [round(t, 1) for t in plain_ms],
        "blendsql_ms_all": [round(t, 1) for t in blend_ms],
        "values_sent_to_ingredient": sorted(passed)[0] if len(passed) == 1 else sorted(passed),
        "ingredient_calls": last.meta.ingredient_calls,
        "blendsql_ms_by_step_kind": trace_ms(last),
        "blendsql_steps": [{"kind": st.kind, "summary": st.summary, "rows": st.rows_out,
                            "ms": round(st.seconds * 1000, 1)}
                           for st in last.trace if st.kind != "plan"],
        "result_rows": len(reference),
        "result_total": sum(n for _, n in reference),
        "rows": reference,  # popped by main() (recorded once, in "result")
    }


def bench_sqlite(path: Path, x_below: int, repeat: int, expected_values: int | None = None,
                 want: Rows | None = None) -> dict[str, Any]:
    """SQLite: the twin through ``sqlite3`` (read-only), BlendSQL over the path."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    bsql = BlendSQL(str(path), ingredients=[EndsWith], cache=False)
    try:
        sql, q = twin(x_below), query(x_below)
        return measure("sqlite", lambda: canonical(con.execute(sql).fetchall()),
                       lambda: bsql.execute(q), repeat, expected_values, want)
    finally:
        bsql.close()
        con.close()


def bench_duckdb(path: Path, x_below: int, repeat: int, expected_values: int | None = None,
                 want: Rows | None = None) -> dict[str, Any]:
    """DuckDB: one read-only connection, the twin on it directly and BlendSQL over it."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    bsql = BlendSQL(con, ingredients=[EndsWith], cache=False)
    try:
        sql, q = twin(x_below), query(x_below)
        out = measure("duckdb", lambda: canonical(con.execute(sql).fetchall()),
                      lambda: bsql.execute(q), repeat, expected_values, want)
        out["threads"] = (con.execute("SELECT current_setting('threads')").fetchone() or [None])[0]
        return out
    finally:
        bsql.close()
        con.close()


def register_parquet(spark: Any, parquet: Path, view: str = "t") -> float:
    """The Parquet folder as the session's temporary view ``view``; seconds."""
    t0 = time.perf_counter()
    spark.read.parquet(str(parquet)).createOrReplaceTempView(view)
    return time.perf_counter() - t0


def bench_spark(spark: Any, parquet: Path, x_below: int, repeat: int,
                expected_values: int | None = None, want: Rows | None = None,
                name: str = "spark") -> dict[str, Any]:
    """Spark: the Parquet folder as view ``t``; the twin through ``spark.sql(..).collect()``,
    BlendSQL over the session. The view is dropped at the end."""
    register_s = register_parquet(spark, parquet)
    bsql = BlendSQL(spark, ingredients=[EndsWith], cache=False)
    try:
        sql, q = twin(x_below), query(x_below)
        out = measure(name, lambda: canonical(spark.sql(sql).collect()),
                      lambda: bsql.execute(q), repeat, expected_values, want)
    finally:
        bsql.close()
        spark.catalog.dropTempView("t")
    out["register_view_ms"] = round(register_s * 1000, 1)
    out["master"] = spark.sparkContext.master
    out["default_parallelism"] = spark.sparkContext.defaultParallelism
    out["shuffle_partitions"] = spark.conf.get("spark.sql.shuffle.partitions")
    return out


def start_spark(master: str, warehouse: Path) -> Any:
    """A local session as the tests start one (tests/spark_session.py), with ``master``:
    shuffle partitions and parallelism = its cores, no UI, bound to 127.0.0.1."""
    from pyspark.sql import SparkSession

    cores = master_cores(master)
    if SparkSession.getActiveSession() is not None:
        # getOrCreate would hand back that session (its master, not ``master``) and the
        # run would stop it at the end
        raise SystemExit("spark: a Spark session is already active in this process; run the "
                         "benchmark in a process of its own")
    # the workers run this interpreter (Spark takes PYSPARK_PYTHON, else python3 from PATH)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("blendsql-plain-backends")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.default.parallelism", str(cores))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.warehouse.dir", str(warehouse))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    if spark.sparkContext.master != master:
        spark.stop()
        raise SystemExit(f"spark: asked for master {master!r}, got "
                         f"{spark.sparkContext.master!r}")
    return spark


def master_cores(master: str) -> int:
    """Cores of a ``local[N]`` master (``local`` = 1, ``local[*]`` = this machine's)."""
    if master == "local":
        return 1
    if not (master.startswith("local[") and master.endswith("]")):
        raise SystemExit(f"--spark-masters: {master!r} is not local, local[N] or local[*]")
    inner = master[len("local["):-1]
    if inner == "*":
        return os.cpu_count() or 1
    try:
        return max(1, int(inner))
    except ValueError:
        raise SystemExit(f"--spark-masters: {master!r} is not local, local[N] or local[*]") from None


def spark_missing() -> str | None:
    """Why no Spark session can start here (None: it can)."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'blendsql[spark]')"
    java = shutil.which("java")
    if java is None:
        return "Java is not installed (Spark needs Java 17 or later)"
    try:
        subprocess.run([java, "-version"], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"Java does not run here ({java} -version: {e})"
    return None


# ------------------------------------------------------------------ the run


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The table: per backend plain / BlendSQL / overhead, and the ratios between engines."""
    rows = [{k: r[k] for k in ("backend", "plain_ms", "blendsql_ms", "overhead_ms",
                               "blendsql_over_plain", "values_sent_to_ingredient")}
            for r in results]
    by = {r["backend"]: r for r in results}
    ratios: dict[str, Any] = {}
    pairs = [(a, b) for a in by for b in by
             if a != b and (a.startswith("spark") and not b.startswith("spark")
                            or (a, b) == ("duckdb", "sqlite"))]
    for a, b in pairs:
        ratios[f"{a}/{b}"] = {"plain": ratio(by[a]["plain_ms"], by[b]["plain_ms"]),
                              "blendsql": ratio(by[a]["blendsql_ms"], by[b]["blendsql_ms"])}
    if "spark_local1" in by and "spark_local2" in by:
        ratios["spark_local1/spark_local2"] = {
            "plain": ratio(by["spark_local1"]["plain_ms"], by["spark_local2"]["plain_ms"]),
            "blendsql": ratio(by["spark_local1"]["blendsql_ms"], by["spark_local2"]["blendsql_ms"])}
    return {"rows": rows, "ratios": ratios, "same_rows_everywhere": True}


def backend_name(master: str) -> str:
    """``spark_local2`` for ``local[2]`` (a key the published numbers can name)."""
    return "spark_" + "".join(ch for ch in master if ch.isalnum())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="measured rounds after one warm-up")
    ap.add_argument("--seed", type=int, default=0, help="shifts every generated column")
    ap.add_argument("--x-below", type=int, default=10,
                    help=f"the plain filter t.x < N (x is 0 .. {X_RANGE - 1}, uniform)")
    ap.add_argument("--parts", type=int, default=8, help="Parquet files the table is written as")
    ap.add_argument("--backends", nargs="+", default=["sqlite", "duckdb", "spark"],
                    choices=["sqlite", "duckdb", "spark"])
    ap.add_argument("--spark-masters", nargs="+", default=["local[2]", "local[1]"])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.rows < 1 or args.repeat < 1 or args.parts < 1:
        ap.error("--rows, --repeat and --parts must be positive")
    if not 1 <= args.x_below <= X_RANGE:
        ap.error(f"--x-below must be 1 .. {X_RANGE} (x is 0 .. {X_RANGE - 1})")
    if "spark" in args.backends:  # before any backend runs, not after the others' minutes
        for master in args.spark_masters:
            master_cores(master)
        names = [backend_name(m) for m in args.spark_masters]
        if len(set(names)) != len(names):
            ap.error(f"--spark-masters: each master once ({' '.join(args.spark_masters)})")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from benchmarks.protocol import run_record

    record = run_record("plain_backends.py", argv,
                        model_name="none: a deterministic map ingredient (EndsWith), no model")
    record["protocol"] = (
        "one synthetic table, generated once per run (DuckDB range(), fixed arithmetic), in "
        "each backend's own storage (SQLite file, DuckDB file, Parquet folder as a Spark temp "
        "view); per backend one warm-up then --repeat rounds of (plain twin, BlendSQL) "
        "alternating, medians of wall time; every result checked equal across backends and "
        "to the twin; the ingredient checked to see exactly the distinct surviving values")
    record["settings"] = {"rows": args.rows, "repeat": args.repeat, "seed": args.seed,
                          "x_below": args.x_below, "parts": args.parts,
                          "backends": args.backends, "spark_masters": args.spark_masters,
                          "query": query(args.x_below), "twin": twin(args.x_below)}
    record["load_1_5_15_before"] = load()
    if "spark" in args.backends:
        why = spark_missing()
        if why:
            raise SystemExit(f"spark: {why} (or leave it out: --backends sqlite duckdb)")
    results: list[dict[str, Any]] = []
    builds: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="plain-backends-") as tmp:
        folder = Path(tmp)
        parquet = folder / "t_parquet"
        print(f"generating {args.rows} rows ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        table = generate(parquet, args.rows, args.seed, args.parts)
        builds["parquet_generate_s"] = round(time.perf_counter() - t0, 2)
        table.update(surviving_values(parquet, args.x_below))
        record["table"] = table
        expected = table["distinct_values_passing_filter"]
        want: Rows | None = None

        def done(r: dict[str, Any]) -> None:
            """One backend measured: its rows become what every later backend must give."""
            nonlocal want
            want = r.pop("rows")
            record["result"] = {"rows": len(want), "total_count": sum(n for _, n in want),
                                "first_rows": want[:5]}
            after = load()
            r["load_1min_after"] = after[0] if after else None
            results.append(r)
            print(json.dumps({k: r[k] for k in ("backend", "plain_ms", "blendsql_ms",
                                                "overhead_ms", "values_sent_to_ingredient")}),
                  file=sys.stderr, flush=True)

        for backend in args.backends:
            if backend == "sqlite":
                path = folder / "t.sqlite"
                builds["sqlite_build_s"] = round(build_sqlite(parquet, path), 2)
                builds["sqlite_mb"] = round(path.stat().st_size / 1e6, 1)
                r = bench_sqlite(path, args.x_below, args.repeat, expected, want)
                path.unlink()
                done(r)
            elif backend == "duckdb":
                path = folder / "t.duckdb"
                builds["duckdb_build_s"] = round(build_duckdb(parquet, path), 2)
                builds["duckdb_mb"] = round(path.stat().st_size / 1e6, 1)
                r = bench_duckdb(path, args.x_below, args.repeat, expected, want)
                path.unlink()
                done(r)
            else:
                for master in args.spark_masters:
                    name = backend_name(master)
                    t0 = time.perf_counter()
                    spark = start_spark(master, folder / "warehouse")
                    builds[f"{name}_session_start_s"] = round(time.perf_counter() - t0, 2)
                    try:
                        r = bench_spark(spark, parquet, args.x_below, args.repeat, expected,
                                        want, name=name)
                    finally:
                        spark.stop()
                    builds[f"{name}_register_view_s"] = round(r["register_view_ms"] / 1000, 3)
                    done(r)
    builds["note"] = ("the Parquet folder, written by DuckDB from range(), is Spark's storage "
                      "and the source the SQLite and DuckDB files are built from; the first "
                      "Spark session's start includes the JVM's, later masters reuse that JVM "
                      "(a new SparkContext)")
    record["build"] = builds
    record["backends"] = results
    record["summary"] = summarise(results)
    record["load_1_5_15_after"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"build": builds, **record["summary"]}, indent=2))
    return record


if __name__ == "__main__":
    main()
