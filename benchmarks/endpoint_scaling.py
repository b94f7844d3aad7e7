"""Engine scaling over a pool of model endpoints (issue 25): LLMMap values/s with 1, 2, 4.

Fake OpenAI-compatible servers with a fixed, known latency and slot count make
the limit known: an endpoint with ``--slots`` S requests in service at once,
each taking ``--latency`` L seconds, answers at most S / L requests per second,
and k of them at most k * S / L. The query

    SELECT COUNT(*), SUM(t.k) FROM t WHERE {{LLMMap('Is it x?', t.v)}} = TRUE

runs over a SQLite table of ``--rows`` rows holding ``--distinct`` distinct values
(one model request per distinct value) through ``BlendSQL(path, model=Pool.from_urls(
...), cache=False)``, each endpoint's client ``max_concurrency`` = ``--concurrency``
(default 2 S: a request is already waiting at the server whenever a slot frees, so
the slot does not idle for the answer's round trip through the client). Side by
side in one run, for each ``--endpoints`` k:

- wall time of the query, model calls, distinct values answered, values/s, values/s
  as a fraction of the summed limit k * S / L, and the ratio to the first k (1);
- where the wall time went: before the first request reached a server (reading the
  distinct values, building prompts), between the first and last request (the
  model phase; its own values/s), after the last answer (joining the answers back);
  the client process's CPU seconds over the wall time (cores it kept busy);
- correctness: the query's COUNT and SUM(k) equal those computed in Python from
  the servers' rule (a value's answer is ``true`` when the CRC-32 of its text is
  even), every value reached the servers exactly once (the servers count every
  value they are asked), no slot limit was exceeded.

``--baseline-values M`` also sends M values' requests, with the largest k, through
``Pool.generate`` alone (no SQL engine) and through a plain ``openai`` client from
k * concurrency threads: the client stack's own ceiling on this machine, to tell the
engine's cost from Python's HTTP client's. ``--profile N`` measures the client's
CPU per request layer by layer (blendsql's ``OpenAI.answer``, the ``openai`` SDK
call under it, the same JSON over ``http.client``) over N sequential requests and
records a cProfile of ``OpenAI.answer`` by layer.

The servers run in one child process (this script with ``--serve``; one asyncio
loop, one port per endpoint on 127.0.0.1 chosen by the OS, HTTP/1.1 keep-alive),
so they do not share the benchmark's interpreter lock; each configuration gets a
fresh child, stopped at the end (also on error). They answer
``/v1/chat/completions`` and ``/v1/completions`` (with ``usage``, and first-token
``logprobs`` when asked) and ``GET /v1/models``; ``GET /stats`` is theirs.

    python benchmarks/endpoint_scaling.py [--rows 1000000] [--distinct 100000]
        [--endpoints 1 2 4] [--slots 8] [--latency 0.05] [--baseline-values 20000]
        [--profile 2000]
    python -m benchmarks endpoint-scaling      # the README's run

``--executors`` 1 2 (default) also runs the query with ``--executor-endpoints`` (4) on a
local Spark session (``local[n]``: n executor task slots) holding the same table
(cached before the clock starts): the distinct values are computed by Spark and
the requests answered on the executors (``blendsql.db.spark_calls``, the pool's
copy from ``blendsql.db.spark_models.for_executors`` in each task), checked like the rest, plus that the trace
shows executor jobs (and none on SQLite).

Writes benchmarks/results/endpoint_scaling.json (``--out``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.protocol import cpu_name  # noqa: E402

MODEL = "fake-yes-no"
QUESTION = "Is it x?"
QUERY = ("SELECT COUNT(*), SUM(t.k) FROM t WHERE {{LLMMap('" + QUESTION + "', t.v)}} = TRUE")
VALUE_PREFIX = "v"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "endpoint_scaling.json"


# ------------------------------------------------------------------ the rule and the table


def value_text(i: int, distinct: int) -> str:
    """The i-th distinct value: ``v`` and its zero-padded number (``v000042``)."""
    return f"{VALUE_PREFIX}{i:0{max(6, len(str(distinct - 1)))}d}"


def answer_for(value: str) -> bool:
    """The servers' answer to a value: true when the CRC-32 of its text is even."""
    return zlib.crc32(value.encode()) % 2 == 0


def row_value(row: int, distinct: int) -> int:
    """Which distinct value row ``row`` holds: every value on rows // distinct rows or one
    more, spread over the table (a stride coprime with ``distinct``), not in runs."""
    stride = 7919 if distinct % 7919 else 7907  # primes: coprime with any distinct < 7919**2
    return (row * stride) % distinct


