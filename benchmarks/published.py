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

A number is registered as a :class:`Number` of its benchmark wherever it is published,
prose included; ``tests/benchmarks/test_published.py`` checks that every figure in the
tables of benchmarks/README.md sits in a section naming ``python -m benchmarks NAME`` and is
one of that benchmark's recorded numbers, and that every number is found in its committed
results file.

Inputs found through the environment, never through a path of a machine:
``$BLENDSQL_EVAL_MODEL`` (the evaluation model GGUF; ``export
BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)`` fetches it),
``$BLENDSQL_BENCH_DATA`` (the benchmark data, default ``../shared/data`` beside
the checkout), ``$BLENDSQL_CACHE_DIR`` (where ``benchmarks/envs.py`` builds).
"""

from __future__ import annotations

import argparse
import dataclasses
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
    index (``batched.0``) or by fields (``rows[id=llm_map_limit]``,
    ``engine[backend=SQLite&endpoints=4]``). ``fn`` computes it from the whole JSON
    instead; with ``also`` (other repository-relative results files, ``.json`` or
    ``.jsonl``: a list of its rows) ``fn`` gets them too, ``fn(data, *also)``, read
    the same way as the results file (as committed for the recorded number, as on disk
    after a run).
    """

    label: str
    path: str = ""
    fn: Callable[..., Any] | None = None
    also: tuple[str, ...] = ()

    def read(self, data: Any, load: Callable[[str], Any] | None = None) -> Any:
        if self.fn is not None:
            if self.also:
                others = [(load or committed_file)(rel) for rel in self.also]
                if any(o is None for o in others):
                    raise KeyError(f"{self.label}: {self.also}")
                return self.fn(data, *others)
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
    # ``python -m benchmarks NAME --quick``: the same measurement at a smaller size (its
    # README section says which size the recorded numbers are from)
    quick: tuple[tuple[tuple[str, ...], ...], ...] = ()
    quick_takes: str = ""

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


def _selected(item: Any, conditions: list[tuple[str, str]]) -> bool:
    return isinstance(item, dict) and all(str(item.get(k)) == v for k, v in conditions)


def lookup(data: Any, path: str) -> Any:
    """The value at ``path`` (see :class:`Number`); KeyError when it is not there."""
    cur = data
    for sel_key, sel_value, key in _TOKEN.findall(path):
        if sel_key:
            if not isinstance(cur, list):
                raise KeyError(path)
            conditions = [(sel_key, sel_value)]
            if "&" in sel_value:  # [backend=SQLite&endpoints=4]
                first, *more = sel_value.split("&")
                conditions = [(sel_key, first)] + [tuple(m.split("=", 1)) for m in more  # type: ignore[misc]
                                                   if "=" in m]
            hits = [x for x in cur if _selected(x, conditions)]
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


# ------------------------------------------------------------------ numbers as published


def _real(x: Any) -> float:
    """``x`` as a number; TypeError for None, text or a bool (a number not there)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"not a number: {x!r}")
    return float(x)


def _p(p: Any) -> str:
    return "p < 0.0001" if _real(p) < 0.0001 else f"p = {_real(p):.4g}"


def _right(prefix: str, pct: bool = False) -> Callable[[Any], str]:
    """``136/200 = 0.680 (0.613–0.741)``: right of n, the accuracy and its 95% interval
    (``correct``, ``n``, ``accuracy``, ``ci95`` under ``prefix``); ``pct``: in percent."""
    def read(d: Any) -> str:
        c, n = lookup(d, f"{prefix}.correct"), lookup(d, f"{prefix}.n")
        a = _real(lookup(d, f"{prefix}.accuracy"))
        lo, hi = (_real(x) for x in lookup(d, f"{prefix}.ci95"))
        if pct:
            return f"{c}/{n} = {100 * a:.1f}% ({100 * lo:.1f}–{100 * hi:.1f})"
        return f"{c}/{n} = {a:.3f} ({lo:.3f}–{hi:.3f})"
    return read


def _paired(prefix: str) -> Callable[[Any], str]:
    """``+0.095 (+0.045 to +0.150), p = 0.0009; 25 / 6 right only in one``: a paired
    difference, its 95% interval, McNemar's p and the discordant items (first / second)."""
    def read(d: Any) -> str:
        diff = _real(lookup(d, f"{prefix}.difference"))
        lo, hi = (_real(x) for x in lookup(d, f"{prefix}.ci95"))
        first, second = lookup(d, f"{prefix}.only_first_right"), lookup(d, f"{prefix}.only_second_right")
        return (f"{diff:+.3f} ({lo:+.3f} to {hi:+.3f}), {_p(lookup(d, f'{prefix}.mcnemar_p'))}; "
                f"{first} / {second} right only in one")
    return read


def _mean_ci(prefix: str, nd: int = 2) -> Callable[[Any], str]:
    """``0.93 (0.80–1.00)``: a mean and its 95% interval (none when there is none)."""
    def read(d: Any) -> str:
        mean = _real(lookup(d, f"{prefix}.mean"))
        ci = lookup(d, prefix).get("ci95")
        band = f" ({_real(ci[0]):.{nd}f}–{_real(ci[1]):.{nd}f})" if ci else ""
        return f"{mean:.{nd}f}{band}"
    return read


def _g(x: Any) -> str:
    """A value as printed: a whole float without its ``.0``; under 1, 4 significant
    digits; from 1 up, at most 4 decimals."""
    if isinstance(x, float):
        if x.is_integer():
            return str(int(x))
        return f"{x:.4g}" if abs(x) < 1 else f"{x:.4f}".rstrip("0").rstrip(".")
    return str(x)


def _slash(prefix: str, *keys: str) -> Callable[[Any], str]:
    """Several values under ``prefix`` as one row: ``4079 / 264 / 264 / 264``."""
    return lambda d: " / ".join(_g(lookup(d, f"{prefix}.{k}" if prefix else k)) for k in keys)


def _span(values: Sequence[Any], nd: int = 2, unit: str = "") -> str:
    """``1.04–1.38``: the smallest and the largest of ``values``."""
    nums = [_real(v) for v in values]
    return f"{min(nums):.{nd}f}–{max(nums):.{nd}f}{unit}"


def _jsonl_rows(*parts: Any) -> list[dict[str, Any]]:
    return [row for part in parts for row in part]


def cmd(script: str, *args: str) -> tuple[str, ...]:
    return (script, *args)


