"""One safe way to load a GGUF, proven on a machine without AMX.

The CPU is injected (a fake ``/proc/cpuinfo`` through ``BLENDSQL_CPUINFO``, or a
``CpuFeatures``), so these tests check on any machine that with AMX flags present
every loading path passes llama.cpp's extra buffer types off: the engine's
``LlamaCpp``, ``load_llama`` itself, the guidance adapter, the OpenAI-compatible
server the tests and benchmarks start, llama.cpp's own ``llama-server`` and the
benchmarks; that code forcing them on runs in a child process, where a crash is
a result; and that nothing else in the repository constructs a ``Llama``.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from blendsql.models import gguf
from blendsql.models.gguf import (
    CPUINFO_ENV,
    EXTRA_BUFTS_ENV,
    CpuFeatures,
    kernel_choice,
    llama_server_flags,
    load_llama,
    python_server_command,
    run_isolated,
    server_launcher,
)

ROOT = Path(__file__).resolve().parents[2]

# /proc/cpuinfo of an Intel Xeon with AMX (Sapphire Rapids) and of an AMD EPYC, cut short
AMX_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu vme de pse tsc msr pae avx2 avx512f avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8
"""
EPYC_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme de pse tsc msr pae sse4_2 avx avx2 fma bmi2 sha_ni clzero
"""
EPYC_BUILD = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | FMA = 1 | REPACK = 1 | "


def _fake_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpuinfo: str) -> Path:
    """This process (and its children) read ``cpuinfo`` as /proc/cpuinfo; no override set."""
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    monkeypatch.setenv(CPUINFO_ENV, str(path))
    monkeypatch.delenv(EXTRA_BUFTS_ENV, raising=False)
    return path


@pytest.fixture
def amx_cpu(tmp_path, monkeypatch) -> Path:
    return _fake_cpu(tmp_path, monkeypatch, AMX_CPUINFO)


@pytest.fixture
def plain_cpu(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(gguf, "system_info", lambda: EPYC_BUILD)  # a build without AMX too
    return _fake_cpu(tmp_path, monkeypatch, EPYC_CPUINFO)


# ---------------------------------------------------------------- detection and decision


def test_a_fake_cpuinfo_is_read_instead_of_the_machines(amx_cpu):
    assert "amx_int8" in gguf.cpu_flags().split()
    cpu = CpuFeatures.detect()
    assert "amx_tile" in cpu.flags and cpu.env is None
    choice = kernel_choice(cpu=cpu)
    assert choice.extra_bufts is False and "amx_int8" in choice.reason
    assert gguf.has_amx()


def test_no_amx_keeps_extra_buffer_types(plain_cpu):
    assert kernel_choice().extra_bufts is True
    assert not gguf.has_amx()


def test_explicit_choice_and_env_beat_detection(amx_cpu, monkeypatch):
    assert kernel_choice(True).extra_bufts is True
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "1")
    assert kernel_choice().extra_bufts is True
    assert gguf.has_amx()  # the override never hides what the CPU is
    with pytest.raises(gguf.ModelError):
        kernel_choice("yes")  # type: ignore[arg-type]


def test_an_injected_cpu_needs_no_environment(monkeypatch):
    monkeypatch.delenv(EXTRA_BUFTS_ENV, raising=False)
    amx = CpuFeatures(system_info=EPYC_BUILD, flags="avx2 amx_int8")
    assert kernel_choice(cpu=amx).extra_bufts is False
    assert server_launcher(cpu=amx)[-2:] == ["--extra-bufts", "off"]
    assert llama_server_flags(cpu=amx) == ["--no-repack"]
    plain = CpuFeatures(system_info=EPYC_BUILD, flags="avx2")
    assert llama_server_flags(cpu=plain) == []


# ---------------------------------------------------------------- in-process loads


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: records the model parameters it was built with."""

    made: list[FakeLlama] = []

    def __init__(self, model_path: str, **kwargs: Any) -> None:
        import llama_cpp.llama_cpp as lib

        self.model_path = model_path
        self.kwargs = kwargs
        self.model_params = lib.llama_model_default_params()  # what llama.cpp would load with
        self.context_params = SimpleNamespace(n_threads=kwargs["n_threads"],
                                              n_threads_batch=kwargs["n_threads_batch"])
        FakeLlama.made.append(self)


