"""Large-schema retrieval benchmark (CRUSH4SQL) on the union schemas.

Recall@B of the gold columns for B in (10, 20, 50, 100) on

- spider_UNION (4,503 columns of all Spider databases): gold columns from each
  Spider dev gold SQL (sqlglot, aliases resolved); reported on questions NOT in
  ``spider/dev_ids.txt`` (``--split dev`` uses the dev ids, for tuning);
- bird_UNION (798 columns): gold elements from ``bird_dev.json``; BIRD has no
  dev_ids list here, so question ids divisible by 10 are the tuning split
  (``--split dev``) and the others the report split;

for five methods on the same questions: ``cosine`` (dense top-B of the
question), ``bm25`` (BM25 top-B of the question), ``crush_no_llm`` (the
collective selection probing with the question only), ``crush`` (collective
selection with the model's hallucinated schema) and ``crush_greedy`` (the
paper's entropy-weighted coverage objective, same hallucinations). Also times
selection on ndap_super.json (18,891 columns; it has no questions, so the
Spider questions are reused for timing).

Hallucinations are cached in a JSONL file (``--hallucinations``), keyed by
the model identity (weights hash) and the prompt, so re-scoring after a change
to the selection never re-runs the model; ``--generate-only`` fills the cache,
``--cached-only`` scores only the questions already in it.

    python benchmarks/schema_retrieval.py --limit 100
    python benchmarks/schema_retrieval.py --model path/to/model.gguf --threads 1
    python benchmarks/schema_retrieval.py --model M --threads 1 --generate-only  # fill cache first
    python benchmarks/schema_retrieval.py --base-url http://localhost:8080/v1 --model-name x
    python -m benchmarks schema-retrieval      # the README's run ($BLENDSQL_EVAL_MODEL)
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from benchmarks.protocol import data_dir  # noqa: E402
from blendsql.models.base import Model  # noqa: E402
from blendsql.nl.schema_select import (  # noqa: E402
    SchemaSelector,
    columns_in_sql,
    hallucinate_text,
    hallucination_request,
    parse_hallucination,
)
from blendsql.retrieval.embeddings import (  # noqa: E402
    Embedder,
    HashingEmbedder,
    SentenceTransformerEmbedder,
)
from blendsql.retrieval.index import BM25Index, top_k  # noqa: E402

BUDGETS = (10, 20, 50, 100)
# --ablations: what each part of the collective selection adds (SchemaSelector fields)
ABLATIONS: dict[str, dict[str, float]] = {
    "crush_without_link_bonus": {"link_bonus": 0.0},
    "crush_without_group_boost": {"db_weight": 0.0, "table_weight": 0.0},
    "crush_probes_only": {"db_weight": 0.0, "table_weight": 0.0, "link_bonus": 0.0},
}
ROOT = Path(__file__).resolve().parent.parent
DATA = data_dir()  # $BLENDSQL_BENCH_DATA, else ../shared/data beside the checkout


def spider_questions(data: Path, split: str) -> tuple[list[dict[str, Any]], int]:
    """Spider dev questions with gold ``db.table.column`` elements (original names, lower-cased).

    Returns the questions and how many were dropped because their gold SQL
    could not be read or named no column of spider_UNION.
    """
    tables = json.loads((data / "spider" / "tables.json").read_text())
    dev = json.loads((data / "spider" / "dev.json").read_text())
    dev_ids = {int(x) for x in (data / "spider" / "dev_ids.txt").read_text().split()}
    union = set(load_union(data / "crush4sql" / "spider_UNION.txt"))
    by_db = {}
    for db in tables:
        t_orig = [t.lower() for t in db["table_names_original"]]
        schema: dict[str, list[str]] = {t: [] for t in t_orig}
        natural: dict[tuple[str, str], str] = {}
        for ti, c_orig in db["column_names_original"]:
            if ti < 0:
                continue
            schema[t_orig[ti]].append(c_orig.lower())
            natural[(t_orig[ti], c_orig.lower())] = f"{db['db_id']}.{t_orig[ti]}.{c_orig.lower()}"
        by_db[db["db_id"]] = (schema, natural)
    out, dropped = [], 0
    for i, ex in enumerate(dev):
        if (i in dev_ids) != (split == "dev"):
            continue
        schema, natural = by_db[ex["db_id"]]
        try:
            cols = columns_in_sql(ex["query"], schema)
        except Exception:
            dropped += 1
            continue
        gold = sorted({natural[c] for c in cols if c in natural} & union)
        if not gold:
            dropped += 1
            continue
        out.append({"id": i, "question": ex["question"], "gold": gold})
    return out, dropped


def is_bird_dev(question_id: int) -> bool:
    """BIRD has no dev_ids.txt here: question ids divisible by 10 are the tuning split."""
    return question_id % 10 == 0


def bird_questions(data: Path, split: str) -> tuple[list[dict[str, Any]], int]:
    """BIRD dev questions of ``split`` with their gold elements present in bird_UNION."""
    union = set(load_union(data / "crush4sql" / "bird_UNION.txt"))
    out, dropped = [], 0
    for ex in json.loads((data / "crush4sql" / "bird_dev.json").read_text()):
        if is_bird_dev(int(ex["question_id"])) != (split == "dev"):
            continue
        gold = sorted({".".join(e).lower() for e in ex["schema_elements"]} & union)
        if not gold:
            dropped += 1
            continue
        out.append({"id": ex["question_id"], "question": ex["question"], "gold": gold})
    return out, dropped


def load_union(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def recall(picked: list[str], gold: list[str]) -> float:
    return len(set(picked) & set(gold)) / len(gold)


class HallucinationCache:
    """Model answers to the step-1 prompt, one JSON line each, so re-scoring is free.

    A line is keyed by the model identity (weights hash included) and the
    request's own key (prompt text, few shots, limits), so a changed prompt or
    model never reuses a stale answer. The raw text is stored; parsing is
    redone on load, so a parser change needs no new generation.
    """

    def __init__(self, path: Path | None, model: Model | None, model_name: str) -> None:
        self.path = path
        self.model = model
        self.model_name = model_name
        self.rows: dict[str, dict[str, Any]] = {}
        self.generated = 0
        self.seconds = 0.0
        if path is not None and path.is_file():
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.rows[row["key"]] = row

    def key(self, question: str) -> str:
        req = hallucination_request(question)
        return hashlib.sha256(f"{self.model_name}\n{req.key()}".encode()).hexdigest()

    def get(self, question: str) -> list[str]:
        """Parsed hallucination for ``question``: from the file, else from the model."""
        if self.model is None:
            return []
        k = self.key(question)
        row = self.rows.get(k)
        if row is None:
            t0 = time.perf_counter()
            text = hallucinate_text(question, self.model)
            secs = time.perf_counter() - t0
            self.generated += 1
            self.seconds += secs
            row = {"key": k, "model": self.model_name, "question": question, "text": text,
                   "seconds": round(secs, 3)}
            self.rows[k] = row
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(json.dumps(row) + "\n")
        return parse_hallucination(row["text"])

    def mean_seconds(self, questions: list[dict[str, Any]]) -> float | None:
        """Mean generation time of these questions as recorded when each was generated."""
        secs = [self.rows[self.key(q["question"])].get("seconds") for q in questions
                if self.key(q["question"]) in self.rows]
        secs = [x for x in secs if x is not None]
        return round(sum(secs) / len(secs), 3) if secs else None


def paired(method: list[float], baseline: list[float], resamples: int = 2000) -> dict[str, Any]:
    """Per-question comparison on the same questions: wins / ties / losses, the mean
    difference and its 95% bootstrap interval (seeded), so a small gap is read as such."""
    diff = [a - b for a, b in zip(method, baseline, strict=True)]
    rng = random.Random(0)
    n = len(diff)
    means = sorted(sum(diff[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return {
        "wins": sum(d > 1e-12 for d in diff),
        "ties": sum(abs(d) <= 1e-12 for d in diff),
        "losses": sum(d < -1e-12 for d in diff),
        "mean_diff": round(sum(diff) / n, 4),
        "ci95": [round(means[int(0.025 * resamples)], 4), round(means[int(0.975 * resamples) - 1], 4)],
    }


def make_model(args: argparse.Namespace) -> tuple[Model | None, str]:
    """The hallucination model and a name for the report (None: no LLM)."""
    if args.no_llm:
        return None, "none"
    try:
        if args.base_url:
            from blendsql.models import OpenAI

            m = OpenAI(args.model_name, base_url=args.base_url)
            return m, f"openai-compatible:{args.model_name}@{args.base_url}"
        from blendsql.models import LlamaCpp

        lm = LlamaCpp(args.model, n_threads=args.threads)
        return lm, lm.identity()
    except (ImportError, AttributeError) as e:
        print(f"no hallucination model available ({e}); running without LLM", file=sys.stderr)
        return None, f"unavailable: {e}"


def evaluate(name: str, elements: list[str], questions: list[dict[str, Any]],
             embedder: Embedder, hcache: HallucinationCache,
             cache_dir: Path | None, ablations: bool = False) -> dict[str, Any]:
    """Recall@B of every method on one union schema."""
    model = hcache.model
    t0 = time.perf_counter()
    selector = SchemaSelector(elements, embedder, cache_dir=cache_dir, cache=True)
    build_s = time.perf_counter() - t0
    bm25 = BM25Index(elements)
    methods = ["cosine", "bm25", "crush_no_llm"]
    variants: dict[str, SchemaSelector] = {}
    if model is not None:
        methods += ["crush", "crush_greedy"]
        if ablations:  # the collective selection with one part switched off
            for label, changes in ABLATIONS.items():
                variants[label] = copy.copy(selector)
                variants[label].__dict__.update(changes)
            methods += list(variants)
    per_q: dict[str, dict[int, list[float]]] = {m: {b: [] for b in BUDGETS} for m in methods}
    select_s = 0.0
    examples = []
    for k, q in enumerate(questions):
        bs = bm25.scores(q["question"])
        hall = hcache.get(q["question"]) if model is not None else []
        t1 = time.perf_counter()
        sims = selector.similarities(q["question"], hall)  # row 0: the bare question
        embed_s = time.perf_counter() - t1
        for b in BUDGETS:
            picks = {
                "cosine": [elements[i] for i in top_k(sims[0], b)],
                "bm25": [elements[i] for i in top_k(bs, b)],
                "crush_no_llm": selector.select_from_similarities(sims[:1], b),
            }
            if model is not None:
                t1 = time.perf_counter()
                picks["crush"] = selector.select_from_similarities(sims, b)
                select_s += time.perf_counter() - t1 + embed_s / len(BUDGETS)
                picks["crush_greedy"] = selector.select_from_similarities(sims, b, "greedy")
                for label, variant in variants.items():
                    picks[label] = variant.select_from_similarities(sims, b)
            for m in methods:
                per_q[m][b].append(recall(picks[m], q["gold"]))
        if k < 3:
            examples.append({"question": q["question"], "gold": q["gold"], "hallucinated": hall})
        print(f"{name} {k + 1}/{len(questions)}", file=sys.stderr, flush=True)
    n = len(questions)
    return {
        "elements": len(elements),
        "questions": n,
        "index_build_seconds": round(build_s, 2),
        "recall": {m: {f"@{b}": round(sum(per_q[m][b]) / n, 4) for b in BUDGETS}
                   for m in methods},
        "paired_vs_cosine": {m: {f"@{b}": paired(per_q[m][b], per_q["cosine"][b])
                                 for b in (10, 20)} for m in methods if m != "cosine"},
        "seconds_per_question": {
            "hallucination": hcache.mean_seconds(questions),
            "crush_probe_embed_and_select_per_budget": round(select_s / (n * len(BUDGETS)), 4)
            if model is not None else None,
        },
        "examples": examples,
    }


def time_ndap(data: Path, questions: list[dict[str, Any]], embedder: Embedder,
              hcache: HallucinationCache, cache_dir: Path | None, n: int) -> dict[str, Any]:
    """Index build and per-question selection time on the 18,891-column schema."""
    ndap = json.loads((data / "crush4sql" / "ndap_super.json").read_text())
    elements, tables = [], []
    for table in ndap.values():
        for col in table["columns"]:
            elements.append(f"{table['name']}.{col}")
            tables.append(table["name"])
    t0 = time.perf_counter()
    embedder.embed(["warm up"])  # load the model outside the index timing
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    selector = SchemaSelector(elements, embedder, tables=tables, cache_dir=cache_dir,
                              cache=True)
    build_s = time.perf_counter() - t0
    sel = []
    for q in questions[:n]:
        hall = hcache.get(q["question"])
        t2 = time.perf_counter()
        selector.select_with_probes(q["question"], hall, 100)
        sel.append(time.perf_counter() - t2)
    return {
        "elements": len(elements),
        "tables": len(ndap),
        "questions_timed": len(sel),
        "question_source": "spider dev (report split); ndap_super.json has no questions",
        "embedder_load_seconds": round(load_s, 2),
        "index_build_seconds": round(build_s, 2),
        "index_build_note": "embeddings of the schema are cached on disk; a cached build only loads them",
        "hallucination_seconds_mean": hcache.mean_seconds(questions[:n]),
        "select_seconds_mean_B100": round(sum(sel) / len(sel), 4),
    }


def write(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--limit", type=int, default=100, help="questions per set (seeded sample)")
    ap.add_argument("--split", choices=["report", "dev"], default="report",
                    help="spider: outside dev_ids.txt (report) or inside (dev, tuning); "
                         "bird: question_id %% 10 != 0 (report) or == 0 (dev)")
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--model", default=None, help="GGUF path for LlamaCpp (default: embedded)")
    ap.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default", help="model name at --base-url")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads")
    ap.add_argument("--no-llm", action="store_true", help="skip hallucination")
    ap.add_argument("--ndap-questions", type=int, default=10)
    ap.add_argument("--sets", default="spider,bird,ndap")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="embedding cache (default: $BLENDSQL_CACHE_DIR or the user cache dir)")
    ap.add_argument("--hallucinations", type=Path,
                    default=ROOT / "benchmarks" / "results" / "schema_retrieval_hallucinations.jsonl",
                    help="JSONL cache of model hallucinations (keyed by model + prompt)")
    ap.add_argument("--generate-only", action="store_true",
                    help="only fill the hallucination cache for the sampled questions")
    ap.add_argument("--ablations", action="store_true",
                    help="also score the collective selection with parts switched off")
    ap.add_argument("--cached-only", action="store_true",
                    help="score only the sampled questions whose hallucination is cached")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "schema_retrieval.json")
    args = ap.parse_args()

    embedder: Embedder = SentenceTransformerEmbedder() if args.embedder == "minilm" else HashingEmbedder()
    model, model_name = make_model(args)
    hcache = HallucinationCache(args.hallucinations, model, model_name)
    sets = args.sets.split(",")
    result: dict[str, Any] = {
        "benchmark": "CRUSH4SQL large-schema retrieval, recall@B of gold columns",
        "command": "python " + " ".join(sys.argv),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
                   f"python {platform.python_version()}",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hallucination_model": model_name,
        "hallucination_cache": str(args.hallucinations) if model is not None else None,
        "embedder": embedder.identity(),
        "limit": args.limit,
        "split": args.split,
        "sources": "Spider dev (Yu et al. 2018), BIRD dev and union schemas via CRUSH4SQL "
                   "(Kothyari et al. 2023, iMayK/CRUSH4SQL)",
        "sets": {},
    }
    spider_qs: list[dict[str, Any]] = []
    bird_qs: list[dict[str, Any]] = []
    if "spider" in sets or "ndap" in sets:
        all_qs, dropped = spider_questions(args.data, args.split)
        spider_qs = random.Random(0).sample(all_qs, min(args.limit, len(all_qs)))
    if "bird" in sets:
        bird_all, bdropped = bird_questions(args.data, args.split)
        bird_qs = random.Random(1).sample(bird_all, min(args.limit, len(bird_all)))
    if args.cached_only and model is not None:
        spider_qs = [q for q in spider_qs if hcache.key(q["question"]) in hcache.rows]
        bird_qs = [q for q in bird_qs if hcache.key(q["question"]) in hcache.rows]
        result["cached_only"] = True
    if args.generate_only:
        todo = spider_qs * ("spider" in sets) + bird_qs
        for k, q in enumerate(todo):
            hcache.get(q["question"])
            print(f"hallucinate {k + 1}/{len(todo)}", file=sys.stderr, flush=True)
        print(f"generated {hcache.generated} in {hcache.seconds:.0f} s")
        return
    if "spider" in sets:
        res = evaluate("spider", load_union(args.data / "crush4sql" / "spider_UNION.txt"),
                       spider_qs, embedder, hcache, args.cache_dir, args.ablations)
        res["split"] = (f"spider dev, {args.split} split ({len(all_qs)} usable, {dropped} "
                        f"dropped), seeded sample of {len(spider_qs)}")
        result["sets"]["spider_UNION"] = res
        write(args.out, result)  # partial results survive an interrupted run
    if "bird" in sets:
        res = evaluate("bird", load_union(args.data / "crush4sql" / "bird_UNION.txt"),
                       bird_qs, embedder, hcache, args.cache_dir, args.ablations)
        res["split"] = (f"bird_dev.json, {args.split} split (dev: question_id % 10 == 0; "
                        f"{len(bird_all)} usable, {bdropped} dropped), seeded sample of "
                        f"{len(bird_qs)}")
        result["sets"]["bird_UNION"] = res
        write(args.out, result)
    if "ndap" in sets:
        result["sets"]["ndap_super_timing"] = time_ndap(
            args.data, spider_qs, embedder, hcache, args.cache_dir, args.ndap_questions)
    write(args.out, result)
    print(json.dumps({k: v.get("recall", v) for k, v in result["sets"].items()}, indent=1))


if __name__ == "__main__":
    main()
