"""Models by name: ``hf:ORG/REPO/FILE.gguf`` and ``LlamaCpp.from_hub`` against a stand-in Hub.

The Hub is ``fake_hub.FakeHub`` on 127.0.0.1 (``HF_ENDPOINT``), the cache a temp
``HF_HOME``: never the internet. The file served is the embedded SmolLM2 GGUF.
"""

from __future__ import annotations

import io
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_hub import FakeHub  # noqa: E402

from blendsql import cli  # noqa: E402
from blendsql.errors import ModelError  # noqa: E402
from blendsql.models import hub  # noqa: E402
from blendsql.models.providers import get_provider  # noqa: E402

pytest.importorskip("huggingface_hub")
REPO, FILE = "tiny-org/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf"
SPEC = f"hf:{REPO}/{FILE}"


@pytest.fixture(scope="module")
def gguf() -> Path:
    from blendsql.models.llamacpp import default_model_path

    try:
        return default_model_path()
    except ModelError as e:
        pytest.skip(str(e))


@pytest.fixture
def fake_hub(gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    server = FakeHub()
    server.files[(REPO, FILE)] = gguf
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    yield server
    server.close()


def test_specs_are_parsed() -> None:
    assert hub.parse_spec(SPEC) == hub.HubFile(REPO, FILE, "main")
    assert hub.parse_spec("hf:a/b/sub/f.GGUF@v1.0") == hub.HubFile("a/b", "sub/f.GGUF", "v1.0")
    assert hub.parse_spec("hf:a/b/f.gguf@v1.0").spec == "hf:a/b/f.gguf@v1.0"
    for bad in ("hf:a/f.gguf", "hf:a/b/f.bin", "hf:"):
        with pytest.raises(ModelError, match="not a Hub model"):
            hub.parse_spec(bad)
    assert hub.is_hub_spec("QWEN2.5-Coder-1.5B") and not hub.is_hub_spec("model.gguf")
    assert hub.resolve_model_path("model.gguf") == "model.gguf"
    assert hub.resolve_model_path("smollm2-135m") is None  # the embedded default


def test_from_hub_downloads_once_into_the_cache(fake_hub: FakeHub, gguf: Path,
                                                tmp_path: Path) -> None:
    from blendsql.models.llamacpp import LlamaCpp

    model = LlamaCpp.from_hub(REPO, FILE, n_ctx=512)
    assert isinstance(model, LlamaCpp) and model.n_ctx == 512 and model._llm is None  # not loaded
    assert model.path.is_relative_to(tmp_path / "hf" / "hub")
    folder = hub.cache_location(hub.HubFile(REPO, FILE), tmp_path / "hf" / "hub")
    assert model.path.parent.parent == folder / "snapshots" and model.path.name == FILE
    assert model.path.read_bytes() == gguf.read_bytes()
    assert fake_hub.gets() == 1
    again = LlamaCpp.from_hub(REPO, FILE)
    assert again.path == model.path and fake_hub.gets() == 1  # served from the cache


def test_the_command_line_takes_a_hub_name(fake_hub: FakeHub, gguf: Path) -> None:
    args = cli.build_parser().parse_args(["run", "example", "SELECT 1", "--model", SPEC])
    model = cli.resolve_model(args, env={})
    assert model is not None and Path(model.path).read_bytes()[:4] == b"GGUF"
    assert get_provider("llamacpp").create(path=SPEC).path == model.path  # BlendSQL(db, model=SPEC)
    assert fake_hub.gets() == 1


def test_a_wrong_checksum_is_refused(fake_hub: FakeHub) -> None:
    fake_hub.etags[(REPO, FILE)] = "f" * 64
    with pytest.raises(ModelError, match="corrupt"):
        hub.resolve_model_path(SPEC)


def test_offline_names_the_cache_path(fake_hub: FakeHub, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    where = hub.cache_location(hub.HubFile(REPO, FILE), tmp_path / "hf" / "hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError) as e:
        hub.resolve_model_path(SPEC)
    assert str(where) in str(e.value.hint) and fake_hub.gets() == 0
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: unreachable
    import huggingface_hub.utils._http as hf_http  # its retries wait 23 s in all: not here

    no_wait = types.SimpleNamespace(**{n: getattr(time, n) for n in dir(time) if not n.startswith("_")})
    no_wait.sleep = lambda seconds: None
    monkeypatch.setattr(hf_http, "time", no_wait)
    with pytest.raises(ModelError) as e:
        hub.resolve_model_path(SPEC)
    assert str(where) in str(e.value.hint)


def test_offline_uses_what_the_cache_holds(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hub.resolve_model_path(SPEC)
    fake_hub.close()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.resolve_model_path(SPEC) == path


def test_a_missing_file_is_a_model_error(fake_hub: FakeHub) -> None:
    with pytest.raises(ModelError, match="could not download"):
        hub.resolve_model_path(f"hf:{REPO}/nope.gguf")


def test_models_command_lists_providers_and_names() -> None:
    out = io.StringIO()
    assert cli.main(["models"], stdout=out) == 0
    text = out.getvalue()
    for name in ("llamacpp (default)", "openai", "recorded", "function", "--base-url",
                 "qwen2.5-coder-1.5b", "hf:ORG/REPO/FILE.gguf"):
        assert name in text, name


@pytest.mark.model
def test_the_downloaded_model_answers(fake_hub: FakeHub) -> None:
    pytest.importorskip("llama_cpp")
    from blendsql.models import Request
    from blendsql.models.constraints import Bool
    from blendsql.models.llamacpp import LlamaCpp

    model = LlamaCpp.from_hub(REPO, FILE, n_ctx=512)
    (response,) = model.generate([Request(prompt="Is the sky blue? Answer true or false:",
                                          constraint=Bool(), max_tokens=4)])
    assert response.value in (True, False)


def test_a_library_frozen_offline_earlier_does_not_stop_a_download(
        fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub reads HF_HUB_OFFLINE once, at import: imported while it was set,
    it would stay offline; the download decides from the environment now."""
    import huggingface_hub

    from blendsql.models.llamacpp import LlamaCpp

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    model = LlamaCpp.from_hub(REPO, FILE)
    assert model.path.is_file() and fake_hub.gets() == 1
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True  # put back as it was


def test_loading_an_embedder_leaves_the_environment_as_it_was(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    from blendsql.errors import BlendSQLError
    from blendsql.retrieval import embeddings

    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    try:
        with embeddings._offline_while_loading():
            assert os.environ["HF_HUB_OFFLINE"] == "1"
            raise BlendSQLError("the load failed")
    except BlendSQLError:
        pass
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own setting is kept
    with embeddings._offline_while_loading():
        assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["HF_HUB_OFFLINE"] == "0"
