"""A stand-in for the Hugging Face Hub on 127.0.0.1: the endpoints ``hf_hub_download`` uses.

``HEAD`` / ``GET /{org}/{repo}/resolve/{revision}/{filename}`` answer with the headers the
Hub sends (``X-Repo-Commit``, ``ETag``: the file's sha256 as for an LFS file,
``Content-Length``) and, for GET, the file's bytes (a ``Range: bytes=N-`` request gets the
rest from N). Every request is logged, so a test can see that a second use downloads
nothing. ``etag`` may be set per file to serve a wrong checksum.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str], Path] = {}  # (repo, filename) -> file served
        self.etags: dict[tuple[str, str], str] = {}
        self.log: list[tuple[str, str]] = []  # (method, path)
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _found(self) -> tuple[Path, str] | None:
                parts = self.path.split("?", 1)[0].strip("/").split("/")
                if len(parts) < 5 or parts[2] != "resolve":
                    return None
                key = ("/".join(parts[:2]), "/".join(parts[4:]))
                path = hub.files.get(key)
                if path is None:
                    return None
                etag = hub.etags.get(key) or hashlib.sha256(path.read_bytes()).hexdigest()
                return path, etag

            def _headers(self, found: tuple[Path, str] | None, start: int = 0) -> None:
                if found is None:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, etag = found
                size = path.stat().st_size
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Content-Length", str(size - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def do_HEAD(self) -> None:  # noqa: N802
                hub.log.append(("HEAD", self.path))
                self._headers(self._found())

            def do_GET(self) -> None:  # noqa: N802
                hub.log.append(("GET", self.path))
                found = self._found()
                rng = self.headers.get("Range", "")
                start = int(rng.split("=", 1)[1].split("-", 1)[0]) if rng.startswith("bytes=") else 0
                self._headers(found, start)
                if found is not None:
                    with open(found[0], "rb") as f:
                        f.seek(start)
                        for block in iter(lambda: f.read(1 << 20), b""):
                            self.wfile.write(block)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def gets(self) -> int:
        """Downloads of a file (other requests the client makes, such as its own API
        calls, answered 404, are not downloads)."""
        return sum(1 for method, path in self.log if method == "GET" and "/resolve/" in path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
