"""The engine's fixed cost on one small query (issue 26): time, tree copies, folder changes.

The query is one deterministic map over world_1's 28 Dutch cities::

    SELECT Name FROM city WHERE CountryCode = 'NLD' AND {{StartsWith('A', city.Name)}} = TRUE

and its twin is plain sqlite3 with the same Python function registered as a UDF
(``py_startswith``, called once per row). Three measures, on warm runs (the parse
cached, as a session re-running a query has it):

- ``ratio``: engine seconds / twin seconds, each round running both one after
  the other; the median of the per-round ratios (and the medians of the times)
  over ``--repeat`` rounds of ``--inner`` executions each. The machine is
  shared: the ratio, measured side by side, is the number to read.
- ``tree_copies``: sqlglot ``Expression.copy`` / ``deepcopy`` calls during one
  execute (counted by wrapping ``Expression.__deepcopy__``; ``copy`` goes through it).
- ``folder_changes``: Python calls into ``blendsql/<folder>/`` (``plan``,
  ``execute``, ``db`` ...; a top-level module counts as its own folder) whose
  folder differs from the previous such call's, counted with ``sys.setprofile``
  during one execute: how often the hot path crosses a layer.

    python benchmarks/hot_path.py --label after      # writes benchmarks/results/hot_path.json
    python benchmarks/hot_path.py --label before --repeat 15
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlglot import exp  # noqa: E402

import blendsql  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients.base import MapIngredient  # noqa: E402

WORLD = ROOT / "tests" / "data" / "spider" / "world_1" / "world_1.sqlite"
QUERY = ("SELECT Name FROM city WHERE CountryCode = 'NLD' "
         "AND {{StartsWith('A', city.Name)}} = TRUE")
TWIN = "SELECT Name FROM city WHERE CountryCode = 'NLD' AND py_startswith('A', Name) = TRUE"
PACKAGE = Path(blendsql.__file__).resolve().parent


class StartsWith(MapIngredient):
    """Zero-cost map: True where the value starts with the question."""

    def run(self, question: Any, values: list[Any], **kwargs: Any) -> list[Any]:
        q = str(question)
        return [str(v).startswith(q) for v in values]


def twin_connection(db: Path) -> sqlite3.Connection:
    """Read-only sqlite3 connection with ``py_startswith(prefix, x)`` as a per-row UDF."""
    con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    con.create_function("py_startswith", 2, lambda p, x: str(x).startswith(p),
                        deterministic=True)
    return con


@contextmanager
def counting_copies() -> Iterator[Counter[str]]:
    """Count sqlglot copies (``Expression.__deepcopy__``, which ``copy()`` calls): ``copies``
    all of them, ``trees`` those of a whole query (no parent)."""
    counts: Counter[str] = Counter()
    original = exp.Expression.__deepcopy__

    def counted(self: exp.Expression, memo: Any) -> exp.Expression:
        counts["copies"] += 1
        if self.parent is None and isinstance(self, exp.Query):
            counts["trees"] += 1
        return original(self, memo)

    exp.Expression.__deepcopy__ = counted  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        exp.Expression.__deepcopy__ = original  # type: ignore[method-assign]


def folder_of(filename: str) -> str | None:
    """``plan``, ``execute``, ``blend.py`` ... for a file of the package, else None."""
    try:
        rel = Path(filename).resolve().relative_to(PACKAGE)
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def folder_walk(fn: Callable[[], Any]) -> dict[str, Any]:
    """Folder changes (and calls per folder) of the package's Python calls while ``fn`` runs."""
    cache: dict[str, str | None] = {}
    calls: Counter[str] = Counter()
    changes: Counter[str] = Counter()
    last: list[str | None] = [None]

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_code.co_filename
        folder = cache[name] if name in cache else cache.setdefault(name, folder_of(name))
        if folder is None:
            return
        calls[folder] += 1
        if last[0] is not None and folder != last[0]:
            changes[f"{last[0]} -> {folder}"] += 1
        last[0] = folder

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return {"folder_changes": sum(changes.values()), "calls": sum(calls.values()),
            "calls_per_folder": dict(calls.most_common()),
            "changes": dict(changes.most_common())}


def timed_ratio(engine: Callable[[], Any], twin: Callable[[], Any], repeat: int,
                inner: int) -> dict[str, Any]:
    """Median per-round engine / twin ratio (wall and CPU), rounds interleaved."""
    for _ in range(20):
        engine()
        twin()
    rows: dict[str, list[float]] = {k: [] for k in ("engine", "twin", "engine_cpu",
                                                    "twin_cpu")}
    for _ in range(repeat):
        for name, fn in (("engine", engine), ("twin", twin)):
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(inner):
                fn()
            rows[name].append((time.perf_counter() - t0) / inner)
            rows[name + "_cpu"].append((time.process_time() - c0) / inner)
    ratio = [e / t for e, t in zip(rows["engine"], rows["twin"], strict=True)]
    ratio_cpu = [e / t for e, t in zip(rows["engine_cpu"], rows["twin_cpu"], strict=True)
                 if t > 0]
    return {"engine_ms": round(statistics.median(rows["engine"]) * 1000, 3),
            "twin_ms": round(statistics.median(rows["twin"]) * 1000, 3),
            "engine_cpu_ms": round(statistics.median(rows["engine_cpu"]) * 1000, 3),
            "twin_cpu_ms": round(statistics.median(rows["twin_cpu"]) * 1000, 3),
            "ratio": round(statistics.median(ratio), 2),
            "ratio_cpu": round(statistics.median(ratio_cpu), 2) if ratio_cpu else None,
            "ratio_min_max": [round(min(ratio), 2), round(max(ratio), 2)]}


def measure(repeat: int, inner: int) -> dict[str, Any]:
    """Every measure of the module docstring on the one-map query."""
    con = twin_connection(WORLD)
    with BlendSQL(WORLD, ingredients=[StartsWith], cache=False) as b:
        got = sorted(b.execute(QUERY).df["Name"].tolist())
        want = sorted(r[0] for r in con.execute(TWIN).fetchall())
        if got != want:
            raise SystemExit(f"engine and twin differ: {got} vs {want}")
        b.execute(QUERY)  # warm: the parse is cached
        with counting_copies() as counts:
            b.execute(QUERY)
        walk = folder_walk(lambda: b.execute(QUERY))
        timing = timed_ratio(lambda: b.execute(QUERY).df,
                             lambda: con.execute(TWIN).fetchall(), repeat, inner)
    con.close()
    return {"rows": len(got), "tree_copies": counts["copies"], **timing, **walk}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="after")
    ap.add_argument("--repeat", type=int, default=15, help="rounds (the median is reported)")
    ap.add_argument("--inner", type=int, default=20, help="executions per round")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "hot_path.json"))
    args = ap.parse_args()
    result = measure(args.repeat, args.inner)
    out = Path(args.out)
    data: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    data["query"], data["twin"] = QUERY, TWIN
    data["targets"] = {"engine_ms": "<= 1", "ratio": "<= 8", "folder_changes": "<= 40",
                       "tree_copies": "once per query"}
    data[args.label] = {
        **result,
        "command": f"python benchmarks/hot_path.py --label {args.label} --repeat "
                   f"{args.repeat} --inner {args.inner}",
        "statistic": f"median of {args.repeat} rounds of {args.inner} warm executions; "
                     "engine and twin interleaved per round; ratio = median per-round ratio",
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "sqlite": sqlite3.sqlite_version,
                    "note": "2 shared cores, other jobs running: read the ratio"},
        "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("changes",
                                                                   "calls_per_folder")}))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
