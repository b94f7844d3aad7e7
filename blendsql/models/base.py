"""The model contract: a batch of requests in, responses out.

Every backend (llama.cpp, OpenAI-compatible, guidance, a Python function)
implements ``Model.generate``. Ingredients only ever see this interface.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from blendsql.models.constraints import Constraint, Text


@dataclass(frozen=True)
class Request:
    """One generation: a prompt (or chat messages), a constraint and limits."""

    prompt: str = ""
    messages: tuple[tuple[str, str], ...] = ()  # (role, content) pairs; wins over prompt
    constraint: Constraint = field(default_factory=Text)
    max_tokens: int = 64
    temperature: float = 0.0
    stop: tuple[str, ...] = ()

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages:
            return [{"role": r, "content": c} for r, c in self.messages]
        return [{"role": "user", "content": self.prompt}]

    def key(self) -> str:
        """Stable identity of the request (for the cache)."""
        return repr((self.prompt, self.messages, self.constraint.key(), self.max_tokens,
                     self.temperature, self.stop))


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def __iadd__(self, other: Usage) -> Usage:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        return self


@dataclass
class Response:
    """What came back: raw text, the parsed value (None if unparseable), usage."""

    text: str
    value: Any = None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    cached: bool = False
    error: str | None = None  # set when the text could not be parsed after retries


class Model(ABC):
    """A language model backend."""

    name: str = "model"
    # False: the default persistent cache skips this model (its outputs may change
    # between sessions without its identity changing, e.g. a Python function).
    cacheable: bool = True

    @abstractmethod
    def generate(self, requests: Sequence[Request]) -> list[Response]:
        """Answer each request; the output list is parallel to the input."""

    def identity(self) -> str:
        """What makes two models interchangeable for caching (name + weights + params)."""
        return self.name

    def count_tokens(self, text: str) -> int:
        """Token count of ``text``; backends with a tokenizer override this."""
        return max(1, len(text) // 4)


def parse_response(text: str, constraint: Constraint) -> tuple[Any, str | None]:
    """Parse ``text`` under ``constraint``: (value, None) or (None, error message)."""
    try:
        return constraint.parse(text), None
    except (ValueError, TypeError) as e:
        return None, f"could not parse {text!r} as {constraint.describe()}: {e}"


class FunctionModel(Model):
    """A Python callable as a model, for tests and rules.

    ``fn(request)`` returns either text (parsed with the request's constraint)
    or an already-typed value. Not persistently cached by default (a function's
    code can change while its name stays); pass ``cacheable=True`` with a
    distinctive ``name`` to opt in.
    """

    def __init__(self, fn: Callable[[Request], Any], name: str = "function",
                 cacheable: bool = False) -> None:
        self.fn = fn
        self.name = name
        self.cacheable = cacheable

    def identity(self) -> str:
        return f"function:{self.name}:{getattr(self.fn, '__qualname__', repr(self.fn))}"

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            result = self.fn(req)
            if isinstance(result, str):
                value, err = parse_response(result, req.constraint)
                text = result
            else:
                value, err, text = result, None, str(result)
            usage = Usage(self.count_tokens(req.prompt or str(req.messages)), self.count_tokens(text))
            out.append(Response(text, value, usage, time.perf_counter() - t0, error=err))
        return out
