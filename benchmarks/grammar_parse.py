"""Parse speed of blendsql.grammar.parse on the golden round-trip fixtures.

Reports, per query and overall: median wall time of ``parse`` (scanner +
sqlglot + restoring ingredient nodes), of the pyparsing scanner alone, and of
sqlglot alone on the spliced text; plus the one-off cost of building the
grammar for a registry's name set (cached afterwards).

Run:  python benchmarks/grammar_parse.py [--repeat 50]
Writes benchmarks/results/grammar_parse.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlglot  # noqa: E402

from blendsql.grammar import parse  # noqa: E402
from blendsql.grammar import parser as gparser  # noqa: E402
from blendsql.grammar.scanner import _cached, scanner_for  # noqa: E402
from tests.grammar.conftest import make_registry  # noqa: E402
from tests.grammar.fixtures import roundtrip_queries  # noqa: E402

TYPICAL = """SELECT * FROM w WHERE city = <<LLMQA('Which city is 120 miles west of Sydney?',
    (SELECT * FROM documents WHERE documents MATCH 'sydney OR 120' ORDER BY rank LIMIT 3),
    options='w::city')>> AND {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE"""


def median_ms(fn, repeat: int) -> float:
    """Median wall time of ``fn()`` in milliseconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def min_and_cpu_ms(fn, repeat: int) -> tuple[float, float]:
    """Best wall time and mean CPU (process) time of ``fn()`` in milliseconds.

    Why both: on a shared, overloaded machine the wall-time median mostly
    measures waiting for a core; the minimum and the CPU time measure the work.
    """
    best = float("inf")
    cpu0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000, (time.process_time() - cpu0) / repeat * 1000


def spliced(text: str, registry) -> str:
    """The text sqlglot receives for ``text`` (for the sqlglot-only timing)."""
    tokens = scanner_for(registry.names()).scan(text)
    ctx = gparser._Ctx(text, registry)
    gparser._number(ctx, tokens)
    sp = gparser._Splice(text)
    gparser._splice_top(ctx, sp, tokens)
    return sp.text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    reg = make_registry()
    _cached.cache_clear()
    t0 = time.perf_counter()
    scanner = scanner_for(reg.names())
    build_ms = (time.perf_counter() - t0) * 1000
    queries = [("typical", TYPICAL)] + [(f"fixture{i}", q) for i, q in enumerate(roundtrip_queries())]
    queries.append(("typical_again", TYPICAL))
    rows = []
    for name, q in queries:
        parse(q, reg)  # warm-up
        text = spliced(q, reg)
        best, cpu = min_and_cpu_ms(lambda q=q: parse(q, reg), args.repeat)
        rows.append({
            "query": name,
            "chars": len(q),
            "parse_min_ms": round(best, 3),
            "parse_cpu_ms": round(cpu, 3),
            "parse_ms": round(median_ms(lambda q=q: parse(q, reg), args.repeat), 3),
            "scan_ms": round(median_ms(lambda q=q: scanner.scan(q), args.repeat), 3),
            "sqlglot_ms": round(
                median_ms(lambda t=text: sqlglot.parse(t, read="sqlite"), args.repeat), 3
            ),
        })
    summary = {
        k: round(statistics.median(r[k] for r in rows), 3)
        for k in ("parse_min_ms", "parse_cpu_ms", "parse_ms", "scan_ms", "sqlglot_ms")
    }
    out = {
        "benchmark": "grammar_parse",
        "command": f"python benchmarks/grammar_parse.py --repeat {args.repeat}",
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_at_start": os.getloadavg(),
        },
        "model": "none (parsing only)",
        "statistic": (
            f"*_ms: median wall time of {args.repeat} runs after one warm-up; parse_min_ms: "
            "best wall time; parse_cpu_ms: mean process CPU time (robust to a loaded machine)"
        ),
        "grammar_build_ms": round(build_ms, 2),
        "typical": rows[0],
        "median_over_queries": summary,
        "max_parse_ms": max(r["parse_ms"] for r in rows),
        "results": rows,
    }
    dest = ROOT / "benchmarks" / "results" / "grammar_parse.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("grammar_build_ms", "typical", "median_over_queries",
                                          "max_parse_ms")}, indent=2))


if __name__ == "__main__":
    main()