def write_table(path: Path, rows: int, distinct: int) -> dict[str, int]:
    """``t(v TEXT, k INTEGER)`` with ``rows`` rows, ``distinct`` distinct ``v``;
    returns what the query must answer (COUNT and SUM(k) over the rows answered true)."""
    if not 1 <= distinct <= rows:
        raise SystemExit(f"--distinct {distinct} must be between 1 and --rows {rows}")
    names = [value_text(i, distinct) for i in range(distinct)]
    truth = [answer_for(n) for n in names]
    count = total = 0
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE TABLE t (v TEXT, k INTEGER)")
        chunk = 100_000
        for start in range(0, rows, chunk):
            batch = []
            for r in range(start, min(rows, start + chunk)):
                i = row_value(r, distinct)
                batch.append((names[i], r % 1000))
                if truth[i]:
                    count += 1
                    total += r % 1000
            con.executemany("INSERT INTO t VALUES (?, ?)", batch)
        con.commit()
    finally:
        con.close()
    return {"count": count, "sum_k": total, "true_values": sum(truth)}


# ------------------------------------------------------------------ the fake servers


class _Endpoint:
    """One fake server's slots and counters (in the server process)."""

    def __init__(self, slots: int) -> None:
        self.slots = asyncio.Semaphore(slots)
        self.requests = 0
        self.chat = 0
        self.completions = 0
        self.logprobs = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.first = 0.0
        self.last = 0.0
        self.busy = 0.0  # seconds of slot time in service (sum over requests)
        self.port = 0