def one(*commands: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """One group: its commands run side by side."""
    return tuple(commands)


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


def _on_same_items(prefix: str) -> Callable[[Any], str]:
    """The Parser's right answers on the items of a mode run on fewer items (``prefix``: that
    mode): the mode's own right ones, plus those only the Parser got, minus those only it got."""
    def read(d: Any) -> str:
        pair = lookup(d, f"{prefix}.parser_vs_this")
        mode = lookup(d, prefix)
        right = mode["question_accuracy"]["correct"] if "question_accuracy" in mode else mode["correct"]
        return f"{right + pair['only_first_right'] - pair['only_second_right']}/{pair['n']}"
    return read


def _spider_numbers(modes: Sequence[str], paired: Sequence[str]) -> tuple[Number, ...]:
    """A row of a Spider table per mode: right (95% CI), Parser minus it, tokens and seconds."""
    out: list[Number] = []
    for m in modes:
        out += [Number(f"{m}: right, accuracy (95% CI)", fn=_right(f"modes.{m}")),
                Number(f"{m}: prompt tokens / question", f"modes.{m}.prompt_tokens_per_question"),
                Number(f"{m}: seconds / question", f"modes.{m}.seconds_per_question")]
        if m in paired:
            out.append(Number(f"parser minus {m} (95% CI), McNemar p; only parser / only {m}",
                              fn=_paired(f"modes.{m}.parser_vs_this")))
    return tuple(out)


def _not_run(prefix: str) -> Callable[[Any], int]:
    """Questions whose program did not run (``executed`` is a share of ``n``)."""
    return lambda d: round((1 - _real(lookup(d, f"{prefix}.executed"))) * lookup(d, f"{prefix}.n"))


def _dialogue_numbers() -> tuple[Number, ...]:
    """SParC / CoSQL: each mode's row of the table, the Parser on the ablations' shard, the
    direct modes' failed programs and the Parser's questions without a valid program."""
    out: list[Number] = []
    for m in ("parser", "direct", "direct_fewshot", *ABLATIONS):
        out += [Number(f"{m}: questions right, accuracy (95% CI)",
                       fn=_right(f"modes.{m}.question_accuracy")),
                Number(f"{m}: interactions right", fn=lambda d, m=m: (
                    f"{round(_real(d['modes'][m]['interaction_exec_acc']) * d['modes'][m]['interactions'])}"
                    f"/{d['modes'][m]['interactions']}")),
                Number(f"{m}: seconds / question", f"modes.{m}.mean_seconds_per_question")]
        if m != "parser":
            out.append(Number(f"parser minus {m} (95% CI), McNemar p; only parser / only {m}",
                              fn=_paired(f"modes.{m}.parser_vs_this")))
        if m.startswith("direct"):
            out += [Number(f"{m}: prompt tokens / question", f"modes.{m}.prompt_tokens_per_question"),
                    Number(f"{m}: share of questions whose program failed to run",
                           fn=lambda d, m=m: round(1 - _real(d["modes"][m]["executed_rate"]), 4))]
    out += [Number("parser: questions with a valid program (without)", fn=lambda d: (
                lambda n, valid: f"{valid} of {n} ({n - valid} without)")(
                d["modes"]["parser"]["questions"],
                round(_real(d["modes"]["parser"]["program_rate"]) * d["modes"]["parser"]["questions"]))),
            Number("parser on the ablations' questions", fn=_on_same_items("modes.parser_no_examples"))]
    return tuple(out)


SEMBENCH_QUERIES = tuple(f"Q{i}" for i in range(1, 11))
SEMBENCH_METRICS = {"Q1": "F1", "Q2": "F1", "Q3": "relative error", "Q4": "relative error",
                    "Q5": "F1", "Q6": "F1", "Q7": "F1", "Q8": "relative error",
                    "Q9": "Spearman", "Q10": "Spearman"}  # = sembench_peers.METRIC_NAMES
# the queries every system ran, over which benchmarks/README.md sums calls and tokens
SEMBENCH_COMMON = ("Q1", "Q2", "Q3", "Q4", "Q8", "Q9", "Q10")
SEMBENCH_PAIRS = ("Q5", "Q6", "Q7")
SEMBENCH_REPORT = "benchmarks/results/sembench_report.json"


def _summed(field: str, queries: Sequence[str], prefix: str = "") -> Callable[[Any], Any]:
    return lambda d: int(sum(_real(lookup(d, f"{prefix}queries.{q}.{field}")) for q in queries))


def _stages(mode: str, main: str) -> Callable[[Any], str]:
    """``0 of 630``: values a mode's first stage (a cascade's small model, the proxy)
    decided, of all its values; ``main`` names the stage of the model under test."""
    def read(d: Any) -> str:
        stages = lookup(d, f"modes.{mode}.stages")
        return f"{sum(v for k, v in stages.items() if k != main)} of {sum(stages.values())}"
    return read


def _sembench_numbers(modes: Sequence[str]) -> tuple[Number, ...]:
    """Each mode's row of the tune table: per-review label accuracy (95% CI), the means of
    F1, relative error and Spearman, model calls and prompt tokens."""
    out: list[Number] = []
    for m in modes:
        out += [Number(f"{m} per-review label accuracy (95% CI)",
                       fn=_right(f"modes.{m}.review_accuracy", pct=True)),
                Number(f"{m} mean F1 (Q1, Q2, Q5-Q7)", f"modes.{m}.mean_f1"),
                Number(f"{m} mean relative error (Q3, Q4, Q8)", f"modes.{m}.mean_relative_error")]
        if m != "claim":  # claim frames yes/no questions only: no scores, no Spearman
            out.append(Number(f"{m} mean Spearman (Q9, Q10)", f"modes.{m}.mean_spearman"))
        out += [Number(f"{m} model calls", f"modes.{m}.totals.model_calls"),
                Number(f"{m} prompt tokens", f"modes.{m}.totals.prompt_tokens")]
    return tuple(out)


def _sembench_report_numbers(modes: Sequence[str]) -> tuple[Number, ...]:
    """The engine's rows of the side-by-side table (each query's mean and 95% interval,
    calls and prompt tokens over the queries every system ran) and the per-review label
    accuracy of each mode, paired with the default's."""
    span = ", ".join(SEMBENCH_COMMON)
    out: list[Number] = []
    for m in modes:
        out += [Number(f"{m} {q} {SEMBENCH_METRICS[q]} (95% CI)", fn=_mean_ci(f"modes.{m}.queries.{q}"))
                for q in SEMBENCH_QUERIES]
        out += [Number(f"{m} model calls ({span})", fn=_summed("model_calls", SEMBENCH_COMMON, f"modes.{m}.")),
                Number(f"{m} prompt tokens ({span})",
                       fn=_summed("prompt_tokens", SEMBENCH_COMMON, f"modes.{m}.")),
                Number(f"{m} per-review label accuracy (95% CI)",
                       fn=_right(f"modes.{m}.review_accuracy", pct=True)),
                Number(f"{m} mean F1 (Q1, Q2, Q5-Q7)", f"modes.{m}.mean_f1"),
                Number(f"{m} mean relative error (Q3, Q4, Q8)", f"modes.{m}.mean_relative_error")]
        if m != "default":
            out.append(Number(f"{m} minus default, per-review label accuracy (95% CI), McNemar p",
                              fn=_paired(f"modes.{m}.review_accuracy.vs_default")))
    return (*out,
            Number("default Q1 model calls (stops at LIMIT 5)", "modes.default.queries.Q1.model_calls"),
            *(Number(f"default {q} model calls / prompt tokens",
                     fn=_slash(f"modes.default.queries.{q}", "model_calls", "prompt_tokens"))
              for q in SEMBENCH_PAIRS),
            Number("cascade: values decided by the first stage (SmolLM2), of all",
                   fn=_stages("cascade", "llamacpp (cascade)")))


def _peer_stem(peer: str) -> str:
    return f"sembench_{peer.replace('.', '').replace('-', '')}_report"


_LOWER_IS_BETTER = {"Q3", "Q4", "Q8"}


def _default_beside(peer: Any, engine: Any) -> str:
    """On the queries every system ran: where the engine's default is as good as the peer
    or better, and where strictly better (relative error: lower is better)."""
    ge = gt = 0
    for q in SEMBENCH_COMMON:
        ours = _real(engine["modes"]["default"]["queries"][q]["mean"])
        theirs = _real(peer["queries"][q]["mean"])
        if q in _LOWER_IS_BETTER:
            ours, theirs = -ours, -theirs
        ge += ours >= theirs
        gt += ours > theirs
    return f"as good or better on {ge}, better on {gt}, of {len(SEMBENCH_COMMON)}"


def _token_share(queries: Sequence[str]) -> Callable[[Any, Any], str]:
    """The default's prompt tokens beside the peer's on ``queries``: both and the share."""
    def read(peer: Any, engine: Any) -> str:
        theirs = _summed("prompt_tokens", queries)(peer)
        ours = _summed("prompt_tokens", queries, "modes.default.")(engine)
        return f"{ours:,} vs {theirs:,} ({100 * ours / theirs:.0f}%, 1/{theirs / ours:.1f})"
    return read


def _peer_numbers(peer: str, scored: Sequence[str]) -> tuple[Number, ...]:
    """A peer's row of the SemBench table (each scored query's mean and 95% interval, the
    model calls and prompt tokens summed over the queries every system ran), and how the
    engine's default compares on those queries (read with the engine's results)."""
    span = ", ".join(SEMBENCH_COMMON)
    out = [*(Number(f"{q} {SEMBENCH_METRICS[q]} (95% CI)", fn=_mean_ci(f"queries.{q}")) for q in scored),
           *(Number(f"{q} model calls / prompt tokens", fn=_slash(f"queries.{q}", "model_calls",
                                                                  "prompt_tokens"))
             for q in scored if q in SEMBENCH_PAIRS),
           Number(f"model calls ({span})", fn=_summed("model_calls", SEMBENCH_COMMON)),
           Number(f"prompt tokens ({span})", fn=_summed("prompt_tokens", SEMBENCH_COMMON)),
           Number(f"the default beside it ({span})", fn=_default_beside, also=(SEMBENCH_REPORT,)),
           Number(f"prompt tokens, the default vs it ({span})", fn=_token_share(SEMBENCH_COMMON),
                  also=(SEMBENCH_REPORT,))]
    if peer == "lotus":
        without_q1 = tuple(q for q in SEMBENCH_COMMON if q != "Q1")
        out += [Number("Q1 model calls / prompt tokens (no LIMIT: every review asked)",
                       fn=_slash("queries.Q1", "model_calls", "prompt_tokens")),
                Number("prompt tokens, the default vs it (Q2-Q4, Q8-Q10)", fn=_token_share(without_q1),
                       also=(SEMBENCH_REPORT,)),
                Number("Q7 F1, 3 decimals: it / the default", also=(SEMBENCH_REPORT,), fn=lambda p, e: (
                    f"{_real(p['queries']['Q7']['mean']):.3f} / "
                    f"{_real(e['modes']['default']['queries']['Q7']['mean']):.3f}")),
                Number("pairs (Q5-Q7): its calls / the default's, per query", also=(SEMBENCH_REPORT,),
                       fn=lambda p, e: _span([_real(p["queries"][q]["model_calls"])
                                              / _real(e["modes"]["default"]["queries"][q]["model_calls"])
                                              for q in SEMBENCH_PAIRS], 1, "x")),
                Number("pairs (Q5-Q7): its prompt tokens / the default's, per query",
                       also=(SEMBENCH_REPORT,),
                       fn=lambda p, e: _span([_real(p["queries"][q]["prompt_tokens"])
                                              / _real(e["modes"]["default"]["queries"][q]["prompt_tokens"])
                                              for q in SEMBENCH_PAIRS], 1, "x"))]
    if peer == "palimpzest":
        items = f"benchmarks/results/{_peer_stem(peer)}.jsonl"
        out += [Number("Q1 model calls / prompt tokens per sample",
                       fn=lambda d: f"{_real(d['queries']['Q1']['model_calls']) / d['queries']['Q1']['n']:.0f}"
                                    f" / {_real(d['queries']['Q1']['prompt_tokens']) / d['queries']['Q1']['n']:,.0f}"),
                Number("prompt tokens per review, filters (Q1-Q3)", fn=lambda d: _span(
                    [_real(d["queries"][q]["prompt_tokens"]) / _real(d["queries"][q]["model_calls"])
                     for q in ("Q1", "Q2", "Q3")], 0)),
                Number("prompt tokens per review, maps (Q4, Q8-Q10)", fn=lambda d: _span(
                    [_real(d["queries"][q]["prompt_tokens"]) / _real(d["queries"][q]["model_calls"])
                     for q in ("Q4", "Q8", "Q9", "Q10")], 0)),
                Number("Q3: positive reviews counted / there, per movie", also=(items,),
                       fn=lambda d, rows: ", ".join(f"{r['value']:.0f} of {r['truth']:.0f}"
                                                    for r in rows if r.get("query") == "Q3"))]
    return tuple(out)


def _dialogue_steps(dataset: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """SParC / CoSQL: both shards of the three modes, the ablations on shard 1, the summary."""
    common = ("--dataset", dataset, "--questions", "150", "--threads", "1")
    ablation = f"benchmarks/results/{dataset}_ablation_1.jsonl"
    return (_shards("conversation.py", dataset, *common, "--modes", "parser,direct_fewshot,direct"),
            one(cmd("conversation.py", *common, "--modes", ",".join(ABLATIONS), "--shard", "1/2",
                    "--out", ablation)),
            one(cmd("conversation.py", "--dataset", dataset, "--combine", *_parts(dataset), ablation,
                    "--out", f"benchmarks/results/{dataset}.json")))


CALL_ECONOMY_QUERIES = (
    "and_filter_city", "and_filter_two_plain", "dup_continent", "dup_countrycode",
    "dup_language_filter", "join_city_country", "join_country_language", "join_hiring",
    "cascade_two_maps", "cascade_join_two_maps", "subquery_in", "cte_filter", "car_models",
    "pets_students", "select_map", "select_map_join", "select_map_group", "qa_context_where",
    "qa_context_select", "qa_and_map", "limit_simple", "limit_filter", "limit_join",
    "hqa_songs_language", "hqa_party_count", "hqa_qa_context", "hqa_limit")
CALL_ECONOMY_MODEL_QUERIES = ("llm_map_filter", "llm_map_select_join", "llm_qa_context", "llm_map_limit")
CALL_ECONOMY_TARGETS = ("values_minimal_everywhere", "at_most_tenth_of_naive", "never_more_than_0128",
                        "limit_stops_early", "rows_match_twin")


def _call_economy_counts() -> tuple[Number, ...]:
    """The values-passed table (each query, the totals) and the targets."""
    return (Number("queries", "totals.queries"),
            *(Number(f"{q}: naive / 0.1.28 / ours / minimal", fn=_slash(
                f"queries[id={q}]", "naive.values_passed", "blendsql_0128.values_passed",
                "ours.values_passed", "minimal_values")) for q in CALL_ECONOMY_QUERIES),
            Number("naive values passed", "totals.naive_values_passed"),
            Number("0.1.28 values passed", "totals.blendsql_0128_values_passed"),
            Number("ours values passed", "totals.ours_values_passed"),
            Number("minimal values", "totals.minimal_values"),
            Number("ours / naive", "totals.ours_over_naive"),
            *(Number(f"target met: {t}", f"totals.targets.{t}.met") for t in CALL_ECONOMY_TARGETS),
            Number("queries with the plain-SQL twin's rows: ours / 0.1.28 pinned", fn=lambda d: (
                f"{sum(bool(q['ours']['rows_match_twin']) for q in d['queries'])} / "
                f"{sum(bool(q['blendsql_0128']['rows_match_twin']) for q in d['queries'])}")),
            Number("queries whose rows differ from the twin on 0.1.28 with today's dependencies",
                   fn=lambda d: len(d["blendsql_0128"]["latest_deps_rows_differ_from_twin"])))


def _readme_demo_sweep(d: Any) -> str:
    answers = [s["answer"] for s in d["sweep"]["schools"].values()]
    top = max(set(answers), key=answers.count)
    return f"{top} ({answers.count(top)} of {len(answers)})"


def _position_maps(d: Any) -> str:
    maps = [c for c in d["candidates"] if "LLMMap" in c["query"] and "w::position" in c["query"]]
    return f"{sum(bool(c['right']) for c in maps)} right of {len(maps)}"


def _engine_rows(d: Any, skip: Sequence[str] = ()) -> list[dict[str, Any]]:
    return [r for r in d["results"]["generated_100k"] if r["query"] not in skip]


def _engine_span(key: str, skip: Sequence[str] = ()) -> Callable[[Any], str]:
    return lambda d: _span([r[key] for r in _engine_rows(d, skip) if r.get(key) is not None], 2, "x")


ES_SQLITE = tuple(f"engine[backend=SQLite&endpoints={k}]" for k in (1, 2, 4))
ES_SPARK = {n: f"engine[executors={n}]" for n in (1, 2)}
ES_ROW = ("summed_limit_per_s", "wall_s", "values_per_s", "fraction_of_limit", "ratio_to_first",
          "slot_utilisation", "client_cores_busy")
PLAIN_BACKENDS = ("sqlite", "duckdb", "spark_local2", "spark_local1")


def _plain_row(b: str) -> Callable[[Any], str]:
    """A row of the plain-backends table: twin, BlendSQL, their difference, the candidate
    values query and the final query, ms."""
    def read(d: Any) -> str:
        row = lookup(d, f"summary.rows[backend={b}]")
        steps = lookup(d, f"backends[backend={b}].blendsql_steps")
        cand = lookup(steps, "[summary=candidate values for EndsWith].ms")
        final = lookup(steps, "[summary=final query].ms")
        return " / ".join(_g(x) for x in (row["plain_ms"], row["blendsql_ms"], row["overhead_ms"], cand, final))
    return read


BENCHES: tuple[Bench, ...] = (
    Bench("demo-margins", "logit margins of the README demo query's decision, both CPU kernel "
          "paths; the 13 candidate queries; its question over all 18 schools",
          "benchmarks/README.md (The README's first command)",
          (one(cmd("demo_margins.py", "--sweep", "--candidates")),),
          "benchmarks/results/demo_margins.json",
          (Number("margin, extra buffer types on", "paths.extra_bufts=on.min_margin"),
           Number("margin, extra buffer types off", "paths.extra_bufts=off.min_margin"),
           Number("runner-up school(s)", "paths.extra_bufts=on.decisions.0.runner_up"),
           Number("candidate queries", fn=lambda d: len(d["candidates"])),
           Number("candidates right", fn=lambda d: sum(bool(c["right"]) for c in d["candidates"])),
           Number("candidates right with every margin >= 1",
                  fn=lambda d: sum(bool(c["right"]) and c["min_margin"] >= 1 for c in d["candidates"])),
           Number("maps over the positions: right", fn=_position_maps),
           Number("the true/false map's margin (the near tie)",
                  fn=lambda d: next(c["min_margin"] for c in d["candidates"] if c["query"] == PITCHER)),
           Number("sweep: schools right", "sweep.right"),
           Number("sweep: right with margin >= 1", "sweep.right_with_margin_ge_1"),
           Number("sweep: schools", "sweep.of"),
           Number("sweep: most frequent answer", fn=_readme_demo_sweep)),
          "~15 min (embedded model)"),
    Bench("demo-margins-pitcher", "the previous demo query's margin (the near tie)",
          "benchmarks/README.md (The README's first command)",
          (one(cmd("demo_margins.py", "--query", PITCHER, "--out",
                   "benchmarks/results/demo_margins_pitcher.json")),),
          "benchmarks/results/demo_margins_pitcher.json",
          (Number("margin of 'Pitcher'", "paths.extra_bufts=on.min_margin"),),
          "~3 min (embedded model)"),
    Bench("readme-demo", "the README's first-run query: the CLI's cold wall time, the query's "
          "seconds, model calls and prompt tokens, the answer",
          "benchmarks/README.md (The README's first command)",
          (one(cmd("readme_demo.py", "--repeat", "3")),),
          "benchmarks/results/readme_demo.json",
          (Number("blendsql run, s (median of 3 cold processes)", "cli_seconds_median"),
           Number("query seconds (model load included)", "query_seconds"),
           Number("model calls", "model_calls"),
           Number("prompt tokens", "prompt_tokens"),
           Number("the README's row", "right")),
          "~1 min (embedded model)"),
    Bench("install-time", "the README's first command in a fresh clone and venv: python3 -m venv, "
          "pip install . (pip's wheel cache as it is), the first blendsql run",
          "benchmarks/README.md (The README's first command)",
          (one(cmd("install_time.py")),),
          "benchmarks/results/install_time.json",
          (Number("whole command, s", "total_s"),
           Number("python3 -m venv, s", "steps.venv_s"),
           Number("pip install ., s", "steps.pip_install_s"),
           Number("blendsql run, s", "steps.first_run_s"),
           Number("llama-cpp-python wheel in pip's cache before", "wheel_cache.llama_cpp_python_cached"),
           Number("the README's row", "right")),
          "~1-2 min with a warm wheel cache (~10 min without)",
          note="needs the network (PyPI) and git"),
    Bench("test-suite", "the test suite's size: pytest --collect-only",
          "benchmarks/README.md (The README's first command)",
          (one(cmd("suite.py")),),
          "benchmarks/results/test_suite.json",
          (Number("tests collected", "collected"),),
          "~15 s"),
    Bench("spider", "Spider dev report split, n = 200 over all 20 databases: Parser beside "
          "direct, direct_fewshot and the ablations", "README.md (How good is it), benchmarks/README.md (Spider dev)",
          (_shards("spider.py", "spider", "--n", "200"),
           _shards("spider.py", "spider_ablation", "--n", "100", "--modes",
                   "parser_no_examples,parser_no_retry"),
           one(cmd("spider.py", "--combine", *_parts("spider"), *_parts("spider_ablation")))),
          "benchmarks/results/spider.json",
          (*_spider_numbers(("parser", "direct", "direct_fewshot", *ABLATIONS),
                            ("direct", "direct_fewshot", *ABLATIONS)),
           Number("parser on the ablations' 100 questions", fn=_on_same_items("modes.parser_no_examples")),
           Number("parser: questions whose program did not run", fn=_not_run("modes.parser"))),
          "~3 h (2 processes)", ("eval-model", "data:spider")),
    Bench("spider-duckdb", "Spider dev report split, the first 100 dealt questions: the Parser on "
          "SQLite beside the Parser on DuckDB copies", "benchmarks/README.md (The Parser on DuckDB)",
          (_shards("spider.py", "spider_duckdb", "--n", "100", "--modes", "parser,parser_duckdb"),
           one(cmd("spider.py", "--combine", *_parts("spider_duckdb"), "--out",
                   "benchmarks/results/spider_duckdb.json"))),
          "benchmarks/results/spider_duckdb.json",
          (*_spider_numbers(("parser", "parser_duckdb"), ("parser_duckdb",)),
           Number("DuckDB's prompt / SQLite's", fn=lambda d: round(
               _real(d["modes"]["parser_duckdb"]["prompt_tokens_per_question"])
               / _real(d["modes"]["parser"]["prompt_tokens_per_question"]), 3)),
           Number("identical programs on both backends", also=_parts("spider_duckdb"),
                  fn=lambda d, *parts: sum(r["parser"]["pred"] == r["parser_duckdb"]["pred"]
                                           for r in _jsonl_rows(*parts))),
           Number("programs that did not run: SQLite / DuckDB", fn=lambda d: (
               f"{_not_run('modes.parser')(d)} / {_not_run('modes.parser_duckdb')(d)}"))),
          "~1.5 h (2 processes)", ("eval-model", "data:spider")),
    Bench("sparc", "SParC report split, 150 questions: Conversation beside direct_fewshot and "
          "direct", "README.md (How good is it), benchmarks/README.md (SParC)",
          _dialogue_steps("sparc"),
          "benchmarks/results/sparc.json",
          _dialogue_numbers(),
          "~1 h (2 processes)", ("eval-model", "data:sparc", "data:spider")),
    Bench("cosql", "CoSQL report split, 150 questions: Conversation beside direct_fewshot and "
          "direct", "README.md (How good is it), benchmarks/README.md (CoSQL)",
          _dialogue_steps("cosql"),
          "benchmarks/results/cosql.json",
          _dialogue_numbers(),
          "~1 h (2 processes)", ("eval-model", "data:cosql", "data:spider")),
    Bench("splash", "SPLASH test, 150 items: correction with the feedback, re-parse, combined",
          "benchmarks/README.md (SPLASH)",
          (_shards("splash.py", "splash", "--n", "150"),
           one(cmd("splash.py", "--combine", *_parts("splash")))),
          "benchmarks/results/splash.json",
          (*(Number(f"{s} execution (95% CI)", fn=_right(f"scores.all.execution.{s}"))
             for s in ("edit", "fresh", "combined")),
           *(Number(f"{s} exact set (95% CI)", fn=_right(f"scores.all.exact_set.{s}"))
             for s in ("edit", "fresh", "combined")),
           *(Number(f"{s} execution, items whose wrong query is really wrong (95% CI)",
                    fn=_right(f"scores.without_wrong_already_right.execution.{s}"))
             for s in ("edit", "fresh", "combined")),
           Number("edit minus fresh (95% CI), McNemar p; only edit / only fresh",
                  fn=_paired("scores.all.execution.edit_vs_fresh")),
           Number("edit on the items fresh gets wrong (95% CI)",
                  fn=_right("scores.all.execution.edit_vs_fresh_where_fresh_wrong.edit")),
           Number("edit on the items fresh gets wrong, McNemar p",
                  "scores.all.execution.edit_vs_fresh_where_fresh_wrong.mcnemar_p"),
           Number("combined minus fresh (95% CI), McNemar p; only combined / only fresh",
                  fn=_paired("scores.all.execution.combined_vs_fresh")),
           Number("items whose wrong query already returns gold's rows", "scores.wrong_already_right.items"),
           Number("items per database", fn=lambda d: _span(list(d["databases"].values()), 0)),
           Number("items where fresh was the chosen candidate", "candidates.fresh.chosen"),
           Number("right with the sources the other way (edit, then fresh)", "right_by_sources.edit,fresh")),
          "~2.5 h (2 processes)", ("eval-model", "data:splash", "data:spider")),
    Bench("splash-dev-policies", "the SPLASH dev items the default correction order was chosen on: "
          "each order of the sources replayed from the recorded candidates (no model)",
          "benchmarks/README.md (SPLASH)",
          (one(cmd("splash.py", "--split", "dev", "--policies", "--out",
                   "benchmarks/results/splash_dev_qwen_candidates_all.jsonl")),),
          "benchmarks/results/splash_dev_qwen_candidates_all_policies.json",
          (Number("dev items", "items"),
           Number("right: fresh, then edit / edit, then fresh / fresh alone",
                  fn=_slash("right_by_sources", "fresh,edit", "edit,fresh", "fresh"))),
          "seconds", ("data:spider",)),
    Bench("hybridqa", "HybridQA report questions, 150: program + fallback, program alone, "
          "end-to-end", "README.md (How good is it), benchmarks/README.md (HybridQA)",
          (_shards("hybridqa.py", "hybridqa_report", "--n", "150"),
           one(cmd("hybridqa.py", "--combine", *_parts("hybridqa_report"), "--out",
                   "benchmarks/results/hybridqa_report.jsonl"))),
          "benchmarks/results/hybridqa_report.summary.json",
          (*(Number(f"{m} right (95% CI)", fn=_right(f"modes.{m}"))
             for m in ("blendsql_fallback", "blendsql", "end_to_end")),
           *(Number(f"{m} minus end_to_end (95% CI), McNemar p", fn=_paired(f"modes.{m}.vs_end_to_end"))
             for m in ("blendsql_fallback", "blendsql")),
           Number("program + fallback minus program alone (95% CI), McNemar p",
                  fn=_paired("modes.blendsql_fallback.vs_blendsql")),
           *(Number(f"{m} prompt tokens / question", f"{m}.prompt_tokens")
             for m in ("blendsql_fallback", "blendsql", "end_to_end")),
           Number("ids of earlier runs skipped", "skipped_spent_ids.count"),
           Number("programs parsed", "programs_parse"),
           Number("programs ran", "programs_execute"),
           Number("fallback used", "fallback_rate")),
          "~1.5 h (2 processes)", ("eval-model", "data:hybridqa")),
    Bench("old-pool-leaks", "what the pool filters before the protocol (8c1666a) let into the "
          "report prompts of Spider, SParC, CoSQL and SPLASH (no model)",
          "benchmarks/README.md (Quality of the plain-language layer)",
          (one(cmd("old_pool_leaks.py")),),
          "benchmarks/results/old_pool_leaks.json",
          tuple(Number(f"{b}: {what}", f"benchmarks.{b}.{key}")
                for b in ("spider", "sparc", "cosql", "splash")
                for what, key in (("leaking prompts / prompts", "leaking"),
                                  ("examples from the item's own database", "own_database_examples"),
                                  ("gold queries in the prompt (prompts)", "gold_sql_in_prompt"),
                                  ("result twins shown", "result_twins"))),
          "~1 min", ("data:spider", "data:sparc", "data:cosql", "data:splash")),
    Bench("sembench-tune", "SemBench's movie queries Q1-Q10 on the TUNE movies, in every "
          "LLMMap decision mode side by side (what chose the defaults)",
          "benchmarks/README.md (SemBench)",
          (_shards("sembench.py", "sembench_tune", "--split", "tune", "--threads", "1"),
           one(cmd("sembench.py", "--combine", *_parts("sembench_tune"), "--out",
                   "benchmarks/results/sembench_tune.json"))),
          "benchmarks/results/sembench_tune.json",
          (*_sembench_numbers(SEMBENCH_MODES),
           Number("examples / default, prompt tokens", fn=lambda d: round(
               _real(d["modes"]["examples"]["totals"]["prompt_tokens"])
               / _real(d["modes"]["default"]["totals"]["prompt_tokens"]), 2)),
           Number("cascade: values decided by the first stage (SmolLM2), of all",
                  fn=_stages("cascade", "llamacpp (cascade)"))),
          "~1 h (2 processes; ~4,500 model calls)", ("eval-model", "data:sembench")),
    *(Bench(f"sembench-{split}-proxy" if split == "tune" else "sembench-proxy",
            f"SemBench's movie queries on the {split.upper()} movies with the embedding proxy "
            "(proxy='embedding', MiniLM, target=0.9)", "benchmarks/README.md (SemBench)",
            (one(cmd("sembench.py", "--split", split, "--threads", "1", "--modes", "proxy", "--out",
                     f"benchmarks/results/sembench_{split}_proxy.jsonl")),),
            f"benchmarks/results/sembench_{split}_proxy.json",
            (Number("proxy per-review label accuracy (95% CI)",
                    fn=_right("modes.proxy.review_accuracy", pct=True)),
             Number("proxy mean F1 (Q1, Q2, Q5-Q7)", "modes.proxy.mean_f1"),
             Number("proxy mean relative error (Q3, Q4, Q8)", "modes.proxy.mean_relative_error"),
             Number("proxy mean Spearman (Q9, Q10)", "modes.proxy.mean_spearman"),
             Number("proxy model calls", "modes.proxy.totals.model_calls"),
             Number("proxy prompt tokens", "modes.proxy.totals.prompt_tokens"),
             Number("values decided by the proxy, of all", fn=_stages("proxy", "llamacpp")),
             Number("values a map asks, per instance", also=(f"benchmarks/results/sembench_{split}_proxy.jsonl",),
                    fn=lambda d, rows: _span([r["values_passed"] for r in rows], 0))),
            takes, ("eval-model", "data:sembench", "module:sentence_transformers"),
            note="embeddings: pip install -e '.[embeddings]' (a CPU torch first)")
      for split, takes in (("tune", "~15 min"), ("report", "~20 min"))),
    Bench("sembench", "SemBench's movie queries Q1-Q10 on the report movies: the default "
          "beside label framing, threshold from examples and the cascade from SmolLM2",
          "benchmarks/README.md (SemBench)",
          (_shards("sembench.py", "sembench_report", "--split", "report", "--threads", "1",
                   "--modes", ",".join(SEMBENCH_REPORT_MODES)),
           one(cmd("sembench.py", "--combine", *_parts("sembench_report"), "--out",
                   "benchmarks/results/sembench_report.json"))),
          "benchmarks/results/sembench_report.json",
          _sembench_report_numbers(SEMBENCH_REPORT_MODES),
          "~1 h (2 processes; ~3,400 model calls)", ("eval-model", "data:sembench")),
    *(Bench(f"sembench-{peer.replace('.', '')}", f"SemBench's report instances through {peer} behind the same "
            "llama.cpp server, metered", "benchmarks/README.md (SemBench)",
            (one(cmd("sembench_peers.py", "--peer", peer, "--queries", ",".join(SEMBENCH_QUERIES),
                     "--out", f"benchmarks/results/{_peer_stem(peer)}.jsonl")),),
            f"benchmarks/results/{_peer_stem(peer)}.json",
            _peer_numbers(peer, scored), takes, ("eval-model", "data:sembench", f"peer:{peer}"))
      # the queries scored in the committed results (Palimpzest 0.7 has no semantic join:
      # Q5-Q7 are run and recorded as not applicable); times from the recorded seconds
      for peer, scored, takes in (
          ("lotus", SEMBENCH_QUERIES, "~2.5 h (Q5-Q7: one call per pair of reviews)"),
          ("blendsql-0.1.28", SEMBENCH_QUERIES, "~20 min"),
          ("palimpzest", tuple(q for q in SEMBENCH_QUERIES if q not in SEMBENCH_PAIRS),
           "~1 h 40 min"))),
    Bench("call-economy", "values passed per query: ours vs naive vs blendsql 0.1.28 vs the "
          "minimal set (27 queries), and the embedded-model subset",
          "benchmarks/README.md (Call economy)",
          (one(cmd("call_economy.py")),),
          "benchmarks/results/call_economy.json",
          (*_call_economy_counts(),
           *(Number(f"{q}: naive values / ours calls / prompt tokens / s / rows", fn=_slash(
               f"model_subset.rows[id={q}]", "naive_values", "model_calls", "prompt_tokens", "seconds",
               "rows")) for q in CALL_ECONOMY_MODEL_QUERIES),
           *(Number(f"{q}, 0.1.28: calls / prompt tokens / s / rows", fn=_slash(
               f"model_subset.blendsql_0128.rows[id={q}]", "num_generation_calls", "prompt_tokens",
               "seconds", "rows")) for q in CALL_ECONOMY_MODEL_QUERIES),
           Number("llm_qa_context, 0.1.28's own values passed (context rows)",
                  "model_subset.blendsql_0128.rows[id=llm_qa_context].num_values_passed")),
          "~3 min (+ ~5 min once for the 0.1.28 venvs)",
          ("peer:blendsql-0.1.28", "peer:blendsql-0.1.28-latest", "data:hybridqa")),
    Bench("call-economy-counts", "the deterministic part of call-economy (the targets table); "
          "keeps the embedded-model subset already in the file",
          "benchmarks/README.md (Call economy: Targets)",
          (one(cmd("call_economy.py", "--no-model")),),
          "benchmarks/results/call_economy.json",
          _call_economy_counts(),
          "~1 min (+ ~5 min once for the 0.1.28 venvs)",
          ("peer:blendsql-0.1.28", "peer:blendsql-0.1.28-latest", "data:hybridqa")),
    Bench("engine-overhead", "engine CPU time over plain sqlite3 with zero-cost ingredients, "
          "100k-row table; blendsql 0.1.28 on the same queries",
          "benchmarks/README.md (Latest numbers: Engine overhead)",
          (one(cmd("engine_overhead.py", "--repeat", "9", "--blendsql-0128",
                   "{peer:blendsql-0.1.28}")),),
          "benchmarks/results/engine_overhead.json",
          (Number("target", "target"),
           *(Number(f"{q} (CPU ratio)", f"results.generated_100k[query={q}].ratio_cpu")
             for q in ENGINE_QUERIES),
           Number("queries at or under the 2x target (CPU)", fn=lambda d: (
               f"{sum(_real(r['ratio_cpu']) <= 2 for r in _engine_rows(d))} of {len(_engine_rows(d))}")),
           Number("map_select_limit: engine / plain CPU, ms", fn=lambda d: " / ".join(
               f"{1000 * _real(lookup(d, f'results.generated_100k[query=map_select_limit].{k}')):.2f}"
               for k in ("engine_cpu_s", "plain_cpu_s"))),
           Number("map_select_limit: the twin's DataFrame alone, CPU ms", fn=lambda d: round(
               1000 * _real(lookup(d, "results.generated_100k[query=map_select_limit].engine_cpu_s"))
               / _real(lookup(d, "results.generated_100k[query=map_select_limit].ratio_vs_plain_dataframe_cpu")),
               2)),
           Number("map_select_limit: engine / pandas.read_sql_query of the twin",
                  "results.generated_100k[query=map_select_limit].ratio_vs_plain_dataframe_cpu"),
           *(Number(f"{q}: hand-written plan / plain", f"results.generated_100k[query={q}].hand_written_vs_plain_cpu")
             for q in ("map_where_unique_col", "map_where_low_cardinality", "plain_filter_then_map",
                       "map_select_limit")),
           Number("engine / hand-written plan, all but map_select_limit",
                  fn=_engine_span("ratio_vs_hand_written_cpu", ("map_select_limit",))),
           Number("map_select_limit: engine / hand-written plan",
                  "results.generated_100k[query=map_select_limit].ratio_vs_hand_written_cpu"),
           Number("engine / per-row Python UDF twin, all but map_select_limit",
                  fn=_engine_span("ratio_vs_udf_cpu", ("map_select_limit",))),
           Number("0.1.28: CPU s per query", fn=lambda d: _span(
               [r["cpu_s"] for r in d["results"]["blendsql_0128_generated_100k"]["results"]], 1, " s")),
           Number("0.1.28 / plain", fn=lambda d: _span(
               [r["ratio_cpu_vs_plain"] for r in d["results"]["blendsql_0128_generated_100k"]["results"]],
               0, "x")),
           Number("0.1.28 / this engine", fn=lambda d: _span(
               [r["ratio_cpu_vs_this_engine"] for r in d["results"]["blendsql_0128_generated_100k"]["results"]],
               0, "x"))),
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
                  "llmmap_through_engine.direct_same_requests_per_value_s"),
           Number("values (requests)", "llmmap_through_engine.values")),
          "~3 min (embedded model)"),
    Bench("guidance-vs-gbnf", "per-value latency: guidance adapter over the GBNF path",
          "benchmarks/README.md (Latest numbers: Guidance vs GBNF)",
          (one(cmd("guidance_vs_gbnf.py", "--n", "8", "--threads", "1")),),
          "benchmarks/results/guidance_vs_gbnf.json",
          (Number("guidance / GBNF, median per value", "median_ratio_vs_gbnf.guidance_llamacpp"),
           Number("values", "n_values")),
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
          (*(Number(f"{s} {m} {b}", f"sets.{s}_UNION.recall.{m}.{b}")
             for s in ("spider", "bird") for m in ("cosine", "crush") for b in ("@10", "@20")),
           *(Number(f"{s} crush minus cosine @20: wins / losses, mean (95% CI)", fn=lambda d, s=s: (
               lambda c: f"{c['wins']} / {c['losses']}, {c['mean_diff']:+.4f} "
                         f"({c['ci95'][0]:+.4f}..{c['ci95'][1]:+.4f})")(
               lookup(d, f"sets.{s}_UNION.paired_vs_cosine.crush.@20"))) for s in ("spider", "bird")),
           Number("hallucination, s per question (bird / spider)", fn=_slash(
               "sets", "bird_UNION.seconds_per_question.hallucination",
               "spider_UNION.seconds_per_question.hallucination")),
           Number("selection, s per question (bird / spider)", fn=_slash(
               "sets", "bird_UNION.seconds_per_question.crush_probe_embed_and_select_per_budget",
               "spider_UNION.seconds_per_question.crush_probe_embed_and_select_per_budget")),
           Number("ndap: columns", "sets.ndap_super_timing.elements"),
           Number("ndap: selection at B=100, s per question", "sets.ndap_super_timing.select_seconds_mean_B100")),
          "~10 min with the cached hallucinations (~40 min without)",
          ("data:spider", "data:crush4sql", "module:sentence_transformers"),
          note="embeddings: pip install -e '.[embeddings]' (a CPU torch first)"),
    Bench("schema-retrieval-no-llm", "CRUSH4SQL large-schema retrieval without an LLM (the "
          "question itself as the only probe): recall@10/20/50/100, cosine vs CRUSH, Spider union",
          "benchmarks/README.md (Latest numbers: Schema retrieval)",
          (one(cmd("schema_retrieval.py", "--limit", "100", "--no-llm")),),
          "benchmarks/results/schema_retrieval.json",
          tuple(Number(f"spider {m} {b}", f"sets.spider_UNION.recall.{m}.{b}")
                for m in ("cosine", "crush_no_llm") for b in ("@10", "@20", "@50", "@100")),
          "~25 min (the ndap index once, cached after)",
          ("data:spider", "data:crush4sql", "module:sentence_transformers"),
          note="embeddings: pip install -e '.[embeddings]' (a CPU torch first)"),
    Bench("backend-overhead", "one map query on SQLite, DuckDB and PostgreSQL vs the backend's "
          "own query with the function as a UDF, 200k rows",
          "benchmarks/README.md (Backend overhead)",
          (one(cmd("backend_overhead.py", "--rows", "200000", "--repeat", "3")),),
          "benchmarks/results/backend_overhead.json",
          (Number("rows", "rows"),
           Number("distinct values", "distinct"),
           *(Number(f"{b} engine s / baseline s / ratio", fn=_slash(f"backends.{b}", "engine_s",
                                                                     "baseline_s", "ratio"))
             for b in ("sqlite", "duckdb", "postgres"))),
          "~3 min", note="PostgreSQL from Debian's postgresql-15 (skipped without it)"),
    Bench("backend-overhead-10m", "the same on DuckDB with 10M rows",
          "benchmarks/README.md (Backend overhead)",
          (one(cmd("backend_overhead.py", "--rows", "10000000", "--repeat", "3", "--backends",
                   "duckdb")),),
          "benchmarks/results/backend_overhead_10000000.json",
          (Number("rows", "rows"),
           Number("duckdb engine s / baseline s / ratio", fn=_slash("backends.duckdb", "engine_s",
                                                                   "baseline_s", "ratio")),),
          "~5 min"),
    Bench("model-throughput", "LLMMap values/s through llama-server (4 slots): engine vs a "
          "plain concurrent client vs blendsql 0.1.28; values per prompt; embedded threads",
          "benchmarks/README.md (Model throughput)",
          (one(cmd("model_throughput.py", *THROUGHPUT, "--server-bin", "{llama_server}",
                   "--blendsql-0128", "{peer:blendsql-0.1.28}")),),
          "benchmarks/results/model_throughput.json",
          (Number("client values/s, rounds 1 / 2", fn=_slash("runs.client", "0.values_per_s", "1.values_per_s")),
           Number("client values/s (median)", "summary.client_values_per_s"),
           Number("engine values/s, rounds 1 / 2", fn=_slash("runs.engine", "0.values_per_s", "1.values_per_s")),
           Number("engine values/s (median)", "summary.engine_values_per_s"),
           Number("engine / client", "summary.engine_over_client"),
           Number("engine / client, rounds 1 / 2", fn=lambda d: " / ".join(
               f"{_real(d['runs']['engine'][i]['values_per_s']) / _real(d['runs']['client'][i]['values_per_s']):.3f}"
               for i in (0, 1))),
           Number("engine agrees with the client", "summary.engine_agrees_with_client"),
           Number("prompt tokens / value, one per prompt", "summary.prompt_tokens_per_value_one_per_prompt"),
           *(Number(f"k={k}: values/s / prompt tokens per value / agreement", fn=_slash(
               f"summary.batched[values_per_prompt={k}]", "values_per_s", "prompt_tokens_per_value",
               "agreement_with_one_per_prompt")) for k in (4, 8)),
           Number("0.1.28 values/s", "summary.blendsql_0128_values_per_s"),
           Number("engine / 0.1.28", "summary.engine_over_blendsql_0128"),
           Number("0.1.28 prompt / completion tokens per value", fn=_slash(
               "runs.blendsql_0128", "prompt_tokens_per_value", "completion_tokens_per_value")),
           Number("0.1.28 agreement with the engine", "summary.blendsql_0128_agrees_with_engine"),
           Number("0.1.28 answers that did not parse (NULL)", "runs.blendsql_0128.null_answers"),
           *(Number(f"embedded {e}: values / values/s / prompt tokens per value / cached", fn=_slash(
               f"summary.embedded.{e}", "values", "values_per_s", "prompt_tokens_per_value",
               "cached_prompt_tokens_per_value"))
             for e in ("before", "after", "before_with_load", "after_with_load")),
           Number("embedded phase: 1-minute load at its start, without / with the busy process",
                  fn=_slash("embedded", "before.load_avg_at_start", "before_with_load.load_avg_at_start")),
           *(Number(f"embedded after / before{label}", fn=lambda d, w=w: round(
               _real(d["summary"]["embedded"][f"after{w}"]["values_per_s"])
               / _real(d["summary"]["embedded"][f"before{w}"]["values_per_s"]), 1))
             for label, w in (("", ""), (", with a busy process", "_with_load")))),
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
           *(Number(f"k={k}: values/s / prompt tokens per value / agreement", fn=_slash(
               f"summary.batched[values_per_prompt={k}]", "values_per_s", "prompt_tokens_per_value",
               "agreement_with_one_per_prompt")) for k in (4, 8))),
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
     *(Number(f"SQLite, {k} endpoint{'s' * (k > 1)}: limit / wall s / values/s / fraction / ratio / "
              "slot utilisation / driver cores busy", fn=_slash(row, *ES_ROW))
       for k, row in zip((1, 2, 4), ES_SQLITE, strict=True)),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}, 4 endpoints: limit / wall s / values/s / "
              "fraction / ratio / slot utilisation / driver cores busy", fn=_slash(row, *ES_ROW))
       for n, row in ES_SPARK.items()),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}, 4 endpoints: fraction of the "
              "summed limit", f"summary.executor_rows[executors={n}].fraction_of_limit")
       for n in (1, 2)),
     Number("SQLite, 4 endpoints: fraction of the limit between the first and the last request",
            f"{ES_SQLITE[2]}.model_phase_fraction_of_limit"),
     Number("SQLite, 4 endpoints: s before the first request / after the last answer",
            fn=_slash(f"{ES_SQLITE[2]}.phases_s", "before_first_request", "after_last_answer")),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}: fraction of the limit between the "
              "first and the last request; s before the first request / after the last answer",
              fn=_slash(row, "model_phase_fraction_of_limit", "phases_s.before_first_request",
                        "phases_s.after_last_answer"))
       for n, row in ES_SPARK.items()),
     Number("mean time a request spent in its slot, ms, every configuration",
            fn=lambda d: _span([1000 * _real(r["mean_service_s"]) for r in d["engine"]], 1)),
     Number("SQLite, 1 / 2 / 4 endpoints: fraction of the limit the servers could give",
            fn=lambda d: " / ".join(f"{_real(lookup(d, f'{row}.fraction_of_effective_limit')):.3f}"
                                    for row in ES_SQLITE)),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}: fraction of the limit the servers "
              "could give", f"{row}.fraction_of_effective_limit") for n, row in ES_SPARK.items()),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}: executor jobs", f"{row}.executor_jobs")
       for n, row in ES_SPARK.items()),
     Number("SQLite, 4 endpoints: driver CPU ms per value", f"{ES_SQLITE[2]}.client_cpu_ms_per_value"),
     Number("SQLite, 1 / 2 / 4 endpoints: driver CPU ms per value", fn=lambda d: _span(
         [lookup(d, f"{row}.client_cpu_ms_per_value") for row in ES_SQLITE], 2)),
     *(Number(f"Spark, {n} executor task slot{'s' * (n > 1)}: driver CPU ms per value",
              f"{row}.client_cpu_ms_per_value") for n, row in ES_SPARK.items()),
     Number("one request's CPU, ms: blendsql OpenAI.answer / the same on the SDK's httpx client "
            "/ openai SDK call / http.client + json",
            fn=lambda d: " / ".join(f"{_real(v):.2f}" for v in
                                    d["client_cpu_profile"]["cpu_ms_per_request"].values())),
     Number("baselines, values/s: Pool.generate alone / plain openai client (64 threads)",
            fn=_slash("baselines", "pool_only.values_per_s", "plain_openai_client.values_per_s")),
     Number("answers right, each value asked once", "summary.all_correct"),
     Number("client CPU ms per request, every row (SQLite 1 / 2 / 4, Spark 1 / 2)",
            fn=lambda d: " / ".join(f"{_real(r['client_cpu_ms_per_request']):.2f}"
                                    for r in d["summary"]["rows"]))),
    "~32 min", ("module:pyspark",), note="the Spark rows need Java 17",
    quick=(one(cmd("endpoint_scaling.py", "--rows", "250000", "--distinct", "25000",
                   "--endpoints", "1", "2", "4", "--executors", "1", "2", "--executor-endpoints",
                   "4", "--slots", "8", "--latency", "0.05", "--baseline-values", "10000",
                   "--profile", "2000")),),
    quick_takes="~8 min"),
    Bench("hot-path", "the engine's fixed cost on one small query (one deterministic map over "
          "world_1's 28 Dutch cities) against plain sqlite3 with the same Python function as "
          "a UDF: ms, ratio, folder changes, calls, tree copies",
          "benchmarks/README.md (The engine's fixed cost on one small query)",
          (one(cmd("hot_path.py", "--label", "now", "--repeat", "15")),),
          "benchmarks/results/hot_path.json",
          (Number("before: engine CPU ms", "before.median_of_3_processes.engine_cpu_ms"),
           Number("before: twin CPU ms", "before.median_of_3_processes.twin_cpu_ms"),
           Number("before: engine / twin", "before.median_of_3_processes.ratio"),
           Number("before: folder changes", "before.median_of_3_processes.folder_changes"),
           Number("before: package calls", "before.one_process_detail.calls"),
           Number("before: node copies", "before.median_of_3_processes.tree_copies"),
           Number("engine ms (median)", "now.engine_ms"),
           Number("sqlite3 + UDF twin ms (median)", "now.twin_ms"),
           Number("engine / twin (median of per-round ratios)", "now.ratio"),
           Number("folder changes in one execute", "now.folder_changes"),
           Number("package Python calls in one execute", "now.calls"),
           Number("sqlglot node copies in one execute", "now.tree_copies")),
          "~10 s"),
    Bench("many-filters", "planning and running n AND-ed ingredient filters on one table "
          "(seconds, statements, values passed) for n = 5 .. 200",
          "benchmarks/README.md (The engine's fixed cost on one small query)",
          (one(cmd("many_filters.py", "--sizes", "5", "10", "20", "40", "100", "200",
                   "--label", "after_hooks")),),
          "benchmarks/results/many_filters.json",
          (*(Number(f"{n} filters: seconds", f"after_hooks.results[filters={n}].seconds")
             for n in (5, 10, 20, 40, 100, 200)),
           Number("200 filters when the issue was opened: seconds",
                  "before_issue26_head.results[filters=200].seconds")),
          "~10 s"),
    Bench("spark-driver-costs", "what one distinct value costs the driver on Spark (an instant "
          "model, requests on the executors): ms per value, driver CPU and memory; 1M values",
          "docs/scaling.md (Measured on one machine)",
          (one(cmd("spark_driver_costs.py", "--rows", "2000000", "--distinct", "1000000")),),
          "benchmarks/results/spark_driver_costs.json",
          (Number("wall ms per value", "per_value_ms.wall"),
           Number("driver CPU ms per value", "per_value_ms.driver_cpu"),
           Number("driver memory MB per million values",
                  "driver_rss_mb.growth_per_million_values"),
           Number("right count, every request on the executors", "correct")),
          "~2 min", ("module:pyspark",), note="Spark needs Java 17"),
    Bench("llama-servers", "LLMMap values/s through a pool of two real llama.cpp servers "
          "(llama_cpp.server, embedded model) against one, and one of two threads",
          "benchmarks/README.md (Two real llama.cpp servers against one)",
          (one(cmd("llama_servers.py", "--values", "200", "--rounds", "3")),),
          "benchmarks/results/llama_servers.json",
          (*(Number(f"{c}: values/s", f"summary.rows[config={c}].values_per_s")
             for c in ("1x1", "2x1", "1x2")),
           *(Number(f"{c}: wall s / values/s / ratio to 1x1 / server cores busy", fn=_slash(
               f"summary.rows[config={c}]", "wall_s", "values_per_s", "ratio_to_first", "server_cores_busy"))
             for c in ("1x1", "2x1", "1x2")),
           *(Number(f"{c}: requests per server, each round", fn=lambda d, c=c: ", ".join(
               " / ".join(str(v[i]) for v in lookup(d, f"summary.rows[config={c}].requests_per_server").values())
               for i in range(lookup(d, f"summary.rows[config={c}].rounds"))))
             for c in ("1x1", "2x1", "1x2")),
           Number("2x1 / 1x1", "summary.ratios.2x1_over_1x1"),
           Number("2x1 / 1x2", "summary.ratios.2x1_over_1x2"),
           Number("answers identical in every run", "summary.agreement.identical_everywhere"),
           Number("right on the labels (the small model)", "summary.rows[config=1x1].accuracy_vs_labels"),
           Number("every value answered once, counts agree", "summary.all_correct")),
          "~3 min", ("module:llama_cpp",)),
    Bench("plain-backends", "the plain part of a 10M-row query on Spark (local[2], local[1]) vs "
          "DuckDB vs SQLite, twin and BlendSQL",
          "benchmarks/README.md (Spark vs DuckDB vs SQLite)",
          (one(cmd("plain_backends.py", "--rows", "10000000", "--repeat", "3")),),
          "benchmarks/results/plain_backends.json",
          (*(Number(f"{b}: {k}", f"summary.rows[backend={b}].{k}")
             for b in PLAIN_BACKENDS for k in ("plain_ms", "blendsql_ms")),
           *(Number(f"{b}: twin / BlendSQL / difference / candidate values query / final query, ms",
                    fn=_plain_row(b)) for b in PLAIN_BACKENDS),
           *(Number(f"Spark local[2] / {o}, plain / BlendSQL", fn=_slash(
               f"summary.ratios.spark_local2/{o}", "plain", "blendsql")) for o in ("sqlite", "duckdb")),
           Number("Spark local[2] / SQLite, plain", "summary.ratios.spark_local2/sqlite.plain"),
           Number("Spark local[2] / DuckDB, plain", "summary.ratios.spark_local2/duckdb.plain"),
           Number("Spark local[1] / local[2], plain", "summary.ratios.spark_local1/spark_local2.plain"),
           Number("the ingredient, ms (every backend)", fn=lambda d: _span(
               [b["blendsql_ms_by_step_kind"]["ingredient"] for b in d["backends"]], 1)),
           Number("values sent to the ingredient", "summary.rows[backend=sqlite].values_sent_to_ingredient"),
           Number("rows of the result", "result.rows"),
           Number("building: SQLite s / MB, DuckDB s / MB", fn=_slash(
               "build", "sqlite_build_s", "sqlite_mb", "duckdb_build_s", "duckdb_mb")),
           Number("first Spark session s / the Parquet view s", fn=_slash(
               "build", "spark_local2_session_start_s", "spark_local2_register_view_s")),
           Number("same rows everywhere", "summary.same_rows_everywhere")),
          "~5 min", ("module:pyspark",), note="Spark needs Java 17"),
)

