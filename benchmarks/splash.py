"""SPLASH: correcting a wrong query from the user's natural-language feedback.

For each SPLASH item (question, a parser's wrong query, the user's feedback,
gold SQL) the wrong query becomes the previous turn of a
``blendsql.nl.Conversation`` and ``conversation.correct(feedback)`` writes the
corrected query: the prompt holds the question, the wrong query, OUR
``explain()`` of it (not the release's explanation) and the feedback, decoded
under the Parser's grammar constraint, validated, retried once.

Scores, all by execution on the same Spider SQLite file (result multisets,
as in benchmarks/conversation.py; gold and the wrong query have their
tokenised operators joined back):

  correction_acc   the corrected query's result equals gold's
  wrong_already_right  the wrong query's own result already equals gold's
                   (SPLASH's "wrong" is by exact match, so a few execute right)
  end_to_end_acc   the same model parsing the question from scratch, with no
                   feedback (``--no-e2e`` skips it): what correction adds

Reports on test.json by default (``--split dev`` reads dev.json, which is for
tuning only).

    python benchmarks/splash.py --limit 20
    python benchmarks/splash.py --limit 100 --model path/to/model.gguf
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# this checkout's own package first (a pinned worktree must not run the editable install's code)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conversation import (  # noqa: E402 - sibling script, imported by path
    DATA,
    QUERY_SECONDS,
    RESULTS,
    add_model_args,
    code_commit,
    cross_database_pool,
    db_path,
    fix_gold,
    frame_rows,
    gold_rows,
    machine,
    make_model,
    plain_sql_only,
    read_done,
    with_deadline,
)

from blendsql import BlendSQL  # noqa: E402
from blendsql.errors import BlendSQLError  # noqa: E402
from blendsql.models.base import Model  # noqa: E402
from blendsql.nl import Conversation, Parser  # noqa: E402
from blendsql.nl.conversation import (  # noqa: E402
    CORRECTION_SOURCES,
    DEFAULT_CORRECTION_SOURCES,
    Candidate,
    choose_correction,
    result_key,
    sort_clause,
)
from blendsql.nl.correct import CorrectionExample, load_correction_examples  # noqa: E402
from blendsql.nl.parser import Example, load_examples  # noqa: E402

POOL = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "splash.json"
from blendsql.nl.conversation import Turn  # noqa: E402


def seed_turn(bsql: BlendSQL, question: str, program: str) -> Turn:
    """The wrong query as an earlier turn (executed, so the correction can compare sizes)."""
    turn = Turn(question, "inform_sql", "", program=program, question=question)
    try:
        turn.smoothie = bsql.execute(program)
    except BlendSQLError as e:
        turn.error = str(e)
    return turn


def run_item(i: int, item: dict[str, Any], data: Path, model: Model, e2e: bool,
             retries: int = 1, spider_pool: list[Example] | None = None,
             n_examples: int = 3, sources: Sequence[str] = DEFAULT_CORRECTION_SOURCES) -> dict[str, Any]:
    path = db_path(data, item["db_id"])
    gold = fix_gold(item["gold_parse"])
    wrong = fix_gold(item["predicted_parse_with_values"])
    g_rows, g_err = gold_rows(path, gold)
    w_rows, _ = gold_rows(path, wrong)
    bsql = BlendSQL(str(path), model=model, cache=False)
    plain_sql_only(bsql)  # Spider: plain SQL only (see benchmarks/conversation.py)
    # the fresh parse is the best parser we have: the Spider pool, minus this database's own
    # examples (SPLASH test questions are Spider dev questions: no gold query in the prompt)
    pool = cross_database_pool(spider_pool if spider_pool is not None else load_examples("spider"), path)
    parser = Parser(model, examples=pool, max_retries=retries)
    # tuning on dev: no example from the item's own database (the pool is built from dev.json;
    # test items are on other databases, so this is the condition the test split sees)
    corrections = [e for e, db in zip(load_correction_examples(), pool_databases(), strict=True)
                   if db != item["db_id"]]
    conv = Conversation(bsql, parser, classify_acts=False, correction_examples=n_examples,
                        correction_pool=corrections, correction_sources=sources)
    conv.history.append(seed_turn(bsql, item["question"], wrong))
    row: dict[str, Any] = {"i": i, "db": item["db_id"], "question": item["question"], "feedback": item["feedback"],
                           "wrong": wrong, "gold": gold, "gold_error": g_err,
                           "wrong_already_right": g_rows is not None and w_rows == g_rows,
                           "wrong_key": _digests(conv._key(conv.history[-1]))}
    # the fresh parse is also the correction's "fresh" candidate (the same parser on the
    # question alone, no history): when the correction writes it, it is not written twice
    fresh_inside = e2e and "fresh" in sources
    if e2e and not fresh_inside:
        t0 = time.perf_counter()
        fresh = Conversation(bsql, parser, classify_acts=False)
        with_deadline(bsql.db.conn, QUERY_SECONDS)
        try:
            t = fresh.ask(item["question"])
            pred, perr, pdf = t.program, t.error, t.result
        except Exception as e:  # noqa: BLE001
            pred, perr, pdf = None, f"{type(e).__name__}: {e}", None
        row.update(e2e_pred=pred, e2e_error=perr,
                   e2e_match=bool(g_rows is not None and pdf is not None and perr is None
                                  and frame_rows(pdf) == g_rows),
                   e2e_seconds=round(time.perf_counter() - t0, 2))
    t0 = time.perf_counter()
    with_deadline(bsql.db.conn, QUERY_SECONDS)
    cands: list[Candidate] = []
    try:
        turn = conv.correct(item["feedback"], retries=retries)
        corrected, err, df, diff, cands = turn.program, turn.error, turn.result, turn.diff, turn.candidates
    except Exception as e:  # noqa: BLE001 - a crash is a failed correction, recorded
        corrected, err, df, diff = None, f"{type(e).__name__}: {e}", None, None
    row.update(corrected=corrected, error=err, diff=diff,
               correction_match=bool(g_rows is not None and df is not None and err is None
                                     and frame_rows(df) == g_rows),
               correction_seconds=round(time.perf_counter() - t0, 2),
               candidates=[candidate_row(c, g_rows) for c in cands])
    if fresh_inside:
        mine = next((c for c in row["candidates"] if c["source"] == "fresh"), None)
        if mine is not None:
            row.update(e2e_pred=mine["program"], e2e_error=mine["error"], e2e_match=mine["match"],
                       e2e_seconds=mine["seconds"], e2e_from="correction's fresh candidate")
    bsql.close()
    return row


def candidate_row(c: Candidate, g_rows: Any) -> dict[str, Any]:
    """One candidate correction as recorded: source, query, outcome, match with gold."""
    match = bool(g_rows is not None and c.smoothie is not None and c.error is None
                 and frame_rows(c.smoothie.df) == g_rows)
    return {"source": c.source, "program": c.program, "error": c.error, "rows": c.rows,
            "repeats_rejected": c.repeats_rejected, "unchanged": c.unchanged, "chosen": c.chosen,
            "seconds": c.seconds, "match": match, **_digests(c.key)}


def _digests(key: tuple[str, ...] | None) -> dict[str, Any]:
    """A result key, shortened: ``result`` (the rows); for a query that sorts, ``order``
    (the rows in order) and ``sort`` (its ORDER BY)."""
    if key is None:
        return {"result": None, "order": None, "sort": None}
    if len(key) < 3:
        return {"result": key[0][:12], "order": None, "sort": None}
    return {"result": key[0][:12], "order": key[1][:12], "sort": key[2]}


def _key(d: dict[str, Any]) -> tuple[str, ...] | None:
    if not d.get("result"):
        return None
    return (d["result"], d["order"], d.get("sort") or "") if d.get("order") else (d["result"],)


_REJECTED = ("<the rejected result>",)


def _as_candidate(c: dict[str, Any], rekeyed: bool) -> Candidate:
    """A recorded candidate as ``choose_correction`` sees it. Rows re-keyed by
    :func:`rekey` compare with the rejected query's key; older rows only say
    whether a candidate repeated the rejected result."""
    key = _key(c)
    if not rekeyed and c["repeats_rejected"]:
        key = _REJECTED
    return Candidate(c["source"], c["program"], error=c["error"], key=key, unchanged=c["unchanged"])


def rekey(rows: list[dict[str, Any]], data: Path) -> int:
    """Results of every recorded row's rejected query and candidates, keyed again as
    ``blendsql.nl.conversation`` keys them now (runs their queries again, no model:
    they are plain SQL on the Spider file); returns how many queries ran."""
    ran = 0
    for r in rows:
        bsql = BlendSQL(str(db_path(data, r["db"])), cache=False)
        try:
            r["wrong_key"] = _digests(_key_of(bsql, r["wrong"]))
            ran += 1
            for c in r.get("candidates", []):
                if c["program"] is not None and c["error"] is None:
                    c.update(_digests(_key_of(bsql, c["program"])))
                    ran += 1
                else:
                    c.update(_digests(None))
        finally:
            bsql.close()
    return ran


def _key_of(bsql: BlendSQL, program: str) -> tuple[str, ...] | None:
    with_deadline(bsql.db.conn, QUERY_SECONDS)
    try:
        smoothie = bsql.execute(program)
    except BlendSQLError:
        return None
    return result_key(smoothie, sort_clause(program, bsql))


def policy_table(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Items right under each choice of candidate sources (in preference order), from the
    recorded candidates: what ``Conversation(correction_sources=...)`` would have answered."""
    from itertools import permutations

    present = {c["source"] for r in rows for c in r.get("candidates", [])}
    sources = [s for s in CORRECTION_SOURCES if s in present]
    out: dict[str, int] = {}
    for k in range(1, len(sources) + 1):
        for order in permutations(sources, k):
            right = 0
            for r in rows:
                by = {c["source"]: c for c in r.get("candidates", [])}
                rekeyed = "wrong_key" in r
                rejected = _key(r["wrong_key"]) if rekeyed else _REJECTED
                chosen = choose_correction([_as_candidate(by[s], rekeyed) for s in order if s in by], rejected)
                right += bool(chosen is not None and by[chosen.source]["match"])
            out[",".join(order)] = right
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)

    def rate(key: str, sub: list[dict[str, Any]] | None = None) -> float | None:
        sub = rows if sub is None else sub
        return round(sum(bool(r.get(key)) for r in sub) / len(sub), 4) if sub else None

    e2e = [r for r in rows if "e2e_match" in r]
    return {
        "items": n,
        "correction_acc": rate("correction_match"),
        "corrected_query_rate": round(sum(r["corrected"] is not None for r in rows) / n, 4) if n else None,
        "changed_query_rate": round(sum(r["corrected"] is not None and r["diff"] != "no change"
                                        for r in rows) / n, 4) if n else None,
        "wrong_already_right": rate("wrong_already_right"),
        "end_to_end_items": len(e2e),
        "end_to_end_acc": rate("e2e_match", e2e),
        "gold_errors": sum(r["gold_error"] is not None for r in rows),
        "mean_correction_seconds": round(sum(r["correction_seconds"] for r in rows) / n, 2) if n else None,
        "mean_end_to_end_seconds": round(sum(r["e2e_seconds"] for r in e2e) / len(e2e), 2) if e2e else None,
        "databases": sorted({r["db"] for r in rows}),
        "candidates": candidate_summary(rows),
    }