@pytest.fixture
def fake_llama(monkeypatch, tmp_path) -> Path:
    llama_cpp = pytest.importorskip("llama_cpp")
    lib = llama_cpp.llama_cpp
    if "use_extra_bufts" not in {f[0] for f in lib.llama_model_params._fields_}:
        pytest.skip("this llama-cpp-python has no use_extra_bufts field")
    FakeLlama.made.clear()
    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    return model


def test_load_llama_passes_extra_buffer_types_off_on_amx(amx_cpu, fake_llama):
    llm, info = load_llama(fake_llama, n_threads=1, n_ctx=256)
    assert llm.model_params.use_extra_bufts is False
    assert info.extra_bufts is False and "AMX" in info.extra_bufts_reason
    assert (info.n_threads, info.n_threads_batch) == (1, 1)
    assert llm.kwargs["n_ctx"] == 256
    import llama_cpp.llama_cpp as lib

    assert lib.llama_model_default_params().use_extra_bufts is True  # restored afterwards


def test_load_llama_keeps_them_on_without_amx(plain_cpu, fake_llama):
    llm, info = load_llama(fake_llama, n_threads=1)
    assert llm.model_params.use_extra_bufts is True and info.extra_bufts is True


def test_the_engine_model_loads_through_the_loader(amx_cpu, fake_llama):
    from blendsql.models import LlamaCpp

    mark = gguf.load_count()
    model = LlamaCpp(fake_llama, n_threads=1)
    llm = model.llm
    assert FakeLlama.made == [llm] and llm.model_params.use_extra_bufts is False
    assert model.load_info is not None and model.load_info.extra_bufts is False
    assert [i.model for i in gguf.loads_since(mark)] == ["tiny.gguf"]


def test_the_engine_model_takes_an_injected_cpu(fake_llama, monkeypatch):
    from blendsql.models import LlamaCpp

    monkeypatch.delenv(EXTRA_BUFTS_ENV, raising=False)
    amx = CpuFeatures(system_info=EPYC_BUILD, flags="amx_tile")
    assert LlamaCpp(fake_llama, n_threads=1, cpu=amx).llm.model_params.use_extra_bufts is False


def test_a_guidance_model_built_with_extra_buffer_types_is_refused_on_amx(amx_cpu):
    pytest.importorskip("guidance")
    from blendsql.models.guidance_model import check_kernels

    risky = SimpleNamespace(_interpreter=SimpleNamespace(engine=SimpleNamespace(
        model_obj=SimpleNamespace(model_params=SimpleNamespace(use_extra_bufts=True)))))
    with pytest.raises(gguf.ModelError, match="extra buffer types") as e:
        check_kernels(risky)
    assert "Guidance('model.gguf')" in (e.value.hint or "")
    safe = SimpleNamespace(_interpreter=SimpleNamespace(engine=SimpleNamespace(
        model_obj=SimpleNamespace(model_params=SimpleNamespace(use_extra_bufts=False)))))
    check_kernels(safe)
    check_kernels(risky, cpu=CpuFeatures(flags="avx2"))  # no AMX: nothing to refuse


@pytest.mark.model
def test_guidance_adapter_hands_guidance_a_llama_from_the_loader(amx_cpu):
    """The real embedded model through the guidance adapter, on a (fake) AMX CPU."""
    pytest.importorskip("guidance")
    pytest.importorskip("llama_cpp")
    from blendsql.models.base import Request
    from blendsql.models.constraints import Choice
    from blendsql.models.guidance_model import Guidance, _llama_of

    model = Guidance.from_gguf(n_ctx=512, n_threads=1)
    assert model.load_info is not None and model.load_info.extra_bufts is False
    assert _llama_of(model.lm).model_params.use_extra_bufts is False
    [r] = model.generate([Request("Pick a colour.", constraint=Choice(("red", "blue")))])
    assert r.value in ("red", "blue")