def _stratum_row(mode: str, stratum: str) -> Callable[[Any], Any]:
    """One row of a strata table (``sembench.py --strata``): reviews, positives and
    negatives, accuracy / FPR / FNR in % with their 95% intervals, the mean count error
    and the predicted / true counts."""
    def read(data: Any) -> Any:
        row = data["modes"][mode]["strata"][stratum]
        pct = [100 * x for x in (row["accuracy"]["accuracy"], *row["accuracy"]["ci95"],
                                           row["fpr"]["rate"], *row["fpr"]["ci95"],
                                           row["fnr"]["rate"], *row["fnr"]["ci95"])]
        return [row["reviews"], row["positives"], row["negatives"], row["instances"], *pct,
                row["count_relative_error_mean"], row["predicted_vs_true_counts"]]
    return read


_STRATA = ("<=10%", "10-40%", "40-60%", ">=60%")
#: the decision modes per split: tune compares framings; report measures the chosen default
_STRATA_MODES = {"tune": "auto,argmax,labels-argmax,yesno-argmax", "report": "auto,argmax"}


def _separation(mode: str) -> Callable[[dict[str, Any]], Any]:
    def read(d: dict[str, Any]) -> Any:
        sep = d["modes"][mode]["separation"]
        return [sep["auc"], *sep["auc_ci95"], sep["best_threshold_per_stratum_accuracy"]]
    return read