class _Servers:
    """k endpoints in one asyncio loop; every value asked is counted across them."""

    def __init__(self, endpoints: int, slots: int, latency: float) -> None:
        self.latency = latency
        self.slots = slots
        self.eps = [_Endpoint(slots) for _ in range(endpoints)]
        self.values: Counter[str] = Counter()
        self.unrecognised = 0
        self.started = time.time()

    async def handle(self, ep: _Endpoint, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        key, _, val = line.partition(":")
                        headers[key.strip().lower()] = val.strip()
                size = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(size) if size else b""
                status, payload = await self.route(ep, method, path.split("?")[0], body)
                data = json.dumps(payload).encode()
                writer.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\n\r\n%s"
                             % (status, b"OK" if status == 200 else b"ERR", len(data), data))
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def route(self, ep: _Endpoint, method: str, path: str,
                    body: bytes) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path.endswith("/models"):
            return 200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]}
        if method == "GET" and path == "/stats":
            return 200, self.stats()
        if method == "POST" and path.endswith(("/chat/completions", "/completions")):
            return 200, await self.complete(ep, path.endswith("/chat/completions"),
                                            json.loads(body or b"{}"))
        return 404, {"error": {"message": f"no {method} {path}", "type": "not_found"}}

    async def complete(self, ep: _Endpoint, chat: bool, req: dict[str, Any]) -> dict[str, Any]:
        if chat:
            messages = req.get("messages") or [{}]
            content = messages[-1].get("content", "")
            prompt = content if isinstance(content, str) else json.dumps(content)
        else:
            raw = req.get("prompt", "")
            prompt = raw if isinstance(raw, str) else json.dumps(raw)
        value = _value_in(prompt)
        async with ep.slots:
            now = time.time()
            ep.requests += 1
            ep.first = ep.first or now
            if chat:
                ep.chat += 1
            else:
                ep.completions += 1
            if value is None:
                self.unrecognised += 1
            else:
                self.values[value] += 1
            ep.in_flight += 1
            ep.max_in_flight = max(ep.max_in_flight, ep.in_flight)
            t_in = time.perf_counter()
            await asyncio.sleep(self.latency)
            ep.busy += time.perf_counter() - t_in  # the latency plus the loop's lateness
            ep.in_flight -= 1
            ep.last = time.time()
        text = "true" if value is not None and answer_for(value) else "false"
        other = "false" if text == "true" else "true"
        usage = {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": 1,
                 "total_tokens": max(1, len(prompt) // 4) + 1}
        logprobs = None
        if req.get("logprobs"):
            ep.logprobs += 1
            top = [{"token": text, "logprob": -0.01, "bytes": list(text.encode())},
                   {"token": other, "logprob": -4.6, "bytes": list(other.encode())}]
            top = top[: max(1, int(req.get("top_logprobs") or 2))]
            logprobs = {"content": [{**top[0], "top_logprobs": top}], "refusal": None}
        if chat:
            return {"id": f"chatcmpl-{ep.requests}", "object": "chat.completion", "created": 0,
                    "model": req.get("model", MODEL), "usage": usage,
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                                 "message": {"role": "assistant", "content": text}}]}
        return {"id": f"cmpl-{ep.requests}", "object": "text_completion", "created": 0,
                "model": req.get("model", MODEL), "usage": usage,
                "choices": [{"index": 0, "finish_reason": "stop", "text": text,
                             "logprobs": None}]}

    def stats(self) -> dict[str, Any]:
        firsts = [e.first for e in self.eps if e.first]
        return {
            "requests": sum(e.requests for e in self.eps),
            "distinct_values": len(self.values),
            "values_asked_more_than_once": sum(1 for n in self.values.values() if n > 1),
            "unrecognised_prompts": self.unrecognised,
            "first_request_at": min(firsts) if firsts else None,
            "last_answer_at": max((e.last for e in self.eps), default=None) or None,
            "server_cpu_s": round(time.process_time(), 3),
            "slots": self.slots,
            "endpoints": [{"port": e.port, "requests": e.requests, "chat": e.chat,
                           "completions": e.completions, "logprobs_asked": e.logprobs,
                           "max_in_flight": e.max_in_flight, "busy_s": round(e.busy, 3),
                           "mean_service_s": round(e.busy / e.requests, 5) if e.requests
                           else None} for e in self.eps],
        }

    async def serve(self) -> None:
        servers = []
        for ep in self.eps:
            async def on_client(r: asyncio.StreamReader, w: asyncio.StreamWriter,
                                ep: _Endpoint = ep) -> None:
                await self.handle(ep, r, w)

            server = await asyncio.start_server(on_client, "127.0.0.1", 0, backlog=1024)
            ep.port = server.sockets[0].getsockname()[1]
            servers.append(server)
        print(json.dumps({"ports": [e.port for e in self.eps]}), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        for server in servers:
            server.close()
        os._exit(0)  # at once: connections still open would log their cancelled handlers


def _value_in(prompt: str) -> str | None:
    """The value a prompt asks about: the text after its last ``Value:`` line."""
    at = prompt.rfind("Value: ")
    if at < 0:
        return None
    rest = prompt[at + len("Value: "):].split("\n", 1)[0].strip()
    return rest if rest.startswith(VALUE_PREFIX) and rest[len(VALUE_PREFIX):].isdigit() else None


def serve_main(endpoints: int, slots: int, latency: float) -> None:
    asyncio.run(_Servers(endpoints, slots, latency).serve())


class FakeServers:
    """The child process serving k fake endpoints; ``urls``, ``stats()``, ``stop()``."""

    def __init__(self, endpoints: int, slots: int, latency: float, start_timeout: float = 30) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", "--endpoints",
             str(endpoints), "--slots", str(slots), "--latency", repr(latency)],
            stdout=subprocess.PIPE, text=True)
        line = ""
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()
                                                             if self.proc.stdout else ""),
                                  daemon=True)
        reader.start()
        reader.join(start_timeout)
        line = box[0] if box else ""
        if not line:
            self.stop()
            raise RuntimeError("the fake servers did not start")
        self.ports: list[int] = json.loads(line)["ports"]

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}/v1" for p in self.ports]

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[0]}/stats", timeout=60) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def fake_servers(endpoints: int, slots: int, latency: float) -> Iterator[FakeServers]:
    servers = FakeServers(endpoints, slots, latency)
    try:
        yield servers
    finally:
        servers.stop()


# ------------------------------------------------------------------ the measurements


def make_pool(urls: Sequence[str], concurrency: int, timeout: float) -> Any:
    from blendsql.models.pool import Pool

    return Pool.from_urls(MODEL, list(urls), max_concurrency=concurrency, timeout=timeout,
                          max_retries=2, backoff=0.05)


def spark_session(executors: int) -> Any:
    """A local Spark session with ``executors`` task slots (``local[n]``: one executor
    process's n cores, as Spark runs on one machine), quiet, bound to 127.0.0.1."""
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        raise SystemExit("a Spark session is already running in this process: the Spark rows "
                         "start (and stop) their own local[n] sessions; run the script alone")
    # the workers run this interpreter (Spark takes PYSPARK_PYTHON, else python3 from PATH)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(f"local[{executors}]")
             .appName(f"blendsql-endpoint-scaling-{executors}")
             .config("spark.default.parallelism", str(executors))
             .config("spark.sql.shuffle.partitions", str(executors))
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.memory", "4g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextmanager
def spark_table(db_path: Path, executors: int) -> Iterator[Any]:
    """The SQLite table ``t`` as a Spark DataFrame of a fresh ``local[executors]``
    session (stopped after)."""
    import pandas as pd

    con = sqlite3.connect(db_path)
    try:
        frame = pd.read_sql_query("SELECT v, k FROM t", con)
    finally:
        con.close()
    spark = spark_session(executors)
    try:
        yield spark.createDataFrame(frame).repartition(executors).cache()
    finally:
        spark.stop()


