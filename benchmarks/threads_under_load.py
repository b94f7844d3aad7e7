"""Short llama.cpp calls while another process keeps a core busy (issue 10, finding 2).

llama.cpp splits every matmul across its threads and waits for the slowest;
a thread that shares a core with a busy process stalls the whole call. Before
the fix ``LlamaCpp(n_threads=k)`` left ``n_threads_batch`` (prompt processing)
at every core. This compares, under one competing busy process:

- ``before``: ``n_threads=1``, ``n_threads_batch=os.cpu_count()`` (what
  ``LlamaCpp(n_threads=1)`` used to load);
- ``before_default``: both at ``os.cpu_count()`` (the old default);
- ``after_default``: ``LlamaCpp()`` now (both from :func:`default_threads`);
- ``after_explicit``: ``LlamaCpp(n_threads=1)`` now (batch follows).

Each configuration answers the same short LLMMap-like prompts (instructions +
one value, a true/false grammar); the configurations alternate value by value
so drift in the machine's load hits all alike. The busy process bounds itself
(``--busy-seconds``) and is killed by pid at the end.

    python benchmarks/threads_under_load.py [--n 12] [--path model.gguf]

Writes benchmarks/results/threads_under_load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from blendsql.models import LlamaCpp, Request  # noqa: E402
from blendsql.models.constraints import Bool  # noqa: E402
from blendsql.models.llamacpp import default_threads, machine_load, usable_cores  # noqa: E402

VALUES = ["pitcher", "catcher", "first baseman", "outfielder", "shortstop", "second baseman",
          "third baseman", "designated hitter", "utility", "starting pitcher", "closer", "infield"]
INSTRUCTIONS = ("Answer the question for the given value. Reply with true or false only.\n"
                "Question: Is this position a pitcher?")
BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def request(value: str) -> Request:
    return Request(messages=(("system", INSTRUCTIONS), ("user", f"Value: {value}\nAnswer:")),
                   constraint=Bool(), max_tokens=4)


def configs(path: Path | None) -> dict[str, LlamaCpp]:
    cpus = os.cpu_count() or 1
    return {
        "before": LlamaCpp(path, n_threads=1, n_threads_batch=cpus),
        "before_default": LlamaCpp(path, n_threads=cpus, n_threads_batch=cpus),
        "after_default": LlamaCpp(path),
        "after_explicit": LlamaCpp(path, n_threads=1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=12, help="values (calls) per configuration")
    ap.add_argument("--path", type=Path, default=None, help="GGUF file (default: embedded)")
    ap.add_argument("--busy-seconds", type=float, default=300.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/threads_under_load.json")
    args = ap.parse_args()

    load_before = machine_load()
    models = configs(args.path)
    for m in models.values():  # load + warm up (first prompt) before the busy process starts
        m.generate([request("warm up")])
    busy = subprocess.Popen([sys.executable, "-c", BUSY.format(s=args.busy_seconds)])
    seconds: dict[str, list[float]] = {k: [] for k in models}
    try:
        time.sleep(1.0)  # let the busy process get its core
        load_with_busy = machine_load()
        for i in range(args.n):
            value = VALUES[i % len(VALUES)]
            names = list(models) if i % 2 == 0 else list(reversed(models))
            for name in names:
                t0 = time.perf_counter()
                models[name].generate([request(value)])
                seconds[name].append(time.perf_counter() - t0)
    finally:
        busy.kill()
        busy.wait()

    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "usable_cores": usable_cores(),
                    "load_1min_before": load_before, "load_1min_with_busy": load_with_busy},
        "model": str(next(iter(models.values())).path.name),
        "competing_load": "one `python -c 'while time.time() < end: pass'` process",
        "default_threads_now": default_threads(usable_cores(), load_before),
        "configs": {},
    }
    for name, m in models.items():
        info = m.load_info
        xs = seconds[name]
        result["configs"][name] = {
            "n_threads": info.n_threads if info else m.n_threads,
            "n_threads_batch": info.n_threads_batch if info else m.n_threads_batch,
            "calls": len(xs), "median_s": round(statistics.median(xs), 4),
            "mean_s": round(statistics.fmean(xs), 4), "max_s": round(max(xs), 4),
            "min_s": round(min(xs), 4),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
