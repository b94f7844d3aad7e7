"""LLMMap throughput against a local OpenAI-compatible llama.cpp server (issue 15).

The script starts ``python -m llama_cpp.server`` on 127.0.0.1 with the embedded
SmolLM2-135M GGUF and, side by side in one run, measures:

- ``client``: the server's own throughput (the limit): the exact chat requests
  LLMMap would send (same prompts, grammar, max_tokens), fired by a plain
  ``openai`` client from ``--concurrency`` threads;
- ``engine``: ``SELECT v, {{LLMMap(...)}} FROM t`` over the same N distinct
  values through ``BlendSQL`` with ``blendsql.models.OpenAI(base_url=...,
  max_concurrency=--concurrency)`` and no answer cache (values/s, ratio to
  ``client``);
- ``batched``: the same query with ``values_per_prompt=k`` (k values per
  request, a JSON list answer under a schema): prompt tokens per value and the
  agreement of its answers with the one-per-prompt run;
- ``blendsql_0128``: blendsql 0.1.28 against the same server, when a 0.1.28
  venv is given (``--blendsql-0128 PYTHON``) or found; otherwise recorded as not
  run, with the reason.

The requests for ``client`` are captured by running the query once on a
recording model that answers instantly, so both sides send identical bodies.
``client`` and ``engine`` alternate ``--rounds`` times so load drift on a
shared machine hits both alike. The server is stopped at the end, also on error.

    python benchmarks/model_throughput.py [--n 1000] [--concurrency 4] [--rounds 1]

Writes benchmarks/results/model_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from blendsql import BlendSQL  # noqa: E402
from blendsql.models import OpenAI  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.models.gbnf import to_gbnf  # noqa: E402
from blendsql.models.llamacpp import (  # noqa: E402
    default_model_path,
    default_threads,
    machine_load,
    server_launcher,
    usable_cores,
)
from blendsql.models.openai_compat import _max_tokens, plan_for  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "model_throughput.json"
QUESTION = "Is this a fruit?"
COLORS = ["red", "green", "yellow", "blue", "black", "white", "purple", "orange", "brown",
          "pink", "golden", "silver", "dark", "pale", "bright", "small", "large", "old",
          "fresh", "dried"]
THINGS = ["apple", "banana", "cherry", "grape", "lemon", "mango", "pear", "plum", "peach",
          "melon", "kiwi", "fig", "lime", "berry", "apricot", "papaya", "guava", "date",
          "olive", "tomato", "car", "chair", "table", "hammer", "shoe", "phone", "lamp",
          "book", "pencil", "bottle", "door", "window", "truck", "bicycle", "guitar",
          "carpet", "mirror", "bucket", "brick", "cable", "spoon", "stone", "wallet",
          "helmet", "ladder", "candle", "kettle", "blanket", "basket", "engine"]

def distinct_values(n: int) -> list[str]:
    """N distinct short phrases, about a third of them fruits."""
    out = [f"{c} {t}" for c in COLORS for t in THINGS]
    i = 2
    while len(out) < n:  # beyond 1,000: numbered variants stay distinct
        out += [f"{v} no. {i}" for v in out[: n - len(out)]]
        i += 1
    return out[:n]


def make_db(values: list[str]) -> Path:
    path = Path(tempfile.mkdtemp(prefix="bsql-throughput-")) / "values.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (v TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
    return path


def query(values_per_prompt: int = 1) -> str:
    extra = f", values_per_prompt={values_per_prompt}" if values_per_prompt > 1 else ""
    return f"SELECT v, {{{{LLMMap('{QUESTION}', 't::v', return_type='bool'{extra})}}}} AS a FROM t"


# ----------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(gguf: Path, port: int, threads: int, n_ctx: int) -> list[str]:
    return [sys.executable, *server_launcher(), "--model", str(gguf), "--host", "127.0.0.1",
            "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            "--n_threads_batch", str(threads), "--verbose", "False"]


@contextmanager
def running_server(cmd: list[str], port: int, timeout: float = 120) -> Iterator[str]:
    """Start the server, yield its /v1 URL, and always stop it (terminate, then kill)."""
    log = Path(tempfile.mkdtemp(prefix="bsql-throughput-server-")) / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server not up in {timeout}s:\n{log.read_text()[-2000:]}") from None
                time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------------- runs


def captured_requests(db: Path) -> list[Request]:
    """The requests the engine sends for the query (recorded with an instant model)."""
    seen: list[Request] = []

    def answer(req: Request) -> Any:
        seen.append(req)
        return False

    BlendSQL(str(db), model=FunctionModel(answer, name="recorder"), cache=False).execute(query())
    return seen


def run_client(base_url: str, requests: list[Request], concurrency: int) -> dict[str, Any]:
    """The same chat bodies as the backend would send, from a plain concurrent client."""
    import openai

    client = openai.OpenAI(api_key="sk-no-key", base_url=base_url, timeout=120, max_retries=0)

    def body(req: Request) -> dict[str, Any]:
        plan = plan_for("llamacpp", req.constraint, gbnf=to_gbnf)
        kwargs: dict[str, Any] = {"model": "smollm2", "messages": req.as_messages(),
                                  "temperature": req.temperature,
                                  "max_tokens": _max_tokens(req, plan), **plan.create_kwargs}
        if plan.extra_body:
            kwargs["extra_body"] = plan.extra_body
        return kwargs

    bodies = [body(r) for r in requests]

    def send(kwargs: dict[str, Any]) -> tuple[str, int]:
        resp = client.chat.completions.create(**kwargs)
        return resp.choices[0].message.content or "", resp.usage.prompt_tokens if resp.usage else 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        out = list(pool.map(send, bodies))
    seconds = time.perf_counter() - t0
    prompt_tokens = sum(p for _, p in out)
    return {"values": len(bodies), "seconds": round(seconds, 3),
            "values_per_s": round(len(bodies) / seconds, 3),
            "prompt_tokens_per_value": round(prompt_tokens / len(bodies), 2),
            "answers": [t.strip() for t, _ in out]}


def run_engine(base_url: str, db: Path, concurrency: int, values_per_prompt: int = 1) -> dict[str, Any]:
    """The LLMMap query through the engine with the OpenAI backend (no answer cache)."""
    model = OpenAI("smollm2", base_url=base_url, max_concurrency=concurrency, timeout=120)
    session = BlendSQL(str(db), model=model, cache=False)
    t0 = time.perf_counter()
    result = session.execute(query(values_per_prompt))
    seconds = time.perf_counter() - t0
    df = result.df
    n = len(df)
    meta = result.meta
    return {"values": n, "seconds": round(seconds, 3), "values_per_s": round(n / seconds, 3),
            "model_calls": meta.model_calls,
            "prompt_tokens_per_value": round(meta.prompt_tokens / n, 2),
            "completion_tokens_per_value": round(meta.completion_tokens / n, 2),
            "answers": dict(zip(df["v"], df["a"], strict=True))}


def find_0128(explicit: str | None) -> tuple[str | None, str]:
    """A python with blendsql 0.1.28, or None and why not."""
    candidates = [explicit] if explicit else [
        os.environ.get("BSQL0128_VENV", "/tmp/bsql0128-venv-pinned") + "/bin/python",
        "/tmp/bsql0128-venv/bin/python"]
    for py in candidates:
        if py and Path(py).exists():
            return py, ""
    return None, ("no blendsql 0.1.28 venv found (" + ", ".join(c for c in candidates if c)
                  + "); creating one installs torch, not done on this shared machine")


def _as_text(answer: Any) -> str:
    """An engine answer (SQLite gives 1/0 for booleans) as the server's text."""
    if answer is None:
        return "null"
    return "true" if answer in (1, True) else "false" if answer in (0, False) else str(answer)


