"""What one distinct value costs the driver on Spark (issue 25): the per-value numbers
``docs/scaling.md`` scales to 10M distinct values.

A local Spark session (``--master``, default ``local[2]``) holds a generated table of
``--rows`` rows with ``--distinct`` distinct values ``v`` (``v0000000`` ..; every value on
rows // distinct rows), and the query

    SELECT COUNT(*) AS n FROM t WHERE {{LLMMap('Is it even?', t.v)}} = TRUE

runs with an instant model (a ``FunctionModel``: yes when the value's number is even)
whose requests are answered on the executors (``executors='on'``), answer cache off. The
model costs nothing, so the wall time is what the engine and Spark spend per value:
the candidate values computed by Spark and collected to the driver, the requests built
(prompts) and sent to the executors in rounds, the answers back, the outputs stored as a
temporary view, the final query. Reported from the query's trace (seconds by step kind,
the executor jobs; an ``ingredient`` step's seconds include its ``executors`` jobs),
divided by the distinct values: milliseconds per value of wall time
and of the driver process's CPU, and the driver's resident memory growth (peak RSS after
minus before, /proc). Checked: the count equals the even values' rows, model calls =
distinct values, every job on the executors.

    python benchmarks/spark_driver_costs.py [--rows 2000000] [--distinct 1000000]

Writes benchmarks/results/spark_driver_costs.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUERY = "SELECT COUNT(*) AS n FROM t WHERE {{LLMMap('Is it even?', t.v)}} = TRUE"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "spark_driver_costs.json"


def answer(request: Any) -> str:
    """Yes when the number in the prompt's last ``Value:`` line is even."""
    prompt = request.prompt or "\n".join(c for _r, c in request.messages)
    at = prompt.rfind("Value: ")
    digits = "".join(ch for ch in prompt[at + 7:].split("\n", 1)[0] if ch.isdigit())
    return "yes" if digits and int(digits) % 2 == 0 else "no"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return peak_rss_mb()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--distinct", type=int, default=1_000_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if not 1 <= args.distinct <= args.rows:
        raise SystemExit("--distinct must be between 1 and --rows")

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from benchmarks.protocol import run_record
    from blendsql import BlendSQL
    from blendsql.models import FunctionModel

    record = run_record("spark_driver_costs.py", argv)
    # the workers run this interpreter (Spark takes PYSPARK_PYTHON, else python3 from PATH)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(args.master).appName("blendsql-driver-costs")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.memory", "6g")
             .config("spark.sql.shuffle.partitions", "4")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        width = len(str(args.distinct - 1))
        frame = (spark.range(args.rows)
                 .withColumn("v", F.format_string(f"v%0{width}d", F.col("id") % args.distinct))
                 .select("v").cache())
        frame.count()
        even = frame.where(F.substring("v", 2, width).cast("long") % 2 == 0).count()
        bsql = BlendSQL({"t": frame}, model=FunctionModel(answer, name="instant"), cache=False)
        rss0 = current_rss_mb()
        cpu0, t0 = time.process_time(), time.perf_counter()
        smoothie = bsql.execute(QUERY, executors="on", timeout=3600)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        rss1 = peak_rss_mb()
        bsql.close()
    finally:
        spark.stop()
    by_kind: dict[str, float] = defaultdict(float)
    for step in smoothie.trace:
        by_kind[step.kind] += step.seconds or 0.0
    jobs = [{"sql": s.sql, "seconds": round(s.seconds or 0.0, 3), "answers": s.rows_out}
            for s in smoothie.trace if s.kind == "executors"]
    steps = [{"kind": s.kind, "summary": s.summary, "seconds": round(s.seconds or 0.0, 3),
              "rows": s.rows_out} for s in smoothie.trace if (s.seconds or 0) > 0.01]
    n = args.distinct
    count = int(smoothie.df.iloc[0, 0])
    checks = {"count_right": count == even, "model_calls_equal_distinct": (
        smoothie.meta.model_calls == n), "answered_on_executors": sum(
        j["answers"] or 0 for j in jobs) == n}
    record.update({
        "settings": {"rows": args.rows, "distinct": n, "master": args.master, "query": QUERY,
                     "model": "FunctionModel (instant), executors='on', cache off"},
        "wall_s": round(wall, 3),
        "driver_cpu_s": round(cpu, 3),
        "per_value_ms": {"wall": round(1000 * wall / n, 4), "driver_cpu": round(1000 * cpu / n, 4)},
        "seconds_by_step_kind": {k: round(v, 3) for k, v in sorted(by_kind.items())},
        "per_value_ms_by_step_kind": {k: round(1000 * v / n, 4) for k, v in sorted(by_kind.items())},
        "driver_rss_mb": {"before": round(rss0, 1), "peak_after": round(rss1, 1),
                          "growth_per_million_values": round((rss1 - rss0) * 1e6 / n, 1)},
        "executor_jobs": jobs,
        "steps": steps,
        "result": {"count": count, "expected": even},
        "checks": checks,
        "correct": all(checks.values()),
    })
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("wall_s", "driver_cpu_s", "per_value_ms",
                                              "seconds_by_step_kind", "driver_rss_mb",
                                              "correct")}, indent=2))
    return record


if __name__ == "__main__":
    main()