def run_engine(db_path: Path, k: int, args: argparse.Namespace,
               expected: dict[str, int], executors: int = 0) -> dict[str, Any]:
    """The query through BlendSQL over a pool of k fresh fake endpoints: on the SQLite
    file (``executors`` 0, the model called from this process), or on a local Spark
    session's table, the requests answered by ``executors`` executor tasks."""
    from blendsql import BlendSQL

    limit = k * args.slots / args.latency
    with fake_servers(k, args.slots, args.latency) as servers, (
            spark_table(db_path, executors) if executors else nullcontext()) as table:
        pool = make_pool(servers.urls, args.concurrency, args.timeout)
        source: Any = {"t": table} if executors else str(db_path)
        if executors:
            table.count()  # cached before the clock starts, as the SQLite file is on disk
        bsql = BlendSQL(source, model=pool, cache=False)
        cpu0, t0 = time.process_time(), time.time()
        # Spark: the requests on the executors whatever the batch's size ('auto' sends a
        # batch of 256+ there anyway: the same at the published size)
        smoothie = bsql.execute(QUERY, executors="on" if executors else "auto")
        t1, cpu1 = time.time(), time.process_time()
        stats = servers.stats()
        bsql.close()
    wall = t1 - t0
    jobs = [t for t in smoothie.trace if t.kind == "executors"]
    row = [int(x) for x in smoothie.df.iloc[0].tolist()]
    meta = smoothie.meta
    answered = stats["distinct_values"]
    busy = sum(e["busy_s"] for e in stats["endpoints"])
    first, last = stats["first_request_at"], stats["last_answer_at"]
    model_s = (last - first) if first and last else None
    values_per_s = answered / wall if wall > 0 else 0.0
    checks = {
        "count_right": row[0] == expected["count"],
        "sum_k_right": row[1] == expected["sum_k"],
        "every_value_asked": answered == args.distinct,
        "each_value_asked_once": stats["values_asked_more_than_once"] == 0
        and stats["requests"] == answered and stats["unrecognised_prompts"] == 0,
        "slots_respected": all(e["max_in_flight"] <= args.slots for e in stats["endpoints"]),
        "model_calls_equal_values": meta.model_calls == args.distinct,
        "answered_where_asked": bool(jobs) == bool(executors),
    }
    out: dict[str, Any] = {
        "endpoints": k,
        "backend": f"Spark local[{executors}]" if executors else "SQLite",
        "executors": executors,
        "executor_jobs": len(jobs),
        "summed_limit_per_s": round(limit, 3),
        "wall_s": round(wall, 3),
        "model_calls": meta.model_calls,
        "values_passed": meta.values_passed,
        "distinct_values_answered": answered,
        "values_per_s": round(values_per_s, 2),
        "fraction_of_limit": round(values_per_s / limit, 4),
        "phases_s": {
            "before_first_request": round(first - t0, 3) if first else None,
            "model": round(model_s, 3) if model_s is not None else None,
            "after_last_answer": round(t1 - last, 3) if last else None,
        },
        "model_phase_values_per_s": round(answered / model_s, 2) if model_s else None,
        "model_phase_fraction_of_limit": round(answered / model_s / limit, 4) if model_s else None,
        # slot time in service over the slot time there was (model phase): 1.0 = the client
        # kept every slot busy; below 1, slots waited for a request
        "slot_utilisation": round(busy / (k * args.slots * model_s), 4) if model_s else None,
        # each request's time in its slot, measured by the server: the set latency plus its
        # event loop's lateness on this machine; the limit the servers could really give
        "mean_service_s": round(busy / answered, 5) if answered else None,
        "effective_limit_per_s": round(k * args.slots * answered / busy, 3) if busy else None,
        "fraction_of_effective_limit": round(values_per_s * busy / (k * args.slots * answered), 4)
        if busy and answered else None,
        "client_cpu_s": round(cpu1 - cpu0, 3),
        "client_cores_busy": round((cpu1 - cpu0) / wall, 3) if wall > 0 else None,
        "client_cpu_ms_per_value": round(1000 * (cpu1 - cpu0) / max(1, answered), 4),
        # the driver's user + sys CPU over the requests the servers saw: on SQLite the whole
        # query's client cost per request; on Spark only the driver's share
        "client_cpu_ms_per_request": round(1000 * (cpu1 - cpu0) / max(1, stats["requests"]), 4),
        "cpu": cpu_name(),
        "server_cpu_s": stats["server_cpu_s"],
        "query_result": {"count": row[0], "sum_k": row[1]},
        "expected": {"count": expected["count"], "sum_k": expected["sum_k"]},
        "checks": checks,
        "correct": all(checks.values()),
        "server_stats": {key: stats[key] for key in ("requests", "distinct_values",
                         "values_asked_more_than_once", "unrecognised_prompts")},
        "per_endpoint": [{"requests": e["requests"], "chat": e["chat"],
                          "completions": e["completions"], "logprobs_asked": e["logprobs_asked"],
                          "max_in_flight": e["max_in_flight"],
                          "mean_service_s": e["mean_service_s"]} for e in stats["endpoints"]],
        "pool_failovers": pool.failovers,
    }
    return out


