"""Planning time for n AND-ed ingredient filters (issue 10, finding 7).

``SELECT id FROM t WHERE {{Has('q0', t.a)}} AND {{Has('q1', t.b)}} AND ...`` over a
generated 2000-row table, n = 5, 10, 20, 40, 100, 200 (``--sizes``), with a model-free
map ingredient (so the
seconds are the engine's own: candidate queries, cost estimates, lookups). Cost
ordering is on (the default). Before the fix every remaining call was re-estimated
at every step (time ~ n^3); now each call is estimated once, calls with the same
candidate query share one counting statement, the relaxed WHERE is written as text
from cached parts, and once the cascade has no row left the later candidates run no
statement.

    python benchmarks/many_filters.py                 # writes benchmarks/results/many_filters.json
    python benchmarks/many_filters.py --label before  # another label / output key
    python benchmarks/many_filters.py --sizes 5 10 200 --out mf.json  # another file

Besides seconds, each size records counts that do not depend on the machine: the
candidate queries built (``relax_scope`` calls) and the cost estimates run, per filter
(issue 26: planning linear in the number of filters, 200 in about a second).

The "before" numbers were taken with the same script on a git worktree of commit
54a11ff (``PYTHONPATH=<worktree> python benchmarks/many_filters.py --label before``).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient
from blendsql.plan import candidates

COLUMNS = 8
SIZES = (5, 10, 20, 40, 100, 200)


class Has(MapIngredient):
    """Model-free map: True unless the value contains the question's digit."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        return [str(question)[-1] not in str(v) for v in values]


def make_db(path: Path, n: int = 2000) -> Path:
    rng = random.Random(0)
    con = sqlite3.connect(path)
    cols = ", ".join(f"c{i} TEXT" for i in range(COLUMNS))
    con.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, {cols})")
    rows = [(i, *(f"v{rng.randrange(10_000)}" for _ in range(COLUMNS))) for i in range(n)]
    con.executemany(f"INSERT INTO t VALUES (?{', ?' * COLUMNS})", rows)
    con.commit()
    con.close()
    return path


@contextmanager
def counting_builds() -> Iterator[list[int]]:
    """Count candidate queries built (``candidates.relax_scope`` calls) inside the block."""
    count = [0]
    original = candidates.relax_scope

    def counted(*a: Any, **kw: Any) -> Any:
        count[0] += 1
        return original(*a, **kw)

    candidates.relax_scope = counted  # type: ignore[assignment]
    try:
        yield count
    finally:
        candidates.relax_scope = original


def query(n: int) -> str:
    preds = " AND ".join(f"{{{{Has('q{i}', t.c{i % COLUMNS})}}}}" for i in range(n))
    return f"SELECT id FROM t WHERE {preds}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", default="after")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--sizes", nargs="+", default=[",".join(map(str, SIZES))],
                    help="numbers of filters, comma- or space-separated")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results"
                    / "many_filters.json", help="the JSON file the label is written into")
    args = ap.parse_args()
    sizes = [int(x) for part in args.sizes for x in part.split(",") if x]
    out_path = args.out
    with tempfile.TemporaryDirectory() as d:
        db = make_db(Path(d) / "t.sqlite")
        results = []
        for n in sizes:
            times = []
            for _ in range(args.repeat):
                with BlendSQL(str(db), ingredients=[Has], cache=False) as s, \
                        counting_builds() as builds:
                    t0 = time.perf_counter()
                    res = s.execute(query(n))
                    times.append(time.perf_counter() - t0)
            sql = sum(1 for t in res.trace if t.kind == "sql")
            estimates = [t for t in res.trace if t.summary.startswith("cost estimate for")]
            costs = len(estimates)
            per_run = builds[0]  # of the last run (the count does not vary)
            results.append({"filters": n, "seconds": round(statistics.median(times), 3),
                            "rows": len(res.df), "traced_sql_statements": sql,
                            "values_passed": res.meta.values_passed,
                            "candidate_builds": per_run,
                            "candidate_builds_per_filter": round(per_run / n, 2),
                            "cost_estimates": costs,
                            # counting statements run (calls with the same candidate share one)
                            "cost_statements": sum(1 for t in estimates if t.sql),
                            "all_statements": sum(1 for t in res.trace if t.sql)})
            print(f"{args.label}: {n:3d} filters  {statistics.median(times):7.3f} s  {sql} "
                  f"traced statements  {per_run / n:.2f} candidate builds and "
                  f"{costs / n:.2f} cost estimates per filter", flush=True)
    data: dict[str, Any] = json.loads(out_path.read_text()) if out_path.exists() else {}
    import blendsql

    src = Path(blendsql.__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    data[args.label] = {
        "results": results,
        "code": {"blendsql_from": str(src), "commit": commit,
                 "dirty_tree": bool(subprocess.run(
                     ["git", "-C", str(src), "status", "--porcelain", "--", "blendsql"],
                     capture_output=True, text=True).stdout.strip())},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "processor": platform.processor() or platform.machine(),
                    "note": "2 shared cores, other jobs running (times are indicative)"},
        "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    out_path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
