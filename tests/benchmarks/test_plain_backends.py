"""benchmarks/plain_backends.py at tiny sizes: its checks hold and its JSON has its shape.

No timing is asserted (the machine may be busy): only that every backend gave the
same rows, the ingredient saw exactly the distinct values surviving the plain
filter, and the results file carries the run record, the build times, every
backend's numbers and the ratios between them. The Spark run goes through a
process of its own (the benchmark starts and stops its sessions; the test
session's shared one must not be touched) and skips with the reason when pyspark
or Java is missing (a failure with ``BLENDSQL_REQUIRE_SPARK=1``, as in CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import plain_backends as pb  # noqa: E402

ROWS = 20_000  # x < 10 keeps 200 rows, each with its own v


def check_record(record: dict[str, Any], backends: list[str]) -> None:
    """What every run's results file must show, whatever the backends."""
    for key in ("command", "commit", "clean_tree", "machine", "date", "model", "protocol",
                "settings", "table", "build", "backends", "summary", "result",
                "load_1_5_15_before", "load_1_5_15_after"):
        assert key in record, key
    assert record["command"].startswith(f"python benchmarks/plain_backends.py --rows {ROWS}")
    table = record["table"]
    assert table["rows"] == ROWS
    assert table["distinct_cat"] == pb.CATS and table["distinct_x"] == pb.X_RANGE
    assert table["rows_passing_filter"] == ROWS * 10 // pb.X_RANGE
    distinct = table["distinct_values_passing_filter"]
    assert 0 < distinct <= table["rows_passing_filter"]
    assert [r["backend"] for r in record["backends"]] == backends
    result = record["result"]
    assert result["rows"] > 0 and result["total_count"] >= result["rows"]
    for r in record["backends"]:
        assert "rows" not in r, r["backend"]  # recorded once, in "result"
        assert r["values_sent_to_ingredient"] == distinct, r["backend"]
        assert r["ingredient_calls"] == 1
        assert (r["result_rows"], r["result_total"]) == (result["rows"], result["total_count"])
        assert len(r["plain_ms_all"]) == len(r["blendsql_ms_all"]) == 1
        assert r["plain_ms"] > 0 and r["blendsql_ms"] > 0
        assert r["overhead_ms"] == pytest.approx(r["blendsql_ms"] - r["plain_ms"], abs=0.11)
        assert {"sql", "ingredient"} <= set(r["blendsql_ms_by_step_kind"])
        assert [s["kind"] for s in r["blendsql_steps"]].count("ingredient") == 1
        assert "load_1min_after" in r
    summary = record["summary"]
    assert summary["same_rows_everywhere"] is True
    assert [r["backend"] for r in summary["rows"]] == backends
    for pair, ratios in summary["ratios"].items():
        for kind in ("plain", "blendsql"):
            assert isinstance(ratios[kind], float) and ratios[kind] > 0, (pair, kind)


def test_sqlite_and_duckdb(tmp_path: Path) -> None:
    out = tmp_path / "plain.json"
    rec = pb.main(["--rows", str(ROWS), "--repeat", "1", "--backends", "sqlite", "duckdb",
                   "--out", str(out)])
    on_disk = json.loads(out.read_text())
    assert on_disk["summary"] == rec["summary"]
    check_record(on_disk, ["sqlite", "duckdb"])
    assert set(on_disk["summary"]["ratios"]) == {"duckdb/sqlite"}
    assert {"parquet_generate_s", "sqlite_build_s", "duckdb_build_s"} <= set(on_disk["build"])
    assert on_disk["backends"][1]["threads"]


def test_spark_both_masters(tmp_path: Path) -> None:
    why = pb.spark_missing()
    if why is not None:
        if os.environ.get("BLENDSQL_REQUIRE_SPARK") == "1":
            pytest.fail(f"BLENDSQL_REQUIRE_SPARK=1 but {why}")
        pytest.skip(why)
    out = tmp_path / "plain_spark.json"
    run = subprocess.run(
        [sys.executable, "benchmarks/plain_backends.py", "--rows", str(ROWS), "--repeat", "1",
         "--backends", "sqlite", "spark", "--spark-masters", "local[2]", "local[1]",
         "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads(out.read_text())
    check_record(record, ["sqlite", "spark_local2", "spark_local1"])
    by = {r["backend"]: r for r in record["backends"]}
    assert by["spark_local2"]["master"] == "local[2]"
    assert by["spark_local1"]["master"] == "local[1]"
    assert by["spark_local1"]["default_parallelism"] == 1
    assert set(record["summary"]["ratios"]) == {"spark_local2/sqlite", "spark_local1/sqlite",
                                                "spark_local1/spark_local2"}
    for name in ("spark_local2", "spark_local1"):
        assert f"{name}_session_start_s" in record["build"]
        assert f"{name}_register_view_s" in record["build"]


def test_the_table_is_the_same_every_time_and_the_seed_shifts_it(tmp_path: Path) -> None:
    a = pb.generate(tmp_path / "a", 3000, seed=0, parts=3)
    b = pb.generate(tmp_path / "b", 3000, seed=0, parts=1)
    c = pb.generate(tmp_path / "c", 3000, seed=1, parts=3)
    assert c["rows"] == 3000 and c["distinct_cat"] == a["distinct_cat"]
    assert a["parquet_files"] == 3 and b["parquet_files"] == 1
    con = duckdb.connect()
    try:
        def rows(folder: str) -> list[tuple[Any, ...]]:
            return con.execute(f"SELECT * FROM {pb.parquet_glob(tmp_path / folder)} "
                               "ORDER BY id").fetchall()

        ra, rb, rc = rows("a"), rows("b"), rows("c")
    finally:
        con.close()
    assert ra == rb  # the split into files does not change the rows
    assert [r[0] for r in ra] == list(range(3000))
    assert ra != rc and [r[0] for r in rc] == list(range(3000))
    for _, cat, v, x in ra:
        assert cat.startswith("c") and len(cat) == 4 and 0 <= int(cat[1:]) < pb.CATS
        assert v.startswith("v") and len(v) == 7 and 0 <= int(v[1:]) < pb.VALUES
        assert 0 <= x < pb.X_RANGE
    assert pb.surviving_values(tmp_path / "a", 10)["rows_passing_filter"] == 30


def test_the_query_and_its_twin() -> None:
    assert pb.query(10) == ("SELECT t.cat, COUNT(*) AS n FROM t WHERE t.x < 10 AND "
                            "{{EndsWith('7', t.v)}} = TRUE GROUP BY t.cat ORDER BY t.cat")
    assert pb.twin(10) == ("SELECT t.cat, COUNT(*) AS n FROM t WHERE t.x < 10 AND "
                           "t.v LIKE '%7' GROUP BY t.cat ORDER BY t.cat")
    assert pb.EndsWith().run("7", ["v000017", "v000070", 27]) == [True, False, True]


def test_masters_and_names() -> None:
    assert pb.master_cores("local[2]") == 2
    assert pb.master_cores("local") == 1
    assert pb.master_cores("local[*]") == (os.cpu_count() or 1)
    with pytest.raises(SystemExit):
        pb.master_cores("spark://host:7077")
    assert pb.backend_name("local[2]") == "spark_local2"
    assert pb.backend_name("local[*]") == "spark_local"


@pytest.mark.parametrize("argv", [["--x-below", "0"], ["--spark-masters", "yarn"],
                                  ["--spark-masters", "local[2]", "local[2]"]])
def test_bad_arguments_stop_before_any_work(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        pb.parse_args(["--rows", "10", *argv])