def baseline_requests(n: int, distinct: int) -> list[Any]:
    """The requests LLMMap sends for the first n values, captured from the engine."""
    import pandas as pd

    from blendsql import BlendSQL
    from blendsql.models.base import Model, Response, Usage

    captured: list[Any] = []

    class Recorder(Model):
        name = "recorder"

        def identity(self) -> str:
            return "recorder"

        def generate(self, requests: Sequence[Any]) -> list[Response]:
            captured.extend(requests)
            return [Response("true", True, Usage(), 0.0) for _ in requests]

    frame = pd.DataFrame({"v": [value_text(i, distinct) for i in range(n)], "k": [0] * n})
    BlendSQL({"t": frame}, model=Recorder(), cache=False).execute(QUERY)
    return captured


def run_pool_only(requests: Sequence[Any], k: int, args: argparse.Namespace) -> dict[str, Any]:
    """The same requests through ``Pool.generate`` alone: no SQL engine."""
    limit = k * args.slots / args.latency
    with fake_servers(k, args.slots, args.latency) as servers:
        pool = make_pool(servers.urls, args.concurrency, args.timeout)
        for endpoint in pool.endpoints:
            endpoint.kind()  # the /models probe, outside the timing
        cpu0, t0 = time.process_time(), time.time()
        out = pool.generate(requests)
        wall, cpu = time.time() - t0, time.process_time() - cpu0
        stats = servers.stats()
    right = sum(1 for r, q in zip(out, requests, strict=True)
                if r.value == answer_for(_value_in(q.prompt) or ""))
    return {"endpoints": k, "values": len(requests), "wall_s": round(wall, 3),
            "values_per_s": round(len(requests) / wall, 2),
            "fraction_of_limit": round(len(requests) / wall / limit, 4),
            "client_cores_busy": round(cpu / wall, 3),
            "client_cpu_ms_per_value": round(1000 * cpu / len(requests), 4),
            "answers_right": right, "each_value_asked_once":
                stats["values_asked_more_than_once"] == 0 and stats["requests"] == len(requests),
            **_effective(stats, len(requests), wall)}


def _effective(stats: dict[str, Any], n: int, wall: float) -> dict[str, Any]:
    """The servers' measured service time and the fraction of the limit it allows."""
    busy = sum(e["busy_s"] for e in stats["endpoints"])
    slots = stats["slots"] * len(stats["endpoints"])
    if not busy or not n or wall <= 0:
        return {}
    return {"mean_service_s": round(busy / n, 5),
            "effective_limit_per_s": round(slots * n / busy, 3),
            "fraction_of_effective_limit": round(n / wall * busy / (slots * n), 4)}


