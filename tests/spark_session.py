"""A local Spark session for the Spark backend tests (``local[2]``, one per test session).

Why one per test session: a SparkSession starts a JVM (~10 s here), so every
Spark test shares the one the ``spark_session`` fixture (tests/conftest.py)
starts. Small on purpose: two cores, two shuffle partitions, no web UI, the
driver bound to 127.0.0.1. Where pyspark or Java is missing the tests skip
with a message, unless ``BLENDSQL_REQUIRE_SPARK=1`` (CI), where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from typing import Any

#: id(session) -> its temp warehouse dir (removed by stop_session)
_WAREHOUSES: dict[int, str] = {}


def spark_missing() -> str | None:
    """Why no Spark session can start here (None: it can)."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'blendsql[spark]')"
    java = shutil.which("java")
    if java is None:
        return "Java is not installed (apt-get install openjdk-17-jre-headless)"
    try:
        subprocess.run([java, "-version"], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"Java does not run here ({java} -version: {e})"
    return None


def start_session() -> Any:
    """A new local Spark session for tests (stop it with :func:`stop_session`, which
    also removes its warehouse, a temp dir)."""
    import tempfile

    from pyspark.sql import SparkSession

    # catalog tables a test saves go to a temp dir, never ./spark-warehouse
    warehouse = tempfile.mkdtemp(prefix="bsql_spark_")
    # the workers run this interpreter (Spark takes PYSPARK_PYTHON, else python3 from PATH)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("blendsql-tests")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.warehouse.dir", warehouse)
             .getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")  # failures the tests expect would log ERRORs
    _WAREHOUSES[id(spark)] = warehouse
    return spark


def stop_session(spark: Any) -> None:
    """Stop a session of :func:`start_session` and remove its warehouse dir."""
    spark.stop()
    warehouse = _WAREHOUSES.pop(id(spark), None)
    if warehouse is not None:
        shutil.rmtree(warehouse, ignore_errors=True)


def frames_from_sqlite(spark: Any, path: Any) -> dict[str, Any]:
    """Every table of a SQLite file as a Spark DataFrame (types as ``blendsql.db.transfer``
    gives them to DuckDB / PostgreSQL: BIGINT, DOUBLE, TEXT, BLOB)."""
    from pyspark.sql import types as T

    from blendsql.db.transfer import read_sqlite

    kinds = {"BIGINT": T.LongType(), "DOUBLE": T.DoubleType(), "TEXT": T.StringType(),
             "BLOB": T.BinaryType()}
    out = {}
    for name, cols, col_kinds, rows, _ in read_sqlite(path):
        schema = T.StructType([T.StructField(c, kinds[k], True)
                               for c, k in zip(cols, col_kinds, strict=True)])
        out[name] = spark.createDataFrame(rows, schema)
    return out