def agreement(a: dict[str, Any], b: dict[str, Any]) -> float:
    keys = list(a)
    return round(sum(1 for k in keys if a[k] == b.get(k)) / len(keys), 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1, help="client/engine alternations")
    ap.add_argument("--batch", type=int, nargs="*", default=[8],
                    help="values per prompt for the batched runs (none: skip)")
    ap.add_argument("--threads", type=int, default=None,
                    help="server threads (default: load-aware, as LlamaCpp)")
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--blendsql-0128", metavar="PYTHON", default=None)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    gguf = default_model_path()
    load_before = machine_load()
    threads = args.threads or default_threads(usable_cores(), load_before)
    port = free_port()
    cmd = server_command(gguf, port, threads, args.n_ctx)
    values = distinct_values(args.n)
    db = make_db(values)
    requests = captured_requests(db)
    results: dict[str, Any] = {"client": [], "engine": []}
    with running_server(cmd, port) as base_url:
        run_client(base_url, requests[:8], args.concurrency)  # warm-up (model pages, grammar)
        for _ in range(args.rounds):
            results["client"].append(run_client(base_url, requests, args.concurrency))
            print("client", {k: v for k, v in results["client"][-1].items() if k != "answers"})
            results["engine"].append(run_engine(base_url, db, args.concurrency))
            print("engine", {k: v for k, v in results["engine"][-1].items() if k != "answers"})
        one = results["engine"][-1]["answers"]
        batched = []
        for k in args.batch:
            run = run_engine(base_url, db, args.concurrency, values_per_prompt=k)
            run["values_per_prompt"] = k
            run["agreement_with_one_per_prompt"] = agreement(one, run["answers"])
            run["null_answers"] = sum(1 for v in run["answers"].values() if v is None)
            print("batched", {kk: vv for kk, vv in run.items() if kk != "answers"})
            batched.append(run)
        py0128, why = find_0128(args.blendsql_0128)
        results["blendsql_0128"] = {"run": False, "why": why} if py0128 is None else \
            {"run": False, "why": f"found {py0128}, but driving 0.1.28's model against a server "
                                   "is not implemented in this script yet"}

    client_vps = statistics.median(r["values_per_s"] for r in results["client"])
    engine_vps = statistics.median(r["values_per_s"] for r in results["engine"])
    client_answers = results["client"][-1]["answers"]
    engine_answers = [_as_text(one[v]) for v in values]
    summary = {
        "client_values_per_s": client_vps,
        "engine_values_per_s": engine_vps,
        "engine_over_client": round(engine_vps / client_vps, 3),
        "engine_agrees_with_client": round(
            sum(1 for a, b in zip(client_answers, engine_answers, strict=True) if a == b) / len(values), 4),
        "prompt_tokens_per_value_one_per_prompt": results["engine"][-1]["prompt_tokens_per_value"],
        "batched": [{k: r[k] for k in ("values_per_prompt", "values_per_s", "prompt_tokens_per_value",
                                       "agreement_with_one_per_prompt", "null_answers")}
                    for r in batched],
    }
    for run in [*results["client"], *results["engine"], *batched]:
        run.pop("answers", None)
    report = {
        "issue": 15,
        "command": "python benchmarks/model_throughput.py " + " ".join(sys.argv[1:]),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cores": os.cpu_count(), "usable_cores": usable_cores(),
                    "load_avg_before": round(load_before, 2), "load_avg_after": round(machine_load(), 2)},
        "model": {"gguf": gguf.name, "bytes": gguf.stat().st_size},
        "server": {"program": "llama_cpp.server (llama-cpp-python)", "n_ctx": args.n_ctx,
                   "n_threads": threads, "n_threads_batch": threads,
                   "parallel_slots": 1,
                   "note": "llama_cpp.server has no parallel-slot option: it serves one request at a "
                           "time behind a lock, so the limit is its serial throughput"},
        "n_values": len(values), "concurrency": args.concurrency, "question": QUESTION,
        "summary": summary, "runs": {**results, "batched": batched},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
