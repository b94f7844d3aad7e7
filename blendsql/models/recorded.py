"""A model that replays answers recorded from a real one.

Why: a notebook or a test that shows what a capable model does should run in
seconds, offline, on any machine, and show the real answers, not made-up
ones. Record once with the real model (``Recorded(path, model=LlamaCpp(...))``
passes every request through and writes its answers to ``path``); afterwards
``Recorded(path)`` answers the same requests from the file. A request that
was not recorded is an error (never a guess), so a changed prompt shows up at
once instead of silently replaying a stale answer.

The file is JSON, one entry per request key (sha256 of the request's stable
key: prompt or messages, constraint, limits), plus the recording model's token
counts of the texts ingredients measured (requests are sized by them), with the raw text, its token
counts, the parsed value as the backend returned it (stored as JSON, as the
response cache does) and the end of the prompt for a person reading the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.base import Model, Request, Response, Usage, parse_response

FORMAT = "blendsql-recorded-answers/1"
PREVIEW_CHARS = 160  # how much of each prompt's end the file keeps for a reader


def request_key(request: Request) -> str:
    """The file's key for ``request`` (independent of which model answered it)."""
    return hashlib.sha256(request.key().encode("utf-8")).hexdigest()


def _preview(request: Request) -> str:
    text = request.messages[-1][1] if request.messages else request.prompt
    return text[-PREVIEW_CHARS:]


class Recorded(Model):
    """Replays recorded answers; with ``model=`` records (or extends) the file first.

    ``Recorded(path)``: replay only; a request missing from the file raises
    :class:`~blendsql.errors.ModelError`. ``Recorded(path, model=m)``: answers
    come from ``m`` and are added to the file (requests already in the file are
    still replayed, so re-recording costs only the new ones).
    """

    cacheable = False  # replaying is already free; keep the user's cache for real models

    def __init__(self, path: str | Path, model: Model | None = None) -> None:
        self.path = Path(path)
        self.inner = model
        self._lock = threading.Lock()
        self._dirty = False  # token counts learnt since the last write
        self._data = self._load()
        self.name = f"recorded:{self._data.get('model') or (model.name if model else 'none')}"

    # -- model contract -------------------------------------------------

    def identity(self) -> str:
        return f"{self.name}:{self._data.get('identity', '')}"

    def count_tokens(self, text: str) -> int:
        """The real model's count while recording (kept in the file); the kept count on replay.

        Ingredients size requests with it (an answer drawn from options gets
        ``max_tokens`` from the longest option's tokens), so a replay must count
        as the recording model did, or the request it builds is not the one recorded.
        """
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()
        counts: dict[str, int] = self._data.setdefault("token_counts", {})
        if self.inner is None:
            return int(counts[key]) if key in counts else super().count_tokens(text)
        n = self.inner.count_tokens(text)
        with self._lock:
            if counts.get(key) != n:
                counts[key] = n
                self._dirty = True
        return n

    def context_window(self) -> int | None:
        """The real model's window while recording (kept in the file); the kept one on replay,
        so a prompt fitted to the window is built the same way again."""
        if self.inner is None:
            kept = self._data.get("context_window")
            return int(kept) if kept is not None else None
        window = self.inner.context_window()
        with self._lock:
            if self._data.get("context_window") != window:
                self._data["context_window"] = window
                self._dirty = True
        return window

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        keys = [request_key(r) for r in requests]
        answers: dict[str, Any] = self._data["answers"]
        missing = [i for i, k in enumerate(keys) if k not in answers]
        if missing and self.inner is None:
            first = requests[missing[0]]
            raise ModelError(
                f"{len(missing)} of {len(requests)} requests were never recorded in {self.path.name} "
                f"(first prompt ends: {_preview(first)[-80:]!r})",
                hint="the prompt changed since recording: record again with "
                     "Recorded(path, model=<the real model>)")
        live: dict[int, Response] = {}
        if not missing and self._dirty:
            with self._lock:
                self._write()
        if missing:
            assert self.inner is not None
            fresh = self.inner.generate([requests[i] for i in missing])
            if len(fresh) != len(missing):
                raise ModelError(f"{self.inner.name} returned {len(fresh)} responses for "
                                 f"{len(missing)} requests", hint="a Model must answer every request")
            live = dict(zip(missing, fresh, strict=True))
            self._record([(requests[i], keys[i], resp) for i, resp in live.items()])
        return [live[i] if i in live else self._replay(r, answers[k])
                for i, (r, k) in enumerate(zip(requests, keys, strict=True))]

    def __len__(self) -> int:
        return len(self._data["answers"])

    # -- the file -------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            if self.inner is None:
                raise ModelError(f"no recorded answers at {self.path}",
                                 hint="record them first: Recorded(path, model=<the real model>)")
            return {"format": FORMAT, "model": self.inner.name, "identity": self.inner.identity(),
                    "answers": {}}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ModelError(f"cannot read recorded answers {self.path}: {e}",
                             hint="the file must be a Recorded model's JSON") from e
        if not isinstance(data, dict) or data.get("format") != FORMAT \
                or not isinstance(data.get("answers"), dict):
            raise ModelError(f"{self.path} is not a recorded-answers file",
                             hint=f"expected JSON with \"format\": \"{FORMAT}\"")
        return data

    def _record(self, items: list[tuple[Request, str, Response]]) -> None:
        with self._lock:
            for req, key, resp in items:
                if resp.error is not None:  # a failed answer is not worth replaying
                    continue
                try:  # the parsed value as the backend gave it (as the response cache keeps it)
                    value = json.loads(json.dumps(resp.value))
                except (TypeError, ValueError):
                    continue  # not JSON-representable: not recorded, so replay says so
                entry = {
                    "text": resp.text, "value": value, "prompt_tokens": resp.usage.prompt_tokens,
                    "completion_tokens": resp.usage.completion_tokens, "prompt_end": _preview(req)}
                if resp.scores is not None:  # a scored answer replays with its scores
                    entry["scores"] = resp.scores
                self._data["answers"][key] = entry
            self._write()

    def _write(self) -> None:
        """Atomically, keys sorted: a re-recording shows as a readable diff."""
        self._dirty = False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self._data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".recorded-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @staticmethod
    def _replay(request: Request, entry: dict[str, Any]) -> Response:
        text = str(entry["text"])
        if "value" in entry:
            value, error = entry["value"], None
        else:  # a hand-written entry: parse the text as a live backend would
            value, error = parse_response(text, request.constraint)
        usage = Usage(prompt_tokens=int(entry.get("prompt_tokens", 0)),
                      completion_tokens=int(entry.get("completion_tokens", 0)))
        scores = entry.get("scores")
        return Response(text=text, value=value, usage=usage, error=error,
                        scores=dict(scores) if isinstance(scores, dict) else None)


__all__ = ["Recorded", "request_key"]