def test_guidance_given_a_path_uses_the_loader(amx_cpu, monkeypatch):
    pytest.importorskip("guidance")
    from blendsql.models import guidance_model

    seen: dict[str, Any] = {}

    def fake(path: Any, **kw: Any) -> Any:
        seen["path"] = path
        raise gguf.ModelError("stop here")

    monkeypatch.setattr(guidance_model, "gguf_for_guidance", fake)
    with pytest.raises(gguf.ModelError, match="stop here"):
        guidance_model.Guidance("some.gguf")
    assert seen["path"] == "some.gguf"


# ---------------------------------------------------------------- servers


def test_server_commands_run_this_interpreter_on_the_safe_loader(amx_cpu):
    cmd = python_server_command("m.gguf", "--port", "1")
    assert cmd[0] == sys.executable  # never whatever "python" is on PATH
    assert cmd[1:5] == ["-m", "blendsql.models.llama_server", "--extra-bufts", "auto"]
    assert cmd[5:] == ["--model", "m.gguf", "--port", "1"]
    assert llama_server_flags() == ["--no-repack"]
    forced = python_server_command("m.gguf", extra_bufts=True)
    assert forced[3:5] == ["--extra-bufts", "on"]


def test_server_arguments_take_the_choice_and_add_threads(amx_cpu):
    from blendsql.models.llama_server import server_arguments

    args, choice = server_arguments(["--model", "m.gguf", "--extra-bufts", "auto"])
    assert choice.extra_bufts is False and "amx" in choice.reason.lower()
    assert args[:2] == ["--model", "m.gguf"] and "--n_threads" in args
    args, choice = server_arguments(["--extra-bufts=on", "--n_threads", "3"])
    assert choice.extra_bufts is True and args.count("--n_threads") == 1
    assert choice.reason == "--extra-bufts on"
    with pytest.raises(SystemExit):
        server_arguments(["--extra-bufts", "maybe"])


def test_the_test_servers_start_on_the_safe_loader(amx_cpu):
    from tests.models.conftest import server_launcher as tests_launcher

    assert tests_launcher() == ["-m", "blendsql.models.llama_server", "--extra-bufts", "auto"]


@pytest.mark.server
def test_the_server_process_loads_without_extra_buffer_types_on_amx(amx_cpu, tmp_path):
    """A real ``llama_cpp.server`` started through the launcher, with a fake AMX CPU
    and a PATH that holds no Python: it must load with extra buffer types off."""
    from tests.models.conftest import _SERVER_DEPS, embedded_gguf, free_port, running_server

    if any(importlib.util.find_spec(m) is None for m in _SERVER_DEPS) or embedded_gguf() is None:
        pytest.skip("the server extra or the embedded GGUF is not installed")
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin"), "PYTHONUNBUFFERED": "1"}
    cmd = python_server_command(embedded_gguf(), "--host", "127.0.0.1", "--port", str(port),
                                "--n_ctx", "512")
    with running_server(cmd, port, timeout=90, env=env, log=log):
        text = log.read_text(errors="replace")
        assert "blendsql: loaded" in text and "extra buffer types off (AMX" in text, text[-2000:]


# ---------------------------------------------------------------- crash isolation


def test_a_crash_in_the_child_is_a_result(tmp_path):
    done = run_isolated("os:abort", timeout=60)
    assert done.crashed and done.signal == signal.Signals.SIGABRT.name
    assert "Fatal Python error" in done.stderr  # the child runs with faulthandler on
    ok = run_isolated("os.path:join", {"a": "x", "b": "y"}, timeout=60)  # type: ignore[arg-type]
    assert not ok.ok  # join takes positional arguments only: a clean failure, no crash
    assert not ok.crashed
    fine = run_isolated("platform:python_version", timeout=60)
    assert fine.ok and fine.value == ".".join(map(str, sys.version_info[:3]))