_TOUCHED = tuple(f"benchmarks/results/sembench_{name}" for name in (
    "report.json", "report_1.json", "report_1.jsonl", "report_2.json", "report_2.jsonl",
    "report_proxy.json", "report_proxy.jsonl", "lotus_report.json", "lotus_report.jsonl",
    "blendsql0128_report.json", "blendsql0128_report.jsonl", "palimpzest_report.json",
    "palimpzest_report.jsonl"))

BENCHES = (*BENCHES, *(
    Bench(f"sembench-strata{'-tune' if split == 'tune' else ''}",
          f"yes/no maps per stratum of the positive rate on the {split.upper()} split "
          "(issue 38): accuracy, FPR, FNR with intervals, counts; decision modes side by side",
          "benchmarks/README.md (SemBench)",
          (one(cmd("sembench.py", "--strata", "--split", split, "--strata-modes", _STRATA_MODES[split],
                   "--threads", "2", "--data", "sembench", "--strata-cache", "strata_cache.sqlite",
                   *(("--exclude-touched", *_TOUCHED) if split == "report" else ()),
                   "--out", f"benchmarks/results/sembench_strata_{split}.jsonl")),),
          f"benchmarks/results/sembench_strata_{split}.json",
          (*(Number(f"{mode}, stratum {stratum}", fn=_stratum_row(mode, stratum))
             for mode in _STRATA_MODES[split].split(",") for stratum in _STRATA),
           *(Number(f"{mode}: AUC of P(TRUE) and the best-threshold ceiling per stratum",
                    fn=_separation(mode)) for mode in _STRATA_MODES[split].split(",")
             if split == "tune")),
          "~40 min (one process)", ("eval-model", "data:sembench"))
    for split in ("tune", "report")),
    Bench("rank-calls", "LLMRank's model calls against n and k with a deterministic comparator "
          "(issue 38), beside the plan's estimate and all pairs",
          "benchmarks/README.md (SemBench)", (one(cmd("rank_calls.py")),),
          "benchmarks/results/rank_calls.json",
          (Number("calls per (n, k): model calls, plan estimate, all pairs", fn=lambda d: [
              [r["n"], r["k"], r["model_calls"], r["plan_estimate"], r["all_pairs"]]
              for r in d["rows"]]),),
          "seconds"),
)

