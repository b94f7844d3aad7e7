"""Per-value latency: our GBNF path (``LlamaCpp``) vs the guidance adapter vs the
OpenAI-compatible backend talking to a local ``llama_cpp.server``.

All sides run the same GGUF (default: the embedded SmolLM2-135M) with the same
thread count, the same chat messages (an LLMMap-like prompt: fixed instructions
+ one value) and constraints (Bool, Choice, Int, Regex), greedy. Calls are
interleaved value by value, rotating which side goes first, so machine-load
drift hits all sides alike. Answers are also checked against the constraint.

    python benchmarks/guidance_vs_gbnf.py [--n 20] [--threads 2] [--server]

Writes benchmarks/results/guidance_vs_gbnf.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from blendsql.models.base import Model, Request  # noqa: E402
from blendsql.models.constraints import Bool, Choice, Constraint, Int, Regex  # noqa: E402
from blendsql.models.llamacpp import LlamaCpp, default_model_path  # noqa: E402

VALUES = ["apple", "carrot", "banana", "granite", "cherry", "potato", "mango", "oak",
          "grape", "salmon", "lemon", "rice", "peach", "cheddar", "plum", "tomato",
          "kiwi", "bread", "melon", "onion", "pear", "garlic", "fig", "wheat"]
TASKS: list[tuple[str, Constraint]] = [
    ("Is this a fruit? Answer true or false.", Bool()),
    ("Which food group is this?", Choice(("fruit", "vegetable", "grain", "dairy", "other"))),
    ("How many letters does this word have?", Int()),
    ("Give a two-letter code and a digit for this item, like AB-1.", Regex(r"[A-Z]{2}-[0-9]")),
]


def requests(n: int) -> list[Request]:
    """n LLMMap-like requests cycling through the four constraint kinds."""
    out = []
    for i in range(n):
        task, c = TASKS[i % len(TASKS)]
        out.append(Request(messages=(("system", "You label values. " + task),
                                     ("user", f"Value: {VALUES[i % len(VALUES)]}")), constraint=c))
    return out


def start_server(path: Path, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m llama_cpp.server`` on a free port, same model and threads."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from blendsql.models.gguf import python_server_command

    proc = subprocess.Popen(python_server_command(path, "--host", "127.0.0.1", "--port", str(port),
                                                  "--n_ctx", "2048", "--n_threads", str(threads)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/models", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.25)
    proc.kill()
    raise SystemExit("llama_cpp.server did not start")


def make_models(path: Path, threads: int, server_url: str | None) -> dict[str, Model]:
    from blendsql.models.guidance_model import Guidance

    models: dict[str, Model] = {
        "gbnf_llamacpp": LlamaCpp(path, n_threads=threads),
        # the same loader as LlamaCpp (same kernels and threads), handed to guidance
        "guidance_llamacpp": Guidance.from_gguf(path, n_ctx=2048, n_threads=threads),
    }
    if server_url is not None:
        from blendsql.models.openai_compat import OpenAI

        models["openai_compat_llama_server"] = OpenAI("smollm2", server_url, max_concurrency=1)
    return models


def run(models: dict[str, Model], reqs: list[Request]) -> dict[str, Any]:
    """Interleave sides per value (rotating who goes first); collect seconds and validity."""
    names = list(models)
    secs: dict[str, list[float]] = {k: [] for k in names}
    valid: dict[str, int] = dict.fromkeys(names, 0)
    for m in models.values():  # warm-up: load weights, first grammar
        m.generate([reqs[0]])
    for i, req in enumerate(reqs):
        order = names[i % len(names):] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            [r] = models[name].generate([req])
            secs[name].append(time.perf_counter() - t0)
            valid[name] += r.error is None and r.value is not None
    return {name: {"n": len(s), "median_s": round(statistics.median(s), 4),
                   "mean_s": round(statistics.fmean(s), 4), "total_s": round(sum(s), 3),
                   "valid": valid[name]} for name, s in secs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--path", type=Path, default=None)
    ap.add_argument("--server", action="store_true", help="also time the OpenAI backend")
    args = ap.parse_args()
    path = args.path or default_model_path()
    # a `timeout` SIGTERM must still stop the server subprocess (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    proc, url = start_server(path, args.threads) if args.server else (None, None)
    try:
        result = run(make_models(path, args.threads, url), requests(args.n))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    base = result["gbnf_llamacpp"]["median_s"]
    out = {
        "benchmark": "guidance_vs_gbnf",
        "command": "python " + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_at_end": os.getloadavg()},
        "model": path.name, "threads": args.threads, "n_values": args.n,
        "results": result,
        "median_ratio_vs_gbnf": {k: round(v["median_s"] / base, 2) for k, v in result.items()},
    }
    dest = ROOT / "benchmarks" / "results" / "guidance_vs_gbnf.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
