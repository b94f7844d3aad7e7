"""Spider dev: execution accuracy of ``blendsql.nl.Parser`` beside fair baselines and ablations.

Reads Spider from the benchmark data (``benchmarks/protocol.py``: ``../shared/data``
or ``$BLENDSQL_BENCH_DATA``): dev.json with gold SQL, dev_ids.txt,
database/<db>/<db>.sqlite. Questions whose index is in ``dev_ids.txt`` are for
tuning and few-shot examples only; ``--split report`` (the default) scores the
others. The ``--n`` questions are dealt round-robin over all 20 databases with
``--seed`` (``protocol.spread``) and run in that order, in batches grouped by
database (``--batch``), so a run stopped early still covers every database and
consecutive questions reuse the schema part of the prompt. ``--shard k/K`` runs every K-th of them (parallel
processes), ``--combine`` merges the shards.

Few-shot pool, per question (``protocol.leak_free``): the shipped pool of
dev-id questions minus every example on the question's own database and every
example whose question, SQL (normalised: case, spaces, aliases) or result on
this database equals the question's own.

Modes, side by side on the same questions (``--modes``):

  direct            the same model, zero-shot: the CREATE statements and the
                    question; one attempt, no engine.
  direct_fewshot    the same model given what the Parser's prompt gives it, that
                    is not the Parser: the same schema text with sample rows, the
                    same bridge hints and the same retrieved examples, the plain
                    SQL guide; one greedy attempt, run as written (no
                    validation, repair or retry).
  parser            ``blendsql.nl.Parser`` with its defaults (validation, name
                    repair, value check, retries with the error), executed by
                    ``BlendSQL.execute`` with the default ingredient registry.
  parser_no_examples the Parser without few-shot examples.
  parser_no_retry   the Parser with one attempt: no retry, no name repair, no
                    example-free last attempt.
  grammar, permissive the Parser under its strict / permissive GBNF.
  parser_c3, parser_c5 the Parser writing 3 / 5 candidate programs (nearest
                    examples, next-nearest groups, none, sampled) and keeping the
                    one whose result most candidates share (``candidates=``).
  parser_duckdb     ``parser`` (same defaults, same few-shot pool) on a DuckDB
                    copy of the question's database: the Parser reads the DuckDB
                    copy and ``BlendSQL.execute`` runs the program there (each
                    statement limited to ``--query-seconds`` by BlendSQL's own
                    ``timeout=``); the gold SQL still runs on the SQLite file.

Each mode has its own ``LlamaCpp`` instance (same GGUF), so each keeps its own
prompt prefix in the KV cache. Each row records the backend a mode ran on
(``"backend": "sqlite"`` or ``"duckdb"``).

DuckDB copies: ``blendsql.db.transfer.sqlite_to_duckdb`` of each database, made
once and reused, in ``spider-duckdb-2/`` under the cache folder
(``$BLENDSQL_CACHE_DIR``, by default the platform's user cache directory, as for
``benchmarks/envs.py``), rebuilt when the SQLite file is newer than its copy. A
copy that fails to build is that row's error (a wrong answer), not a crash.

Execution accuracy: predicted and gold SQL run on the same SQLite file (for
``parser_duckdb`` the prediction runs on the DuckDB copy, the gold on SQLite); the
result rows must be equal as multisets (numbers rounded to 4 places, column
order kept), and as lists when the gold query has a top-level ORDER BY. Each
query runs under a time limit (``--query-seconds``). Every mode gets a 95%
Wilson interval, and is paired against ``parser`` (bootstrap interval of the
difference, McNemar's exact p).

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)  # or any copy's path
    python benchmarks/spider.py --n 200 --shard 1/2 --out benchmarks/results/spider_1.jsonl &
    python benchmarks/spider.py --n 200 --shard 2/2 --out benchmarks/results/spider_2.jsonl
    python benchmarks/spider.py --combine benchmarks/results/spider_1.jsonl benchmarks/results/spider_2.jsonl

The Parser on SQLite against the Parser on DuckDB copies (paired on the same questions):

    python benchmarks/spider.py --n 100 --modes parser,parser_duckdb --shard 1/2 --out benchmarks/results/spider_duckdb_1.jsonl &
    python benchmarks/spider.py --n 100 --modes parser,parser_duckdb --shard 2/2 --out benchmarks/results/spider_duckdb_2.jsonl
    python benchmarks/spider.py --combine benchmarks/results/spider_duckdb_1.jsonl benchmarks/results/spider_duckdb_2.jsonl --out benchmarks/results/spider_duckdb.json

Writes one JSONL line per question (resumable: a rerun adds missing modes) and
a JSON summary. Data: Spider (Yu et al. 2018, CC BY-SA 4.0); SQLite files
rebuilt from the SpiderMan CSV release (cloudera/spiderman).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import envs, protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.db.transfer import sqlite_to_duckdb  # noqa: E402
from blendsql.ingredients.base import IngredientRegistry  # noqa: E402
from blendsql.models.base import Model, Request  # noqa: E402
from blendsql.models.constraints import Text  # noqa: E402
from blendsql.nl.parser import Example, Parser, clean_program, load_examples  # noqa: E402

DATA = protocol.data_dir()
RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("direct", "direct_fewshot", "parser", "parser_no_examples", "parser_no_retry",
         "grammar", "permissive", "parser_duckdb", "parser_c3", "parser_c5")
#: modes whose parser writes several candidate programs and keeps the one most agreed on
#: by their results (``Parser(candidates=k)``, issue 42)
CANDIDATES = {"parser_c3": 3, "parser_c5": 5}
#: the backend a mode's program runs on (the others: the SQLite file)
BACKENDS = {"parser_duckdb": "duckdb"}
DUCKDB_COPIES = "spider-duckdb-2"  # folder of the copies under the cache dir (2: with keys)


def backend_of(mode: str) -> str:
    return BACKENDS.get(mode, "sqlite")


# ---------------------------------------------------------------- data


def load_split(data: Path, split: str, n: int | None, seed: int) -> list[tuple[int, dict[str, Any]]]:
    """``n`` questions of the split dealt round-robin over its databases (seeded)."""
    raw = json.loads((data / "spider" / "dev.json").read_text())
    dev = {int(x) for x in (data / "spider" / "dev_ids.txt").read_text().split()}
    ids = [(i, raw[i]) for i in range(len(raw)) if (i in dev) == (split == "dev")]
    return protocol.spread(ids, lambda t: t[1]["db_id"], n, seed)


def db_path(data: Path, db_id: str) -> Path:
    return data / "spider" / "database" / db_id / f"{db_id}.sqlite"


def duckdb_copies() -> Path:
    """Where the DuckDB copies live: ``$BLENDSQL_CACHE_DIR/spider-duckdb-2`` (else the user cache dir)."""
    return envs.cache_root() / DUCKDB_COPIES


_copy_failures: dict[tuple[Path, float], str] = {}


def duckdb_copy(path: Path) -> Path:
    """The DuckDB copy of the SQLite file ``path``, built on first use and reused; rebuilt
    when the SQLite file is newer than the copy. Built under a temporary name and moved
    into place, so parallel shards never open half a copy. Raises when the copy cannot be
    built (and, in this process, again without retrying for the same SQLite file)."""
    src = path.resolve()
    mtime = src.stat().st_mtime
    key = hashlib.sha256(str(src).encode()).hexdigest()[:12]  # two data folders, two copies
    target = duckdb_copies() / f"{path.stem}-{key}.duckdb"
    if target.exists() and target.stat().st_mtime >= mtime:
        return target
    if (src, mtime) in _copy_failures:
        raise RuntimeError(_copy_failures[src, mtime])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp")
    try:
        for f in (tmp, tmp.with_name(tmp.name + ".wal")):
            f.unlink(missing_ok=True)
        sqlite_to_duckdb(src, tmp)
        os.replace(tmp, target)
    except Exception as e:
        _copy_failures[src, mtime] = f"DuckDB copy of {path.name} failed: {type(e).__name__}: {e}"[:400]
        raise RuntimeError(_copy_failures[src, mtime]) from e
    finally:
        for f in (tmp, tmp.with_name(tmp.name + ".wal")):
            f.unlink(missing_ok=True)
    return target


def question_pool(pool: list[Example], q: dict[str, Any], path: Path,
                  oracle: protocol.ResultOracle) -> list[Example]:
    """The pool this question may see: no example of its database, question, SQL or result."""
    target = protocol.Target(q["db_id"], (q["question"],), (q["query"],), path)
    return protocol.leak_free(pool, target, oracle)


# ---------------------------------------------------------------- scoring


def with_deadline(conn: sqlite3.Connection, seconds: float) -> None:
    """Abort any statement on ``conn`` running past ``seconds`` from now."""
    start = time.monotonic()
    conn.set_progress_handler(lambda: 1 if time.monotonic() - start > seconds else 0, 50_000)


norm_value = protocol.norm_value


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
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


# ---------------------------------------------------------------- the systems


def create_statements(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
                            "AND name NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return "\n\n".join(r[0].strip() + ";" for r in rows)


def direct_prompt(schema: str, question: str) -> str:
    """The zero-shot twin: schema, question, "write the query" (the common zero-shot prompt)."""
    return (f"{schema}\n\n-- Using valid SQLite, answer the following question for the tables "
            f"provided above.\n-- Question: {question}\nAnswer with the SQLite query only.")


def fewshot_prompt(pool: list[Example], model: Model, path: Path, question: str) -> str:
    """The Parser's own first prompt with the plain-SQL guide: same schema text, sample
    rows, bridge hints and retrieved examples."""
    bsql = BlendSQL(str(path), model=model, cache=False)
    try:
        return Parser(model, examples=pool).first_prompt(question, bsql.db.conn, IngredientRegistry())
    finally:
        bsql.close()


def run_once(model: Model, prompt: str, path: Path, seconds: float) -> dict[str, Any]:
    """One greedy completion of ``prompt``, cleaned and run as written."""
    resp = model.generate([Request(prompt=prompt, constraint=Text(), max_tokens=256)])[0]
    sql = clean_program(resp.text)
    rows, err = run_sql(path, sql, seconds)
    return {"pred": sql, "rows": rows, "error": err, "prompt_tokens": resp.usage.prompt_tokens,
            "cached_tokens": resp.usage.cached_tokens, "completion_tokens": resp.usage.completion_tokens,
            "attempts": 1}


def run_parser(parser: Parser, model: Model, path: Path, question: str, seconds: float) -> dict[str, Any]:
    """Parse ``question`` on the database at ``path`` (a SQLite file, or a ``.duckdb`` copy)
    and run the program there with ``BlendSQL.execute``."""
    duck = path.suffix == ".duckdb"
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
        if not duck:
            with_deadline(bsql.db.conn, seconds)
        try:
            # DuckDB has no progress handler: BlendSQL's own limit, per statement
            sm = bsql.execute(parsed.program, timeout=seconds) if duck else bsql.execute(parsed.program)
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
    if mode == "parser_no_examples":
        return Parser(model, examples=[], n_examples=0)
    if mode == "parser_no_retry":
        return Parser(model, examples=pool, max_retries=0, plain_fallback=False, repair=False)
    if mode in CANDIDATES:
        return Parser(model, examples=pool, candidates=CANDIDATES[mode])
    return Parser(model, examples=pool)  # parser, parser_duckdb


def run_mode(mode: str, model: Model, pool: list[Example], path: Path, question: str,
             seconds: float) -> dict[str, Any]:
    if mode == "direct":
        return run_once(model, direct_prompt(create_statements(path), question), path, seconds)
    if mode == "direct_fewshot":
        return run_once(model, fewshot_prompt(pool, model, path, question), path, seconds)
    if backend_of(mode) == "duckdb":
        try:
            copy = duckdb_copy(path)
        except Exception as e:  # noqa: BLE001 - no copy: this row's error, the run goes on
            return {"pred": None, "rows": None, "error": str(e)[:400], "prompt_tokens": 0,
                    "completion_tokens": 0, "attempts": 0}
        out = run_parser(make_parser(mode, model, pool), model, copy, question, seconds)
        out["duckdb_copy"] = envs.portable(copy)
        return out
    return run_parser(make_parser(mode, model, pool), model, path, question, seconds)


def leak_checks(data: Path, n: int = 200, seed: int = 0) -> list[protocol.PromptCheck]:
    """Each report question's real first parser prompt (no model call), the examples
    shown and what must not leak: what ``tests/benchmarks/test_leaks.py`` checks."""
    from blendsql.models import FunctionModel

    pool = load_examples("spider")
    oracle = protocol.ResultOracle()
    model = FunctionModel(lambda *a, **k: "")
    checks = []
    for idx, q in load_split(data, "report", n, seed):
        path = db_path(data, q["db_id"])
        parser = Parser(model, examples=question_pool(pool, q, path, oracle))
        bsql = BlendSQL(str(path), model=model, cache=False)
        try:
            ctx = parser.context(q["question"], bsql.db.conn, bsql.registry)
            prompt = parser.prompt(q["question"], ctx.schema, ctx.hints, examples=ctx.examples,
                                   guide=ctx.guide, tables=ctx.tables)
        finally:
            bsql.close()
        target = protocol.Target(q["db_id"], (q["question"],), (q["query"],), path)
        checks.append(protocol.PromptCheck("spider", str(idx), prompt, ctx.examples, target,
                                           given=(q["question"],)))
    return checks


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


# ---------------------------------------------------------------- summaries


def summarize(rows: list[dict[str, Any]], modes: list[str]) -> dict[str, Any]:
    """Per mode: accuracy with its 95% interval and costs; each mode paired against
    ``parser`` on the questions both ran."""
    out: dict[str, Any] = {}
    for m in modes:
        rs = [r[m] for r in rows if m in r]
        n = len(rs)
        if not n:
            continue
        out[m] = {
            "backend": backend_of(m),
            **protocol.accuracy([r["match"] for r in rs]),
            "executed": round(sum(r["error"] is None for r in rs) / n, 4),
            "seconds_per_question": round(sum(r["seconds"] for r in rs) / n, 2),
            "prompt_tokens_per_question": round(sum(r["prompt_tokens"] for r in rs) / n, 1),
            "completion_tokens_per_question": round(sum(r["completion_tokens"] for r in rs) / n, 1),
            "attempts_per_question": round(sum(r.get("attempts", 1) for r in rs) / n, 2),
            "with_name_repair": sum(bool(r.get("repairs")) for r in rs),
            "with_ingredient": sum("{{" in (r["pred"] or "") or "<<" in (r["pred"] or "") for r in rs),
        }
        if m != "parser":
            both = [r for r in rows if m in r and "parser" in r]
            if both:
                out[m]["parser_vs_this"] = protocol.paired([r["parser"]["match"] for r in both],
                                                           [r[m]["match"] for r in both])
    return out


def summary_of(rows: list[dict[str, Any]], modes: list[str], header: dict[str, Any],
               split: str) -> dict[str, Any]:
    return {
        "benchmark": f"Spider dev, {'dev ids (tuning)' if split == 'dev' else 'report split (not in dev_ids.txt)'}",
        **header, "split": split, "n": len(rows),
        "databases": protocol.database_counts(r["db"] for r in rows),
        "ids": sorted(r["id"] for r in rows),
        "metric": "execution accuracy: result multisets equal (lists when gold has a top-level "
                  "ORDER BY); numbers rounded to 4 places; column order kept",
        "data": "Spider (Yu et al. 2018, CC BY-SA 4.0; SQLite files from cloudera/spiderman)",
        "modes": summarize(rows, modes),
    }


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows.setdefault(r["id"], {}).update(r)
    return rows


def combine(parts: list[Path], out: Path) -> dict[str, Any]:
    """One summary from shards: every mode on the questions the shards ran."""
    rows: dict[int, dict[str, Any]] = {}
    headers = []
    for part in parts:
        for idx, row in read_rows(part).items():
            rows.setdefault(idx, {}).update(row)  # shards of other modes add to the same question
        headers.append(json.loads(part.with_suffix(".json").read_text()))
    modes = [m for m in MODES if any(m in r for r in rows.values())]
    header = {k: headers[0].get(k) for k in ("model", "machine", "seed", "requested_n", "query_seconds")}
    copies = next((h["duckdb_copies"] for h in headers if h.get("duckdb_copies")), None)
    if copies:
        header["duckdb_copies"] = copies
    header["runs"] = [{k: h.get(k) for k in ("command", "commit", "clean_tree", "date", "n",
                                             "reuse_check")} for h in headers]
    header["command"] = "python benchmarks/spider.py --combine " + " ".join(
        str(p.resolve().relative_to(protocol.ROOT)) if p.resolve().is_relative_to(protocol.ROOT) else p.name
        for p in parts)
    combined = summary_of(list(rows.values()), modes, header, headers[0].get("split", "report"))
    out.write_text(json.dumps(combined, indent=2) + "\n")
    return combined


def markdown(summary: dict[str, Any]) -> str:
    """The summary as the table ``benchmarks/README.md`` shows (accuracy, interval, the
    paired difference with the Parser, costs)."""
    lines = ["| mode | right | accuracy (95% CI) | Parser minus this (95% CI), McNemar p | "
             "prompt tokens / q | s / q |", "|---|---:|---|---|---:|---:|"]
    for mode, m in summary["modes"].items():
        vs = m.get("parser_vs_this")
        diff = (f"{vs['difference']:+.3f} ({vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}), p = {vs['mcnemar_p']}"
                f" on {vs['n']}" if vs else "")
        lines.append(f"| {mode} | {m['correct']}/{m['n']} | {m['accuracy']:.3f} ({m['ci95'][0]:.3f}, "
                     f"{m['ci95'][1]:.3f}) | {diff} | {m['prompt_tokens_per_question']:.0f} | "
                     f"{m['seconds_per_question']:.0f} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--model", help=f"GGUF path (default ${protocol.MODEL_ENV})")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard", help="k/K: run every K-th question of the set, from the k-th")
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--fresh", action="store_true",
                    help="draw the set from items no committed run touched (the results' git "
                    "history, protocol.touched_ids); every run records the check (reuse_check)")
    ap.add_argument("--batch", type=int, default=30,
                    help="run order: batches of this many dealt questions, each grouped by database")
    ap.add_argument("--modes", default="parser,direct_fewshot,direct")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model request")
    ap.add_argument("--query-seconds", type=float, default=10.0)
    ap.add_argument("--out", type=Path, help="JSONL (default results/spider[_dev].jsonl)")
    ap.add_argument("--build-pool", type=Path, metavar="JSON",
                    help="write the few-shot pool from the dev ids to JSON and exit")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="merge shards into --out (default results/spider.json) and exit")
    ap.add_argument("--markdown", type=Path, metavar="JSON",
                    help="print a summary JSON as the README's table and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
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
    model_file = protocol.model_arg(args.model)
    if not model_file:
        ap.error(f"--model (or ${protocol.MODEL_ENV}) is required")
    out = args.out or RESULTS / f"spider{'_dev' if args.split == 'dev' else ''}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    model_path = Path(model_file).expanduser()
    models = {m: LlamaCpp(model_path, n_ctx=args.n_ctx, n_threads=args.threads,
                           timeout=args.timeout) for m in modes}
    pool = load_examples("spider")
    oracle = protocol.ResultOracle(args.query_seconds)
    done = read_rows(out)
    # what earlier committed runs touched (this file's own rows left out when resuming it)
    touched = protocol.touched_ids("spider", exclude=[out] if done else [])
    dealt = load_split(args.data, args.split, None if args.fresh else args.n, args.seed)
    if args.fresh:
        dealt = protocol.untouched(dealt, lambda t: t[0], args.n, touched)
    items = protocol.shard_of(dealt, args.shard)
    # dealt order, in batches of ~3 questions per database grouped together: a run stopped
    # early still covers every database, and the schema part of the prompt is reused
    items = protocol.grouped_in_batches(items, lambda t: t[1]["db_id"], args.batch)
    header = {**protocol.run_record("spider.py", argv, model_path), "seed": args.seed,
              "requested_n": args.n, "shard": args.shard, "query_seconds": args.query_seconds,
              "fresh": args.fresh,
              "reuse_check": protocol.reuse_check([i for i, _ in items], touched)}
    if any(backend_of(m) == "duckdb" for m in modes):
        header["duckdb_copies"] = envs.portable(duckdb_copies())

    def write_summary() -> dict[str, Any]:
        rows = [done[i] for i, _ in items if i in done]
        summary = summary_of(rows, modes, header, args.split)
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
            qpool = question_pool(pool, q, path, oracle)
            row["pool_size"] = len(qpool)
            for m in todo:
                t0 = time.perf_counter()
                try:
                    r = run_mode(m, models[m], qpool, path, q["question"], args.query_seconds)
                except Exception as e:  # noqa: BLE001 - a crash is a wrong answer, recorded
                    r = {"pred": None, "rows": None, "error": f"{type(e).__name__}: {e}"[:400],
                         "prompt_tokens": 0, "completion_tokens": 0}
                r["seconds"] = round(time.perf_counter() - t0, 2)
                r["backend"] = backend_of(m)
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
