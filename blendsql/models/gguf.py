"""The one way blendsql loads a GGUF: every ``llama_cpp.Llama`` is made here.

llama.cpp's *extra buffer types* (weights repacked for the CPU's fastest
kernels, including the AMX matmul path) crash in the first decode on some Intel
machines with AMX. A segfault cannot be caught, so the choice is taken before a
model loads, from the CPU's features (:func:`kernel_choice`), and applied the
same way wherever a GGUF is loaded:

- in this process, by :func:`load_llama` (the engine's ``LlamaCpp``, the
  guidance adapter, the benchmarks);
- in llama-cpp-python's OpenAI-compatible server, started through
  :func:`server_launcher` (``python -m blendsql.models.llama_server``), which
  loads its model under the same setting;
- in llama.cpp's own ``llama-server`` binary, by :func:`llama_server_flags`
  (``--no-repack``).

CPU detection is injectable: pass a :class:`CpuFeatures`, or set
``BLENDSQL_CPUINFO`` to a file read instead of ``/proc/cpuinfo`` (child
processes inherit it), so the AMX path's decisions are tested on any machine.
Code that wants the risky path on purpose runs it in a child process
(:func:`run_isolated`), where a crash is a result instead of the end of the
caller.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

from blendsql.errors import ModelError

EXTRA_BUFTS_ENV = "BLENDSQL_LLAMA_EXTRA_BUFTS"
THREADS_ENV = "BLENDSQL_LLAMA_THREADS"
#: a file read instead of /proc/cpuinfo (a fake CPU for tests; inherited by children)
CPUINFO_ENV = "BLENDSQL_CPUINFO"
_AMX_INFO = re.compile(r"\bAMX_INT8\s*=\s*1\b")
_AMX_FLAGS = frozenset({"amx_int8", "amx_tile", "amx_bf16"})
_ON, _OFF = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})
_INSTALL_HINT = "pip install llama-cpp-python (a C++ compiler is needed if no wheel fits)"

log = logging.getLogger("blendsql.models")


# ---------------------------------------------------------------- what the CPU is


@dataclass(frozen=True)
class CpuFeatures:
    """What the extra-buffer-type decision reads: llama.cpp's build summary, the CPU's
    flags and the user's override (``BLENDSQL_LLAMA_EXTRA_BUFTS``)."""

    system_info: str = ""
    flags: str = ""
    env: str | None = None

    @classmethod
    def detect(cls) -> CpuFeatures:
        """This machine's (or the fake CPU that ``BLENDSQL_CPUINFO`` names)."""
        return cls(system_info(), cpu_flags(), os.environ.get(EXTRA_BUFTS_ENV))


def cpu_flags(cpuinfo: str | os.PathLike[str] | None = None) -> str:
    """The ``flags`` line of /proc/cpuinfo ('' where there is none, e.g. macOS).

    ``cpuinfo``: the file to read; default ``$BLENDSQL_CPUINFO`` or /proc/cpuinfo.
    """
    path = cpuinfo or os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.partition(":")[2]
    except OSError:
        pass
    return ""


def system_info() -> str:
    """llama.cpp's build / CPU feature summary ('' if it cannot be read)."""
    try:
        import llama_cpp

        raw = llama_cpp.llama_print_system_info()
    except (ImportError, AttributeError, OSError):
        return ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def has_amx(cpu: CpuFeatures | None = None) -> bool:
    """True when the CPU (or llama.cpp's build) shows AMX, whatever the override says."""
    cpu = cpu or CpuFeatures.detect()
    return not extra_bufts_decision(cpu.system_info, cpu.flags, None)[0]


# ---------------------------------------------------------------- the decision