def run_plain_client(requests: Sequence[Any], k: int, args: argparse.Namespace) -> dict[str, Any]:
    """The same chat requests from k * S threads through a plain ``openai`` client per
    endpoint (no blendsql): Python's HTTP client stack alone on this machine."""
    import openai

    limit = k * args.slots / args.latency
    with fake_servers(k, args.slots, args.latency) as servers:
        clients = [openai.OpenAI(api_key="sk-no-key", base_url=u, timeout=args.timeout,
                                 max_retries=2) for u in servers.urls]
        answers: list[str | None] = [None] * len(requests)
        lock = threading.Lock()
        nxt = [0]

        def worker(client: Any) -> None:
            while True:
                with lock:
                    i = nxt[0]
                    nxt[0] += 1
                if i >= len(requests):
                    return
                req = requests[i]
                resp = client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": req.prompt}],
                    temperature=0.0, max_tokens=req.max_tokens)
                answers[i] = resp.choices[0].message.content

        cpu0, t0 = time.process_time(), time.time()
        threads = k * args.concurrency
        with ThreadPoolExecutor(max_workers=threads) as ex:
            futures = [ex.submit(worker, clients[j % k]) for j in range(threads)]
            for f in futures:
                f.result()
        wall, cpu = time.time() - t0, time.process_time() - cpu0
        stats = servers.stats()
    right = sum(1 for a, q in zip(answers, requests, strict=True)
                if (a == "true") == answer_for(_value_in(q.prompt) or ""))
    return {"endpoints": k, "threads": k * args.concurrency, "values": len(requests),
            "wall_s": round(wall, 3), "values_per_s": round(len(requests) / wall, 2),
            "fraction_of_limit": round(len(requests) / wall / limit, 4),
            "client_cores_busy": round(cpu / wall, 3),
            "client_cpu_ms_per_value": round(1000 * cpu / len(requests), 4),
            "answers_right": right, "each_value_asked_once":
                stats["values_asked_more_than_once"] == 0 and stats["requests"] == len(requests),
            **_effective(stats, len(requests), wall)}


def _layer(filename: str, func: str) -> str:
    """Which layer a profiled function belongs to (package, blendsql, stdlib, socket)."""
    if func.startswith("<method 'recv") or func.startswith("<method 'send"):
        return "socket send/recv"
    if "site-packages/" in filename:
        return filename.split("site-packages/")[1].split("/")[0].removesuffix(".py")
    if "blendsql" in Path(filename).parts:
        return "blendsql"
    if filename == "~":
        return "builtins"
    return "stdlib"


def profile_request_cpu(requests: Sequence[Any], args: argparse.Namespace) -> dict[str, Any]:
    """CPU per request of each client layer, one request at a time against one endpoint
    with no latency: blendsql's ``OpenAI.answer`` (what the pool's threads call), the
    ``openai`` SDK call it makes, and the same JSON over ``http.client``; then a cProfile
    of ``OpenAI.answer`` by layer. CPU is what caps a pool's values/s in one process:
    the pool's threads hold the interpreter lock while they build and parse requests."""
    import cProfile
    import http.client
    import pstats

    import openai

    from blendsql.models import OpenAI
    from blendsql.models.chat_transport import ChatTransport

    n = len(requests)
    out: dict[str, Any] = {"requests": n, "cpu_ms_per_request": {}}
    with fake_servers(1, args.slots, 0.0001) as servers:
        model = OpenAI(MODEL, servers.urls[0], max_concurrency=1, timeout=args.timeout)
        model.kind()
        # the same client on the SDK's httpx client (the route HTTPS and proxied endpoints take)
        via_httpx_model = OpenAI(MODEL, servers.urls[0], max_concurrency=1, timeout=args.timeout)
        via_httpx_model.kind()
        via_httpx_model._chat = ChatTransport(via_httpx_model._client, via_httpx_model._http)
        sdk = openai.OpenAI(api_key="sk-no-key", base_url=servers.urls[0], max_retries=0,
                            timeout=args.timeout)
        conn = http.client.HTTPConnection("127.0.0.1", servers.ports[0], timeout=args.timeout)

        def via_blendsql() -> None:
            for req in requests:
                model.answer(req)

        def via_blendsql_httpx() -> None:
            for req in requests:
                via_httpx_model.answer(req)

        def via_sdk() -> None:
            for req in requests:
                sdk.chat.completions.create(model=MODEL, temperature=0.0, max_tokens=req.max_tokens,
                                            messages=[{"role": "user", "content": req.prompt}])

        def via_http_client() -> None:
            for req in requests:
                body = json.dumps({"model": MODEL, "temperature": 0.0,
                                   "max_tokens": req.max_tokens,
                                   "messages": [{"role": "user", "content": req.prompt}]})
                conn.request("POST", "/v1/chat/completions", body,
                             {"content-type": "application/json"})
                json.loads(conn.getresponse().read())

        layers = (("blendsql OpenAI.answer", via_blendsql),
                  ("blendsql OpenAI.answer on the SDK's httpx client", via_blendsql_httpx),
                  ("openai SDK call", via_sdk),
                  ("http.client + json", via_http_client))
        for name, fn in layers:
            fn()  # warm up (connections, caches)
            cpu0, t0 = time.process_time(), time.perf_counter()
            fn()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
            out["cpu_ms_per_request"][name] = round(1000 * cpu / n, 4)
            out.setdefault("wall_ms_per_request", {})[name] = round(1000 * wall / n, 4)
        prof = cProfile.Profile(time.thread_time)  # CPU time: waiting for the server is not
        prof.enable()
        via_blendsql()
        prof.disable()
        conn.close()
    by_layer: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    # {(file, line, func): (calls, primitive calls, tottime, cumtime, callers)}
    stats: dict[Any, Any] = getattr(pstats.Stats(prof), "stats", {})
    for (filename, _line, func), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        by_layer[_layer(filename, func)] += tottime
        where = (filename.split("site-packages/")[1] if "site-packages/" in filename
                 else Path(filename).name)
        by_function[f"{where}:{func}"] += tottime
    total = sum(by_layer.values()) or 1.0
    out["cprofile_note"] = ("own CPU time (tottime, thread CPU clock) under cProfile, which "
                            "inflates pure-Python layers; shares of the profiled total")
    out["cprofile_share_by_layer"] = {k: round(v / total, 4) for k, v in by_layer.most_common()}
    out["cprofile_top_functions"] = [{"where": k, "share": round(v / total, 4)}
                                     for k, v in by_function.most_common(12)]
    return out


