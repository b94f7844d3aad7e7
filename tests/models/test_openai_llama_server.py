"""``OpenAI(base_url=...)`` against llama.cpp's own ``llama-server``.

llama-server differs from llama-cpp-python's server: several parallel slots,
``owned_by: "llamacpp"`` in ``/v1/models``, and its own parsing of ``grammar``,
``json_schema`` and ``response_format``. A user pointing the backend at it must
get constrained answers. Needs a ``llama-server`` binary (``BLENDSQL_LLAMA_SERVER``,
the build of ``python -m benchmarks.envs build llama-server``, or one on PATH);
skipped without one. Marked ``server``.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.envs import find_llama_server  # noqa: E402
from blendsql import BlendSQL
from blendsql.models import OpenAI
from blendsql.models.base import Request
from blendsql.models.constraints import Bool, Constraint, ListOf
from blendsql.models.gguf import llama_server_flags
from tests.models.conftest import embedded_gguf, running_server
from tests.models.test_openai import PROMPTS, SERVER_CONSTRAINTS, _satisfies, free_port


def _binary() -> Path | None:
    return find_llama_server()  # builds nothing


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """``llama-server`` with 2 slots on a free port; yields its ``/v1`` base URL."""
    binary, gguf = _binary(), embedded_gguf()
    if binary is None or gguf is None:
        pytest.skip("no llama-server binary (set BLENDSQL_LLAMA_SERVER or run python -m "
                    "benchmarks.envs build llama-server) or no embedded GGUF")
    port = free_port()
    cmd = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-np", "2",
           "-c", "2048", "-t", "1", "-tb", "1", "--no-webui", *llama_server_flags()]
    with running_server(cmd, port, timeout=120) as base_url:
        yield base_url


@pytest.mark.server
def test_detected_as_llamacpp(llama_server: str) -> None:
    assert OpenAI("smollm2", llama_server).kind() == "llamacpp"


@pytest.mark.server
@pytest.mark.parametrize("constraint", [*SERVER_CONSTRAINTS, ListOf(Bool(), min_len=4, max_len=4)],
                         ids=lambda c: type(c).__name__)
def test_constrained_answers_on_llama_server(llama_server: str, constraint: Constraint) -> None:
    model = OpenAI("smollm2", llama_server, max_concurrency=2, timeout=120)
    out = model.generate([Request(p, constraint=constraint, max_tokens=48) for p in PROMPTS])
    for r in out:
        assert r.error is None, r.error
        assert _satisfies(constraint, r.value), (r.text, r.value)
        assert r.usage.prompt_tokens > 5 and r.usage.completion_tokens >= 1
    assert not model._rejected  # the server took every constraint field we sent


@pytest.mark.server
def test_llmmap_through_llama_server_slots(llama_server: str, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (v TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [(v,) for v in
                        ("apple", "car", "banana", "chair", "plum", "shoe")])
    model = OpenAI("smollm2", llama_server, max_concurrency=4, timeout=120)
    for k in (1, 3):
        extra = f", values_per_prompt={k}" if k > 1 else ""
        res = BlendSQL(str(db), model=model, cache=False).execute(
            f"SELECT v, {{{{LLMMap('Is this a fruit?', 't::v', return_type='bool'{extra})}}}} AS a FROM t")
        assert len(res.df) == 6
        assert set(res.df["a"].tolist()) <= {0, 1}  # every answer parsed as a boolean