def extra_bufts_decision(system_info: str, cpu_flags: str, env: str | None) -> tuple[bool, str]:
    """Whether llama.cpp may use its extra (repacking / AMX) buffer types, and why.

    ``system_info`` is ``llama_print_system_info()`` (``AMX_INT8 = 1`` when the
    build has the AMX kernels), ``cpu_flags`` the ``flags`` of /proc/cpuinfo
    (``amx_int8`` / ``amx_tile`` when the CPU has AMX), ``env`` the value of
    ``BLENDSQL_LLAMA_EXTRA_BUFTS`` (``0`` / ``1`` force the choice). Either
    AMX sign is enough to take the safe path: its only cost is that weights
    are not repacked for faster kernels.
    """
    if env is not None and env.strip().lower() in _ON | _OFF:
        on = env.strip().lower() in _ON
        return on, f"{EXTRA_BUFTS_ENV}={env.strip()}"
    signs = []
    if _AMX_INFO.search(system_info or ""):
        signs.append("llama.cpp reports AMX_INT8 = 1")
    flags = sorted(_AMX_FLAGS & set((cpu_flags or "").split()))
    if flags:
        signs.append("the CPU has " + ", ".join(flags))
    if signs:
        return False, "AMX: " + "; ".join(signs) + " (llama.cpp's AMX buffer type can crash)"
    return True, "no AMX on this CPU"


@dataclass(frozen=True)
class KernelChoice:
    """Extra buffer types on or off, and why (what the trace and the logs show)."""

    extra_bufts: bool
    reason: str

    @property
    def flag(self) -> str:
        return "on" if self.extra_bufts else "off"


def kernel_choice(forced: bool | KernelChoice | None = None,
                  cpu: CpuFeatures | None = None) -> KernelChoice:
    """The decision for one load: ``forced`` (a caller's explicit choice, or a decision
    already taken) wins, then ``BLENDSQL_LLAMA_EXTRA_BUFTS``, then the CPU (off where
    AMX is present)."""
    if isinstance(forced, KernelChoice):
        return forced
    if forced is not None:
        if not isinstance(forced, bool):
            raise ModelError(f"extra_bufts={forced!r} is not True, False or None",
                             hint="None decides from the CPU (off where AMX is present)")
        return KernelChoice(forced, f"extra_bufts={forced} was asked for")
    cpu = cpu or CpuFeatures.detect()
    on, why = extra_bufts_decision(cpu.system_info, cpu.flags, cpu.env)
    return KernelChoice(on, why)


# ---------------------------------------------------------------- threads


