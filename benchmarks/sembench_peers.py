"""SemBench's movie queries through the peers, scored like ``benchmarks/sembench.py``.

The same adapted instances as ``sembench.py`` (same split, seed and sizes), each run
by a peer in its own venv (``benchmarks/envs.py``: ``lotus``, ``palimpzest``,
``blendsql-0.1.28``) against one OpenAI-compatible server, and scored with
``sembench.score_result``:

- ``lotus`` / ``palimpzest``: ``benchmarks/sembench_peer_runner.py`` with the peer's
  python; each query written in the peer's own API as SemBench's runners and the
  peers' docs write it (LOTUS ``sem_filter`` / ``sem_map`` / ``sem_join``; Palimpzest
  ``MemoryDataset`` + ``sem_filter`` / ``sem_add_columns`` / ``sem_join``). The pairs
  queries are the peers' semantic self-joins (one call per pair of reviews).
- ``blendsql-0.1.28``: ``benchmarks/blendsql_0128_runner.py`` on a SQLite file holding
  ``reviews(id, reviewId, reviewText)`` only, with 0.1.28's ``LLMMap`` and ``OpenAI``.

The peers see no label column: the runner gets ``id``, ``reviewId`` and ``reviewText``.
Each instance runs in its own peer process behind a metering proxy
(:class:`MeteringProxy`), which counts the model calls and the tokens the server
reports, the same way for every peer. The server is ``--base-url``, or llama.cpp's
``llama-server`` started here on 127.0.0.1 (``envs.find_llama_server()`` or
``--server-bin``; ``--gguf``, default ``$BLENDSQL_EVAL_MODEL``) and stopped at the end.

    python -m benchmarks.envs build lotus      # once (several GB)
    python benchmarks/sembench_peers.py --peer lotus --out benchmarks/results/sembench_lotus.jsonl
    python benchmarks/sembench_peers.py --peer blendsql-0.1.28 --queries Q2,Q3,Q8
    python benchmarks/sembench_peers.py --peer palimpzest --dry-run   # no peer, no model

Run against lotus-ai 1.2.4, palimpzest 0.7.21 and blendsql 0.1.28 (``--keys`` runs a
subset of the instances into the same ``--out``, e.g. one movie's pairs queries).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import envs, protocol, sembench  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PEERS = ("lotus", "palimpzest", "blendsql-0.1.28")
RUNNERS = {"lotus": ROOT / "benchmarks" / "sembench_peer_runner.py",
           "palimpzest": ROOT / "benchmarks" / "sembench_peer_runner.py",
           "blendsql-0.1.28": ROOT / "benchmarks" / "blendsql_0128_runner.py"}


# ---------------------------------------------------------------- the server


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(binary: Path, gguf: Path, port: int, threads: int, n_ctx: int) -> list[str]:
    """llama.cpp's server on 127.0.0.1 with one slot (one request at a time, as the engine)."""
    from blendsql.models.gguf import llama_server_flags

    return [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "-c", str(n_ctx), "-t", str(threads), "-tb", str(threads), "-np", "1", "--no-webui",
            *llama_server_flags()]


def python_server_command(gguf: Path, port: int, threads: int, n_ctx: int) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server (the same llama.cpp, no build needed)."""
    from blendsql.models.gguf import python_server_command

    return python_server_command(gguf, "--host", "127.0.0.1", "--port", str(port), "--n_ctx",
                                 str(n_ctx), "--n_threads", str(threads), "--n_threads_batch",
                                 str(threads))


def has_python_server() -> bool:
    """True when ``llama_cpp.server`` and its web stack import in this interpreter."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None
               for m in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "pydantic_settings"))


@contextmanager
def llama_server(cmd: Sequence[str], port: int, timeout: float = 300.0) -> Iterator[str]:
    """Start the server, yield its ``/v1`` URL once ``/v1/models`` answers, and always stop
    it (terminate, then kill). A server that exits or does not answer in ``timeout``
    seconds is an error showing the end of its log."""
    log = Path(tempfile.mkdtemp(prefix="bsql-sembench-server-")) / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        envs.wait_until_up(proc, base, timeout, log)
        yield base
    finally:
        envs.stop(proc)


# ---------------------------------------------------------------- metering


