"""The test suite's size, and with ``--run`` how long a full run takes (README: Run the tests).

By default counts the tests pytest collects (``python -m pytest --collect-only -q``, the
README's test command without running anything: a minute or so). With ``--run`` it also
runs the whole suite as the README's command does (``python -m pytest -q -p
no:cacheprovider``) and records its wall time and pytest's summary (passed, skipped,
failed, errors); which tests run and which skip depends on what the machine has
(the evaluation model, chromium, PostgreSQL 15, Java 17, the benchmark data), so the
record keeps the skip count beside the time.

    python benchmarks/suite.py [--run] [--out benchmarks/results/test_suite.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "test_suite.json"
_COLLECTED = re.compile(r"(\d+)(?:/\d+)? tests? collected")
_OUTCOME = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)")


def collected(output: str) -> int | None:
    """The count in pytest's ``N tests collected`` line (``--collect-only -q``)."""
    found = _COLLECTED.findall(output)
    return int(found[-1]) if found else None


def outcomes(output: str) -> dict[str, int]:
    """Pytest's final summary line as counts (``{"passed": 6900, "skipped": 50}``)."""
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error)", line)]
    if not lines:
        return {}
    out: dict[str, int] = {}
    for n, kind in _OUTCOME.findall(lines[-1]):
        key = {"error": "errors", "warning": "warnings"}.get(kind, kind)
        out[key] = int(n)
    return out


def pytest(*args: str, timeout: float) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    return time.perf_counter() - t0, done


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--run", action="store_true", help="also run the whole suite and time it")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    from benchmarks.protocol import run_record

    record = run_record("suite.py", argv, model_name="none")
    record.pop("protocol", None)
    seconds, done = pytest("--collect-only", "-q", "-p", "no:cacheprovider", timeout=1800)
    record.update({"collected": collected(done.stdout), "collect_seconds": round(seconds, 1),
                   "collect_errors": outcomes(done.stdout).get("errors", 0)})
    if args.run:
        load_before = os.getloadavg()[0]
        seconds, done = pytest("-q", "-p", "no:cacheprovider", timeout=3 * 3600)
        record["run"] = {"seconds": round(seconds, 1), "minutes": round(seconds / 60, 1),
                         "exit_code": done.returncode, **outcomes(done.stdout),
                         "load_1min_before": round(load_before, 2),
                         "load_1min_after": round(os.getloadavg()[0], 2)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("collected", "collect_seconds", "collect_errors")}
                     | ({"run": record["run"]} if "run" in record else {})))
    return record


if __name__ == "__main__":
    main()
