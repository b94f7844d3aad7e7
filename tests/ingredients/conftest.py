"""Fixtures for the built-in ingredient tests: a FunctionModel that records its requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from blendsql.models.base import FunctionModel, Request


class Recorder:
    """Wraps an answer function; keeps every request and counts generate() batches."""

    def __init__(self, answer: Callable[[Request], Any]) -> None:
        self.requests: list[Request] = []
        self.batches = 0
        self._answer = answer
        self.model = _CountingModel(self)

    def __call__(self, req: Request) -> Any:
        self.requests.append(req)
        return self._answer(req)

    @property
    def prompts(self) -> list[str]:
        return [r.prompt for r in self.requests]


class _CountingModel(FunctionModel):
    def __init__(self, rec: Recorder) -> None:
        super().__init__(rec, name="recorder")
        self.rec = rec

    def generate(self, requests):  # type: ignore[no-untyped-def]
        self.rec.batches += 1
        return super().generate(requests)


@pytest.fixture
def recorder() -> Callable[[Callable[[Request], Any]], Recorder]:
    """``recorder(fn)`` -> a Recorder whose ``.model`` answers with ``fn``."""
    return Recorder
