"""LLMMap prompt layout vs llama.cpp prefix caching.

LLMMap puts everything shared by the values of one call (instructions,
question, answer format, few-shot examples) first and the value last, so
llama.cpp re-evaluates only each prompt's tail. This script runs the same map
(Bool constraint, N baseball positions, SmolLM2-135M by default) twice:

- ``value_last``: the built-in template;
- ``value_first``: the same text with the value moved to the front (a
  subclass overriding ``template``), which defeats the shared prefix;

and records prompt tokens, cached (re-used) prompt tokens, wall time and the
machine's load average (timings on a shared 2-core machine are noisy; the
token counts are deterministic).

Run:  python benchmarks/llmmap_prefix_cache.py [--n 10] [--gguf PATH]
Writes benchmarks/results/llmmap_prefix_cache.json.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from blendsql.ingredients import LLMMap, prompts  # noqa: E402
from blendsql.models import LlamaCpp, Model, Request, Response  # noqa: E402
from blendsql.models.constraints import Bool  # noqa: E402

POSITIONS = ["sp", "1b", "rp", "c", "ss", "lf", "cf", "rf", "3b", "2b", "dh", "p",
             "closer", "catcher", "pitcher", "shortstop", "left field", "relief pitcher"]
FEW_SHOT = [("starting pitcher", True), ("first base", False), ("rp", True), ("2b", False)]


class ValueFirstMap(LLMMap):
    """The built-in prompt with the value moved to the front (the anti-pattern)."""

    template = "Value: {value}\n" + prompts.MAP_TEMPLATE.replace("\nValue: {value}\n", "\n")


class Recording(Model):
    """Wraps a model, keeping every response (for token accounting)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.responses: list[Response] = []

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def generate(self, requests: Any) -> list[Response]:
        out = self.inner.generate(requests)
        self.responses.extend(out)
        return out


def run_layout(ingredient: LLMMap, model: Model, values: list[str]) -> dict[str, Any]:
    rec = Recording(model)
    t0 = time.perf_counter()
    answers = ingredient.run("Is this baseball position a pitcher?", values, model=rec,
                             constraint=Bool(), few_shot=FEW_SHOT)
    seconds = time.perf_counter() - t0
    prompt = sum(r.usage.prompt_tokens for r in rec.responses)
    cached = sum(r.usage.cached_tokens for r in rec.responses)
    return {
        "values": len(values),
        "seconds": round(seconds, 3),
        "seconds_per_value": round(seconds / len(values), 3),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "evaluated_prompt_tokens": prompt - cached,
        "cached_fraction": round(cached / prompt, 3) if prompt else 0.0,
        "unparseable": sum(a is None for a in answers),
        "answers": dict(zip(values, answers, strict=True)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10, help="number of distinct values")
    ap.add_argument("--gguf", default=None, help="GGUF path (default: embedded SmolLM2-135M)")
    args = ap.parse_args()
    values = POSITIONS[: args.n]
    model = LlamaCpp(args.gguf)
    model.generate([Request("Say ok.", constraint=Bool(), max_tokens=4)])  # load + warm up
    results = {}
    for name, ing in [("value_first", ValueFirstMap()), ("value_last", LLMMap())]:
        model.generate([Request("Unrelated warm-up text to reset the cached prefix.",
                                constraint=Bool(), max_tokens=4)])
        results[name] = run_layout(ing, model, values)
    out = {
        "benchmark": "llmmap_prefix_cache",
        "command": " ".join(["python", "benchmarks/llmmap_prefix_cache.py", *sys.argv[1:]]),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(),
                    "loadavg_1m_at_end": round(os.getloadavg()[0], 2)},
        "model": str(model.path.name),
        "constraint": "Bool (GBNF)",
        "note": "timings share 2 cores with other jobs; token counts are deterministic",
        "results": results,
    }
    dest = ROOT / "benchmarks" / "results" / "llmmap_prefix_cache.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name:12s} prompt={r['prompt_tokens']} cached={r['cached_prompt_tokens']} "
              f"({r['cached_fraction']:.0%}) {r['seconds_per_value']} s/value")
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
