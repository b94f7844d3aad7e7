"""Engine overhead per backend, beside the backend's own query with a Python UDF.

The same data (a generated table ``t(id, x)`` with ``--distinct`` distinct
text values of ``x``) on SQLite, DuckDB and PostgreSQL; one BlendSQL query
with a zero-cost map ingredient (``IsEven``: True where the number in the
text is even) against the backend's own query with the same Python function
as a UDF (SQLite ``create_function``, DuckDB ``create_function``). PostgreSQL
has no Python UDF here (no plpython3u), so its row compares with the plain
query without the function. Ratio = median engine seconds / median baseline.

The 10M-row figure: ``--rows 10000000 --backends duckdb``.

Run:  python benchmarks/backend_overhead.py [--rows 200000] [--repeat 5]
          [--backends sqlite,duckdb,postgres]
Writes benchmarks/results/backend_overhead[_<rows>].json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients.base import MapIngredient  # noqa: E402

QUERY = "SELECT COUNT(*) FROM t WHERE {{IsEven('even?', t.x)}} = TRUE"
PLAIN = "SELECT COUNT(*) FROM t WHERE is_even(x)"
NO_UDF = "SELECT COUNT(*) FROM t"


def is_even(value: Any) -> bool:
    """The function both sides use: is the number after 'v' even?"""
    return int(str(value)[1:]) % 2 == 0


class IsEven(MapIngredient):
    """``is_even`` as a map ingredient (no model)."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [is_even(v) for v in values]


def median_seconds(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def make_duckdb(path: Path, rows: int, distinct: int) -> None:
    import duckdb

    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t AS SELECT i AS id, 'v' || (i % {distinct}) AS x "
                f"FROM range({rows}) r(i)")
    con.close()


def make_sqlite(path: Path, rows: int, distinct: int) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER, x TEXT)")
    con.execute(f"INSERT INTO t WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
                f"FROM r WHERE i < {rows - 1}) SELECT i, 'v' || (i % {distinct}) FROM r")
    con.commit()
    con.close()


def bench_sqlite(path: Path, repeat: int) -> dict[str, Any]:
    con = sqlite3.connect(path)
    con.create_function("is_even", 1, is_even, deterministic=True)
    base, want = median_seconds(lambda: con.execute(PLAIN).fetchall(), repeat)
    bsql = BlendSQL(str(path), ingredients=[IsEven])
    eng, got = median_seconds(lambda: bsql.execute(QUERY).df.iloc[0, 0], repeat)
    assert int(got) == want[0][0], (got, want)
    return {"engine_s": eng, "baseline_s": base, "baseline": "sqlite3 + create_function UDF"}


def bench_duckdb(path: Path, repeat: int) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    con.create_function("is_even", is_even, ["VARCHAR"], "BOOLEAN", side_effects=False)
    base, want = median_seconds(lambda: con.execute(PLAIN).fetchall(), repeat)
    con.close()
    bsql = BlendSQL(str(path), ingredients=[IsEven])
    eng, got = median_seconds(lambda: bsql.execute(QUERY).df.iloc[0, 0], repeat)
    bsql.close()
    assert int(got) == want[0][0], (got, want)
    return {"engine_s": eng, "baseline_s": base,
            "baseline": "duckdb + create_function (native Python UDF)"}


def bench_postgres(sqlite_path: Path, repeat: int) -> dict[str, Any]:
    import psycopg
    from pg_server import PgServer, pg_missing

    why = pg_missing()
    if why is not None:
        return {"skipped": why}
    server = PgServer()
    try:
        url = server.create_db("bench")
        from blendsql.db.transfer import sqlite_to_postgres

        sqlite_to_postgres(sqlite_path, url)
        with psycopg.connect(url, autocommit=True) as con:
            base, _ = median_seconds(lambda: con.execute(NO_UDF).fetchall(), repeat)
            want = sum(1 for (x,) in con.execute("SELECT x FROM t") if is_even(x))
        bsql = BlendSQL(url, ingredients=[IsEven])
        eng, got = median_seconds(lambda: bsql.execute(QUERY).df.iloc[0, 0], repeat)
        bsql.close()
        assert int(got) == want, (got, want)
        return {"engine_s": eng, "baseline_s": base,
                "baseline": "plain COUNT(*) without the function (no Python UDF in PostgreSQL)"}
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--distinct", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backends", default="sqlite,duckdb,postgres")
    args = ap.parse_args()
    out: dict[str, Any] = {"rows": args.rows, "distinct": args.distinct,
                           "repeat": args.repeat, "query": QUERY,
                           "machine": platform.platform(), "backends": {}}
    with tempfile.TemporaryDirectory() as tmp:
        sq, dk = Path(tmp) / "t.sqlite", Path(tmp) / "t.duckdb"
        backends = args.backends.split(",")
        if "sqlite" in backends or "postgres" in backends:
            make_sqlite(sq, args.rows, args.distinct)
        for name in backends:
            if name == "sqlite":
                res = bench_sqlite(sq, args.repeat)
            elif name == "duckdb":
                make_duckdb(dk, args.rows, args.distinct)
                res = bench_duckdb(dk, args.repeat)
            else:
                res = bench_postgres(sq, args.repeat)
            if "engine_s" in res:
                res["ratio"] = res["engine_s"] / res["baseline_s"]
            out["backends"][name] = res
            print(name, json.dumps(res))
    suffix = "" if args.rows == 200_000 else f"_{args.rows}"
    path = ROOT / "benchmarks" / "results" / f"backend_overhead{suffix}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
