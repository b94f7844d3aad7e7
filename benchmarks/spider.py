"""Spider dev: execution accuracy of ``blendsql.nl.Parser`` beside the same model prompted directly.

Reads ../shared/data/spider (dev.json with gold SQL, dev_ids.txt,
database/<db>/<db>.sqlite). Questions whose index is in ``dev_ids.txt`` are
for tuning and few-shot examples only; ``--split report`` (the default) scores
the others. ``--n`` questions are the first n ids of the split (``--pick first``, the
default: Spider dev is ordered by database, so questions on one database run
together and llama.cpp reuses the schema prefix of the prompt — on a loaded
2-core machine this is what makes n in the hundreds feasible), or a seeded
sample sorted by index (``--pick sample --seed S``), which spreads over all
20 databases.

Modes, side by side on the same questions (``--modes``):

  direct    the same model, plain chat: the CREATE statements and the question,
            "answer with the SQLite query"; no grammar, no engine, no examples.
  parser    ``blendsql.nl.Parser`` with its defaults (free decoding, validation
            by our parser + SQLite, retry with the error, few-shot examples
            retrieved from the shipped pool of dev-id questions), executed by
            ``BlendSQL.execute`` with the default ingredient registry.
  grammar   the Parser with ``decoding="grammar"`` (the strict GBNF of earlier
            releases), for comparison.
  permissive the Parser with ``decoding="permissive"`` (a GBNF accepting the
            SQLite a model naturally writes).
  zeroshot  the Parser without few-shot examples (what retrieval buys).

Each mode has its own ``LlamaCpp`` instance (same GGUF), so each keeps its own
prompt prefix in the KV cache.

Execution accuracy: predicted and gold SQL run on the same SQLite file; the
result rows must be equal as multisets (numbers rounded to 4 places, column
order kept), and as lists when the gold query has a top-level ORDER BY. Each
query runs under a time limit (``--query-seconds``). Few-shot leakage: Spider
dev asks most questions twice in different words with the same SQL; pool
examples whose gold SQL equals the scored question's gold SQL (after
normalising case and spacing) are removed for that question, so a paraphrase
twin cannot hand over the answer (``--allow-twins`` keeps them).

    python benchmarks/spider.py --model ~/.cache/blendsql-eval/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --n 200
    python benchmarks/spider.py --model M --split dev --n 30 --modes direct,parser
    # two processes on disjoint slices of the first 200, then one summary:
    python benchmarks/spider.py --model M --n 100 --offset 0 --modes parser --out results/spider_parser_part1.jsonl
    python benchmarks/spider.py --model M --n 100 --offset 100 --modes parser --out results/spider_parser_part2.jsonl
    python benchmarks/spider.py --combine results/spider_direct.jsonl results/spider_parser_part1.jsonl \
        results/spider_parser_part2.jsonl

Writes results/spider.jsonl (one line per question and mode; resumable) and
results/spider.json (summary). Data: Spider (Yu et al. 2018, CC BY-SA 4.0);
SQLite files rebuilt from the SpiderMan CSV release (cloudera/spiderman).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import platform
import random
import re
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Text
from blendsql.nl.parser import Example, Parser, clean_program, load_examples

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("direct", "parser", "grammar", "permissive", "zeroshot")


# ---------------------------------------------------------------- data


def load_split(data: Path, split: str, n: int, seed: int,
               pick: str = "first", offset: int = 0) -> list[tuple[int, dict[str, Any]]]:
    """``n`` questions of the split: the first ``n`` by index (after skipping
    ``offset``, so parallel processes can take disjoint slices), or a seeded sample
    (sorted by index)."""
    raw = json.loads((data / "spider" / "dev.json").read_text())
    dev = {int(x) for x in (data / "spider" / "dev_ids.txt").read_text().split()}
    ids = [i for i in range(len(raw)) if (i in dev) == (split == "dev")]
    if pick == "first":
        picked = ids[offset:offset + n]
    else:
        picked = sorted(random.Random(seed).sample(ids, min(n, len(ids))))
    return [(i, raw[i]) for i in picked]


def db_path(data: Path, db_id: str) -> Path:
    return data / "spider" / "database" / db_id / f"{db_id}.sqlite"


def norm_sql(sql: str) -> str:
    """Case- and spacing-insensitive form of a query (for the twin filter)."""
    return " ".join(re.sub(r"\s*([(),=<>])\s*", r" \1 ", sql.lower().rstrip(";")).split())


# ---------------------------------------------------------------- scoring


def with_deadline(conn: sqlite3.Connection, seconds: float) -> None:
    """Abort any statement on ``conn`` running past ``seconds`` from now."""
    start = time.monotonic()
    conn.set_progress_handler(lambda: 1 if time.monotonic() - start > seconds else 0, 50_000)


def norm_value(v: Any) -> Any:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return None if v != v else round(float(v), 4)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return None if v is None else str(v)


def rows_of(rows: Iterable[Iterable[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(norm_value(v) for v in r) for r in rows]


def has_top_order_by(sql: str) -> bool:
    """True when the outermost query orders its rows (ORDER BY outside parentheses)."""
    depth = 0
    for m in re.finditer(r"\(|\)|\border\s+by\b", sql, re.I):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0:
            return True
    return False


def same_result(pred: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], ordered: bool) -> bool:
    return pred == gold if ordered else Counter(pred) == Counter(gold)


def run_sql(path: Path, sql: str, seconds: float) -> tuple[list[tuple[Any, ...]] | None, str | None]:
    """Rows of ``sql`` on a fresh read-only connection, or (None, error)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        with_deadline(conn, seconds)
        return rows_of(conn.execute(sql).fetchall()), None
    except (sqlite3.Error, sqlite3.Warning, ValueError) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


