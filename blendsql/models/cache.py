"""A persistent response cache that wraps any model.

Keyed by sha256(model identity, request key): the same prompt, constraint and
limits against the same weights and decoding parameters give the same answer,
so a rerun of a query costs no model calls. Storage is one SQLite file in WAL
mode: many threads and processes may read and write it at once, and a process
killed mid-write leaves it readable (each batch is one transaction).

Only answers that parsed (``error is None``) are stored, so a transient
failure is retried next time instead of being remembered.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.base import Model, Request, Response, Usage, Wrapper

ENV_CACHE_DIR = "BLENDSQL_CACHE_DIR"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    value TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_dir() -> Path:
    """``$BLENDSQL_CACHE_DIR`` if set, else the platform's user cache dir / blendsql."""
    env = os.environ.get(ENV_CACHE_DIR)
    if env:
        return Path(env)
    try:
        import platformdirs
    except ImportError:  # a core dependency, but don't make caching fail without it
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "blendsql"
    return Path(platformdirs.user_cache_dir("blendsql"))


def cache_key(identity: str, request: Request) -> str:
    """sha256 of the model identity and the request's stable key."""
    h = hashlib.sha256(identity.encode("utf-8"))
    h.update(b"\x00")
    h.update(request.key().encode("utf-8"))
    return h.hexdigest()


class CachedModel(Wrapper):
    """``inner`` behind a persistent SQLite cache; hits come back with ``cached=True``.

    A hit reports the original answer's prompt/completion token counts, with
    ``cached_tokens`` equal to its prompt tokens (the whole prompt was served
    from the cache), and ``seconds`` is the lookup time.
    """

    def __init__(self, inner: Model, path: str | Path | None = None) -> None:
        self.inner = inner
        self.path = Path(path) if path is not None else default_cache_dir() / "cache.sqlite"
        self._local = threading.local()
        self._identity: str | None = None
        self.hits = 0
        self.misses = 0

    # -- model contract -------------------------------------------------

    def identity(self) -> str:
        if self._identity is None:
            self._identity = self.inner.identity()
        return self._identity

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self.generate_each(requests, None)

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None] | None) -> list[Response]:
        """Hits are reported at once, fresh answers as the inner model streams them."""
        t0 = time.perf_counter()
        ident = self.identity()
        keys = [cache_key(ident, r) for r in requests]
        found = self._lookup(set(keys))
        out: list[Response | None] = []
        for k in keys:
            row = found.get(k)
            out.append(None if row is None else _response_from_row(row))
        first_of: dict[str, int] = {}  # a request repeated within the batch is asked once
        for i, r in enumerate(out):
            if r is None:
                first_of.setdefault(keys[i], i)
        missing = list(first_of.values())
        lookup_seconds = (time.perf_counter() - t0) / max(1, len(requests))
        for r in out:
            if r is not None:
                r.seconds = lookup_seconds
        self.hits += sum(r is not None for r in out)
        self.misses += len(missing)
        if on_result is not None:
            for i, r in enumerate(out):
                if r is not None:
                    on_result(i, r)
        if missing:
            fresh = self.inner.generate_each([requests[i] for i in missing],
                                             self._fan_out(keys, missing, on_result))
            if len(fresh) != len(missing):
                raise ModelError(f"{self.inner.name} returned {len(fresh)} responses for "
                                 f"{len(missing)} requests", hint="a Model must answer every request")
            by_key = {keys[i]: resp for i, resp in zip(missing, fresh, strict=True)}
            for i, r in enumerate(out):
                if r is None:
                    resp = by_key[keys[i]]
                    out[i] = resp if i == first_of[keys[i]] else dataclasses.replace(resp)
            self._store(ident, [(keys[i], resp) for i, resp in zip(missing, fresh, strict=True)])
        return [r for r in out if r is not None]

    @staticmethod
    def _fan_out(keys: list[str], missing: list[int],
                 on_result: Callable[[int, Response], None] | None) -> Callable[[int, Response], None]:
        """``on_result`` for the inner model: its j-th answer serves every index with that key."""
        where: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            where.setdefault(k, []).append(i)

        def report(j: int, resp: Response) -> None:
            if on_result is not None:
                for i in where[keys[missing[j]]]:
                    on_result(i, resp)
        return report

    # -- storage ----------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread and process (sqlite3 objects must not cross either)."""
        pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != pid:
            conn = _open(self.path)
            self._local.conn, self._local.pid = conn, pid
        return conn

    def _lookup(self, keys: set[str]) -> dict[str, tuple[Any, ...]]:
        if not keys:
            return {}
        conn = self._conn()
        found: dict[str, tuple[Any, ...]] = {}
        key_list = sorted(keys)
        for start in range(0, len(key_list), 500):  # stay under SQLite's variable limit
            chunk = key_list[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT key, text, value, prompt_tokens, completion_tokens FROM responses "
                f"WHERE key IN ({marks})", chunk).fetchall()
            found.update({row[0]: row for row in rows})
        return found

    def _store(self, ident: str, pairs: list[tuple[str, Response]]) -> None:
        rows = []
        now = time.time()
        for key, resp in pairs:
            if resp.error is not None:
                continue
            try:
                stored: dict[str, Any] = {"v": resp.value}
                if resp.scores is not None:  # a scored answer keeps its answers' scores
                    stored["s"] = resp.scores
                value = json.dumps(stored)
            except (TypeError, ValueError):
                continue  # not JSON-representable: just don't cache it
            rows.append((key, ident, resp.text, value, resp.usage.prompt_tokens,
                         resp.usage.completion_tokens, now))
        if not rows:
            return
        _transaction(self._conn(), "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)",
                     rows)

    def clear(self) -> None:
        """Forget every stored answer (all models)."""
        _transaction(self._conn(), "DELETE FROM responses", [()])

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM responses").fetchone()[0])