def _load_demo_margins() -> Any:
    if "demo_margins" in sys.modules:  # tests/test_readme_demo.py loads it the same way
        return sys.modules["demo_margins"]
    spec = importlib.util.spec_from_file_location("demo_margins",
                                                  ROOT / "benchmarks" / "demo_margins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["demo_margins"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_forced_on_kernel_check_runs_in_a_child_process(amx_cpu, monkeypatch):
    dm = _load_demo_margins()
    calls: list[tuple[str, dict[str, Any]]] = []

    def crashing(target: str, kwargs: dict[str, Any], **kw: Any) -> gguf.Isolated:
        calls.append((target, kwargs))
        return gguf.Isolated(-signal.SIGSEGV, None, "Fatal Python error: Segmentation fault")

    monkeypatch.setattr(dm, "run_isolated", crashing)
    out = dm.measure_isolated("SELECT 1", True)
    assert calls == [("benchmarks.demo_margins:measure", {"query": "SELECT 1",
                                                          "extra_bufts": True})]
    assert out["crashed"] == "SIGSEGV" and out["known_crash"] is True
    assert out["process"] == "child"


def test_the_readme_demo_test_measures_each_path_in_a_child() -> None:
    tree = ast.parse((ROOT / "tests" / "test_readme_demo.py").read_text())
    test = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == "test_readme_query_answer_is_right_and_every_decision_is_wide")
    called = {n.func.attr for n in ast.walk(test)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert "measure_isolated" in called and "measure" not in called


# ---------------------------------------------------------------- one loader in the repository


LOADER = ROOT / "blendsql" / "models" / "gguf.py"
SCANNED = ("blendsql", "benchmarks", "tests", "ingredients", "scripts")


def llama_constructions(source: str) -> list[int]:
    """Lines that construct ``llama_cpp.Llama`` (``Llama(...)``, ``llama_cpp.Llama(...)``,
    ``Llama.from_pretrained(...)``) or start ``llama_cpp.server`` directly."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name == "Llama" or (name == "from_pretrained" and isinstance(f, ast.Attribute)
                                   and getattr(f.value, "id", getattr(f.value, "attr", "")) == "Llama"):
                lines.append(node.lineno)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if any(a == "-m" and b == "llama_cpp.server" for a, b in zip(items, items[1:], strict=False)):
                lines.append(node.lineno)
    return lines


def test_nothing_but_the_loader_constructs_a_llama() -> None:
    hits = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == LOADER or path == Path(__file__).resolve():
                continue
            hits += [f"{path.relative_to(ROOT)}:{line}"
                     for line in llama_constructions(path.read_text(encoding="utf-8"))]
    assert not hits, "load GGUFs with blendsql.models.gguf.load_llama / server_launcher:\n" \
        + "\n".join(hits)


@pytest.mark.parametrize("source", [
    "from llama_cpp import Llama\nm = Llama(model_path='x')\n",
    "import llama_cpp\nm = llama_cpp.Llama('x')\n",
    "m = Llama.from_pretrained(repo_id='a', filename='b')\n",
    "cmd = [sys.executable, '-m', 'llama_cpp.server', '--model', 'x']\n",
])
def test_the_scan_finds_each_way_to_construct_one(source: str) -> None:
    assert llama_constructions(source)


def test_the_scan_leaves_other_calls_alone() -> None:
    assert not llama_constructions("m = LlamaCpp('x')\nload_llama('x')\nprint('Llama(')\n")


@pytest.mark.model
def test_the_trace_says_how_the_model_was_loaded(amx_cpu):
    """A query whose model loads during the run: its first ingredient step carries the load."""
    pytest.importorskip("llama_cpp")
    import pandas as pd

    from blendsql import BlendSQL
    from blendsql.models import LlamaCpp

    engine = BlendSQL({"t": pd.DataFrame({"x": ["apple", "stone"]})},
                      model=LlamaCpp(n_threads=1, n_ctx=512), cache=False)
    smoothie = engine.execute("SELECT x FROM t WHERE {{LLMMap('Is this a fruit?', t.x)}} = TRUE")
    loads = [s.details["model_load"] for s in smoothie.trace if "model_load" in s.details]
    assert len(loads) == 1 and len(loads[0]) == 1
    [info] = loads[0]
    assert info["extra_bufts"] is False and "AMX" in info["extra_bufts_reason"]
    assert info["where"] == "in-process" and info["n_threads"] == 1
    again = engine.execute("SELECT x FROM t WHERE {{LLMMap('Is this a stone?', t.x)}} = TRUE")
    assert not any("model_load" in s.details for s in again.trace)  # loaded once, said once
