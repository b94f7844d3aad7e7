"""Per-value latency of blendsql's LlamaCpp.generate vs calling llama-cpp-python directly.

Both sides run the same model file with the same threads, the same chat
messages (an LLMMap-like prompt: fixed instructions + one value) and the same
GBNF grammar, greedy. Each side has its own ``Llama`` instance so each sees
the KV-cache history it would see alone (consecutive values share the
instruction prefix), and calls are interleaved value by value, alternating
which side goes first, so machine-load drift hits both sides equally.

    python benchmarks/model_overhead.py [--n 40] [--threads N] [--path model.gguf]

Writes benchmarks/results/model_overhead.json. To measure the whole engine
too, add a runner to ``make_runners`` (a name -> ``fn(value) -> text``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.protocol import cpu_name  # noqa: E402
from blendsql.models import LlamaCpp, Request  # noqa: E402
from blendsql.models.cache import file_sha256  # noqa: E402
from blendsql.models.constraints import Bool, Constraint  # noqa: E402
from blendsql.models.gbnf import to_gbnf  # noqa: E402
from blendsql.models.gguf import load_llama  # noqa: E402
from blendsql.models.llamacpp import _token_budget  # noqa: E402

VALUES = [
    "California", "Paris", "Texas", "Bavaria", "Ohio", "Ontario", "Florida", "Tokyo",
    "Nevada", "Kent", "Oregon", "Quebec", "Maine", "Sicily", "Utah", "Provence", "Iowa",
    "Yorkshire", "Alaska", "Catalonia", "Georgia", "Tuscany", "Vermont", "Bali", "Kansas",
    "Punjab", "Idaho", "Normandy", "Hawaii", "Scotland", "Montana", "Saxony", "Arizona",
    "Wales", "Kentucky", "Crete", "Michigan", "Flanders", "Alabama", "Tasmania",
]
INSTRUCTIONS = (
    "Answer the question for the given value. Reply with true or false only.\n"
    "Question: Is this a state of the United States of America?"
)


def messages_for(value: str) -> tuple[tuple[str, str], ...]:
    """The LLMMap-like chat: fixed instructions (shared prefix), then the value."""
    return (("system", INSTRUCTIONS), ("user", f"Value: {value}\nAnswer:"))


# fn(value) -> (text, seconds spent inside llama-cpp-python or None if not separable)
Runner = Callable[[str], tuple[str, float | None]]


def make_runners(path: Path | None, threads: int, constraint: Constraint) -> dict[str, Runner]:
    """name -> fn(value) -> text. Add the engine (an LLMMap query per value) here later."""
    from llama_cpp import LlamaGrammar

    ours = LlamaCpp(path, n_threads=threads)
    ours.generate([Request("warm up")])  # load outside the timed region
    inner_call = ours.llm.create_chat_completion
    inner_seconds: list[float] = []

    def timed_inner(*a: Any, **kw: Any) -> Any:
        """Time the llama-cpp-python call inside our generate (to split out our own work)."""
        t0 = time.perf_counter()
        try:
            return inner_call(*a, **kw)
        finally:
            inner_seconds.append(time.perf_counter() - t0)

    ours.llm.create_chat_completion = timed_inner

    def run_ours(value: str) -> tuple[str, float | None]:
        req = Request(messages=messages_for(value), constraint=constraint)
        inner_seconds.clear()
        text = ours.generate([req])[0].text
        return text, sum(inner_seconds)

    # the same loader as the engine (same kernels, same threads): only the layers differ
    direct: Any = load_llama(ours.path, extra_bufts=ours.kernel_choice(), n_ctx=ours.n_ctx,
                             n_threads=threads, seed=0).llm
    gbnf = to_gbnf(constraint)
    grammar = LlamaGrammar.from_string(gbnf) if gbnf else None
    max_tokens = _token_budget(Request(constraint=constraint))

    def run_direct(value: str) -> tuple[str, float | None]:
        msgs = [{"role": r, "content": c} for r, c in messages_for(value)]
        out = direct.create_chat_completion(messages=msgs, grammar=grammar, temperature=0.0,
                                            max_tokens=max_tokens)
        return out["choices"][0]["message"]["content"] or "", None

    return {"blendsql_llamacpp": run_ours, "llama_cpp_direct": run_direct}


def engine_vs_direct(path: Path | None, threads: int, values: list[str], repeats: int = 3,
                     ) -> dict[str, object]:
    """LLMMap through the whole engine vs llama-cpp-python on the very same requests.

    One query maps every value; a recording model captures the requests the
    engine sends (prompt layout, grammar), and the direct side replays exactly
    those with llama-cpp-python. Medians over ``repeats`` alternating runs,
    per value.
    """
    import pandas as pd
    from llama_cpp import LlamaGrammar

    from blendsql import BlendSQL
    from blendsql.models.base import FunctionModel

    frame = {"w": pd.DataFrame({"x": values})}
    query = "SELECT x FROM w WHERE {{LLMMap('Is this a fruit?', w.x)}} = TRUE"
    captured: list[Request] = []
    BlendSQL(frame, model=FunctionModel(lambda r: captured.append(r) or "false"),
             cache=False).execute(query)
    ours = LlamaCpp(path, n_threads=threads)
    ours.generate([Request("warm up")])
    # the same loader as the engine (same kernels, same threads): only the layers differ
    direct: Any = load_llama(ours.path, extra_bufts=ours.kernel_choice(), n_ctx=ours.n_ctx,
                             n_threads=threads, seed=0).llm

    def run_engine() -> float:
        t0 = time.perf_counter()
        BlendSQL(frame, model=ours, cache=False).execute(query)
        return time.perf_counter() - t0

    def run_direct() -> float:
        t0 = time.perf_counter()
        for req in captured:
            gbnf = to_gbnf(req.constraint)
            direct.create_chat_completion(
                messages=req.as_messages(), temperature=0.0, max_tokens=_token_budget(req),
                grammar=LlamaGrammar.from_string(gbnf, verbose=False) if gbnf else None)
        return time.perf_counter() - t0

    run_engine(), run_direct()  # warm both prompt caches
    eng, dire = [], []
    for _ in range(repeats):
        eng.append(run_engine())
        dire.append(run_direct())
    n = len(captured)
    e, d = statistics.median(eng) / n, statistics.median(dire) / n
    return {"query": query, "values": n, "repeats": repeats,
            "engine_per_value_s": round(e, 5), "direct_same_requests_per_value_s": round(d, 5),
            "overhead_pct": round(100 * (e - d) / d, 2)}


def measure(runners: dict[str, Runner], values: list[str], warmup: int
            ) -> tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[str]]]:
    """Interleave the runners per value (rotating who goes first).

    Returns wall times, our own (outside llama-cpp-python) times where separable, texts.
    """
    names = list(runners)
    times: dict[str, list[float]] = {n: [] for n in names}
    own: dict[str, list[float]] = {n: [] for n in names}
    texts: dict[str, list[str]] = {n: [] for n in names}
    for i, value in enumerate(values[:warmup] + values):
        order = names[i % len(names):] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            text, inner = runners[name](value)
            dt = time.perf_counter() - t0
            if i >= warmup:
                times[name].append(dt)
                texts[name].append(text)
                if inner is not None:
                    own[name].append(dt - inner)
    return times, own, texts


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help=f"values to time (max {len(VALUES)})")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--path", type=Path, default=None, help="GGUF file (default: embedded SmolLM2)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/model_overhead.json")
    ap.add_argument("--engine-repeats", type=int, default=3,
                    help="alternating runs of the engine-level comparison (0 skips it)")
    args = ap.parse_args(argv)

    constraint = Bool()
    load_before = os.getloadavg()
    runners = make_runners(args.path, args.threads, constraint)
    values = VALUES[: args.n]
    times, own, texts = measure(runners, values, args.warmup)
    engine = (engine_vs_direct(args.path, args.threads, values, args.engine_repeats)
              if args.engine_repeats > 0 else None)
    load_after = os.getloadavg()

    base = "llama_cpp_direct"
    med = {n: statistics.median(t) for n, t in times.items()}
    summary: dict[str, dict[str, float]] = {
        n: {"median_s": round(med[n], 5), "mean_s": round(statistics.fmean(t), 5),
            "p90_s": round(sorted(t)[int(0.9 * (len(t) - 1))], 5),
            "overhead_pct_vs_direct": round(100 * (med[n] - med[base]) / med[base], 2)}
        for n, t in times.items()
    }
    for n, t in own.items():
        if t:  # the wrapper's own work per value, independent of model speed and machine load
            summary[n]["own_work_median_s"] = round(statistics.median(t), 6)
            summary[n]["own_work_pct_of_direct_median"] = round(
                100 * statistics.median(t) / med[base], 3)
    paired = [a - b for a, b in zip(times["blendsql_llamacpp"], times[base],
                                    strict=True)]
    model_path = LlamaCpp(args.path).path
    import llama_cpp

    result: dict[str, object] = {
        "benchmark": "model_overhead",
        "what": "per-value latency, LLMMap-like prompt + Bool GBNF grammar, greedy",
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *(argv or sys.argv[1:])]),
        "model": {"file": model_path.name, "sha256_prefix": file_sha256(model_path)[:16]},
        "llama_cpp_python": llama_cpp.__version__,
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_name(), "threads": args.threads,
                    "loadavg_1m_before": round(load_before[0], 2),
                    "loadavg_1m_after": round(load_after[0], 2)},
        "n_values": len(values),
        "warmup": args.warmup,
        "results": summary,
        "paired_median_diff_s": round(statistics.median(paired), 5),
        "same_outputs": sum(a == b for a, b in zip(texts["blendsql_llamacpp"],
                                                   texts[base], strict=True)),
        "llmmap_through_engine": engine,
        "target": "overhead <= 5%",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