def _response_from_row(row: tuple[Any, ...]) -> Response:
    _key, text, value, prompt_tokens, completion_tokens = row
    usage = Usage(prompt_tokens, completion_tokens, cached_tokens=prompt_tokens)
    stored = json.loads(value)
    return Response(text, stored["v"], usage, cached=True, scores=stored.get("s"))


def _open(path: Path) -> sqlite3.Connection:
    """Open (creating if needed) the cache DB in WAL mode with a generous busy timeout."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
    except (OSError, sqlite3.Error) as e:
        raise ModelError(f"cannot open the model cache at {path}: {e}",
                         hint=f"pass cache=False, another cache path, or set {ENV_CACHE_DIR}") from e
    _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
    conn.execute("PRAGMA synchronous=NORMAL")
    _retry_locked(lambda: conn.execute(_SCHEMA))
    return conn


def _transaction(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    """Run ``sql`` over ``rows`` in one write transaction (all rows or none survive a crash).

    BEGIN IMMEDIATE takes the write lock up front, so concurrent writers queue
    on the busy timeout instead of failing on a lock upgrade.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _retry_locked(fn: Any, attempts: int = 50) -> Any:
    """Run ``fn``, retrying while another process holds a lock during DB creation."""
    for i in range(attempts):
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))


def with_cache(model: Model, cache: bool | str | Path = True) -> Model:
    """``model`` wrapped in the persistent cache (True: default path; a path: that file),
    or ``model`` itself when ``cache`` is False. Never wraps twice.

    With the default (``True``), models that declare ``cacheable = False``
    (e.g. a ``FunctionModel``) are not wrapped; an explicit path always wraps."""
    if cache is False or (cache is True and not getattr(model, "cacheable", True)):
        return model
    path = None if cache is True else Path(cache)
    if isinstance(model, CachedModel):
        if path is None or model.path == path:
            return model
        model = model.inner
    return CachedModel(model, path)


# ---------------------------------------------------------------- file digests


def file_sha256(path: str | Path, cache_dir: str | Path | None = None) -> str:
    """sha256 of a (large) file, memoised in a sidecar JSON keyed by path+size+mtime.

    Why: a model's identity includes its weights' hash, and rehashing a
    100 MB GGUF at every start would cost ~0.3 s for nothing.
    """
    p = Path(path).resolve()
    st = p.stat()
    memo_key = f"{p}|{st.st_size}|{st.st_mtime_ns}"
    sidecar = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    sidecar = sidecar / "file-sha256.json"
    memo = _read_json(sidecar)
    if isinstance(memo.get(memo_key), str):
        return str(memo[memo_key])
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    memo = _read_json(sidecar)  # re-read: another process may have added entries
    memo[memo_key] = digest
    _write_json_atomic(sidecar, memo)
    return digest


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write via a temp file + rename, so readers never see half a file; failures are ignored
    (the memo is only an optimisation)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sha256-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError:
        pass
