"""The README's first-run query, as a newcomer runs it (issue 27: a command per number).

Runs ``blendsql run example "<the README's query>" --no-cache`` in a fresh process
(``--repeat`` times: each a cold start, the embedded model loaded each time), and the same
query through the Python API in this process with the answer cache off, to read its
meta: rows, model calls, prompt tokens. Reported: the CLI's wall time per run (median),
the query's own seconds (``Smoothie.meta.seconds``: from ``execute`` to its result, the
embedded model's load included, as on a first run), calls and tokens, and
whether the answer is the README's row (Steve Whitaker, Pitcher, Long Beach State).

The install time the README quotes (``pip install .`` in a fresh clone and venv) is
measured by ``install_time.py`` (``python -m benchmarks install-time``).

    python benchmarks/readme_demo.py [--repeat 3]

Writes benchmarks/results/readme_demo.json (``--out``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.demo_margins import README_QUERY  # noqa: E402

EXPECTED = [("Steve Whitaker", "Pitcher", "Long Beach State")]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "readme_demo.json"


def cli_run() -> tuple[float, str]:
    """One ``blendsql run example QUERY --no-cache`` in a new process: (seconds, stdout)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "blendsql.cli", "run", "example", README_QUERY,
                           "--no-cache"], capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"the README command failed:\n{done.stderr}")
    return seconds, done.stdout


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    from benchmarks.protocol import run_record
    from blendsql import BlendSQL

    record = run_record("readme_demo.py", argv)
    runs = [cli_run() for _ in range(max(1, args.repeat))]
    outputs_agree = len({out for _s, out in runs}) == 1
    bsql = BlendSQL(_example(), cache=False)
    smoothie = bsql.execute(README_QUERY)
    rows = [tuple(r) for r in smoothie.df.itertuples(index=False)]
    meta = smoothie.meta
    record.update({
        "query": README_QUERY,
        "cli_seconds_each": [round(s, 2) for s, _o in runs],
        "cli_seconds_median": round(statistics.median(s for s, _o in runs), 2),
        "cli_output": runs[0][1],
        "cli_outputs_agree": outputs_agree,
        "query_seconds": round(meta.seconds, 3) if getattr(meta, "seconds", None) else None,
        "model_calls": meta.model_calls,
        "prompt_tokens": meta.prompt_tokens,
        "rows": [list(r) for r in rows],
        "right": rows == EXPECTED and all(n in runs[0][1] for n in EXPECTED[0]),
    })
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: record[k] for k in ("cli_seconds_median", "query_seconds",
                                              "model_calls", "prompt_tokens", "right")}))
    return record


def _example() -> str:
    from blendsql.db.loaders import example_db_path

    return str(example_db_path())


if __name__ == "__main__":
    main()
