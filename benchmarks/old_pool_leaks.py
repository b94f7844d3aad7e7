"""What the few-shot pool filters before the protocol let into the report prompts (issue 22).

``benchmarks/protocol.py`` filters every quality benchmark's few-shot pool per item
(``protocol.leak_free``). Before it (commit 8c1666a) Spider's filter removed only an
example whose SQL equalled gold's after lower-casing, and the cross-database filter of
SParC, CoSQL and SPLASH kept every example. This script puts those filters back in place of
``protocol.leak_free``, builds the real prompt of every report item of the four benchmarks
as ``tests/benchmarks/test_leaks.py`` does (Spider 200, SParC 150 questions, CoSQL 150,
SPLASH 150; no model call) and counts what ``protocol.prompt_leaks`` finds in them:

- ``leaking``: prompts with at least one leak, of all prompts;
- ``own_database_examples``: shown examples written on the item's own database;
- ``gold_sql_in_prompt``: the item's gold queries found in the prompt text (a dialogue
  turn's prompt can hold several of its dialogue's), and in how many prompts;
- ``result_twins``: shown examples returning the item's gold result on its database.

Needs the benchmark data (``$BLENDSQL_BENCH_DATA``, default ``../shared/data``).

    python benchmarks/old_pool_leaks.py [--out benchmarks/results/old_pool_leaks.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "benchmarks"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from benchmarks import protocol  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "old_pool_leaks.json"
BENCHMARKS = ("spider", "sparc", "cosql", "splash")
REPORT_SIZES = {"spider": 200, "sparc": 150, "cosql": 150, "splash": 150}


def spider_filter_8c1666a(pool: Sequence[Any], target: protocol.Target, oracle: Any = None) -> list[Any]:
    """Spider's pool filter at 8c1666a: drop an example whose SQL is gold's, lower-cased."""
    golds = {" ".join(s.lower().rstrip(";").split()) for s in target.sqls}
    return [e for e in pool if " ".join(e.program.lower().rstrip(";").split()) not in golds]


def keep_all_8c1666a(pool: Sequence[Any], target: protocol.Target, oracle: Any = None) -> list[Any]:
    """SParC / CoSQL / SPLASH's cross-database filter at 8c1666a: it kept every example."""
    return list(pool)


OLD_FILTERS: dict[str, Callable[..., list[Any]]] = {
    "spider": spider_filter_8c1666a, "sparc": keep_all_8c1666a, "cosql": keep_all_8c1666a,
    "splash": keep_all_8c1666a}


def build_checks(name: str, data: Path) -> list[protocol.PromptCheck]:
    """Every report item's real prompt(s) for ``name``, as the benchmark builds them."""
    if name == "spider":
        from benchmarks import spider

        return spider.leak_checks(data, n=REPORT_SIZES[name])
    if name in ("sparc", "cosql"):
        import conversation

        return conversation.leak_checks(data, name, questions=REPORT_SIZES[name])
    import splash

    return splash.leak_checks(data, n=REPORT_SIZES[name])


def count(checks: Sequence[protocol.PromptCheck]) -> dict[str, Any]:
    """What :func:`protocol.prompt_leaks` finds in ``checks``, counted by kind."""
    oracle = protocol.ResultOracle()
    kinds: Counter[str] = Counter()
    prompts_with: Counter[str] = Counter()
    leaking = 0
    for check in checks:
        found = protocol.prompt_leaks(check, oracle)
        leaking += bool(found)
        seen = set()
        for leak in found:
            kind = leak.split(": ", 1)[1].split(":", 1)[0]  # "shown example (same database)", ...
            kinds[kind] += 1
            seen.add(kind)
        prompts_with.update(seen)
    gold = "its gold SQL is in the prompt"
    return {
        "prompts": len(checks),
        "leaking": f"{leaking} / {len(checks)}",
        "own_database_examples": kinds["shown example (same database)"],
        "gold_sql_in_prompt": f"{kinds[gold]} ({prompts_with[gold]})",
        "result_twins": kinds["shown example (same result)"],
        "by_kind": dict(kinds),
        "prompts_by_kind": dict(prompts_with),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--data", type=Path, default=protocol.data_dir())
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    record = protocol.run_record("old_pool_leaks.py", argv, model_name="none (prompts built, no model call)")
    record["filters"] = {name: (f.__doc__ or "").strip() for name, f in OLD_FILTERS.items()}
    record["benchmarks"] = {}
    kept = protocol.leak_free
    try:
        for name in BENCHMARKS:
            t0 = time.perf_counter()
            protocol.leak_free = OLD_FILTERS[name]  # type: ignore[assignment]
            result = count(build_checks(name, args.data))
            result["seconds"] = round(time.perf_counter() - t0, 1)
            record["benchmarks"][name] = result
            print(name, json.dumps({k: result[k] for k in ("leaking", "own_database_examples",
                                                            "gold_sql_in_prompt", "result_twins")}),
                  flush=True)
    finally:
        protocol.leak_free = kept  # type: ignore[assignment]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    return record


if __name__ == "__main__":
    main()
