"""One command per published number: ``python -m benchmarks NAME``.

Each entry below names the benchmark behind numbers that README.md or
benchmarks/README.md publish: the script(s) and arguments that made them, the
results file they land in, and where in it each number is. Running an entry
builds or reuses what it needs (peer venvs, llama-server: ``benchmarks/envs.py``),
checks the data and the evaluation model, runs the commands from the repository
root, then prints each number beside the recorded one (the results file as
committed, read before the run overwrites it)::

    python -m benchmarks --list               # every name, what it backs, how long, what it needs
    python -m benchmarks call-economy         # run it; new numbers beside the recorded ones
    python -m benchmarks spider --dry-run     # the commands, without running them
    python -m benchmarks spider --recorded    # the recorded numbers only

A run recomputes every number: the item files a resumable script would resume from
(its ``.jsonl`` ``--out`` files) are moved aside (to ``NAME.previous``) when they are
the recorded run's, that is tracked by git and unchanged since HEAD; an item file of
a run of yours that stopped (changed or untracked) is resumed. ``--fresh`` moves
those aside too, ``--reuse`` moves nothing (items already in any --out file, the
recorded ones included, are not run again).

Inputs found through the environment, never through a path of a machine:
``$BLENDSQL_EVAL_MODEL`` (the evaluation model GGUF; ``export
BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)`` fetches it),
``$BLENDSQL_BENCH_DATA`` (the benchmark data, default ``../shared/data`` beside
the checkout), ``$BLENDSQL_CACHE_DIR`` (where ``benchmarks/envs.py`` builds).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL_ENV = "BLENDSQL_EVAL_MODEL"  # = benchmarks.protocol.MODEL_ENV
DATA_ENV = "BLENDSQL_BENCH_DATA"  # = benchmarks.protocol.DATA_ENV


@dataclass(frozen=True)
class Number:
    """One published number: a label and where it is in the results JSON.

    ``path`` is dotted keys (``totals.ours_over_naive``); a list is entered by
    index (``batched.0``) or by a field (``rows[id=llm_map_limit]``). ``fn``
    computes it from the whole JSON instead.
    """

    label: str
    path: str = ""
    fn: Callable[[Any], Any] | None = None

    def read(self, data: Any) -> Any:
        if self.fn is not None:
            return self.fn(data)
        return lookup(data, self.path)


@dataclass(frozen=True)
class Bench:
    """A named benchmark: commands run in groups (the commands of one group side by side,
    as the shards of a quality run), the results file, the numbers, what it needs."""

    name: str
    what: str
    readme: str  # where the numbers are published
    steps: tuple[tuple[tuple[str, ...], ...], ...]
    results: str  # repository-relative results JSON
    numbers: tuple[Number, ...]
    takes: str
    needs: tuple[str, ...] = ()  # "eval-model", "data:<folder>", "module:<name>"
    pending: bool = False  # published as "not yet measured again": no recorded number
    note: str = ""

    def commands(self) -> list[tuple[str, ...]]:
        return [c for group in self.steps for c in group]

    def requirements(self) -> list[str]:
        """``needs`` plus what the placeholders in the arguments ask for."""
        out = list(self.needs)
        for command in self.commands():
            for arg in command:
                m = PLACEHOLDER.fullmatch(arg)
                if m:
                    out.append({"eval_model": "eval-model",
                                "llama_server": "llama-server"}.get(m.group(1), m.group(1)))
        return list(dict.fromkeys(out))


PLACEHOLDER = re.compile(r"\{(eval_model|llama_server|peer:[\w.-]+)\}")
_TOKEN = re.compile(r"\[([^=\]]+)=([^\]]*)\]|([^.\[\]]+)")


def lookup(data: Any, path: str) -> Any:
    """The value at ``path`` (see :class:`Number`); KeyError when it is not there."""
    cur = data
    for sel_key, sel_value, key in _TOKEN.findall(path):
        if sel_key:
            if not isinstance(cur, list):
                raise KeyError(path)
            hits = [x for x in cur if isinstance(x, dict) and str(x.get(sel_key)) == sel_value]
            if not hits:
                raise KeyError(path)
            cur = hits[0]
        elif isinstance(cur, list) and key.isdigit() and int(key) < len(cur):
            cur = cur[int(key)]
        elif isinstance(cur, dict) and key in cur:
            cur = cur[key]
        else:
            raise KeyError(path)
    return cur


def cmd(script: str, *args: str) -> tuple[str, ...]:
    return (script, *args)


def one(*commands: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """One group: its commands run side by side."""
    return tuple(commands)


def _accuracies(prefix: str, modes: Sequence[str], leaf: str = "accuracy") -> tuple[Number, ...]:
    return tuple(Number(f"{m} accuracy", f"{prefix}.{m}.{leaf}") for m in modes)


PITCHER = ("SELECT name, position, school FROM w WHERE "
           "{{LLMMap('Is this position a pitcher?', 'w::position')}} = TRUE")
ENGINE_QUERIES = ("map_group_by", "map_in_select_list", "qa_options", "plain_filter_then_map",
                  "map_where_low_cardinality", "map_where_unique_col", "map_select_limit")
SEMBENCH_MODES = ("default", "scored", "contextual", "labels", "claim", "examples", "cascade")
SEMBENCH_REPORT_MODES = ("default", "labels", "examples", "cascade")
THROUGHPUT = ("--n", "1000", "--parallel", "4", "--rounds", "2", "--batch", "4", "8",
              "--embedded-n", "100", "--embedded-chunk", "20", "--embedded-max-seconds", "180")


def _shards(script: str, out: str, *args: str, k: int = 2) -> tuple[tuple[str, ...], ...]:
    return tuple(cmd(script, *args, "--shard", f"{i}/{k}", "--out",
                     f"benchmarks/results/{out}_{i}.jsonl") for i in range(1, k + 1))


def _parts(out: str, k: int = 2) -> tuple[str, ...]:
    return tuple(f"benchmarks/results/{out}_{i}.jsonl" for i in range(1, k + 1))


ABLATIONS = ("parser_no_examples", "parser_no_retry")


def _sembench_numbers(modes: Sequence[str]) -> tuple[Number, ...]:
    return (*(Number(f"{m} per-review label accuracy", f"modes.{m}.review_accuracy.accuracy")
              for m in modes),
            *(Number(f"{m} mean F1 (Q1, Q2, Q5-Q7)", f"modes.{m}.mean_f1") for m in modes),
            *(Number(f"{m} mean relative error (Q3, Q4, Q8)", f"modes.{m}.mean_relative_error")
              for m in modes))


SEMBENCH_QUERIES = tuple(f"Q{i}" for i in range(1, 11))
SEMBENCH_METRICS = {"Q1": "F1", "Q2": "F1", "Q3": "relative error", "Q4": "relative error",
                    "Q5": "F1", "Q6": "F1", "Q7": "F1", "Q8": "relative error",
                    "Q9": "Spearman", "Q10": "Spearman"}  # = sembench_peers.METRIC_NAMES
# the queries every system ran, over which benchmarks/README.md sums calls and tokens
SEMBENCH_COMMON = ("Q1", "Q2", "Q3", "Q4", "Q8", "Q9", "Q10")


def _peer_stem(peer: str) -> str:
    return f"sembench_{peer.replace('.', '').replace('-', '')}_report"


def _summed(field: str, queries: Sequence[str]) -> Callable[[Any], Any]:
    return lambda d: int(sum(d["queries"][q][field] for q in queries))


def _peer_numbers(scored: Sequence[str]) -> tuple[Number, ...]:
    """A peer's row of the SemBench table: each scored query's mean, then the model calls
    and prompt tokens summed over the queries every system ran."""
    span = ", ".join(SEMBENCH_COMMON)
    return (*(Number(f"{q} {SEMBENCH_METRICS[q]}", f"queries.{q}.mean") for q in scored),
            *(Number(f"{q} model calls", f"queries.{q}.model_calls")
              for q in scored if q in ("Q5", "Q6", "Q7")),
            Number(f"model calls ({span})", fn=_summed("model_calls", SEMBENCH_COMMON)),
            Number(f"prompt tokens ({span})", fn=_summed("prompt_tokens", SEMBENCH_COMMON)))


def _dialogue_steps(dataset: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """SParC / CoSQL: both shards of the three modes, the ablations on shard 1, the summary."""
    common = ("--dataset", dataset, "--questions", "150", "--threads", "1")
    ablation = f"benchmarks/results/{dataset}_ablation_1.jsonl"
    return (_shards("conversation.py", dataset, *common, "--modes", "parser,direct_fewshot,direct"),
            one(cmd("conversation.py", *common, "--modes", ",".join(ABLATIONS), "--shard", "1/2",
                    "--out", ablation)),
            one(cmd("conversation.py", "--dataset", dataset, "--combine", *_parts(dataset), ablation,
                    "--out", f"benchmarks/results/{dataset}.json")))


BENCHES: tuple[Bench, ...] = (
    Bench("demo-margins", "logit margins of the README demo query's decision, both CPU kernel "
          "paths; the 13 candidate queries; its question over all 18 schools",
          "README.md (Why this answer holds)",
          (one(cmd("demo_margins.py", "--sweep", "--candidates")),),
          "benchmarks/results/demo_margins.json",
          (Number("margin, extra buffer types on", "paths.extra_bufts=on.min_margin"),
           Number("margin, extra buffer types off", "paths.extra_bufts=off.min_margin"),
           Number("candidate queries", fn=lambda d: len(d["candidates"])),
           Number("candidates right", fn=lambda d: sum(bool(c["right"]) for c in d["candidates"])),
           Number("candidates right with every margin >= 1",
                  fn=lambda d: sum(bool(c["right"]) and c["min_margin"] >= 1 for c in d["candidates"])),
           Number("sweep: schools right", "sweep.right"),
           Number("sweep: right with margin >= 1", "sweep.right_with_margin_ge_1"),
           Number("sweep: schools", "sweep.of")),
          "~15 min (embedded model)"),
    Bench("demo-margins-pitcher", "the previous demo query's margin (the near tie)",
          "README.md (Why this answer holds)",
          (one(cmd("demo_margins.py", "--query", PITCHER, "--out",
                   "benchmarks/results/demo_margins_pitcher.json")),),
          "benchmarks/results/demo_margins_pitcher.json",
          (Number("margin of 'Pitcher'", "paths.extra_bufts=on.min_margin"),),
          "~3 min (embedded model)"),
    Bench("spider", "Spider dev report split, n = 200 over all 20 databases: Parser beside "
          "direct, direct_fewshot and the ablations", "README.md, benchmarks/README.md (Spider dev)",
          (_shards("spider.py", "spider", "--n", "200"),
           _shards("spider.py", "spider_ablation", "--n", "100", "--modes",
                   "parser_no_examples,parser_no_retry"),
           one(cmd("spider.py", "--combine", *_parts("spider"), *_parts("spider_ablation")))),
          "benchmarks/results/spider.json",
          (*_accuracies("modes", ("parser", "direct_fewshot", "direct", "parser_no_examples",
                                  "parser_no_retry")),
           Number("parser minus direct_fewshot", "modes.direct_fewshot.parser_vs_this.difference")),
          "~3 h (2 processes)", ("eval-model", "data:spider")),
    Bench("spider-duckdb", "Spider dev report split, the first 100 dealt questions: the Parser on "
          "SQLite beside the Parser on DuckDB copies", "benchmarks/README.md (The Parser on DuckDB)",
          (_shards("spider.py", "spider_duckdb", "--n", "100", "--modes", "parser,parser_duckdb"),
           one(cmd("spider.py", "--combine", *_parts("spider_duckdb"), "--out",
                   "benchmarks/results/spider_duckdb.json"))),
          "benchmarks/results/spider_duckdb.json",
          (*_accuracies("modes", ("parser", "parser_duckdb")),
           Number("parser minus parser_duckdb", "modes.parser_duckdb.parser_vs_this.difference")),
          "~1.5 h (2 processes)", ("eval-model", "data:spider")),
    Bench("sparc", "SParC report split, 150 questions: Conversation beside direct_fewshot and "
          "direct", "benchmarks/README.md (SParC)",
          _dialogue_steps("sparc"),
          "benchmarks/results/sparc.json",
          (*_accuracies("modes", ("parser", "direct_fewshot", "direct", *ABLATIONS),
                        "question_accuracy.accuracy"),
           Number("parser minus direct_fewshot", "modes.direct_fewshot.parser_vs_this.difference")),
          "~1 h (2 processes)", ("eval-model", "data:sparc", "data:spider")),
    Bench("cosql", "CoSQL report split, 150 questions: Conversation beside direct_fewshot and "
          "direct", "benchmarks/README.md (CoSQL)",
          _dialogue_steps("cosql"),
          "benchmarks/results/cosql.json",
          (*_accuracies("modes", ("parser", "direct_fewshot", "direct", *ABLATIONS),
                        "question_accuracy.accuracy"),
           Number("parser minus direct_fewshot", "modes.direct_fewshot.parser_vs_this.difference")),
          "~1 h (2 processes)", ("eval-model", "data:cosql", "data:spider")),
    Bench("splash", "SPLASH test, 150 items: correction with the feedback, re-parse, combined",
          "README.md, benchmarks/README.md (SPLASH)",
          (_shards("splash.py", "splash", "--n", "150"),
           one(cmd("splash.py", "--combine", *_parts("splash")))),
          "benchmarks/results/splash.json",
          _accuracies("scores.all.execution", ("edit", "fresh", "combined")),
          "~2.5 h (2 processes)", ("eval-model", "data:splash", "data:spider")),
    Bench("hybridqa", "HybridQA report questions, 150: program + fallback, program alone, "
          "end-to-end", "README.md, benchmarks/README.md (HybridQA)",
          (_shards("hybridqa.py", "hybridqa_report", "--n", "150"),
           one(cmd("hybridqa.py", "--combine", *_parts("hybridqa_report"), "--out",
                   "benchmarks/results/hybridqa_report.jsonl"))),
          "benchmarks/results/hybridqa_report.summary.json",
          _accuracies("modes", ("blendsql_fallback", "blendsql", "end_to_end")),
          "~1.5 h (2 processes)", ("eval-model", "data:hybridqa")),
    Bench("sembench-tune", "SemBench's movie queries Q1-Q10 on the TUNE movies, in every "
          "LLMMap decision mode side by side (what chose the defaults)",
          "benchmarks/README.md (SemBench)",
          (_shards("sembench.py", "sembench_tune", "--split", "tune", "--threads", "1"),
           one(cmd("sembench.py", "--combine", *_parts("sembench_tune"), "--out",
                   "benchmarks/results/sembench_tune.json"))),
          "benchmarks/results/sembench_tune.json",
          _sembench_numbers(SEMBENCH_MODES),
          "~1 h (2 processes; ~4,500 model calls)", ("eval-model", "data:sembench")),
    Bench("sembench", "SemBench's movie queries Q1-Q10 on the report movies: the default "
          "beside label framing, threshold from examples and the cascade from SmolLM2",
          "README.md, benchmarks/README.md (SemBench)",
          (_shards("sembench.py", "sembench_report", "--split", "report", "--threads", "1",
                   "--modes", ",".join(SEMBENCH_REPORT_MODES)),
           one(cmd("sembench.py", "--combine", *_parts("sembench_report"), "--out",
                   "benchmarks/results/sembench_report.json"))),
          "benchmarks/results/sembench_report.json",
          _sembench_numbers(SEMBENCH_REPORT_MODES),
          "~1 h (2 processes; ~3,400 model calls)", ("eval-model", "data:sembench")),
    *(Bench(f"sembench-{peer.replace('.', '')}", f"SemBench's report instances through {peer} behind the same "
            "llama.cpp server, metered", "README.md, benchmarks/README.md (SemBench)",
            (one(cmd("sembench_peers.py", "--peer", peer, "--queries", ",".join(SEMBENCH_QUERIES),
                     "--out", f"benchmarks/results/{_peer_stem(peer)}.jsonl")),),
            f"benchmarks/results/{_peer_stem(peer)}.json",
            _peer_numbers(scored), takes, ("eval-model", "data:sembench", f"peer:{peer}"))
      # the queries scored in the committed results (Palimpzest 0.7 has no semantic join:
      # Q5-Q7 are run and recorded as not applicable); times from the recorded seconds
      for peer, scored, takes in (
          ("lotus", SEMBENCH_QUERIES, "~2.5 h (Q5-Q7: one call per pair of reviews)"),
          ("blendsql-0.1.28", SEMBENCH_QUERIES, "~20 min"),
          ("palimpzest", tuple(q for q in SEMBENCH_QUERIES if q not in ("Q5", "Q6", "Q7")),
           "~1 h 40 min"))),
    Bench("call-economy", "values passed per query: ours vs naive vs blendsql 0.1.28 vs the "
          "minimal set (27 queries), and the embedded-model subset",
          "benchmarks/README.md (Call economy)",
          (one(cmd("call_economy.py")),),
          "benchmarks/results/call_economy.json",
          (Number("queries", "totals.queries"),
           Number("naive values passed", "totals.naive_values_passed"),
           Number("0.1.28 values passed", "totals.blendsql_0128_values_passed"),
           Number("ours values passed", "totals.ours_values_passed"),
           Number("minimal values", "totals.minimal_values"),
           Number("ours / naive", "totals.ours_over_naive"),
           Number("llm_map_limit model calls, ours", "model_subset.rows[id=llm_map_limit].model_calls"),
           Number("llm_map_limit model calls, 0.1.28",
                  "model_subset.blendsql_0128.rows[id=llm_map_limit].num_generation_calls")),
          "~3 min (+ ~5 min once for the 0.1.28 venvs)",
          ("peer:blendsql-0.1.28", "peer:blendsql-0.1.28-latest", "data:hybridqa")),
    Bench("call-economy-counts", "the deterministic part of call-economy (the targets table); "
          "keeps the embedded-model subset already in the file",
          "benchmarks/README.md (Call economy: Targets)",
          (one(cmd("call_economy.py", "--no-model")),),
          "benchmarks/results/call_economy.json",
          (Number("ours values passed", "totals.ours_values_passed"),
           Number("naive values passed", "totals.naive_values_passed"),
           Number("0.1.28 values passed", "totals.blendsql_0128_values_passed"),
           Number("ours / naive", "totals.ours_over_naive")),
          "~1 min (+ ~5 min once for the 0.1.28 venvs)",
          ("peer:blendsql-0.1.28", "peer:blendsql-0.1.28-latest", "data:hybridqa")),
    Bench("engine-overhead", "engine CPU time over plain sqlite3 with zero-cost ingredients, "
          "100k-row table; blendsql 0.1.28 on the same queries",
          "benchmarks/README.md (Latest numbers: Engine overhead)",
          (one(cmd("engine_overhead.py", "--repeat", "9", "--blendsql-0128",
                   "{peer:blendsql-0.1.28}")),),
          "benchmarks/results/engine_overhead.json",
          tuple(Number(f"{q} (CPU ratio)", f"results.generated_100k[query={q}].ratio_cpu")
                for q in ENGINE_QUERIES),
          "~15 min"),
    Bench("model-overhead", "per-value latency of LlamaCpp.generate vs llama-cpp-python directly",
          "benchmarks/README.md (Latest numbers: Model overhead)",
          (one(cmd("model_overhead.py", "--n", "20", "--warmup", "2", "--threads", "2")),),
          "benchmarks/results/model_overhead.json",
          (Number("wrapper's own work per value, s", "results.blendsql_llamacpp.own_work_median_s"),
           Number("own work, % of a direct call",
                  "results.blendsql_llamacpp.own_work_pct_of_direct_median"),
           Number("LLMMap through the engine, s / value", "llmmap_through_engine.engine_per_value_s"),
           Number("same requests, plain calls, s / value",
                  "llmmap_through_engine.direct_same_requests_per_value_s")),
          "~3 min (embedded model)"),
    Bench("guidance-vs-gbnf", "per-value latency: guidance adapter over the GBNF path",
          "benchmarks/README.md (Latest numbers: Guidance vs GBNF)",
          (one(cmd("guidance_vs_gbnf.py", "--n", "8", "--threads", "1")),),
          "benchmarks/results/guidance_vs_gbnf.json",
          (Number("guidance / GBNF, median per value", "median_ratio_vs_gbnf.guidance_llamacpp"),),
          "~5 min (embedded model)", ("module:guidance",)),
    Bench("lazy-limit", "values passed on a 1000-row LIMIT 3 query: full plan, lazy, BM25 prefilter",
          "benchmarks/README.md (Latest numbers: Lazy LIMIT)",
          (one(cmd("lazy_limit.py")),),
          "benchmarks/results/lazy_limit.json",
          (Number("full plan", "results.answer_limit3.full.values_passed"),
           Number("lazy", "results.answer_limit3.lazy.values_passed"),
           Number("BM25 prefilter", "results.answer_limit3.prefilter_bm25.values_passed")),
          "seconds"),
    Bench("schema-retrieval", "CRUSH4SQL large-schema retrieval, recall@10/@20, cosine vs CRUSH, "
          "Spider and BIRD unions (hallucinations by the evaluation model, cached in results/)",
          "benchmarks/README.md (Latest numbers: Schema retrieval)",
          (one(cmd("schema_retrieval.py", "--model", "{eval_model}", "--threads", "1",
                   "--ablations", "--out", "benchmarks/results/schema_retrieval_qwen.json")),),
          "benchmarks/results/schema_retrieval_qwen.json",
          tuple(Number(f"{s} {m} {b}", f"sets.{s}_UNION.recall.{m}.{b}")
                for s in ("spider", "bird") for m in ("cosine", "crush") for b in ("@10", "@20")),
          "~10 min with the cached hallucinations (~40 min without)",
          ("data:spider", "data:crush4sql", "module:sentence_transformers"),
          note="embeddings: pip install -e '.[embeddings]' (a CPU torch first)"),
    Bench("backend-overhead", "one map query on SQLite, DuckDB and PostgreSQL vs the backend's "
          "own query with the function as a UDF, 200k rows",
          "benchmarks/README.md (Backend overhead)",
          (one(cmd("backend_overhead.py", "--rows", "200000", "--repeat", "3")),),
          "benchmarks/results/backend_overhead.json",
          tuple(Number(f"{b} engine / baseline", f"backends.{b}.ratio")
                for b in ("sqlite", "duckdb", "postgres")),
          "~3 min", note="PostgreSQL from Debian's postgresql-15 (skipped without it)"),
    Bench("backend-overhead-10m", "the same on DuckDB with 10M rows",
          "benchmarks/README.md (Backend overhead)",
          (one(cmd("backend_overhead.py", "--rows", "10000000", "--repeat", "3", "--backends",
                   "duckdb")),),
          "benchmarks/results/backend_overhead_10000000.json",
          (Number("duckdb engine / baseline", "backends.duckdb.ratio"),),
          "~5 min"),
    Bench("model-throughput", "LLMMap values/s through llama-server (4 slots): engine vs a "
          "plain concurrent client vs blendsql 0.1.28; values per prompt; embedded threads",
          "benchmarks/README.md (Model throughput)",
          (one(cmd("model_throughput.py", *THROUGHPUT, "--server-bin", "{llama_server}",
                   "--blendsql-0128", "{peer:blendsql-0.1.28}")),),
          "benchmarks/results/model_throughput.json",
          (Number("client values/s (median)", "summary.client_values_per_s"),
           Number("engine values/s (median)", "summary.engine_values_per_s"),
           Number("engine / client", "summary.engine_over_client"),
           Number("k=4 prompt tokens / value", "summary.batched[values_per_prompt=4].prompt_tokens_per_value"),
           Number("k=4 agreement", "summary.batched[values_per_prompt=4].agreement_with_one_per_prompt"),
           Number("k=8 prompt tokens / value", "summary.batched[values_per_prompt=8].prompt_tokens_per_value"),
           Number("k=8 agreement", "summary.batched[values_per_prompt=8].agreement_with_one_per_prompt"),
           Number("0.1.28 values/s", "summary.blendsql_0128_values_per_s"),
           Number("engine / 0.1.28", "summary.engine_over_blendsql_0128"),
           Number("0.1.28 agreement with the engine", "summary.blendsql_0128_agrees_with_engine"),
           Number("embedded before, values/s", "summary.embedded.before.values_per_s"),
           Number("embedded after, values/s", "summary.embedded.after.values_per_s")),
          "~1 h (+ ~30 min once to build llama-server)"),
    Bench("model-throughput-qwen", "the same with the evaluation model, 100 values, no 0.1.28",
          "benchmarks/README.md (Model throughput)",
          (one(cmd("model_throughput.py", "--gguf", "{eval_model}", "--n", "100", "--parallel",
                   "4", "--rounds", "1", "--batch", "4", "8", "--embedded-n", "0", "--no-0128",
                   "--server-bin", "{llama_server}", "--out",
                   "benchmarks/results/model_throughput_qwen.json")),),
          "benchmarks/results/model_throughput_qwen.json",
          (Number("prompt tokens / value, one per prompt",
                  "summary.prompt_tokens_per_value_one_per_prompt"),
           Number("engine values/s", "summary.engine_values_per_s"),
           Number("client values/s", "summary.client_values_per_s"),
           Number("k=4 prompt tokens / value", "summary.batched[values_per_prompt=4].prompt_tokens_per_value"),
           Number("k=4 agreement", "summary.batched[values_per_prompt=4].agreement_with_one_per_prompt"),
           Number("k=8 prompt tokens / value", "summary.batched[values_per_prompt=8].prompt_tokens_per_value"),
           Number("k=8 agreement", "summary.batched[values_per_prompt=8].agreement_with_one_per_prompt")),
          "~10 min (+ ~30 min once to build llama-server)"),
    Bench("grammar-parse", "parse speed of blendsql.grammar.parse on the golden queries",
          "benchmarks/README.md (Other scripts)",
          (one(cmd("grammar_parse.py", "--repeat", "40")),),
          "benchmarks/results/grammar_parse.json",
          (Number("median over queries, CPU ms", "median_over_queries.parse_cpu_ms"),
           Number("typical query, CPU ms", "typical.parse_cpu_ms")),
          "~1 min"),
    Bench("llmmap-prefix-cache", "LLMMap prompt layout (value last vs first) and llama.cpp "
          "prefix caching", "benchmarks/README.md (Other scripts)",
          (one(cmd("llmmap_prefix_cache.py", "--n", "10")),),
          "benchmarks/results/llmmap_prefix_cache.json",
          (Number("value first: cached prompt tokens", "results.value_first.cached_prompt_tokens"),
           Number("value last: cached prompt tokens", "results.value_last.cached_prompt_tokens")),
          "~10 min (embedded model)"),
    Bench(
    "endpoint-scaling", "LLMMap values/s over a pool of 1, 2, 4 fake OpenAI-compatible "
    "endpoints (8 slots, 50 ms each): fraction of the summed limit, ratio to 1 endpoint; "
    "on SQLite and on Spark local[1] / local[2] with the requests answered on the executors; "
    "1M rows / 100k distinct values",
    "benchmarks/README.md (Endpoint scaling)",
    (one(cmd("endpoint_scaling.py", "--rows", "1000000", "--distinct", "100000", "--endpoints",
             "1", "2", "4", "--executors", "1", "2", "--executor-endpoints", "4", "--slots", "8",
             "--latency", "0.05", "--baseline-values", "20000", "--profile", "2000")),),
    "benchmarks/results/endpoint_scaling.json",
    (*(Number(f"{k} endpoint{'s' * (k > 1)}: values/s", f"summary.rows[endpoints={k}].values_per_s")
       for k in (1, 2, 4)),
     *(Number(f"{k} endpoint{'s' * (k > 1)}: fraction of the summed limit",
              f"summary.rows[endpoints={k}].fraction_of_limit") for k in (1, 2, 4)),
     Number("4 endpoints / 1 endpoint", "summary.targets.ratio_4_over_1"),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}, 4 endpoints: fraction of the "
              "summed limit", f"summary.executor_rows[executors={n}].fraction_of_limit")
       for n in (1, 2)),
     Number("answers right, each value asked once", "summary.all_correct")),
    "~32 min", ("module:pyspark",), note="the Spark rows need Java 17"),
    Bench("spark-driver-costs", "what one distinct value costs the driver on Spark (an instant "
          "model, requests on the executors): ms per value, driver CPU and memory; 1M values",
          "docs/SCALING.md (Measured on one machine)",
          (one(cmd("spark_driver_costs.py", "--rows", "2000000", "--distinct", "1000000")),),
          "benchmarks/results/spark_driver_costs.json",
          (Number("wall ms per value", "per_value_ms.wall"),
           Number("driver CPU ms per value", "per_value_ms.driver_cpu"),
           Number("driver memory MB per million values",
                  "driver_rss_mb.growth_per_million_values"),
           Number("right count, every request on the executors", "correct")),
          "~2 min", ("module:pyspark",), note="Spark needs Java 17"),
    Bench("readme-demo", "the README's first-run query: the CLI's cold wall time, the query's "
          "seconds, model calls and prompt tokens, the answer",
          "README.md (Try it)",
          (one(cmd("readme_demo.py", "--repeat", "3")),),
          "benchmarks/results/readme_demo.json",
          (Number("blendsql run, s (median of 3 cold processes)", "cli_seconds_median"),
           Number("query seconds (model load included)", "query_seconds"),
           Number("model calls", "model_calls"),
           Number("prompt tokens", "prompt_tokens"),
           Number("the README's row", "right")),
          "~1 min (embedded model)"),
    Bench("llama-servers", "LLMMap values/s through a pool of two real llama.cpp servers "
          "(llama_cpp.server, embedded model) against one, and one of two threads",
          "benchmarks/README.md (Two real llama.cpp servers against one)",
          (one(cmd("llama_servers.py", "--values", "200", "--rounds", "3")),),
          "benchmarks/results/llama_servers.json",
          (*(Number(f"{c}: values/s", f"summary.rows[config={c}].values_per_s")
             for c in ("1x1", "2x1", "1x2")),
           Number("2x1 / 1x1", "summary.ratios.2x1_over_1x1"),
           Number("2x1 / 1x2", "summary.ratios.2x1_over_1x2"),
           Number("every value answered once, counts agree", "summary.all_correct")),
          "~3 min", ("module:llama_cpp",)),
    Bench("plain-backends", "the plain part of a 10M-row query on Spark (local[2], local[1]) vs "
          "DuckDB vs SQLite, twin and BlendSQL",
          "benchmarks/README.md (Spark vs DuckDB vs SQLite)",
          (one(cmd("plain_backends.py", "--rows", "10000000", "--repeat", "3")),),
          "benchmarks/results/plain_backends.json",
          (*(Number(f"{b}: {k}", f"summary.rows[backend={b}].{k}")
             for b in ("sqlite", "duckdb", "spark_local2", "spark_local1")
             for k in ("plain_ms", "blendsql_ms")),
           Number("Spark local[2] / SQLite, plain", "summary.ratios.spark_local2/sqlite.plain"),
           Number("Spark local[2] / DuckDB, plain", "summary.ratios.spark_local2/duckdb.plain"),
           Number("same rows everywhere", "summary.same_rows_everywhere")),
          "~5 min", ("module:pyspark",), note="Spark needs Java 17"),
)

REGISTRY: dict[str, Bench] = {b.name: b for b in BENCHES}


# ------------------------------------------------------------------------------ running


def recorded_json(bench: Bench) -> Any:
    """The results file as committed (``git show HEAD:...``), else as it is on disk."""
    try:
        out = subprocess.run(["git", "show", f"HEAD:{bench.results}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0:
            return json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    path = ROOT / bench.results
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_numbers(bench: Bench, data: Any) -> list[Any]:
    out = []
    for n in bench.numbers:
        try:
            out.append(None if data is None else n.read(data))
        except (KeyError, IndexError, TypeError, ValueError):
            out.append(None)
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def number_table(bench: Bench, recorded: list[Any], now: list[Any] | None) -> str:
    width = max(len(n.label) for n in bench.numbers)
    lines = [f"{'number':{width}s}  {'recorded':>10s}" + ("  now" if now is not None else "")]
    for i, n in enumerate(bench.numbers):
        line = f"{n.label:{width}s}  {_shown(recorded[i]):>10s}"
        if now is not None:
            line += f"  {_shown(now[i])}"
        lines.append(line)
    return "\n".join(lines)


def _quote(arg: str) -> str:
    if "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return shlex.quote(arg)


def shell(command: Sequence[str]) -> str:
    return "python benchmarks/" + " ".join(_quote(a) for a in command)


def outputs(bench: Bench) -> list[Path]:
    """The ``--out`` files of the commands that resume from them (``.jsonl``), with the
    summaries beside them: what a run moves aside."""
    out = []
    for command in bench.commands():
        for flag, value in zip(command, command[1:], strict=False):
            if flag == "--out" and value.endswith(".jsonl"):
                path = ROOT / value
                out += [path, path.with_suffix(".json"), path.with_suffix(".summary.json")]
    return out


def _git_lines(*args: str) -> set[str] | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return set(out.stdout.splitlines()) if out.returncode == 0 else None


def committed(paths: Sequence[Path]) -> set[Path]:
    """The ``paths`` that are the recorded run's: tracked by git and unchanged since HEAD
    (none without git)."""
    rel = [p.relative_to(ROOT).as_posix() for p in paths if p.exists()]
    if not rel:
        return set()
    tracked = _git_lines("ls-files", "--", *rel)
    changed = _git_lines("diff", "--name-only", "--relative", "HEAD", "--", *rel)
    if tracked is None or changed is None:
        return set()
    return {ROOT / r for r in tracked - changed}


def to_move_aside(bench: Bench, mode: str) -> list[Path]:
    """What a run moves aside before it starts: ``"fresh"`` every item file there,
    ``"reuse"`` none, ``"default"`` the recorded run's (so the run recomputes the published
    numbers, and resumes only a run of yours that stopped)."""
    there = [p for p in outputs(bench) if p.exists()]
    if mode == "fresh":
        return there
    if mode == "reuse":
        return []
    recorded = committed(there)
    return [p for p in there if p in recorded]


def move_aside(paths: Sequence[Path]) -> None:
    for path in paths:
        aside = path.with_name(path.name + ".previous")
        path.replace(aside)
        print(f"moved {path.relative_to(ROOT)} to {aside.name}", flush=True)


def missing(bench: Bench) -> list[str]:
    """What ``bench`` needs that is not here (peers and llama-server are built instead)."""
    from benchmarks.protocol import data_dir

    out = []
    for need in bench.requirements():
        if need == "eval-model":
            raw = os.environ.get(MODEL_ENV)
            if not raw:
                out.append(f"${MODEL_ENV} is not set: export {MODEL_ENV}=$(python -m "
                           f"benchmarks.envs build eval-model)")
            elif not Path(raw).expanduser().is_file():
                out.append(f"${MODEL_ENV}={raw} is not a file")
        elif need.startswith("data:"):
            folder = data_dir() / need.split(":", 1)[1]
            if not folder.is_dir():
                out.append(f"no benchmark data at {folder} (set ${DATA_ENV})")
        elif need.startswith("module:"):
            module = need.split(":", 1)[1]
            if importlib.util.find_spec(module) is None:
                out.append(f"Python module {module} is not installed"
                           + (f" ({bench.note})" if bench.note else ""))
    return out


def resolve(arg: str) -> str:
    """A placeholder argument as a path, building what it names when missing."""
    from benchmarks import envs

    m = PLACEHOLDER.fullmatch(arg)
    if m is None:
        return arg
    what = m.group(1)
    if what == "eval_model":
        return str(Path(os.environ[MODEL_ENV]).expanduser())
    if what == "llama_server":
        return str(envs.llama_server())
    return str(envs.peer_python(what.split(":", 1)[1]))


def start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    """One benchmark process, its output straight to the terminal."""
    return subprocess.Popen(args, cwd=cwd)


def run_bench(bench: Bench, mode: str = "default") -> int:
    """Run ``bench`` and print the new numbers beside the recorded ones; ``mode`` says
    which item files are moved aside first (:func:`to_move_aside`)."""
    from benchmarks import envs

    gaps = missing(bench)
    if gaps:
        for gap in gaps:
            print(f"{bench.name}: {gap}", file=sys.stderr)
        return 2
    recorded = read_numbers(bench, recorded_json(bench))
    for need in bench.requirements():  # build or reuse before anything runs
        if need.startswith("peer:"):
            envs.peer_python(need.split(":", 1)[1])
        elif need == "llama-server":
            envs.llama_server()
    aside = to_move_aside(bench, mode)
    move_aside(aside)
    kept = [p for p in outputs(bench) if p.suffix == ".jsonl" and p.exists() and p not in aside]
    if kept:
        why = ("--reuse" if mode == "reuse" else
               "not the recorded run's (changed since HEAD or untracked): a run that stopped")
        print(f"{bench.name}: resumes from {', '.join(p.name for p in kept)} ({why}); items in "
              f"them are not run again; --fresh moves them aside", flush=True)
    t_all = time.monotonic()
    for group in bench.steps:
        commands = [[resolve(a) for a in c] for c in group]
        t0 = time.monotonic()
        procs = []
        for c in commands:
            print(f"$ {shell(c)}", flush=True)
            procs.append(start([sys.executable, str(ROOT / "benchmarks" / c[0]), *c[1:]], ROOT))
        codes = [p.wait() for p in procs]
        print(f"({len(commands)} command{'s' * (len(commands) > 1)} took "
              f"{time.monotonic() - t0:.0f} s)", flush=True)
        if any(codes):
            print(f"{bench.name}: a command exited {max(codes)}", file=sys.stderr)
            return max(codes) or 1
    now = read_numbers(bench, recorded_json_now(bench))
    print(f"\n{bench.name}: {bench.results} ({time.monotonic() - t_all:.0f} s in all)")
    print(number_table(bench, recorded, now))
    return 0


def recorded_json_now(bench: Bench) -> Any:
    try:
        return json.loads((ROOT / bench.results).read_text())
    except (OSError, ValueError):
        return None


def listing() -> str:
    lines = []
    for b in BENCHES:
        needs = ", ".join(b.requirements()) or "nothing outside the project venv"
        lines.append(f"{b.name}\n    {b.what}\n    published in: {b.readme}"
                     + ("  [not yet measured again]" if b.pending else "")
                     + f"\n    takes: {b.takes}; needs: {needs}\n    writes: {b.results}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks",
                                 description="Run the benchmark behind a published number and "
                                             "print the new number beside the recorded one.")
    ap.add_argument("name", nargs="?", help="a benchmark (see --list)")
    ap.add_argument("--list", action="store_true", help="every benchmark and what it needs")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--recorded", action="store_true", help="print the recorded numbers only")
    again = ap.add_mutually_exclusive_group()
    again.add_argument("--fresh", action="store_true",
                       help="move every --out file a resumable run would resume from aside "
                            "(to NAME.previous), also those of a run of yours that stopped "
                            "(by default only the recorded run's, tracked and unchanged, are)")
    again.add_argument("--reuse", action="store_true",
                       help="move nothing aside: items already in the --out files, the "
                            "recorded run's included, are not run again")
    args = ap.parse_args(argv)
    if args.list or not args.name:
        print(listing())
        return 0
    bench = REGISTRY.get(args.name)
    if bench is None:
        print(f"no benchmark {args.name!r}; one of: {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    if args.dry_run:
        for i, group in enumerate(bench.steps, 1):
            for c in group:
                print(f"[{i}] {shell(c)}" + ("  &" if len(group) > 1 else ""))
        print(f"needs: {', '.join(bench.requirements()) or 'nothing outside the project venv'}")
        mode = "fresh" if args.fresh else "reuse" if args.reuse else "default"
        aside = to_move_aside(bench, mode)
        if aside:
            print("moves aside first: " + ", ".join(p.relative_to(ROOT).as_posix() for p in aside))
        return 0
    if args.recorded:
        recorded = read_numbers(bench, recorded_json(bench))
        print(f"{bench.name}: {bench.results}"
              + (" (not yet measured again)" if bench.pending else ""))
        print(number_table(bench, recorded, None))
        return 0
    return run_bench(bench, "fresh" if args.fresh else "reuse" if args.reuse else "default")