def summarise(engine: list[dict[str, Any]]) -> dict[str, Any]:
    base = engine[0]["values_per_s"] if engine else 0.0
    rows = []
    for r in engine:
        r["ratio_to_first"] = round(r["values_per_s"] / base, 3) if base else None
        rows.append({"endpoints": r["endpoints"], "executors": r.get("executors", 0),
                     "values_per_s": r["values_per_s"],
                     "summed_limit_per_s": r["summed_limit_per_s"],
                     "fraction_of_limit": r["fraction_of_limit"],
                     "ratio_to_first": r["ratio_to_first"],
                     "model_phase_fraction_of_limit": r["model_phase_fraction_of_limit"],
                     "slot_utilisation": r.get("slot_utilisation"),
                     "fraction_of_effective_limit": r.get("fraction_of_effective_limit"),
                     "client_cores_busy": r["client_cores_busy"],
                     "client_cpu_ms_per_request": r.get("client_cpu_ms_per_request"),
                     "cpu": r.get("cpu"), "load_1min_before": r.get("load_1min_before"),
                     "correct": r["correct"]})
    out: dict[str, Any] = {"rows": rows, "all_correct": all(r["correct"] for r in engine)}
    by_k = {r["endpoints"]: r for r in engine if not r.get("executors")}
    if 4 in by_k:
        out["targets"] = {
            "fraction_of_limit_at_4": by_k[4]["fraction_of_limit"],
            "fraction_of_limit_at_4_ge_0.9": by_k[4]["fraction_of_limit"] >= 0.9,
        }
        per_request = by_k[4].get("client_cpu_ms_per_request")
        if per_request is not None:
            out["targets"]["client_cpu_ms_per_request_at_4"] = per_request
            out["targets"]["client_cpu_ms_per_request_at_4_le_0.5"] = per_request <= 0.5
        if 1 in by_k and by_k[1]["values_per_s"]:
            ratio = by_k[4]["values_per_s"] / by_k[1]["values_per_s"]
            out["targets"]["ratio_4_over_1"] = round(ratio, 3)
            out["targets"]["ratio_4_over_1_ge_3.5"] = ratio >= 3.5
    spark = [r for r in engine if r.get("executors")]
    if spark:
        out["executor_rows"] = [
            {"executors": r["executors"], "endpoints": r["endpoints"],
             "fraction_of_limit": r["fraction_of_limit"],
             "ratio_to_sqlite_same_endpoints": round(
                 r["values_per_s"] / by_k[r["endpoints"]]["values_per_s"], 3)
             if r["endpoints"] in by_k and by_k[r["endpoints"]]["values_per_s"] else None}
            for r in spark]
    return out