@dataclass
class Meter:
    """Model calls and the tokens the server reported for them."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, usage: dict[str, Any] | None) -> None:
        with self.lock:
            self.calls += 1
            self.prompt_tokens += int((usage or {}).get("prompt_tokens") or 0)
            self.completion_tokens += int((usage or {}).get("completion_tokens") or 0)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {"model_calls": self.calls, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.completion_tokens}


def since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


class MeteringProxy:
    """An HTTP proxy on 127.0.0.1 in front of an OpenAI-compatible server that counts every
    completion request and the ``usage`` its answer reports (streamed answers count as a
    call without tokens). ``with MeteringProxy(upstream) as proxy: proxy.url``.

    Chat messages in OpenAI's newer forms, which Palimpzest sends, are forwarded in
    the older ones llama-cpp-python's server reads, with the text unchanged: role
    ``developer`` as ``system``, a content list of text parts as one string. A
    streamed chat request (blendsql 0.1.28 streams, asking for usage in the last
    chunk, which llama-cpp-python's server cannot give) is asked upstream unstreamed
    and its answer sent back as one streamed chunk, then the usage chunk."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.meter = Meter()
        origin = self.upstream.split("/v1")[0]
        meter = self.meter

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                return None

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                self.forward(None)

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                self.forward(self.rfile.read(n))

            def forward(self, body: bytes | None) -> None:
                body = plain_messages(body)
                body, streamed = unstreamed(body)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                req = urllib.request.Request(origin + self.path, data=body, headers=headers,
                                             method=self.command)
                try:
                    with urllib.request.urlopen(req, timeout=3600) as r:
                        status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
                if body is not None and self.path.rstrip("/").endswith("completions"):
                    meter.add(usage_of(data))
                    if streamed and status == 200:
                        data, ctype = as_stream(data), "text/event-stream"
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> MeteringProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def plain_messages(body: bytes | None) -> bytes | None:
    """A chat request's ``developer`` messages as ``system`` ones and text-part lists as
    strings (other bodies, and messages with non-text parts, unchanged)."""
    if not body or b'"messages"' not in body:
        return body
    try:
        payload = json.loads(body)
    except ValueError:
        return body
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if not isinstance(messages, list):
        return body
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "developer":
            m["role"] = "system"
        parts = m.get("content")
        if isinstance(parts, list) and all(isinstance(x, dict) and x.get("type") == "text"
                                           for x in parts):
            m["content"] = "".join(str(x.get("text", "")) for x in parts)
    return json.dumps(payload).encode()


def unstreamed(body: bytes | None) -> tuple[bytes | None, bool]:
    """(the request asked without streaming, whether it asked for a stream)."""
    if not body or b'"stream"' not in body:
        return body, False
    try:
        payload = json.loads(body)
    except ValueError:
        return body, False
    if not isinstance(payload, dict) or not payload.get("stream") or "messages" not in payload:
        return body, False
    payload.pop("stream_options", None)
    payload["stream"] = False
    return json.dumps(payload).encode(), True


def as_stream(data: bytes) -> bytes:
    """A chat completion as server-sent events: one chunk with the whole message, one
    with the finish reason, one with the usage, then ``[DONE]``."""
    try:
        answer = json.loads(data)
        choice = (answer.get("choices") or [{}])[0]
    except (ValueError, AttributeError):
        return data
    message = choice.get("message") or {}
    head = {k: answer.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    chunks = [
        {**head, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                    "content": message.get("content") or ""},
                              "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice.get("finish_reason")}]},
        {**head, "choices": [], "usage": answer.get("usage")},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def usage_of(data: bytes) -> dict[str, Any] | None:
    """The ``usage`` of a (non-streamed) completion answer."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    return payload.get("usage") if isinstance(payload, dict) else None


# ---------------------------------------------------------------- what each peer gets


def peer_reviews(data: sembench.Data, insts: Sequence[sembench.Instance]) -> list[dict[str, Any]]:
    """The reviews the instances touch, as the peers see them: id, reviewId, reviewText."""
    wanted = {r.review_id for i in insts for r in sembench.scope(data, i)}
    table = sembench.engine_tables(data, [r for r in data.reviews if r.review_id in wanted])["reviews"]
    return [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]


def runner_request(peer: str, data: sembench.Data, insts: Sequence[sembench.Instance], base_url: str,
                   model: str) -> dict[str, Any]:
    """stdin of ``sembench_peer_runner.py`` for LOTUS / Palimpzest."""
    return {"peer": peer, "base_url": base_url, "model": model, "reviews": peer_reviews(data, insts),
            "instances": [i.record() for i in insts]}


def write_0128_database(data: sembench.Data, path: Path) -> Path:
    """A SQLite file with ``reviews(id, reviewId, reviewText)`` for blendsql 0.1.28."""
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as conn:
        sembench.engine_tables(data)["reviews"].to_sql("reviews", conn, index=False)
    conn.close()
    return path


def sql_0128(inst: sembench.Instance) -> str:
    """The instance in 0.1.28's dialect (``LLMMap(question, t.col, return_type=)``)."""
    def yes(col: str, question: str = sembench.POSITIVE_Q) -> str:
        return f"{{{{LLMMap({sembench.sql_str(question)}, {col}, return_type='bool')}}}} = TRUE"

    def label(col: str) -> str:
        return f"CASE WHEN {yes(col)} THEN 'POSITIVE' ELSE 'NEGATIVE' END"

    def score(col: str) -> str:
        return f"{{{{LLMMap({sembench.sql_str(sembench.SCORE_Q)}, {col}, return_type='int')}}}}"

    q = inst.query
    movie = sembench.sql_str(inst.movies[0]) if inst.movies else ""
    if q == "Q1":
        ids = ", ".join(str(i) for i in inst.sample)
        return (f"SELECT reviewId FROM reviews WHERE reviewId IN ({ids}) AND "
                f"{yes('reviews.reviewText', sembench.CLEARLY_POSITIVE_Q)} LIMIT 5")
    if q == "Q2":
        return f"SELECT reviewId FROM reviews WHERE id = {movie} AND {yes('reviews.reviewText')} LIMIT 5"
    if q == "Q3":
        return (f"SELECT COUNT(*) AS positive_review_cnt FROM reviews WHERE id = {movie} AND "
                f"{yes('reviews.reviewText')}")
    if q == "Q4":
        return (f"SELECT AVG(CASE WHEN {yes('reviews.reviewText')} THEN 1.0 ELSE 0.0 END) AS positivity_ratio "
                f"FROM reviews WHERE id = {movie}")
    if q in sembench.PAIR_QUERIES:
        op = "=" if q == "Q5" else "<>"
        limit = f" LIMIT {sembench.LIMITS[q]}" if q in sembench.LIMITS else ""
        return ("SELECT r1.id, r1.reviewId AS reviewId1, r2.reviewId AS reviewId2 FROM reviews AS r1 "
                "JOIN reviews AS r2 ON r1.id = r2.id AND r1.reviewId < r2.reviewId "
                f"WHERE r1.id = {movie} AND {label('r1.reviewText')} {op} {label('r2.reviewText')}{limit}")
    if q == "Q8":
        return (f"SELECT {label('reviews.reviewText')} AS scoreSentiment, COUNT(*) AS count FROM reviews "
                f"WHERE id = {movie} GROUP BY 1")
    if q == "Q9":
        return f"SELECT reviewId, {score('reviews.reviewText')} AS reviewScore FROM reviews WHERE id = {movie}"
    ids = ", ".join(sembench.sql_str(m) for m in inst.movies)
    return (f"SELECT id AS movieId, AVG({score('reviews.reviewText')}) AS movieScore FROM reviews "
            f"WHERE id IN ({ids}) GROUP BY id")


def request_0128(db: Path, insts: Sequence[sembench.Instance], base_url: str, model: str) -> dict[str, Any]:
    """stdin of ``blendsql_0128_runner.py``: the instances as queries on ``db``."""
    return {"queries": [{"id": i.key, "db": str(db), "sql": sql_0128(i)} for i in insts],
            "model": {"name": model, "base_url": base_url, "class": "OpenAI"},
            "builtin_ingredients": ["LLMMap"]}


# ---------------------------------------------------------------- running and scoring


def result_frame(result: dict[str, Any]) -> pd.DataFrame | None:
    """A runner's result as a DataFrame (columns by position, as SemBench reads them)."""
    rows = result.get("rows")
    if rows is None:
        return None
    columns = result.get("columns") or [f"c{i}" for i in range(len(rows[0]) if rows else 0)]
    return pd.DataFrame(rows, columns=columns)


def score_peer(data: sembench.Data, inst: sembench.Instance, peer: str, result: dict[str, Any],
               usage: dict[str, int]) -> dict[str, Any]:
    """One peer's answer to one instance, scored like sembench's rows."""
    row: dict[str, Any] = {"key": f"{inst.key}|{peer}", "instance": inst.key, "query": inst.query,
                           "mode": peer, "peer": peer, "reviews": len(sembench.scope(data, inst)),
                           **usage, "seconds": result.get("seconds"), "error": result.get("error")}
    if result.get("unsupported"):
        return {**row, "not_applicable": result["unsupported"]}
    df = result_frame(result)
    row.update(sembench.failed_metric(inst) if result.get("error") or df is None
               else sembench.score_result(data, inst, df))
    if df is not None:
        row["result"] = [[sembench.plain_cell(v) for v in r] for r in df.head(50).itertuples(index=False)]
    if inst.query in sembench.PAIR_QUERIES:
        row["pairs"] = row["reviews"] * (row["reviews"] - 1) // 2
    return row


def run_peer_once(python: Path, runner: Path, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One peer process; its JSON answer (or an error standing for every item).

    The peer runs without ``PYTHONPATH``: a checkout put there (as benchmark runs from a
    worktree do) would be imported instead of the peer's own packages (blendsql 0.1.28).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        proc = subprocess.run([str(python), str(runner)], input=json.dumps(request), capture_output=True,
                              text=True, timeout=timeout, cwd=tempfile.gettempdir(), env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"the peer did not finish within {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": f"the peer exited {proc.returncode}: {proc.stderr[-800:]}"}
    try:
        return dict(json.loads(proc.stdout))
    except ValueError:
        return {"error": f"the peer's output is not JSON: {proc.stdout[-300:]}"}


def answer_of(peer: str, payload: dict[str, Any], key: str) -> dict[str, Any]:
    """The runner's result for ``key`` in the shape :func:`result_frame` reads."""
    if payload.get("error"):
        return {"error": payload["error"]}
    for res in payload.get("results") or []:
        if res.get("id", res.get("key")) == key:
            if peer == "blendsql-0.1.28" and res.get("rows") is None:
                return {"error": res.get("error") or "no rows", "seconds": res.get("seconds")}
            return res
    return {"error": "the peer gave no result for this instance"}


def run_all(peer: str, python: Path, data: sembench.Data, insts: Sequence[sembench.Instance], upstream: str,
            model: str, out: Path, timeout: float, workdir: Path) -> int:
    """Every instance not yet in ``out``, each in its own peer process behind the meter."""
    done = set(sembench.read_rows(out))
    db = write_0128_database(data, workdir / "sembench_reviews.sqlite") if peer == "blendsql-0.1.28" else None
    ran = 0
    with MeteringProxy(upstream) as proxy, out.open("a", encoding="utf-8") as fh:
        for n, inst in enumerate(insts):
            if f"{inst.key}|{peer}" in done:
                continue
            request = (request_0128(db, [inst], proxy.url, model) if db is not None
                       else runner_request(peer, data, [inst], proxy.url, model))
            before = proxy.meter.snapshot()
            payload = run_peer_once(python, RUNNERS[peer], request, timeout)
            row = score_peer(data, inst, peer, answer_of(peer, payload, inst.key),
                             since(before, proxy.meter.snapshot()))
            row["peer_version"] = payload.get("version")
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            ran += 1
            shown = (f"not applicable ({row['not_applicable']})" if row.get("not_applicable")
                     else f"{row['metric']}={row.get(row['metric'])}")
            print(f"[{n + 1}/{len(insts)}] {row['key']}: {shown} "
                  f"calls={row['model_calls']}" + (f" error={row['error']}" if row.get("error") else ""),
                  file=sys.stderr, flush=True)
    return ran


def summary(rows: Sequence[dict[str, Any]], header: dict[str, Any]) -> dict[str, Any]:
    """Per query: the mean metric with its bootstrap interval and the cost (sembench's form)."""
    by_query: dict[str, list[dict[str, Any]]] = {}
    not_applicable: dict[str, str] = {}
    for r in rows:
        if r.get("not_applicable"):
            not_applicable[r["query"]] = r["not_applicable"]
            continue
        by_query.setdefault(r["query"], []).append(r)
    return {"benchmark": f"SemBench movie scenario (dev part) through {header.get('peer')}", **header,
            "rows": len(rows), "not_applicable": not_applicable, "queries": {q: sembench.query_summary(by_query[q])
                                           for q in sembench.QUERIES if q in by_query}}


@contextmanager
def model_server(args: argparse.Namespace) -> Iterator[str]:
    """``--base-url``, or a llama.cpp server started on 127.0.0.1 (and stopped afterwards):
    llama-server when one is built or given, else llama-cpp-python's ``llama_cpp.server``."""
    if args.base_url:
        yield args.base_url
        return
    binary = Path(args.server_bin) if args.server_bin else envs.find_llama_server()
    gguf = protocol.model_arg(args.gguf)
    if not gguf or (binary is None and not has_python_server()):
        raise SystemExit("no server: give --base-url, or a llama-server (python -m benchmarks.envs build "
                         "llama-server, or --server-bin) or llama-cpp-python[server], and a model "
                         f"(--gguf or ${protocol.MODEL_ENV})")
    port = free_port()
    cmd = (server_command(binary, Path(gguf), port, args.threads, args.n_ctx) if binary is not None
           else python_server_command(Path(gguf), port, args.threads, args.n_ctx))
    print(f"[sembench_peers] server: {' '.join(cmd[:3])} ...", file=sys.stderr, flush=True)
    with llama_server(cmd, port, args.server_timeout) as url:
        yield url


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", choices=PEERS)
    ap.add_argument("--table", nargs="*", metavar="MODE", help="print the README's markdown table "
                    "from results/sembench_report.json (these modes; default: all in it) and "
                    "the peers' report JSONs, then exit")
    ap.add_argument("--data", type=Path, default=sembench.DATA)
    ap.add_argument("--split", choices=["report", "tune"], default="report")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", default=",".join(sembench.QUERIES), help="comma-separated, e.g. Q2,Q3,Q8")
    ap.add_argument("--keys", help="run only these instance keys (comma-separated, e.g. "
                    "Q5:the_favourite_2018); the summary still covers every --queries instance in --out")
    ap.add_argument("--peer-python", type=Path, help="the peer venv's python (default: benchmarks/envs.py's)")
    ap.add_argument("--base-url", help="a running OpenAI-compatible server (else llama-server is started)")
    ap.add_argument("--model-name", default="default", help="the model name sent to the server")
    ap.add_argument("--server-bin", help="llama-server binary (default: envs.find_llama_server())")
    ap.add_argument("--gguf", help=f"the model file for llama-server (default ${protocol.MODEL_ENV})")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--server-timeout", type=float, default=300.0, help="seconds for the server to come up")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds one instance may take")
    ap.add_argument("--out", type=Path, help="JSONL (default results/sembench_<peer>_<split>.jsonl)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no peer, no model: print what each instance would send")
    args = ap.parse_args(argv)
    if args.table is not None:
        engine = json.loads((RESULTS / "sembench_report.json").read_text())
        found = {peer: RESULTS / f"sembench_{peer.replace('.', '').replace('-', '')}_report.json"
                 for peer in PEERS}
        print(side_by_side(engine, args.table or list(engine["modes"]),
                           {p: json.loads(f.read_text()) if f.is_file() else None
                            for p, f in found.items()}))
        return 0
    if args.peer is None:
        ap.error("--peer is required (or --table)")
    data = sembench.load(args.data)
    wanted = {q.strip() for q in args.queries.split(",") if q.strip()}
    insts = [i for i in sembench.instances(data, args.split, args.seed) if i.query in wanted]
    keys = {k.strip() for k in (args.keys or "").split(",") if k.strip()}
    unknown = keys - {i.key for i in insts}
    if unknown:
        ap.error(f"--keys not among the --queries instances: {', '.join(sorted(unknown))}")
    to_run = [i for i in insts if not keys or i.key in keys]
    if args.dry_run:
        return dry_run(args.peer, data, to_run)
    python = args.peer_python or envs.peer_python_path(args.peer)
    if not python.is_file():
        raise SystemExit(f"no {args.peer} venv at {envs.portable(python)}: "
                         f"python -m benchmarks.envs build {args.peer}")
    out = args.out or RESULTS / f"sembench_{args.peer.replace('.', '').replace('-', '')}_{args.split}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = {**protocol.run_record("sembench_peers.py", argv, protocol.model_arg(args.gguf)
                                    if not args.base_url else None,
                                    f"openai:{args.model_name}" if args.base_url else None),
              "peer": args.peer, "split": args.split, "seed": args.seed,
              "instances": [i.record() for i in insts]}
    with model_server(args) as url, tempfile.TemporaryDirectory(prefix="bsql-sembench-peer-") as work:
        run_all(args.peer, python, data, to_run, url, args.model_name, out, args.timeout, Path(work))
    done = sembench.read_rows(out)
    rows = [done[k] for i in insts if (k := f"{i.key}|{args.peer}") in done]
    result = summary(rows, header)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "instances"}, indent=2, default=str))
    return 0


