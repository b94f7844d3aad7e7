"""How close the README demo's yes/no answers are to flipping (issue 10, finding 7).

For the README query (``LLMMap('Is this position a pitcher?', 'w::position') = TRUE``
on the bundled ``example`` database) this records, per distinct position, the
decision margin of the embedded model under the ``true | false`` grammar:
the best logit among tokens that can start ``true`` minus the best among
tokens that can start ``false`` (greedy decoding picks the larger). A margin
near 0 can flip with CPU kernels (e.g. on an Intel AMX machine, where the
model loads without extra buffer types); the README states what holds.

The prompts are exactly the engine's: a ``FunctionModel`` records the
requests of the real query, then llama.cpp evaluates each chat prompt once.
Both loading paths (extra buffer types on / off) are measured.

    python benchmarks/demo_margins.py [--question '...'] [--column w::position]

Writes benchmarks/results/demo_margins.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from blendsql import BlendSQL  # noqa: E402
from blendsql.db.loaders import example_db_path  # noqa: E402
from blendsql.models import FunctionModel, LlamaCpp, Request  # noqa: E402
from blendsql.models.llamacpp import cpu_flags, extra_bufts_decision, system_info  # noqa: E402


def requests_of(query: str) -> list[Request]:
    """The requests the engine sends for ``query`` (answered 'true' to keep going)."""
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return "true"

    BlendSQL(str(example_db_path()), model=FunctionModel(fn)).execute(query)
    return seen


def margins(model: LlamaCpp, requests: list[Request]) -> dict[str, dict[str, Any]]:
    """Per value: the greedy answer and its margin over the other answer (logits)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llm = model.llm
    fmt = Jinja2ChatFormatter(template=llm.metadata["tokenizer.chat_template"],
                              eos_token="<|im_end|>", bos_token="<|im_start|>",
                              add_generation_prompt=True)
    vocab = [llm.detokenize([i]).decode("utf-8", "replace") for i in range(llm.n_vocab())]
    starts = {w: [i for i, t in enumerate(vocab) if t and w.startswith(t)] for w in ("true", "false")}
    out: dict[str, dict[str, Any]] = {}
    for req in requests:
        tokens = llm.tokenize(fmt(messages=req.as_messages()).prompt.encode(), add_bos=False,
                              special=True)
        llm.reset()
        llm.eval(tokens)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()
        m = float(logits[starts["true"]].max() - logits[starts["false"]].max())
        value = req.as_messages()[-1]["content"].split("Value: ")[-1].split("\n")[0]
        out[value] = {"answer": m > 0, "margin": round(m, 4)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--question", default="Is this position a pitcher?")
    ap.add_argument("--column", default="w::position")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/demo_margins.json")
    args = ap.parse_args()
    query = (f"SELECT name, position, school FROM w WHERE "
             f"{{{{LLMMap('{args.question}', '{args.column}')}}}} = TRUE")
    reqs = requests_of(query)
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "query": query,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                    "llama_system_info": system_info().strip(),
                    "auto_extra_bufts": extra_bufts_decision(system_info(), cpu_flags(), None)},
        "paths": {},
    }
    for bufts in (True, False):
        model = LlamaCpp(extra_bufts=bufts, n_threads=1)
        result["model"] = model.path.name
        result["paths"][f"extra_bufts={'on' if bufts else 'off'}"] = margins(model, reqs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