def candidate_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per candidate source: items where it ran, how often it matched gold, was chosen, took seconds."""
    out: dict[str, Any] = {}
    for r in rows:
        for c in r.get("candidates", []):
            s = out.setdefault(c["source"], {"items": 0, "match": 0, "chosen": 0, "seconds": 0.0})
            s["items"] += 1
            s["match"] += bool(c["match"])
            s["chosen"] += bool(c["chosen"])
            s["seconds"] += c["seconds"]
    for s in out.values():
        s["seconds"] = round(s["seconds"] / s["items"], 1)
    with_c = [r for r in rows if r.get("candidates")]
    if with_c:
        out["any_candidate_matches"] = sum(any(c["match"] for c in r["candidates"]) for r in with_c)
        out["items_with_candidates"] = len(with_c)
    return out


def in_database_order(items: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The same items, grouped by database (databases in order of first appearance).

    Consecutive items on one database share the prompt's opening (guide and
    schema) in the model's KV cache; the set of items is unchanged."""
    first: dict[str, int] = {}
    for pos, (_, item) in enumerate(items):
        first.setdefault(item["db_id"], pos)
    return sorted(items, key=lambda pair: first[pair[1]["db_id"]])


def pool_databases() -> list[str]:
    """The database of each pool example, in pool order (``db`` in splash.json)."""
    return [str(r.get("db", "")) for r in json.loads(POOL.read_text())["examples"]]


