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

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
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
from blendsql.models.gguf import EXTRA_BUFTS_ENV, CpuFeatures, LoadInfo, kernel_choice, load_llama
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
    """Wrap a guidance model as a blendsql model; ``model`` may also be a GGUF path.

    ``Guidance("model.gguf")`` (or :meth:`from_gguf`) loads the file through
    blendsql's one GGUF loader (:func:`blendsql.models.gguf.load_llama`: llama.cpp's
    extra buffer types off on AMX CPUs, where they crash) and hands guidance the
    loaded ``llama_cpp.Llama``. A guidance model built elsewhere is checked: one
    whose llama.cpp model was loaded with extra buffer types on a CPU where they
    crash is refused with a hint, before its first decode.

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
        self.load_info: LoadInfo | None = None
        if isinstance(model, (str, os.PathLike)):
            model, self.load_info = gguf_for_guidance(model)
        if not isinstance(model, self._g.models.Model):
            raise ModelError(f"Guidance() expects a guidance model, got {type(model).__name__}",
                             hint="e.g. Guidance('model.gguf'), or Guidance(a guidance.models.Model)")
        check_kernels(model)
        self.lm = model
        self.chat = chat
        self.name = name or f"guidance:{type(model).__name__}"
        self.timeout = check_timeout(timeout)
        self._stuck: threading.Thread | None = None  # a request still running past its limit

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str] | None = None, *, n_ctx: int = 2048,
                  extra_bufts: bool | None = None, cpu: CpuFeatures | None = None,
                  name: str | None = None, chat: bool = True,
                  timeout: float = DEFAULT_TIMEOUT, **llama_kwargs: Any) -> Guidance:
        """guidance's LlamaCpp over a GGUF loaded by blendsql's loader (default: the
        embedded model); ``llama_kwargs`` go to ``llama_cpp.Llama``."""
        lm, info = gguf_for_guidance(path, n_ctx=n_ctx, extra_bufts=extra_bufts, cpu=cpu,
                                     **llama_kwargs)
        out = cls(lm, name=name, chat=chat, timeout=timeout)
        out.load_info = info
        return out

    def identity(self) -> str:
        inner = _llama_of(self.lm)
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


def gguf_for_guidance(path: str | os.PathLike[str] | None = None, *, n_ctx: int = 2048,
                      extra_bufts: bool | None = None, cpu: CpuFeatures | None = None,
                      **llama_kwargs: Any) -> tuple[Any, LoadInfo]:
    """A ``guidance.models.LlamaCpp`` over a ``llama_cpp.Llama`` that
    :func:`~blendsql.models.gguf.load_llama` loaded, and how it was loaded.

    guidance given a path would build the ``Llama`` itself with llama.cpp's defaults
    (extra buffer types on, which crash on AMX CPUs); given the loaded object it uses
    it as it is. ``logits_all=True`` is what guidance asks for when it loads one itself.
    """
    from blendsql.models.llamacpp import default_model_path

    g = _import_guidance()
    file = Path(path).expanduser() if path is not None else default_model_path()
    llm, info = load_llama(file, extra_bufts=extra_bufts, cpu=cpu, n_ctx=n_ctx,
                           **{"logits_all": True, **llama_kwargs})
    return g.models.LlamaCpp(llm, echo=False), info


def _llama_of(lm: Any) -> Any:
    """The ``llama_cpp.Llama`` inside a guidance LlamaCpp model (None for other backends)."""
    engine = getattr(getattr(lm, "_interpreter", None), "engine", None)
    return getattr(engine, "model_obj", None)


def check_kernels(lm: Any, cpu: CpuFeatures | None = None) -> None:
    """Refuse a guidance model whose llama.cpp weights use extra buffer types on a CPU
    where they crash (decided as for every GGUF load; its first decode would segfault)."""
    inner = _llama_of(lm)
    params = getattr(inner, "model_params", None)
    if params is None or not getattr(params, "use_extra_bufts", False):
        return
    choice = kernel_choice(None, cpu)
    if not choice.extra_bufts:
        raise ModelError(
            f"this guidance model's llama.cpp weights use extra buffer types, which crash "
            f"on this CPU ({choice.reason})",
            hint="load it through blendsql: Guidance('model.gguf') or Guidance.from_gguf(path), "
                 f"or set {EXTRA_BUFTS_ENV}=1 to force them on")


def _usage(lm: Any) -> Usage:
    """Token counts guidance recorded for this generation (zeros if it exposes none)."""
    try:
        u = lm._get_usage()
    except AttributeError:
        return Usage()
    return Usage(int(getattr(u, "input_tokens", 0) or 0), int(getattr(u, "output_tokens", 0) or 0),
                 int(getattr(u, "cached_input_tokens", 0) or 0))


__all__ = ["Guidance", "constraint_node"]
