"""Model providers are plugins: entry points in the ``blendsql.models`` group, the built-ins
included, with typed options that the CLI turns into flags and that are checked (with a
did-you-mean) before a model is built.

A toy provider is installed the way a third-party package is: a ``*.dist-info`` folder
with an ``entry_points.txt`` on ``sys.path``, next to its module.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import blendsql.models
from blendsql import BlendSQL, cli
from blendsql.errors import ModelError, ModelOptionError, OptionError
from blendsql.models.base import FunctionModel, Model
from blendsql.models.providers import (
    BUILTIN_POINTS,
    GROUP,
    Provider,
    ProviderOption,
    get_provider,
    providers,
    register_provider,
    reload_providers,
    unregister_provider,
)

ROOT = Path(__file__).resolve().parents[2]

TOY_MODULE = '''
from blendsql.models.base import FunctionModel
from blendsql.models.providers import Provider, ProviderOption


class Toy(FunctionModel):
    """Answers every request with the same reply."""

    def __init__(self, reply: str = "yes", shout: bool = False) -> None:
        text = reply.upper() if shout else reply
        super().__init__(lambda request: text, name=f"toy:{text}")


PROVIDER = Provider(
    "toy", "blendsql_toy:Toy", help="the same reply to every request",
    options=(
        ProviderOption("reply", (str,), "the reply", flag="toy-reply", env=("TOY_REPLY",)),
        ProviderOption("shout", (bool,), "upper-case the reply"),
    ),
    selected_by=("reply",), priority=5,
)
BROKEN = Provider("llamacpp", "blendsql_toy:Toy")  # takes a built-in's name
NOT_A_PROVIDER = "toy"
'''


def install(site: Path, points: str, module: str = TOY_MODULE) -> Path:
    """A package ``blendsql-toy`` in ``site``: its module and its dist-info entry points."""
    (site / "blendsql_toy.py").write_text(module)
    dist = site / "blendsql_toy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: blendsql-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\n{textwrap.dedent(points)}")
    return site


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The toy plugin installed on sys.path (and gone again afterwards)."""
    site = install(tmp_path, "toy = blendsql_toy:PROVIDER\n")
    monkeypatch.syspath_prepend(str(site))
    reload_providers()
    yield site
    sys.modules.pop("blendsql_toy", None)
    reload_providers()


def frame_db() -> dict[str, pd.DataFrame]:
    return {"t": pd.DataFrame({"x": ["a", "b"]})}


MAP_QUERY = "SELECT x, {{LLMMap('Say something', t.x)}} AS said FROM t ORDER BY x"


# ------------------------------------------------------------ the built-ins


def test_the_built_ins_are_the_entry_points_pyproject_declares() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared[GROUP] == BUILTIN_POINTS
    assert set(BUILTIN_POINTS) <= set(providers())


def test_without_the_group_in_the_metadata_the_built_ins_are_still_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: [])
    reload_providers()
    try:
        assert list(providers()) == list(BUILTIN_POINTS)
        assert get_provider("OpenAI").factory == "blendsql.models.openai_compat:OpenAI"
    finally:
        monkeypatch.undo()
        reload_providers()


