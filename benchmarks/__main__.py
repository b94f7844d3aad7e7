"""``python -m benchmarks NAME``: the benchmark behind a published number (see
``benchmarks/published.py``; ``python -m benchmarks --list`` names them all).

Benchmarks registered here rather than in ``published.BENCHES`` join the registry
before it is read: ``endpoint-scaling`` (issue 25; benchmarks/README.md, Endpoint
scaling).
"""

from benchmarks import published
from benchmarks.published import Bench, Number, cmd, one

ENDPOINT_SCALING = Bench(
    "endpoint-scaling", "LLMMap values/s over a pool of 1, 2, 4 fake OpenAI-compatible "
    "endpoints (8 slots, 50 ms each): fraction of the summed limit, ratio to 1 endpoint; "
    "1M rows / 100k distinct values",
    "benchmarks/README.md (Endpoint scaling)",
    (one(cmd("endpoint_scaling.py", "--rows", "1000000", "--distinct", "100000", "--endpoints",
             "1", "2", "4", "--slots", "8", "--latency", "0.05", "--baseline-values", "20000",
             "--profile", "2000")),),
    "benchmarks/results/endpoint_scaling.json",
    (*(Number(f"{k} endpoint{'s' * (k > 1)}: values/s", f"summary.rows[endpoints={k}].values_per_s")
       for k in (1, 2, 4)),
     *(Number(f"{k} endpoint{'s' * (k > 1)}: fraction of the summed limit",
              f"summary.rows[endpoints={k}].fraction_of_limit") for k in (1, 2, 4)),
     Number("4 endpoints / 1 endpoint", "summary.targets.ratio_4_over_1"),
     Number("answers right, each value asked once", "summary.all_correct")),
    "~25 min")


def register(bench: Bench) -> None:
    """Add ``bench`` to ``published``'s registry (once)."""
    if bench.name not in published.REGISTRY:
        published.BENCHES = (*published.BENCHES, bench)
        published.REGISTRY[bench.name] = bench


register(ENDPOINT_SCALING)

if __name__ == "__main__":
    raise SystemExit(published.main())
