"""Runs queries on the PyPI package ``blendsql==0.1.28`` (executed INSIDE its own venv).

Why a separate process: that package is also imported as ``blendsql``, so it
cannot share an interpreter with this repository. benchmarks/call_economy.py
starts this file with the other venv's python and talks JSON over
stdin/stdout:

    stdin:  {"queries": [{"id": str, "db": path, "sql": str}, ...],
             "model": {"name": str, "base_url": str, "class": str} (optional),
             "builtin_ingredients": [names] (optional: 0.1.28's own, e.g. LLMMap),
             "env": {name: value} (optional: 0.1.28's settings, e.g. BLENDSQL_MAX_TOKENS)}
    stdout: {"version": str, "results": [{"id", "rows", "columns", "map_values",
             "map_calls", "qa_calls", "meta", "seconds", "error"}, ...]}

An item with ``"repeat": n`` also gets ``exec_seconds``: the CPU seconds of n
more runs of the same query on the same session (benchmarks/engine_overhead.py).

The ingredients below are the same deterministic functions as the benchmark's
(``IsPrefix``, ``TextLen``, ``CountCtx``), written against 0.1.28's ingredient
API (``run(values, question=...)`` for maps, ``run(question, context, ...)``
for QA). They record what they are handed, so "values passed" is counted the
same way for every engine: one per map value, one per QA invocation.
This file must not import anything from this repository.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

RECORD: dict[str, Any] = {"map_values": 0, "map_calls": 0, "qa_calls": 0}


def _text(value: Any) -> str:
    """SQLite ``CAST(x AS TEXT)`` for the values in the fixture databases."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return repr(value)
    return str(value)


def build_ingredients() -> list[type]:
    """The recording ingredients as 0.1.28 ingredient classes."""
    import importlib

    # looked up dynamically: type checkers resolve ``blendsql`` to this repository's package
    mod: Any = importlib.import_module("blendsql.ingredients")
    MapIngredient: Any = mod.MapIngredient
    QAIngredient: Any = mod.QAIngredient

    class IsPrefix(MapIngredient):
        """True where the value's text starts with the question."""

        def run(self, values: list[Any], question: str | None = None, **kwargs: Any) -> list[Any]:
            RECORD["map_values"] += len(values)
            RECORD["map_calls"] += 1
            prefix = question or ""
            return [None if v is None else _text(v).startswith(prefix) for v in values]

    class TextLen(MapIngredient):
        """Length of the value's text, like SQLite ``length``."""

        def run(self, values: list[Any], question: str | None = None, **kwargs: Any) -> list[Any]:
            RECORD["map_values"] += len(values)
            RECORD["map_calls"] += 1
            return [None if v is None else len(_text(v)) for v in values]

    class CountCtx(QAIngredient):
        """Number of rows of the context table(s)."""

        def run(self, question: str | None = None, context: Any = None, **kwargs: Any) -> Any:
            RECORD["qa_calls"] += 1
            if context is None:
                return 0
            return sum(len(c) for c in context)

    return [IsPrefix, TextLen, CountCtx]


def _cell(value: Any) -> Any:
    """A JSON-safe cell (the caller normalises types)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def make_model(spec: dict[str, Any] | None) -> Any:
    """0.1.28's OpenAI client pointed at a local OpenAI-compatible server, or None.

    Why: 0.1.28 has no llama.cpp backend; a local ``llama_cpp.server`` lets it
    run the same GGUF as our embedded model, offline.
    """
    if not spec:
        return None
    import importlib

    model_cls: Any = getattr(importlib.import_module("blendsql.models"), spec.get("class", "OpenAI"))
    return model_cls(spec["name"], api_key="local", base_url=spec["base_url"])


def builtin_ingredients(names: list[str]) -> list[type]:
    """0.1.28's own ingredients by name (e.g. ``LLMMap``), for model benchmarks."""
    import importlib

    mod: Any = importlib.import_module("blendsql.ingredients")
    return [getattr(mod, n) for n in names]


def run_one(item: dict[str, Any], ingredients: list[type],
            model_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute one query; never raise (errors are data for the comparison).

    A fresh model client per query, because 0.1.28's model counters accumulate.
    """
    import importlib

    BlendSQL: Any = importlib.import_module("blendsql").BlendSQL
    for key in RECORD:
        RECORD[key] = 0
    out: dict[str, Any] = {"id": item["id"]}
    t0 = time.perf_counter()
    try:
        bsql = BlendSQL(item["db"], ingredients=set(ingredients), model=make_model(model_spec))
        smoothie: Any = bsql.execute(item["sql"])
        df = smoothie.df()
        if item.get("repeat"):  # timing mode (engine_overhead.py): execute + DataFrame
            out["exec_seconds"] = []
            for _ in range(int(item["repeat"])):
                c0 = time.process_time()
                bsql.execute(item["sql"]).df()
                out["exec_seconds"].append(time.process_time() - c0)
        out["columns"] = [str(c) for c in df.columns]
        out["rows"] = [[_cell(v) for v in row] for row in df.itertuples(index=False, name=None)]
        m: Any = smoothie.meta
        out["meta"] = {"num_values_passed": m.num_values_passed,
                       "num_generation_calls": m.num_generation_calls,
                       "prompt_tokens": m.prompt_tokens,
                       "completion_tokens": m.completion_tokens}
        out["error"] = None
    except Exception as e:  # noqa: BLE001 - any failure is a result to report
        out["rows"] = None
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    out["seconds"] = time.perf_counter() - t0
    out.update(RECORD)
    return out


def main() -> None:
    """Read the queries from stdin, write the results to stdout."""
    import logging
    from importlib.metadata import version

    logging.disable(logging.CRITICAL)
    request = json.load(sys.stdin)
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    ingredients = (builtin_ingredients(request["builtin_ingredients"])
                   if request.get("builtin_ingredients") else build_ingredients())
    results = [run_one(item, ingredients, request.get("model")) for item in request["queries"]]
    json.dump({"version": version("blendsql"), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