def test_the_installed_metadata_is_read_when_it_has_the_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blendsql distribution whose metadata lists only llamacpp: only llamacpp is built in."""
    dist = tmp_path / "blendsql-9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: blendsql\nVersion: 9.9\n")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\nllamacpp = {BUILTIN_POINTS['llamacpp']}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reload_providers()
    try:
        assert list(providers()) == ["llamacpp"]
    finally:
        monkeypatch.undo()
        reload_providers()


def test_public_model_names_are_the_providers_factories() -> None:
    from blendsql.models.llamacpp import LlamaCpp
    from blendsql.models.recorded import Recorded

    assert blendsql.models.LlamaCpp is LlamaCpp and blendsql.models.Recorded is Recorded
    with pytest.raises(AttributeError):
        blendsql.models.NoSuchModel  # noqa: B018


def test_an_unknown_provider_gets_a_did_you_mean() -> None:
    with pytest.raises(ModelError, match="no model provider named 'lamacpp'") as e:
        get_provider("lamacpp")
    assert "did you mean 'llamacpp'?" in (e.value.hint or "")


# ------------------------------------------------------------ options are checked


def test_an_unknown_provider_option_is_refused_before_anything_is_imported() -> None:
    openai = get_provider("openai")
    with pytest.raises(ModelOptionError, match="has no option 'max_retry'") as e:
        openai.create(model="m", base_url="http://127.0.0.1:9/v1", max_retry=2)
    assert e.value.option == "max_retry" and isinstance(e.value, OptionError)
    assert "did you mean 'max_retries'?" in (e.value.hint or "")
    with pytest.raises(ModelOptionError, match=r"max_retries= must be int, not str"):
        openai.create(model="m", base_url="http://127.0.0.1:9/v1", max_retries="2")
    with pytest.raises(ModelError, match="no model name for the openai provider"):
        openai.create(base_url="http://127.0.0.1:9/v1")


def test_none_means_the_factorys_default() -> None:
    model = get_provider("function").create(fn=lambda r: "x", name=None, timeout=None)
    assert isinstance(model, FunctionModel) and model.name == "function"


def test_llama_arguments_pass_through_only_when_llama_takes_them() -> None:
    pytest.importorskip("llama_cpp")
    from blendsql.models.llamacpp import LlamaCpp

    assert LlamaCpp(n_gpu_layers=0).llama_kwargs == {"n_gpu_layers": 0}  # lazy: nothing loads
    with pytest.raises(ModelOptionError, match="no option 'n_gpu_layer'") as e:
        get_provider("llamacpp").create(n_gpu_layer=0)
    assert "did you mean 'n_gpu_layers'?" in (e.value.hint or "")
    with pytest.raises(ModelOptionError, match="'n_ctxx'") as e:
        LlamaCpp(n_ctxx=512)
    assert "did you mean 'n_ctx'?" in (e.value.hint or "")


def test_a_missing_gguf_file_is_named() -> None:
    with pytest.raises(ModelError, match="model file not found: /no/such.gguf"):
        get_provider("llamacpp").create(path="/no/such.gguf")


# ------------------------------------------------------------ registering from Python


def test_register_provider_from_python() -> None:
    echo = Provider("echo-test", "blendsql.models.base:FunctionModel",
                    options=(ProviderOption("fn", (object,)), ProviderOption("name", (str,))))
    register_provider(echo)
    try:
        assert get_provider("echo-test") is echo
        with pytest.raises(ModelError, match="already registered"):
            register_provider(echo)
        register_provider(echo, replace=True)
        model = get_provider("echo-test").create(fn=lambda r: "hi", name="echo")
        df = BlendSQL(frame_db(), model=model, cache=False).execute(MAP_QUERY).df
        assert list(df["said"]) == ["hi", "hi"]
    finally:
        unregister_provider("echo-test")
    assert "echo-test" not in providers()


def test_a_malformed_provider_is_refused() -> None:
    with pytest.raises(ModelError, match="malformed"):
        Provider("bad", "no_colon_here")
    with pytest.raises(ModelError, match="unknown: url"):
        Provider("bad", "m:f", selected_by=("url",))
    with pytest.raises(ModelError, match="is not a Provider"):
        register_provider("toy")  # type: ignore[arg-type]


# ------------------------------------------------------------ a third-party plugin


def test_a_plugin_provider_is_found_and_builds_its_model(toy: Path) -> None:
    provider = get_provider("toy")
    model = provider.create(reply="sure", shout=True)
    assert isinstance(model, Model) and model.name == "toy:SURE"
    df = BlendSQL(frame_db(), model=model, cache=False).execute(MAP_QUERY).df
    assert list(df["said"]) == ["SURE", "SURE"]
    assert blendsql.models.Toy is provider.load()
    with pytest.raises(ModelOptionError, match="no option 'shot'") as e:
        provider.create(shot=True)
    assert "did you mean 'shout'?" in (e.value.hint or "")


def test_a_plugins_flags_are_built_into_the_cli(toy: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "chat", "serve"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        assert "--toy-reply" in text and "(toy) [env TOY_REPLY]" in text, command


def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text("x\na\nb\n")
    return path


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_the_cli_uses_a_plugin_provider(toy: Path, tmp_path: Path) -> None:
    db = str(csv_file(tmp_path))
    query = "SELECT x, {{LLMMap('Say something', t.x)}} AS said FROM t ORDER BY x"
    code, out, err = run_main("run", db, query, "--toy-reply", "fine", "--model-option",
                              "shout=yes", "--no-cache", "--format", "csv")
    assert code == 0, err
    assert out.splitlines() == ["x,said", "a,FINE", "b,FINE"]
    code, out, err = run_main("run", db, query, "--provider", "toy", "--no-cache",
                              "--format", "csv")
    assert code == 0 and out.splitlines()[1] == "a,yes", err


def test_the_cli_checks_a_plugins_options(toy: Path, tmp_path: Path) -> None:
    db = str(csv_file(tmp_path))
    code, out, err = run_main("run", db, "SELECT 1", "--provider", "toy", "--model-option",
                              "shuot=true")
    assert code == 2 and "no option 'shuot'" in err and "did you mean 'shout'?" in err
    code, out, err = run_main("run", db, "SELECT 1", "--provider", "toy", "--model-option",
                              "shout=loudly")
    assert code == 2 and "'loudly' is not true or false" in err


def test_a_plugin_is_found_by_a_fresh_process(tmp_path: Path) -> None:
    """The whole route a user takes: install, then run the command."""
    (tmp_path / "site").mkdir()
    site = install(tmp_path / "site", "toy = blendsql_toy:PROVIDER\n")
    db = csv_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
           "TOY_REPLY": "from env"}
    env.pop("BLENDSQL_PROVIDER", None)
    res = subprocess.run(
        [sys.executable, "-m", "blendsql.cli", "run", str(db),
         "SELECT {{LLMMap('Say', t.x)}} AS said FROM t", "--provider", "toy", "--no-cache",
         "--format", "json"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == '[{"said":"from env"},{"said":"from env"}]'


def test_a_broken_plugin_is_skipped_with_a_warning(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    site = install(tmp_path, """\
        toy = blendsql_toy:PROVIDER
        missing = blendsql_toy_missing:PROVIDER
        strange = blendsql_toy:NOT_A_PROVIDER
        llamacpp = blendsql_toy:BROKEN
        """)
    monkeypatch.syspath_prepend(str(site))
    reload_providers()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = providers()
        messages = " | ".join(str(w.message) for w in caught)
        assert "'missing'" in messages and "could not be loaded" in messages
        assert "'strange'" in messages and "is not a blendsql.models.providers.Provider" in messages
        assert "'llamacpp'" in messages and "the name is taken" in messages
        assert found["llamacpp"].factory == "blendsql.models.llamacpp:LlamaCpp"
        assert "toy" in found
    finally:
        sys.modules.pop("blendsql_toy", None)
        reload_providers()


def test_a_plugin_flag_that_a_command_already_has_is_left_out() -> None:
    clash = Provider("clash", "blendsql.models.base:FunctionModel",
                     options=(ProviderOption("fn", (object,)),
                              ProviderOption("name", (str,), "its name", flag="trace")))
    register_provider(clash)
    try:
        with pytest.warns(RuntimeWarning, match="--trace is taken by the blendsql run command"):
            parser = cli.build_parser()
        args = parser.parse_args(["run", "example", "SELECT 1", "--trace"])
        assert args.trace is True
    finally:
        unregister_provider("clash")


# ------------------------------------------------------------ choosing a provider


def ns(**kw: Any) -> argparse.Namespace:
    base = {"base_url": None, "model": None, "model_name": None, "api_key": None,
            "provider": None, "model_option": []}
    return argparse.Namespace(**{**base, **kw})


def test_model_options_alone_configure_the_default_provider() -> None:
    pytest.importorskip("llama_cpp")
    model = cli.resolve_model(ns(model_option=["n_ctx=512", "n_gpu_layers=0"]), env={})
    assert type(model).__name__ == "LlamaCpp"
    assert model.n_ctx == 512 and model.llama_kwargs == {"n_gpu_layers": 0}


def test_a_recording_replays_through_the_recorded_provider(tmp_path: Path) -> None:
    from blendsql.models.recorded import Recorded

    recording = tmp_path / "answers.json"
    live = Recorded(recording, model=FunctionModel(lambda r: "recorded", name="live"))
    BlendSQL({"t": pd.DataFrame({"x": ["a", "b"]})}, model=live, cache=False).execute(MAP_QUERY)
    db = str(csv_file(tmp_path))
    code, out, err = run_main("run", db, MAP_QUERY, "--provider", "recorded", "--model-option",
                              f"path={recording}", "--no-cache", "--format", "csv")
    assert code == 0, err
    assert out.splitlines() == ["x,said", "a,recorded", "b,recorded"]


def test_the_provider_may_come_from_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="no recorded answers at"):
        cli.resolve_model(ns(model_option=[f"path={tmp_path / 'none.json'}"]),
                          env={"BLENDSQL_PROVIDER": "recorded"})
    with pytest.raises(ModelError, match="no model provider named 'recordd'"):
        cli.resolve_model(ns(), env={"BLENDSQL_PROVIDER": "recordd"})


def test_an_option_only_python_can_give_is_refused_on_the_command_line() -> None:
    with pytest.raises(ModelOptionError, match="--model-option model: Model cannot be given "
                       "as text"):
        cli.resolve_model(ns(provider="recorded", model_option=["model=gpt"]), env={})