# ---------------------------------------------------------------- the two systems


def create_statements(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
                            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return "\n\n".join(r[0].strip() + ";" for r in rows)


def direct_prompt(schema: str, question: str) -> str:
    """The direct twin: schema, question, "write the query" (the common zero-shot prompt)."""
    return (f"{schema}\n\n-- Using valid SQLite, answer the following question for the tables "
            f"provided above.\n-- Question: {question}\nAnswer with the SQLite query only.")


def run_direct(model: Model, path: Path, question: str, seconds: float) -> dict[str, Any]:
    req = Request(prompt=direct_prompt(create_statements(path), question), constraint=Text(),
                  max_tokens=256)
    resp = model.generate([req])[0]
    sql = clean_program(resp.text)
    rows, err = run_sql(path, sql, seconds)
    return {"pred": sql, "rows": rows, "error": err, "prompt_tokens": resp.usage.prompt_tokens,
            "cached_tokens": resp.usage.cached_tokens, "completion_tokens": resp.usage.completion_tokens,
            "attempts": 1}


def run_parser(parser: Parser, model: Model, path: Path, question: str, seconds: float) -> dict[str, Any]:
    bsql = BlendSQL(str(path), model=model, cache=False)
    try:
        parsed = parser.parse(question, bsql.db.conn, bsql.registry)
        out: dict[str, Any] = {"pred": parsed.program, "rows": None, "error": None,
                               "prompt_tokens": parsed.prompt_tokens,
                               "completion_tokens": parsed.completion_tokens,
                               "attempts": len(parsed.attempts),
                               "repairs": parsed.repairs, "repaired": parsed.repaired,
                               "attempt_errors": [e for _, e in parsed.attempts if e]}
        if parsed.program is None:
            out["error"] = parsed.attempts[-1][1] if parsed.attempts else "no program"
            return out
        with_deadline(bsql.db.conn, seconds)
        try:
            sm = bsql.execute(parsed.program)
            out["rows"] = rows_of(sm.df.itertuples(index=False, name=None))
            out["prompt_tokens"] += sm.meta.prompt_tokens
            out["completion_tokens"] += sm.meta.completion_tokens
        except Exception as e:  # noqa: BLE001 - a failed program is a wrong answer, recorded
            out["error"] = f"{type(e).__name__}: {e}"[:400]
        return out
    finally:
        bsql.close()


def make_parser(mode: str, model: Model, pool: list[Example]) -> Parser:
    if mode == "grammar":
        return Parser(model, decoding="grammar", examples=pool)
    if mode == "permissive":
        return Parser(model, decoding="permissive", examples=pool)
    if mode == "zeroshot":
        return Parser(model, examples=[], n_examples=0)
    return Parser(model, examples=pool)


# ---------------------------------------------------------------- the example pool


def compact_schema(path: Path, sql: str) -> str:
    """``table(col, ...)`` lines for the tables ``sql`` reads (shown with cross-database examples)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        used = [t for t in tables if re.search(rf"\b(from|join)\s+{re.escape(t)}\b", sql, re.I)]
        lines = []
        for t in used:
            cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')]
            lines.append(f"{t}({', '.join(cols)})")
        return "\n".join(lines)
    finally:
        conn.close()


def build_pool(data: Path, out: Path, seconds: float) -> int:
    """The shipped Spider example pool: every dev-id question whose gold SQL runs
    (and returns rows) on the SQLite files, with the compact schema it reads."""
    raw = json.loads((data / "spider" / "dev.json").read_text())
    dev = sorted(int(x) for x in (data / "spider" / "dev_ids.txt").read_text().split())
    examples = []
    for i in dev:
        q = raw[i]
        sql = " ".join(q["query"].strip().rstrip(";").split())
        path = db_path(data, q["db_id"])
        rows, err = run_sql(path, sql, seconds)
        if err is not None or not rows:
            continue
        examples.append({"id": f"spider-dev-{i}", "db": q["db_id"], "question": q["question"],
                         "program": sql, "schema": compact_schema(path, sql)})
    out.write_text(json.dumps({
        "source": "Spider dev questions listed in dev_ids.txt (Yu et al. 2018, CC BY-SA 4.0), "
                  "gold SQL checked to run and return rows on the Spider SQLite files; "
                  "built by benchmarks/spider.py --build-pool",
        "examples": examples}, indent=1) + "\n")
    return len(examples)


# ---------------------------------------------------------------- combining runs


def match_any_column_order(data: Path, row: dict[str, Any], mode: str, seconds: float) -> bool:
    """The stored prediction re-run and compared allowing any column order (plain SQL only)."""
    pred = row[mode].get("pred")
    if row[mode].get("match"):
        return True
    if not pred or "{{" in pred or "<<" in pred:
        return False
    path = db_path(data, row["db"])
    gold, _ = run_sql(path, row["gold"], seconds * 3)
    got, err = run_sql(path, pred, seconds)
    if gold is None or got is None or err:
        return False
    width = len(gold[0]) if gold else 0
    if not gold or not got or len(got[0]) != width or width > 5:
        return False
    ordered = has_top_order_by(row["gold"])
    return any(same_result([tuple(r[i] for i in perm) for r in got], gold, ordered)
               for perm in itertools.permutations(range(width)))


def combine(parts: list[Path], out: Path) -> dict[str, Any]:
    """One summary from runs of single modes (run as parallel processes): every
    mode scored on the questions all runs finished, plus each run's own summary."""
    rows: dict[int, dict[str, Any]] = {}
    meta: dict[str, Any] = {}
    modes: list[str] = []
    for part in parts:
        summary = json.loads(part.with_suffix(".json").read_text())
        meta.setdefault("runs", []).append({k: summary[k] for k in ("command", "n", "date",
                                                                    "run_seconds_this_session")})
        for key in ("benchmark", "split", "pick", "seed", "model", "machine", "metric", "data",
                    "allow_twins", "query_seconds"):
            meta.setdefault(key, summary.get(key))
        modes += [m for m in summary["modes"] if m not in modes]
        for line in part.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows.setdefault(r["id"], {}).update(r)
    common = [r for r in rows.values() if all(m in r for m in modes)]
    data = Path(meta.get("data_dir") or DATA)
    any_order = {m: sum(match_any_column_order(data, r, m, meta.get("query_seconds") or 10.0)
                        for r in common) for m in modes}
    combined = {**meta, "n": len(common), "modes_on_common_questions": summarize(common, modes),
                "correct_any_column_order": any_order,
                "note_any_column_order": "secondary metric, recomputed from the stored SQL: as "
                                         "above but columns may come in any order (as Spider's "
                                         "official test-suite evaluation allows)",
                "ids": sorted(r["id"] for r in common),
                "command": "python benchmarks/spider.py --combine " + " ".join(map(str, parts))}
    out.write_text(json.dumps(combined, indent=2) + "\n")
    return combined


# ---------------------------------------------------------------- run


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {platform.system()} python {platform.python_version()}"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def summarize(rows: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in modes:
        rs = [r[m] for r in rows if m in r]
        n = len(rs)
        if not n:
            continue
        out[m] = {
            "n": n,
            "correct": sum(r["match"] for r in rs),
            "exec_acc": round(sum(r["match"] for r in rs) / n, 4),
            "executed": round(sum(r["error"] is None for r in rs) / n, 4),
            "seconds_per_question": round(sum(r["seconds"] for r in rs) / n, 2),
            "prompt_tokens_per_question": round(sum(r["prompt_tokens"] for r in rs) / n, 1),
            "completion_tokens_per_question": round(sum(r["completion_tokens"] for r in rs) / n, 1),
            "attempts_per_question": round(sum(r.get("attempts", 1) for r in rs) / n, 2),
            "with_name_repair": sum(bool(r.get("repairs")) for r in rs),
            "with_ingredient": sum("{{" in (r["pred"] or "") or "<<" in (r["pred"] or "") for r in rs),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--model", help="GGUF path (the evaluation model); required unless --build-pool")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--offset", type=int, default=0,
                    help="with --pick first: skip this many ids of the split first (run disjoint "
                         "slices in parallel processes, then --combine them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pick", choices=["first", "sample"], default="first",
                    help="first n ids of the split (few databases: the schema prefix is reused), "
                         "or a seeded sample")
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--modes", default="direct,parser")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model request")
    ap.add_argument("--query-seconds", type=float, default=10.0)
    ap.add_argument("--allow-twins", action="store_true",
                    help="keep pool examples whose gold SQL equals the question's (leaks the answer)")
    ap.add_argument("--out", type=Path, help="JSONL (default results/spider[_dev].jsonl)")
    ap.add_argument("--build-pool", type=Path, metavar="JSON",
                    help="write the few-shot pool from the dev ids to JSON and exit")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="merge single-mode runs (scored on the questions all finished) into --out "
                         "(default results/spider.json) and exit")
    args = ap.parse_args(argv)
    if args.combine:
        print(json.dumps(combine(args.combine, args.out or RESULTS / "spider.json"), indent=2))
        return 0
    if args.build_pool:
        print(f"{build_pool(args.data, args.build_pool, args.query_seconds)} examples", file=sys.stderr)
        return 0
    from blendsql.models import LlamaCpp

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown modes {bad}; choose from {MODES}")
    out = args.out or RESULTS / f"spider{'_dev' if args.split == 'dev' else ''}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not args.model:
        ap.error("--model is required")
    model_path = Path(args.model).expanduser()
    models = {m: LlamaCpp(model_path, n_ctx=args.n_ctx, n_threads=args.threads,
                           timeout=args.timeout) for m in modes}
    pool = load_examples()
    items = load_split(args.data, args.split, args.n, args.seed, args.pick, args.offset)
    done: dict[int, dict[str, Any]] = {}
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done[r["id"]] = r
    command = "python benchmarks/spider.py " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.perf_counter()
    sha = file_sha256(model_path)

    def write_summary() -> dict[str, Any]:
        rows = [done[i] for i, _ in items if i in done]
        summary = {
            "benchmark": f"Spider dev, {'dev ids (tuning)' if args.split == 'dev' else 'report split (not in dev_ids.txt)'}",
            "split": args.split, "n": len(rows), "requested_n": args.n, "offset": args.offset, "pick": args.pick,
            "seed": args.seed if args.pick == "sample" else None,
            "model": {"file": model_path.name, "sha256": sha}, "command": command,
            "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "run_seconds_this_session": round(time.perf_counter() - started, 1),
            "allow_twins": args.allow_twins, "query_seconds": args.query_seconds,
            "metric": "execution accuracy: result multisets equal (lists when gold has a top-level "
                      "ORDER BY); numbers rounded to 4 places; column order kept",
            "data": "../shared/data/spider (Spider, Yu et al. 2018, CC BY-SA 4.0; SQLite files from "
                    "cloudera/spiderman)",
            "modes": summarize(rows, modes),
        }
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    with out.open("a") as fh:
        for k, (idx, q) in enumerate(items):
            row = done.get(idx) or {"id": idx, "db": q["db_id"], "question": q["question"], "gold": q["query"]}
            todo = [m for m in modes if m not in row]
            if not todo:
                continue
            path = db_path(args.data, q["db_id"])
            gold, g_err = run_sql(path, q["query"], args.query_seconds * 3)
            row["gold_error"] = g_err
            ordered = has_top_order_by(q["query"])
            gold_key = norm_sql(q["query"])
            qpool = pool if args.allow_twins else [e for e in pool if norm_sql(e.program) != gold_key]
            for m in todo:
                t0 = time.perf_counter()
                try:
                    if m == "direct":
                        r = run_direct(models[m], path, q["question"], args.query_seconds)
                    else:
                        r = run_parser(make_parser(m, models[m], qpool), models[m], path, q["question"],
                                       args.query_seconds)
                except Exception as e:  # noqa: BLE001 - a crash is a wrong answer, recorded
                    r = {"pred": None, "rows": None, "error": f"{type(e).__name__}: {e}"[:400],
                         "prompt_tokens": 0, "completion_tokens": 0}
                r["seconds"] = round(time.perf_counter() - t0, 2)
                r["match"] = bool(gold is not None and r["rows"] is not None
                                  and same_result(r["rows"], gold, ordered))
                r["n_rows"] = None if r["rows"] is None else len(r["rows"])
                del r["rows"]
                row[m] = r
            done[idx] = row
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            write_summary()
            marks = " ".join(f"{m}={'Y' if row[m]['match'] else 'n'}" for m in modes)
            print(f"[{k + 1}/{len(items)}] {idx} {q['db_id']}: {marks}", file=sys.stderr, flush=True)
    print(json.dumps(write_summary(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
