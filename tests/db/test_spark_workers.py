"""Executors that check before they trust (``blendsql.db.spark_workers``).

Before the first executor job of a Spark context one probe job asks the workers'
Python what it can import. Where it lacks blendsql (a local session started from a
venv that is not on PATH: the workers run ``python3`` from PATH), the calls run on
the driver with the right rows, a traced failed check and a warning that says how to
fix it; ``executors='on'`` makes it a clear error. The end-to-end case runs in a
process of its own (one Spark context per process) whose workers run a bare venv's
Python, with a PATH that holds no Python of the project.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

from blendsql.db.spark_workers import (
    NEEDED,
    WorkersNotReady,
    fix_hint,
    judge,
    probe_function,
)

HERE = Path(__file__).resolve().parent


def _all_there(python: str = "/x/bin/python") -> dict[str, Any]:
    from blendsql.db.spark_workers import driver_version

    return {"python": python, "python_version": "3.11", "blendsql": driver_version(),
            "pandas": "2.2", "pyarrow": "17"}


def test_workers_with_everything_pass() -> None:
    judge([_all_there(), _all_there()], "local[2]")


def test_a_missing_module_is_named_with_the_python_that_lacks_it() -> None:
    bare = {**_all_there("/usr/bin/python3"), "blendsql": None,
            "blendsql_error": "ModuleNotFoundError: No module named 'blendsql'"}
    with pytest.raises(WorkersNotReady) as e:
        judge([bare, _all_there()], "local[2]")
    assert "/usr/bin/python3 cannot import blendsql" in e.value.message
    assert "PYSPARK_PYTHON" in (e.value.hint or "") and sys.executable in (e.value.hint or "")


def test_another_blendsql_version_is_refused_with_a_cluster_hint() -> None:
    old = {**_all_there("/usr/local/py/bin/python"), "blendsql": "0.1.28"}
    with pytest.raises(WorkersNotReady) as e:
        judge([old], "spark://cluster:7077")
    assert "blendsql 0.1.28" in e.value.message
    assert "install blendsql[spark]==" in (e.value.hint or "")
    with pytest.raises(WorkersNotReady, match="no answer"):
        judge([], "local[2]")


def test_fix_hint_differs_for_local_and_cluster_masters() -> None:
    assert "os.environ['PYSPARK_PYTHON']" in fix_hint("local[*]", [])
    assert "every executor" in fix_hint("yarn", ["/a/python"])


def test_the_probe_needs_nothing_but_python_where_it_runs() -> None:
    probe = probe_function()
    found = probe(0)
    assert found["python"] == sys.executable and all(found[m] for m in NEEDED)
    cloudpickle = pytest.importorskip("pyspark.cloudpickle")
    shipped = cloudpickle.dumps(probe)
    assert b"blendsql.db" not in shipped  # by value: no import of blendsql to unpickle it


def test_the_test_session_workers_pass_the_check(spark_session: Any) -> None:
    from blendsql.db.spark import SparkBackend

    backend = SparkBackend(spark_session)
    check = backend.check_executors()
    assert check.ok, check.reason
    assert backend.checked_executors() is check  # remembered per Spark context


def _run_bare(tmp_path: Path, workers_python: str) -> dict[str, Any]:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no venv on PATH, as from an IDE or cron
    env.pop("PYSPARK_PYTHON", None)
    env.pop("PYTHONPATH", None)  # the workers would inherit it, and find blendsql there
    done = subprocess.run([sys.executable, str(HERE / "spark_bare_workers.py"), workers_python],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture
def spark_can_start() -> None:
    from spark_session import spark_missing

    why = spark_missing()
    if why is not None:
        if os.environ.get("BLENDSQL_REQUIRE_SPARK") == "1":
            pytest.fail(why)
        pytest.skip(why)


def test_workers_without_blendsql_answer_on_the_driver_or_refuse_with_on(
        tmp_path: Path, spark_can_start: None) -> None:
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)  # a Python with neither blendsql nor pandas
    python = next(p for p in (bare / "bin" / "python", bare / "Scripts" / "python.exe")
                  if p.exists())
    out = _run_bare(tmp_path, str(python))
    assert out["auto_rows"] == out["want"]  # the rows are right: the calls ran on the driver
    assert "executors" not in out["auto_kinds"] and "executors_check" in out["auto_kinds"]
    [error] = out["check_errors"]
    assert "cannot import blendsql" in error and str(python) in error
    assert len(out["warnings"]) == 1 and "PYSPARK_PYTHON" in out["warnings"][0]
    on = out["on"]
    assert on["error"] == "ExecutionError" and "executors='on'" in on["message"]
    assert "PYSPARK_PYTHON" in on["hint"] and sys.executable in on["hint"]
