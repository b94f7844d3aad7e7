"""Model calls of ``LLMRank`` under ``ORDER BY ... LIMIT k``, measured against n.

A generated table of ``n`` items with a hidden score; the model is a deterministic
comparator (a Python function that answers A or B by the hidden score), so the calls
counted are exact and the rows must equal ``ORDER BY score DESC LIMIT k`` (checked).
Beside each measurement: the plan's estimate (``bsql.plan``), the tournament bound
``n - 1 + (k - 1) ceil(log2 n)``, all pairs ``n (n - 1) / 2`` (what a comparison of every
pair costs) and ``n`` (what scoring each value once costs, e.g. a 1-5 map). A real
model changes the seconds and the quality, not the number of calls.

    python benchmarks/rank_calls.py        # writes benchmarks/results/rank_calls.json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients.llm_rank import tournament_calls  # noqa: E402
from blendsql.models import FunctionModel  # noqa: E402
from blendsql.models.base import Request  # noqa: E402

PAIR = re.compile(r"\nA: (.*?)\n\nB: (.*?)\n\nAnswer:", re.S)
RESULTS = Path(__file__).resolve().parent / "results"


def measure(n: int, k: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(f"rank:{seed}:{n}")
    scores = rng.sample(range(100 * n), n)
    names = [f"item {i}" for i in range(n)]
    hidden = dict(zip(names, scores, strict=True))
    asked = [0]

    def answer(req: Request) -> str:
        m = PAIR.search(req.prompt)
        assert m is not None
        asked[0] += 1
        return "A" if hidden[m.group(1)] >= hidden[m.group(2)] else "B"

    bsql = BlendSQL({"t": pd.DataFrame({"name": names, "score": scores})},
                    model=FunctionModel(answer, name="comparator"), cache=False)
    query = f"SELECT name FROM t ORDER BY {{{{LLMRank('How good?', t.name)}}}} DESC LIMIT {k}"
    plan = bsql.plan(query)
    estimate = next((s.estimate.model_calls.high for s in plan.steps
                     if s.estimate is not None and s.estimate.model_calls.high), None)
    t0 = time.perf_counter()
    got = list(bsql.execute(query).df["name"])
    seconds = time.perf_counter() - t0
    want = list(bsql.execute(f"SELECT name FROM t ORDER BY score DESC LIMIT {k}").df["name"])
    return {"n": n, "k": k, "model_calls": asked[0], "plan_estimate": estimate,
            "bound": tournament_calls(n, k), "all_pairs": n * (n - 1) // 2, "one_per_value": n,
            "same_rows_as_order_by_true_score": got == want, "engine_seconds": round(seconds, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,100,500")
    ap.add_argument("--ks", default="1,5,10")
    ap.add_argument("--out", type=Path, default=RESULTS / "rank_calls.json")
    args = ap.parse_args(argv)
    rows = [measure(int(n), int(k)) for n in args.sizes.split(",") for k in args.ks.split(",")]
    out = {**protocol.run_record("rank_calls.py", argv, None,
                                 "deterministic comparator (FunctionModel)"), "rows": rows}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(rows, indent=2))
    return 0 if all(r["same_rows_as_order_by_true_score"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