def load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--distinct", type=int, default=100_000)
    ap.add_argument("--endpoints", type=int, nargs="+", default=[1, 2, 4],
                    help="pool sizes to run, side by side (the first is the ratio's base)")
    ap.add_argument("--slots", type=int, default=8, help="requests each server serves at once")
    ap.add_argument("--latency", type=float, default=0.05, help="seconds each request takes")
    ap.add_argument("--concurrency", type=int, default=0,
                    help="each endpoint's client max_concurrency (default: 2 x --slots, so a "
                         "request waits at the server whenever a slot frees; = --slots leaves a "
                         "slot idle for each request's round trip through the client)")
    ap.add_argument("--timeout", type=float, default=60.0, help="client timeout per request, s")
    ap.add_argument("--executors", type=int, nargs="*", default=[1, 2],
                    help="also run on a local Spark session with this many executor task "
                         "slots (local[n]), the requests answered there (none: not run)")
    ap.add_argument("--executor-endpoints", type=int, nargs="+", default=[4],
                    help="pool sizes of the Spark runs")
    ap.add_argument("--baseline-values", type=int, default=0,
                    help="also send this many values through Pool.generate alone and a plain "
                         "openai client, with the largest pool (0: not run)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also measure the client's CPU per request, layer by layer, over N "
                         "sequential requests, and cProfile them (0: not run)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any] | None:
    args = parse_args(argv)
    if args.serve:
        serve_main(args.endpoints[0], args.slots, args.latency)
        return None
    if args.slots < 1 or args.latency <= 0 or args.rows < 1:
        raise SystemExit("--slots, --latency and --rows must be positive")
    args.concurrency = args.concurrency or 2 * args.slots
    from benchmarks.protocol import run_record

    record = run_record("endpoint_scaling.py", argv)
    record["protocol"] = (
        "fake OpenAI-compatible endpoints (one child process, asyncio, HTTP/1.1 keep-alive) "
        "with a fixed latency and slot count; limit per endpoint = slots / latency; the query's "
        "wall time from BlendSQL.execute to its result; answer cache off")
    record["settings"] = {"rows": args.rows, "distinct": args.distinct, "slots": args.slots,
                          "latency_s": args.latency, "endpoints": args.endpoints,
                          "limit_per_endpoint_per_s": round(args.slots / args.latency, 3),
                          "query": QUERY, "client_max_concurrency_per_endpoint": args.concurrency}
    record["load_1_5_15_before"] = load()
    with tempfile.TemporaryDirectory(prefix="endpoint-scaling-") as tmp:
        db_path = Path(tmp) / "t.db"
        t0 = time.time()
        expected = write_table(db_path, args.rows, args.distinct)
        record["table"] = {**expected, "build_s": round(time.time() - t0, 2)}
        engine = []
        biggest = max(args.endpoints)
        runs = [(k, 0) for k in args.endpoints] + [
            (k, n) for n in args.executors or [] for k in args.executor_endpoints]
        for k, n in runs:
            print(f"engine, {k} endpoint(s), {n or 'no'} executor(s) ...", file=sys.stderr,
                  flush=True)
            before = load()
            try:
                r = run_engine(db_path, k, args, expected, n)
            except Exception as e:  # noqa: BLE001 - recorded, the other sizes still run
                traceback.print_exc()
                r = {"endpoints": k, "executors": n, "error": f"{type(e).__name__}: {e}",
                     "correct": False,
                     "values_per_s": 0.0, "fraction_of_limit": 0.0,
                     "summed_limit_per_s": k * args.slots / args.latency,
                     "model_phase_fraction_of_limit": None, "client_cores_busy": None,
                     "cpu": cpu_name()}
            r["load_1min_before"] = before[0] if before else None
            after = load()
            r["load_1min_after"] = after[0] if after else None
            engine.append(r)
            print(json.dumps({key: r.get(key) for key in ("endpoints", "executors", "wall_s",
                                                          "values_per_s",
                              "fraction_of_limit", "correct", "client_cores_busy",
                              "client_cpu_ms_per_request")}),
                  file=sys.stderr, flush=True)
    record["engine"] = engine
    record["summary"] = summarise(engine)
    if args.baseline_values > 0:
        n = min(args.baseline_values, args.distinct)
        requests = baseline_requests(n, args.distinct)
        print(f"baselines, {biggest} endpoint(s), {n} values ...", file=sys.stderr, flush=True)
        record["baselines"] = {"pool_only": run_pool_only(requests, biggest, args),
                               "plain_openai_client": run_plain_client(requests, biggest, args)}
    if args.profile > 0:
        print(f"client CPU per request, {args.profile} requests ...", file=sys.stderr, flush=True)
        record["client_cpu_profile"] = profile_request_cpu(
            baseline_requests(min(args.profile, args.distinct), args.distinct), args)
    record["load_1_5_15_after"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["summary"], indent=2))
    return record


if __name__ == "__main__":
    main()
