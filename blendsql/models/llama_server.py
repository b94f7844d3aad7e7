"""llama-cpp-python's OpenAI-compatible server, loading its model the safe way.

``python -m blendsql.models.llama_server [--extra-bufts on|off|auto] ARGS`` runs
``python -m llama_cpp.server ARGS`` with one change: the server's model loads
with llama.cpp's extra buffer types set as :func:`blendsql.models.gguf.kernel_choice`
decides (off on AMX CPUs, where they crash), and with blendsql's thread counts
unless ``--n_threads`` / ``--n_threads_batch`` are given. The load is printed
on stderr (``blendsql: loaded ...``) for logs and tests.

Start it with :func:`blendsql.models.gguf.server_launcher` (or
``python_server_command``), which runs it with this interpreter.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence
from typing import Any

from blendsql.models.gguf import (
    KernelChoice,
    LoadInfo,
    extra_bufts_applied,
    kernel_choice,
    load_threads,
    strip_flag,
)

_CHOICES = {"on": True, "off": False, "auto": None}


def server_arguments(argv: Sequence[str]) -> tuple[list[str], KernelChoice]:
    """llama_cpp.server's own arguments (threads added when absent) and the kernel choice."""
    args, raw = strip_flag(argv, "--extra-bufts")
    if raw is not None and raw not in _CHOICES:
        raise SystemExit(f"--extra-bufts {raw!r}: expected one of on, off, auto")
    forced = _CHOICES[raw] if raw is not None else None
    choice = kernel_choice() if forced is None else KernelChoice(forced, f"--extra-bufts {raw}")
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    threads = load_threads()
    if "--n_threads" not in given:
        args += ["--n_threads", str(threads)]
    if "--n_threads_batch" not in given:
        args += ["--n_threads_batch", str(threads)]
    return args, choice


def install_loader(choice: KernelChoice) -> None:
    """Make llama_cpp.server load each model under ``choice`` and report the load."""
    from llama_cpp.server import model as server_model

    original = server_model.LlamaProxy.load_llama_from_model_settings

    def load(settings: Any) -> Any:
        with extra_bufts_applied(choice.extra_bufts):
            llm = original(settings)
        info = LoadInfo(bool(getattr(llm.model_params, "use_extra_bufts", choice.extra_bufts)),
                        choice.reason, int(llm.context_params.n_threads),
                        int(llm.context_params.n_threads_batch), str(settings.model), "server")
        print(f"blendsql: loaded {info.model}: {info.describe()}", file=sys.stderr, flush=True)
        return llm

    server_model.LlamaProxy.load_llama_from_model_settings = staticmethod(load)  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> None:
    args, choice = server_arguments(sys.argv[1:] if argv is None else argv)
    install_loader(choice)
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
