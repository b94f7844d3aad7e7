"""Run by tests/db/test_spark_workers.py in a process of its own: a local Spark session
whose workers run a bare Python (argv[1]: no blendsql, no pandas), a map over enough
values to ship, with 'auto' and then 'on'. Prints one JSON line with what happened."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # fake_openai

import pandas as pd  # noqa: E402
from fake_openai import FakeServer  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from blendsql import BlendSQL  # noqa: E402
from blendsql.db.spark_calls import MIN_BATCH  # noqa: E402
from blendsql.errors import BlendSQLError  # noqa: E402
from blendsql.models import OpenAI  # noqa: E402


def parity(prompt: str) -> str:
    at = prompt.rfind("Value: ")
    digits = "".join(ch for ch in prompt[at + 7:].split("\n", 1)[0] if ch.isdigit())
    return "yes" if digits and int(digits) % 2 == 0 else "no"


def main() -> None:
    os.environ["PYSPARK_PYTHON"] = sys.argv[1]  # the Python the workers run
    spark = (SparkSession.builder.master("local[2]").appName("blendsql-bare-workers")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")
    server = FakeServer(delay=0.0, slots=8, answer=parity)
    out: dict[str, object] = {}
    try:
        n = MIN_BATCH + 20
        nums = spark.createDataFrame(pd.DataFrame({"v": list(range(n))}))
        model = OpenAI("m", server.url, max_concurrency=8, timeout=10, server_kind="generic")
        query = "SELECT COUNT(*) AS n FROM nums WHERE {{LLMMap('Even?', nums.v)}} = TRUE"
        with BlendSQL({"nums": nums}, model=model, cache=False) as bsql:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                auto = bsql.execute(query)
            out["auto_rows"] = auto.df["n"].tolist()
            out["want"] = [sum(1 for i in range(n) if i % 2 == 0)]
            out["auto_kinds"] = [t.kind for t in auto.trace]
            out["check_errors"] = [t.details.get("error") for t in auto.trace
                                   if t.kind == "executors_check"]
            out["warnings"] = [str(w.message) for w in caught if w.category is RuntimeWarning]
            out["model_calls"] = auto.meta.model_calls
            try:
                bsql.execute(query.replace("Even?", "Even now?"), executors="on")
                out["on"] = "ran"
            except BlendSQLError as e:
                out["on"] = {"error": type(e).__name__, "message": e.message, "hint": e.hint}
    finally:
        server.kill()
        spark.stop()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