def default_threads(cores: int, load: float) -> int:
    """Threads for llama.cpp: the cores this process may use minus those already busy.

    Why not every core: llama.cpp splits each matmul across its threads and
    waits for the slowest, so one thread sharing a core with another busy
    process stalls them all (2 cores, one busy process: a short call took a
    median 6.2 s with 2 prompt threads, 0.59 s with 1; see
    ``benchmarks/threads_under_load.py``). Why the 1-minute load average: it is
    what the OS reports cheaply everywhere; a machine that gets busier later
    is still better served than by taking every core. At least one thread.
    """
    cores = max(1, int(cores))
    busy = load if math.isfinite(load) and load > 0 else 0.0
    return max(1, min(cores, math.floor(cores - busy + 0.5)))


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_load() -> float:
    """The 1-minute load average (0 where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def threads_from_env() -> int | None:
    """``BLENDSQL_LLAMA_THREADS`` as a thread count (None when unset)."""
    raw = os.environ.get(THREADS_ENV)
    if raw is None or not raw.strip():
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ModelError(f"{THREADS_ENV}={raw!r} is not a thread count",
                         hint="set it to a positive integer, or unset it")
    return n


def check_threads(n: Any, name: str) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ModelError(f"{name}={n!r} is not a thread count", hint="pass a positive integer")
    return n


def load_threads(n_threads: int | None = None) -> int:
    """The thread count a load uses: the one given, ``BLENDSQL_LLAMA_THREADS``, or the
    cores left idle by the machine's load."""
    return (check_threads(n_threads, "n_threads") or threads_from_env()
            or default_threads(usable_cores(), machine_load()))


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class LoadInfo:
    """How a model was loaded, for logs, traces, tests and the identity."""

    extra_bufts: bool
    extra_bufts_reason: str
    n_threads: int
    n_threads_batch: int
    model: str = ""
    where: str = "in-process"

    def describe(self) -> str:
        bufts = "on" if self.extra_bufts else "off"
        return (f"extra buffer types {bufts} ({self.extra_bufts_reason}); "
                f"threads {self.n_threads} / batch {self.n_threads_batch}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Loaded(NamedTuple):
    """A loaded ``llama_cpp.Llama`` and how it was loaded."""

    llm: Any
    info: LoadInfo


_PARAMS_LOCK = threading.Lock()
_LOADS_LOCK = threading.Lock()
_LOADS: list[LoadInfo] = []


def load_count() -> int:
    """How many GGUF loads this process has made (a mark for :func:`loads_since`)."""
    with _LOADS_LOCK:
        return len(_LOADS)


def loads_since(mark: int) -> list[LoadInfo]:
    """The loads made after ``mark`` (what a run's trace reports)."""
    with _LOADS_LOCK:
        return list(_LOADS[mark:])


def _record(info: LoadInfo) -> None:
    with _LOADS_LOCK:
        _LOADS.append(info)
    log.info("loaded %s: %s", info.model, info.describe())


@contextmanager
def extra_bufts_applied(on: bool) -> Iterator[bool]:
    """While a Llama loads in this block, its model parameters say ``use_extra_bufts=on``.

    Why this way: ``Llama(...)`` builds its model parameters from
    ``llama_model_default_params()`` and loads the weights in the same
    constructor, with no keyword for ``use_extra_bufts``; the field must be set
    before loading (a crash in the first decode cannot be caught afterwards).
    Yields whether this llama-cpp-python has the field (older ones do not).
    """
    import llama_cpp.llama_cpp as lib

    names = {f[0] for f in getattr(lib.llama_model_params, "_fields_", [])}
    if "use_extra_bufts" not in names:
        yield False
        return
    original = lib.llama_model_default_params

    def patched() -> Any:
        params = original()
        params.use_extra_bufts = on
        return params

    with _PARAMS_LOCK:
        lib.llama_model_default_params = patched
        try:
            yield True
        finally:
            lib.llama_model_default_params = original


def load_llama(path: str | os.PathLike[str], *, extra_bufts: bool | KernelChoice | None = None,
               cpu: CpuFeatures | None = None, n_threads: int | None = None,
               n_threads_batch: int | None = None, verbose: bool = False,
               **llama_kwargs: Any) -> Loaded:
    """Load a GGUF with ``llama_cpp.Llama`` on the CPU-safe path.

    ``extra_bufts``: force llama.cpp's extra buffer types on or off (default:
    :func:`kernel_choice`, off where the CPU has AMX); ``cpu``: the CPU to decide
    for (default: this one). Threads default to :func:`load_threads`;
    ``n_threads_batch`` follows ``n_threads``. Other keywords go to ``Llama``.
    The load is logged and recorded for the run's trace (:func:`loads_since`).
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise ModelError(f"GGUF model file not found: {file}",
                         hint="pass the path of an existing .gguf file")
    try:
        from llama_cpp import Llama
    except ImportError as e:
        raise ModelError("llama-cpp-python is not installed", hint=_INSTALL_HINT) from e
    choice = kernel_choice(extra_bufts, cpu)
    threads = load_threads(n_threads)
    batch = check_threads(n_threads_batch, "n_threads_batch") or threads
    reason = choice.reason
    try:
        with extra_bufts_applied(choice.extra_bufts) as applied:
            llm = Llama(model_path=str(file), n_threads=threads, n_threads_batch=batch,
                        verbose=verbose, **llama_kwargs)
    except (ValueError, RuntimeError, OSError) as e:
        raise ModelError(f"llama.cpp could not load {file}: {e}",
                         hint="is it a GGUF file this llama-cpp-python version supports?") from e
    if not applied and not choice.extra_bufts:
        reason += "; this llama-cpp-python cannot turn them off (no use_extra_bufts field)"
    info = LoadInfo(bool(getattr(llm.model_params, "use_extra_bufts", choice.extra_bufts)),
                    reason, int(llm.context_params.n_threads),
                    int(llm.context_params.n_threads_batch), file.name)
    _record(info)
    return Loaded(llm, info)


# ---------------------------------------------------------------- servers


SERVER_MODULE = "blendsql.models.llama_server"


def server_launcher(extra_bufts: bool | KernelChoice | None = None, cpu: CpuFeatures | None = None) -> list[str]:
    """Interpreter arguments that start llama-cpp-python's server on the safe path.

    Use as ``[sys.executable, *server_launcher(), "--model", path, ...]``: the server
    process loads its model the way :func:`load_llama` does. With no choice given it
    decides itself (``auto``: the same rule, on the same machine, with the reason in
    its log); a forced choice or an injected ``cpu`` is decided here and passed on.
    """
    if extra_bufts is None and cpu is None:
        return ["-m", SERVER_MODULE, "--extra-bufts", "auto"]
    return ["-m", SERVER_MODULE, "--extra-bufts", kernel_choice(extra_bufts, cpu).flag]


def python_server_command(model: str | os.PathLike[str], *args: str,
                          python: str | None = None, extra_bufts: bool | None = None,
                          cpu: CpuFeatures | None = None) -> list[str]:
    """The whole command that serves ``model`` with llama-cpp-python's server, run by
    ``python`` (default: this interpreter, never whatever ``python`` is on PATH)."""
    return [python or sys.executable, *server_launcher(extra_bufts, cpu), "--model", str(model),
            *args]


def llama_server_flags(extra_bufts: bool | None = None, cpu: CpuFeatures | None = None) -> list[str]:
    """Flags for llama.cpp's own ``llama-server`` binary: ``--no-repack`` (its name for
    extra buffer types off) where the decision is off."""
    return [] if kernel_choice(extra_bufts, cpu).extra_bufts else ["--no-repack"]


# ---------------------------------------------------------------- crash isolation


@dataclass(frozen=True)
class Isolated:
    """What a child process running one function gave: its return code, the signal
    that killed it (None when it exited), its JSON value and its stderr's tail."""

    returncode: int
    value: Any = None
    stderr: str = ""

    @property
    def signal(self) -> str | None:
        if self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def crashed(self) -> bool:
        return self.returncode < 0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


