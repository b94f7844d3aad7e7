"""Fixtures for engine tests: deterministic ingredients and small databases."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql.ingredients.base import JoinIngredient, MapIngredient, QAIngredient
from blendsql.models.base import Model, Request, Response, Usage

WORLD = Path(__file__).resolve().parents[1] / "data" / "spider" / "world_1" / "world_1.sqlite"


class StartsWith(MapIngredient):
    """True where str(value) starts with the question; twin: substr(x, 1, n) = prefix."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.seen: list[list[Any]] = []
        self.kwargs: list[dict[str, Any]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        self.seen.append(list(values))
        self.kwargs.append(kwargs)
        return [str(v).startswith(str(question)) for v in values]


class Len(MapIngredient):
    """Length of the text; twin: length(x)."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.seen: list[list[Any]] = []

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        self.seen.append(list(values))
        return [len(str(v)) for v in values]


class CountCtx(QAIngredient):
    """Number of context rows; twin: (SELECT COUNT(*) FROM (<context>))."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.seen: list[dict[str, Any]] = []

    def run(self, question: Any, context: pd.DataFrame | None, options: list | None,
            **kwargs: Any) -> Any:
        self.seen.append({"question": question, "context": context, "options": options,
                          **kwargs})
        return 0 if context is None else len(context)


class PickMax(QAIngredient):
    """The largest option; twin: (SELECT MAX(col) ...)."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.seen: list[dict[str, Any]] = []

    def run(self, question: Any, context: Any, options: list | None, **kwargs: Any) -> Any:
        self.seen.append({"options": options, **kwargs})
        return max(options) if options else None


class LowerJoin(JoinIngredient):
    """Match values equal after lower-casing; twin: lower(a) = lower(b)."""

    def __init__(self, name: str | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        self.seen: list[tuple[list[Any], list[Any]]] = []

    def run(self, left_values: list, right_values: list, question: Any = None,
            **kwargs: Any) -> dict:
        self.seen.append((list(left_values), list(right_values)))
        right = {str(r).lower(): r for r in right_values}
        return {v: right[str(v).lower()] for v in left_values if str(v).lower() in right}


class Boom(MapIngredient):
    """Always raises: errors must become IngredientError and temp tables must go."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        raise KeyError("boom")


class ShortOutput(MapIngredient):
    """Returns one output too few."""

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        return [1] * (len(values) - 1)


class CountingModel(Model):
    """A model answering 'true' for every prompt, with fixed token usage."""

    name = "counting"

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def generate(self, requests: Any) -> list[Response]:
        self.requests.extend(requests)
        return [Response("true", True, Usage(10, 1, 2)) for _ in requests]


class AskModel(MapIngredient):
    """A map that asks the model once per value (needs_model=True)."""

    needs_model = True

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        model = kwargs["model"]
        reqs = [Request(prompt=f"{question}: {v}") for v in values]
        return [r.value for r in model.generate(reqs)]


@pytest.fixture()
def world(tmp_path: Path) -> Path:
    """A private copy of world_1 (tests may hash or open it read-write)."""
    dst = tmp_path / "world_1.sqlite"
    shutil.copy(WORLD, dst)
    return dst


@pytest.fixture()
def plain(world: Path) -> Any:
    """Run plain SQL on the fixture and return the rows."""
    def run(sql: str, params: Any = ()) -> list[tuple]:
        con = sqlite3.connect(world)
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()
    return run
