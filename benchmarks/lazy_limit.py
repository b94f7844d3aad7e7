"""Values passed with and without lazy evaluation (and the retrieval prefilter) under LIMIT.

A generated 1000-row ``restaurants`` table (every 37th row's reviews are romantic;
every review list is unique). The model is deterministic (a Python function that says
'yes' iff the reviews mention 'candlelit'), so the counts are exact and reproducible;
a real model changes the seconds, not which values the plan passes.

    python benchmarks/lazy_limit.py            # writes benchmarks/results/lazy_limit.json
"""

from __future__ import annotations

import json
import platform
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient
from blendsql.models.base import FunctionModel, Request

MARK = "candlelit"
PHRASES = ["great service", "slow kitchen", "cheap eats", "noisy room", "friendly staff",
           "good for kids", "large portions", "parking is hard", "fresh bread"]


class Has(MapIngredient):
    """Model-free map: True when the text contains the question."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        return [str(question).lower() in str(v).lower() for v in values]


def make_db(path: Path, n: int = 1000) -> Path:
    rng = random.Random(0)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE restaurants (id INTEGER PRIMARY KEY, name TEXT, rating REAL, "
                "reviews TEXT)")
    rows = []
    for i in range(1, n + 1):
        reviews = [*rng.sample(PHRASES, 2), f"visited on day {i}"]
        if i % 37 == 0:
            reviews.append(f"a {MARK} dinner, very romantic")
        rows.append((i, f"place {i}", round(rng.uniform(1, 5), 1), json.dumps(reviews)))
    con.executemany("INSERT INTO restaurants VALUES (?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return path


def model() -> FunctionModel:
    def fn(req: Request) -> str:
        return "yes" if MARK in (req.prompt or "").lower() else "no"

    return FunctionModel(fn, name="bench-mark")


QUERIES = {
    "answer_limit3": "SELECT id FROM restaurants WHERE ANSWER(reviews, 'is it romantic?') = 'yes' "
                     "LIMIT 3",
    "answer_limit10_offset5": "SELECT id FROM restaurants WHERE rating > 2 AND "
                              "ANSWER(reviews, 'is it romantic?') = 'yes' LIMIT 10 OFFSET 5",
    "map_limit5_order_by": "SELECT id FROM restaurants WHERE {{Has('candlelit', reviews)}} "
                           "ORDER BY rating DESC, id LIMIT 5",
}


def run(db: Path, query: str, **options: Any) -> dict[str, Any]:
    with BlendSQL(str(db), model=model(), ingredients=[Has], cache=False, **options) as s:
        t0 = time.perf_counter()
        out = s.execute(query)
        secs = time.perf_counter() - t0
    return {"rows": [list(r) for r in out.df.itertuples(index=False, name=None)],
            "values_passed": out.meta.values_passed, "model_calls": out.meta.model_calls,
            "ingredient_calls": out.meta.ingredient_calls, "seconds": round(secs, 4)}


def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        db = make_db(Path(d) / "r.db")
        for name, q in QUERIES.items():
            full = run(db, q, lazy=False)
            lazy = run(db, q)
            pre = run(db, q, prefilter="bm25")
            results[name] = {"query": q, "full": full, "lazy": lazy, "prefilter_bm25": pre,
                             "same_rows_lazy_vs_full": lazy["rows"] == full["rows"]}
            print(f"{name}: values passed full={full['values_passed']} "
                  f"lazy={lazy['values_passed']} prefilter(bm25)={pre['values_passed']}; "
                  f"same rows lazy/full: {lazy['rows'] == full['rows']}")
    out = {"machine": f"{platform.machine()} {platform.system()} python {sys.version.split()[0]}",
           "model": "FunctionModel (deterministic; 'yes' iff reviews mention 'candlelit')",
           "table": "restaurants, 1000 rows, 27 romantic (every 37th)",
           "command": "python benchmarks/lazy_limit.py", "results": results}
    path = Path(__file__).parent / "results" / "lazy_limit.json"
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
