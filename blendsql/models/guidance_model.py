"""Adapter for users who bring their own ``guidance`` model (guidance >= 0.3).

guidance enforces constraints with llguidance at the token level, for any of
its backends (``guidance.models.LlamaCpp``, ``Transformers``, ...). This adapter
maps each blendsql constraint to a guidance grammar node:
``Choice``/``Bool`` → ``select``, scalars and ``Regex`` → ``gen(regex=...)``,
``ListOf``/``JsonSchema`` → ``guidance.json``, a raw GBNF ``Grammar`` →
``guidance.lark``. It is an optional backend (the ``guidance`` extra); the
default llama.cpp path compiles to GBNF directly and is faster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.base import (
    DEFAULT_TIMEOUT,
    Model,
    Request,
    Response,
    TimedBatch,
    Usage,
    check_timeout,
    parse_response,
)
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Grammar,
)
from blendsql.models.openai_compat import constraint_json_schema, constraint_regex

_CAPTURE = "blendsql_answer"


def _import_guidance() -> Any:
    """guidance is optional: import it late, with an install hint if missing."""
    try:
        import guidance
    except ImportError as e:
        raise ModelError("the guidance backend needs the 'guidance' package",
                         hint="pip install 'blendsql[guidance]'") from e
    return guidance


def constraint_node(g: Any, req: Request) -> Any:
    """The guidance grammar node producing an answer to ``req`` under its constraint.

    The answer is captured under one fixed name so ``generate`` can read it back.
    """
    c: Constraint = req.constraint
    node: Any
    if isinstance(c, Choice) and c.options:
        node = g.select(list(c.options), name=_CAPTURE)
    elif isinstance(c, Bool):
        node = g.select(["true", "false"], name=_CAPTURE)
    elif isinstance(c, Grammar):
        node = g.lark(g.gbnf_to_lark(c.gbnf), name=_CAPTURE, max_tokens=req.max_tokens)
    elif (schema := constraint_json_schema(c)) is not None:
        node = g.json(name=_CAPTURE, schema=schema, max_tokens=req.max_tokens)
    elif (rx := constraint_regex(c)) is not None:
        node = g.gen(name=_CAPTURE, regex=rx, max_tokens=req.max_tokens)
    else:  # Text (or an unknown constraint): free text, validated afterwards
        node = g.gen(name=_CAPTURE, max_tokens=req.max_tokens, stop=list(req.stop) or None)
    return g.with_temperature(node, req.temperature)


class Guidance(Model):
    """Wrap a guidance model (e.g. ``guidance.models.LlamaCpp(path)``) as a blendsql model.

    ``chat=True`` sends the request's messages through the model's chat template
    (guidance role blocks); ``chat=False`` feeds the plain prompt text.

    Each request may take ``timeout`` seconds; past it, ``ModelTimeoutError``.
    guidance cannot be interrupted, so the request keeps running in its worker
    thread, and the model refuses new requests until it ends (two requests at
    once on one engine could crash it).
    """

    def __init__(self, model: Any, *, name: str | None = None, chat: bool = True,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self._g = _import_guidance()
        if not isinstance(model, self._g.models.Model):
            raise ModelError(f"Guidance() expects a guidance model, got {type(model).__name__}",
                             hint="e.g. Guidance(guidance.models.LlamaCpp('model.gguf', echo=False))")
        self.lm = model
        self.chat = chat
        self.name = name or f"guidance:{type(model).__name__}"
        self.timeout = check_timeout(timeout)
        self._stuck: threading.Thread | None = None  # a request still running past its limit

    def identity(self) -> str:
        engine = getattr(self.lm, "_interpreter", None)
        inner = getattr(getattr(engine, "engine", None), "model_obj", None)
        path = getattr(inner, "model_path", "") if inner is not None else ""
        return f"guidance:{type(self.lm).__name__}:{path or self.name}:chat={self.chat}"

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        # guidance models are stateful engines: requests run one after another
        if not requests:
            return []
        if self._stuck is not None and self._stuck.is_alive():
            raise ModelError(f"{self.name} is still running a request that timed out or was stopped",
                             hint="wait for it to end, or load a new guidance model")
        batch = TimedBatch(self._one, list(requests))
        try:
            batch.run_within(self.timeout, self.name)
        except BaseException:  # a request timed out, or the query stopped (time-out, Ctrl-C)
            if batch.thread is not None and batch.thread.is_alive():
                self._stuck = batch.thread  # its request still runs on the engine
            raise
        return batch.out

    def _prompted(self, req: Request) -> Any:
        """The base model with the request's prompt appended (chat roles if enabled)."""
        g, lm = self._g, self.lm
        if not self.chat:
            return lm + (req.prompt or "\n".join(c for _, c in req.messages))
        roles = {"system": g.system, "user": g.user, "assistant": g.assistant}
        for msg in req.as_messages():
            block = roles.get(msg["role"], g.user)
            with block():
                lm = lm + msg["content"]
        return lm

    def _one(self, req: Request) -> Response:
        g = self._g
        t0 = time.perf_counter()
        lm = self._prompted(req)
        node = constraint_node(g, req)
        try:
            if self.chat:
                with g.assistant():
                    lm = lm + node
            else:
                lm = lm + node
        except Exception as e:  # guidance/llguidance raise assorted types
            raise ModelError(f"guidance failed on a {type(req.constraint).__name__} constraint: {e}",
                             hint="check the regex / schema is supported by llguidance") from e
        text = str(lm.get(_CAPTURE) or "")
        value, err = parse_response(text, req.constraint)
        return Response(text, value, _usage(lm), time.perf_counter() - t0, error=err)


def _usage(lm: Any) -> Usage:
    """Token counts guidance recorded for this generation (zeros if it exposes none)."""
    try:
        u = lm._get_usage()
    except AttributeError:
        return Usage()
    return Usage(int(getattr(u, "input_tokens", 0) or 0), int(getattr(u, "output_tokens", 0) or 0),
                 int(getattr(u, "cached_input_tokens", 0) or 0))


__all__ = ["Guidance", "constraint_node"]
