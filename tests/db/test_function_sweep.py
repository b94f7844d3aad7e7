"""Every function of each backend's catalogue, called in a read-only session.

Each backend's sweep (``function_sweep.py``) runs in a child process, so a
function that crashes the process (SQLite's ``fts3_tokenizer`` did) is a failure
naming that function, not the end of the run. A call must run, fail with a
blendsql error, or be refused with ``UnsafeQueryError``; no result may hold the
marker file's content; PostgreSQL's settings and the JVM's system properties
must be unchanged. The counts (functions allowed / refused) are printed and,
when ``BLENDSQL_SWEEP_OUT`` names a folder, written there as ``<backend>.json``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SWEEP = Path(__file__).with_name("function_sweep.py")
ROOT = Path(__file__).resolve().parents[2]
#: seconds one backend's sweep may take (Spark's is ~2 minutes on 2 busy cores)
LIMIT = 900


#: ordinary functions no backend may refuse (plus each backend's own in the tests below)
ORDINARY = {"abs", "lower", "upper", "substr", "coalesce", "count", "sum", "avg", "min", "max",
            "round", "length", "replace", "row_number", "rank", "dense_rank", "lag", "lead",
            "trim", "nullif"}


def _no_ordinary_refused(report: dict[str, Any], own: set[str]) -> None:
    assert not (ORDINARY | own) & set(report["refused_names"])


def _sweep(backend: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    marker = tmp_path / "marker.txt"
    marker.write_text(f"blendsql-marker-{secrets.token_hex(8)}\n")
    out = tmp_path / f"{backend}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, str(SWEEP), backend, str(out), str(marker), *extra],
                          capture_output=True, text=True, timeout=LIMIT, env=env, cwd=tmp_path)
    progress = out.with_name(out.name + ".progress")
    last = progress.read_text() if progress.exists() else "(none)"
    assert proc.returncode == 0, (
        f"the {backend} sweep died (exit {proc.returncode}) while running: {last}\n"
        f"{proc.stderr[-3000:]}")
    report = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in report.items() if k != "refused_names"}))
    folder = os.environ.get("BLENDSQL_SWEEP_OUT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{backend}.json").write_text(json.dumps(report, indent=1))
    assert report["problems"] == []
    assert report["functions"] > 50 and report["allowed"] > report["refused"] > 0
    return report


def test_every_sqlite_function(tmp_path: Path) -> None:
    report = _sweep("sqlite", tmp_path)
    assert {"fts3_tokenizer", "load_extension", "fts5"} <= set(report["refused_names"])
    _no_ordinary_refused(report, {"instr", "date", "strftime", "julianday", "json_extract",
                                  "json_object", "bm25", "snippet", "highlight", "match"})


def test_every_duckdb_function(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    report = _sweep("duckdb", tmp_path)
    assert {"read_text", "read_blob", "read_csv", "glob", "query",
            "current_setting"} <= set(report["refused_names"])
    _no_ordinary_refused(report, {"instr", "strpos", "date_trunc", "strftime", "json_extract",
                                  "json_object", "range", "unnest", "generate_series"})


def test_every_postgres_function(tmp_path: Path, postgres_server: Any) -> None:
    report = _sweep("postgres", tmp_path, postgres_server.url())
    assert {"pg_read_file", "pg_ls_dir", "lo_import", "set_config", "pg_terminate_backend",
            "pg_advisory_lock", "pg_reload_conf"} <= set(report["refused_names"])
    _no_ordinary_refused(report, {"strpos", "date_trunc", "to_char", "now", "json_build_object",
                                  "jsonb_extract_path", "to_tsvector", "ts_rank",
                                  "websearch_to_tsquery", "generate_series"})


def test_every_spark_function(tmp_path: Path) -> None:
    from spark_session import spark_missing

    # not `from conftest import ...`: another folder's conftest may hold that name
    why = spark_missing()
    if why is not None:
        if os.environ.get("BLENDSQL_REQUIRE_SPARK") == "1":
            pytest.fail(f"{why} (BLENDSQL_REQUIRE_SPARK=1)")
        pytest.skip(why)
    report = _sweep("spark", tmp_path)
    assert {"reflect", "java_method", "try_reflect"} <= set(report["refused_names"])
    _no_ordinary_refused(report, {"instr", "date_format", "date_trunc", "get_json_object",
                                  "to_json", "explode", "range", "current_date"})
    assert {n for n in report["probes"] if "`path`" in n} == {
        f"probe: {f}.`path`" for f in ("text", "csv", "json", "parquet", "binaryFile")}
    assert all(report["probes"][f"probe: {f}.`path`"] == ["refused"]
               for f in ("text", "csv", "json", "parquet", "binaryFile"))