def side_by_side(engine: dict[str, Any], modes: Sequence[str],
                 peers_: dict[str, dict[str, Any] | None]) -> str:
    """The markdown table of the README: per query, each mode's and each peer's metric
    (95% interval; "[k of n instances]" where a row ran fewer than the others), then
    model calls and prompt tokens summed over the queries every row ran in full (the
    same instances)."""
    rows: list[tuple[str, dict[str, Any], dict[str, str]]] = [
        (f"blendsql `{m}`", engine["modes"][m]["queries"], {}) for m in modes
        if m in engine.get("modes", {})]
    rows += [(name, res.get("queries", {}), res.get("not_applicable", {}))
             for name, res in peers_.items() if res is not None]
    full = {q: max(int(queries[q].get("n") or 0) for _, queries, _ in rows if q in queries)
            for q in sembench.QUERIES if any(q in queries for _, queries, _ in rows)}
    common = [q for q in sembench.QUERIES
              if all(q in queries and int(queries[q].get("n") or 0) == full[q]
                     for _, queries, _ in rows)]
    span = ", ".join(common) if len(common) < len(sembench.QUERIES) else "all"
    head = "| system | " + " | ".join(f"{q} ({METRIC_NAMES[q]})" for q in sembench.QUERIES) + \
        f" | calls ({span}) | prompt tokens ({span}) |"
    lines = [head, "|" + "---|" * (len(sembench.QUERIES) + 3)]
    for name, queries, na in rows:
        cells = []
        for q in sembench.QUERIES:
            if q in na:
                cells.append("n/a")
            elif q in queries:
                ci = queries[q].get("ci95") or [None, None]
                band = f" ({ci[0]:.2f}–{ci[1]:.2f})" if None not in ci else ""
                n = int(queries[q].get("n") or 0)
                part = f" [{n} of {full[q]} instances]" if n < full[q] else ""
                cells.append(f"{queries[q]['mean']:.2f}{band}{part}")
            else:
                cells.append("not run")
        calls = sum(int(queries[q].get("model_calls") or 0) for q in common)
        tokens = sum(int(queries[q].get("prompt_tokens") or 0) for q in common)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {calls:,} | {tokens:,} |")
    return "\n".join(lines)


METRIC_NAMES = {"Q1": "F1", "Q2": "F1", "Q3": "rel. err.", "Q4": "rel. err.", "Q5": "F1",
                "Q6": "F1", "Q7": "F1", "Q8": "rel. err.", "Q9": "Spearman", "Q10": "Spearman"}


def dry_run(peer: str, data: sembench.Data, insts: Sequence[sembench.Instance]) -> int:
    """What each instance would send the peer, checked for label columns."""
    shown: list[dict[str, Any]] = []
    problems = []
    for inst in insts:
        if peer == "blendsql-0.1.28":
            text = sql_0128(inst)
            problems += [f"{inst.key}: names {c}" for c in sembench.label_names(text)]
        else:
            request = runner_request(peer, data, [inst], "http://127.0.0.1:0/v1", "default")
            cols = {c for r in request["reviews"] for c in r}
            problems += [f"{inst.key}: sends {c}" for c in sorted(cols & sembench.LABEL_COLUMNS)]
            text = f"{len(request['reviews'])} reviews (columns {sorted(cols)})"
        shown.append({"key": inst.key, "sends": text})
    print(json.dumps({"peer": peer, "instances": shown, "problems": problems}, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