_DECLINE_SETS = (("off_schema_turn1", "off-schema questions at turn 1"),
                 ("off_schema_turn5", "off-schema questions at turn 5"),
                 ("answerable", "answerable turns (wrongly declined)"))

BENCHES = (*BENCHES,
    Bench("dialogue-declines", "declining in a dialogue (issue 43): off-schema questions declined at "
          "turn 1 and at turn 5 of SParC dev interactions, answerable turns wrongly declined; this rule "
          "and the rule before issue 43, from the same model scores",
          "benchmarks/README.md (Declining in a dialogue)",
          (one(cmd("dialogue_declines.py", "--interactions", "3", "--answerable-interactions", "12",
                   "--out", "benchmarks/results/dialogue_declines_dev.json")),),
          "benchmarks/results/dialogue_declines_dev.json",
          tuple(Number(f"{label}: {rule} rule, declined (95% CI)",
                       fn=_right(f"summary.{key}.{rule}_declined", pct=True))
                for key, label in _DECLINE_SETS for rule in ("new", "old")),
          "~1 h (one process, 2 shared cores)", ("eval-model", "data:sparc", "data:spider")),
)

REGISTRY: dict[str, Bench] = {b.name: b for b in BENCHES}


# ------------------------------------------------------------------------------ running


def _parsed(rel: str, text: str) -> Any:
    if rel.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def committed_file(rel: str) -> Any:
    """A repository-relative results file (``.json``; ``.jsonl``: its rows) as committed
    (``git show HEAD:...``), else as it is on disk; None when it is neither."""
    try:
        out = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        if out.returncode == 0:
            return _parsed(rel, out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return current_file(rel)


def current_file(rel: str) -> Any:
    """A repository-relative results file as it is on disk (after a run); None without it."""
    try:
        return _parsed(rel, (ROOT / rel).read_text())
    except (OSError, ValueError):
        return None


def recorded_json(bench: Bench) -> Any:
    """The results file as committed (``git show HEAD:...``), else as it is on disk."""
    return committed_file(bench.results)


def read_numbers(bench: Bench, data: Any, load: Callable[[str], Any] = committed_file) -> list[Any]:
    """Each number of ``bench`` read from ``data`` (its results file; ``load`` reads the
    other files a number names in ``also``), None for one that is not there."""
    out = []
    for n in bench.numbers:
        try:
            out.append(None if data is None else n.read(data, load))
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, StopIteration):
            out.append(None)
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return _g(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def number_table(bench: Bench, recorded: list[Any], now: list[Any] | None) -> str:
    """One line per number (label, recorded, now); a number whose label or value is long
    takes a block: its label, then the recorded and the new value indented below it."""
    shown = [(n.label, _shown(recorded[i]), None if now is None else _shown(now[i]))
             for i, n in enumerate(bench.numbers)]

    def short(label: str, old: str, new: str | None) -> bool:
        return len(label) <= 72 and len(old) <= 12 and (new is None or len(new) <= 12)

    width = max([len(label) for label, old, new in shown if short(label, old, new)] or [6])
    lines = [f"{'number':{width}s}  {'recorded':>10s}" + ("  now" if now is not None else "")]
    for label, old, new in shown:
        if short(label, old, new):
            lines.append(f"{label:{width}s}  {old:>10s}" + (f"  {new}" if new is not None else ""))
        else:
            lines.append(label)
            lines.append(f"    recorded  {old}")
            if new is not None:
                lines.append(f"    now       {new}")
    return "\n".join(lines)


def _quote(arg: str) -> str:
    if "'" in arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return shlex.quote(arg)


def shell(command: Sequence[str]) -> str:
    return "python benchmarks/" + " ".join(_quote(a) for a in command)


# with one of these flags a command reads its --out (recorded items) rather than writing it
READS_OUT = ("--policies",)


def outputs(bench: Bench) -> list[Path]:
    """The ``--out`` files of the commands that resume from them (``.jsonl``), with the
    summaries beside them: what a run moves aside."""
    out = []
    for command in bench.commands():
        if any(flag in command for flag in READS_OUT):
            continue
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
    now = read_numbers(bench, recorded_json_now(bench), current_file)
    print(f"\n{bench.name}: {bench.results} ({time.monotonic() - t_all:.0f} s in all)")
    print(number_table(bench, recorded, now))
    return 0


def recorded_json_now(bench: Bench) -> Any:
    """The results file as the run left it on disk."""
    return current_file(bench.results)


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
    ap.add_argument("--quick", action="store_true",
                    help="the benchmark's smaller run, where it has one (see --list)")
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
    if args.quick:
        if not bench.quick:
            print(f"{bench.name} has no --quick run", file=sys.stderr)
            return 2
        bench = dataclasses.replace(bench, steps=bench.quick, takes=bench.quick_takes)
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