_CHILD = """
import importlib, json, sys
target, kwargs = json.loads(sys.stdin.read())
module, _, name = target.partition(":")
value = getattr(importlib.import_module(module), name)(**kwargs)
sys.stdout.write("\\n@@blendsql-isolated@@" + json.dumps(value, default=str))
"""
_MARK = "@@blendsql-isolated@@"


def run_isolated(target: str, kwargs: Mapping[str, Any] | None = None, *, timeout: float = 600,
                 cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None,
                 python: str | None = None) -> Isolated:
    """Call ``module:function(**kwargs)`` in a child Python process and return its JSON value.

    For code that runs llama.cpp's risky kernel path on purpose: a segfault there
    ends the child (``Isolated.crashed``, with the faulthandler's stack in
    ``stderr``), not the caller. ``timeout`` bounds the child; past it, it is killed
    and a :class:`~blendsql.errors.ModelTimeoutError` is raised.
    """
    from blendsql.errors import ModelTimeoutError

    cmd = [python or sys.executable, "-X", "faulthandler", "-c", _CHILD]
    payload = json.dumps([target, dict(kwargs or {})])
    try:
        done = subprocess.run(cmd, input=payload, capture_output=True, text=True,
                              timeout=timeout, cwd=cwd,
                              env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired as e:
        raise ModelTimeoutError(f"{target} ran longer than {timeout:g} s in its child process",
                                hint="raise timeout=, or look for a hang in the child") from e
    value = None
    out = done.stdout or ""
    if done.returncode == 0 and _MARK in out:
        value = json.loads(out.rsplit(_MARK, 1)[1])
    return Isolated(done.returncode, value, (done.stderr or "")[-4000:])


def strip_flag(args: Sequence[str], flag: str) -> tuple[list[str], str | None]:
    """``args`` without ``flag VALUE`` (or ``flag=VALUE``), and that value (None if absent)."""
    out: list[str] = []
    value: str | None = None
    it = iter(args)
    for a in it:
        if a == flag:
            value = next(it, None)
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
        else:
            out.append(a)
    return out, value