def build_pool(data: Path) -> int:
    """The correction pool: SPLASH dev items whose gold query runs and whose wrong one is wrong.

    Only dev.json is read (test is reported). Operators are joined back as in the benchmark.
    """
    items = json.loads((data / "splash" / "dev.json").read_text())
    out, seen = [], set()
    for item in items:
        path = db_path(data, item["db_id"])
        gold, wrong = fix_gold(item["gold_parse"]), fix_gold(item["predicted_parse_with_values"])
        g_rows, g_err = gold_rows(path, gold)
        w_rows, _ = gold_rows(path, wrong)
        key = (item["question"], item["feedback"])
        if g_err is not None or g_rows == w_rows or key in seen:
            continue
        seen.add(key)
        ex = CorrectionExample(item["question"], " ".join(wrong.split()),
                               " ".join(item["feedback"].split()), " ".join(gold.split()))
        out.append({**ex.__dict__, "db": item["db_id"]})
    POOL.write_text(json.dumps({
        "source": "SPLASH dev.json (Elgohary et al. 2020, CC BY-SA 4.0, via parkervg/DestT5): items whose "
                  "gold query runs on the Spider SQLite file and whose predicted query returns other rows; "
                  "built by benchmarks/splash.py --build-pool",
        "examples": out}, indent=1, ensure_ascii=False) + "\n")
    return len(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--split", choices=["test", "dev"], default="test")
    ap.add_argument("--no-e2e", action="store_true", help="skip the parse-from-scratch comparison")
    add_model_args(ap)
    ap.add_argument("--retries", type=int, default=1, help="parser / correction retries on an invalid query")
    ap.add_argument("--out", type=Path, help="JSONL (default results/splash[_dev].jsonl)")
    ap.add_argument("--offset", type=int, default=0, help="skip the first items (parallel slices)")
    ap.add_argument("--every", type=int, default=1,
                    help="take every N-th item (a spread over databases; items are grouped by database)")
    ap.add_argument("--n-examples", type=int, default=3,
                    help="worked corrections retrieved from the SPLASH dev pool (0: one fixed example)")
    ap.add_argument("--correction-sources", default=",".join(DEFAULT_CORRECTION_SOURCES),
                    help="comma-separated candidate sources of Conversation.correct, in order of "
                         "preference (fresh, edit, guided); with 'fresh', the parse-from-scratch "
                         "comparison is that candidate (not written twice)")
    ap.add_argument("--policies", action="store_true",
                    help="no model: from the rows in --out, items right under each choice and order "
                         "of correction sources (results of old rows recomputed from their queries)")
    ap.add_argument("--order", choices=["file", "db"], default="file",
                    help="run order of the chosen items: file order, or grouped by database "
                         "(reuses the cached schema; a stopped run then covers fewer databases)")
    ap.add_argument("--build-pool", action="store_true",
                    help=f"write the correction pool from dev.json to {POOL.relative_to(POOL.parents[3])}")
    args = ap.parse_args(argv)
    if args.build_pool:
        n = build_pool(args.data)
        print(f"wrote {n} examples to {POOL}")
        return 0
    out = args.out or RESULTS / ("splash.jsonl" if args.split == "test" else "splash_dev.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.policies:
        rows = [json.loads(line) for line in out.open()]
        ran = rekey(rows, args.data)
        report = {"items": len(rows), "queries_rerun": ran, "afresh": sum(bool(r.get("e2e_match")) for r in rows),
                  "right_by_sources": policy_table(rows),
                  "note": "results keyed as blendsql.nl.conversation.result_key keys them at this commit "
                          "(rows, and their order when a query sorts); afresh = the fresh parse alone",
                  "code_commit": code_commit()}
        out.with_name(out.stem + "_policies.json").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return 0
    model, model_name = make_model(args)
    every = max(1, args.every)
    numbered = list(enumerate(json.loads((args.data / "splash" / f"{args.split}.json").read_text())))
    items = numbered[::every][args.offset: args.offset + args.limit]
    if args.order == "db":
        items = in_database_order(items)
    import blendsql

    print(f"blendsql from {blendsql.__file__}; code {code_commit()}", file=sys.stderr)
    sources = tuple(x.strip() for x in args.correction_sources.split(",") if x.strip())
    done = read_done(out, "i")
    started = time.perf_counter()
    command = "python benchmarks/splash.py " + " ".join(argv if argv is not None else sys.argv[1:])
    commit = code_commit()

    def write_summary() -> dict[str, Any]:
        """Rewritten after every item, so a stopped run still leaves a true summary."""
        rows = [done[i] for i, _ in items if i in done]
        summary = {
            "benchmark": f"SPLASH {args.split} (items in file order)", "split": args.split,
            "model": model_name, "retries": args.retries, "requested_limit": args.limit,
            "offset": args.offset, "every": every, "n_examples": args.n_examples,
            "order": args.order, "correction_sources": list(sources), "command": command, "code_commit": commit,
            "package": blendsql.__file__, "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "run_seconds_this_session": round(time.perf_counter() - started, 1),
            "metric_notes": "execution match of result multisets on the Spider SQLite file; the correction "
                            "prompt uses blendsql.nl.explain, not the release's explanation",
            "source": "SPLASH (Elgohary et al. 2020, CC BY-SA 4.0), via parkervg/DestT5",
            **summarize(rows),
        }
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    with out.open("a") as fh:
        spider_pool = load_examples("spider")
        for i, item in items:
            if i in done:
                continue
            row = run_item(i, item, args.data, model, not args.no_e2e, args.retries, spider_pool,
                           args.n_examples, sources)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[i] = row
            write_summary()
            print(f"[{len(done)}/{len(items)}] {i} {row['db']}: correction={row['correction_match']} "
                  f"e2e={row.get('e2e_match')}", file=sys.stderr)
    print(json.dumps(write_summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
