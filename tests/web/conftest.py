"""Headless Chromium for tests that check what a person sees.

Debian's ``chromium`` (``/usr/bin/chromium``) driven by Playwright; Playwright's
own browser download is never used. Missing either one skips with the command
that installs it.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REQUIRED = bool(os.environ.get("BLENDSQL_REQUIRE_BROWSER"))  # CI: a missing browser fails
CHROMIUM = Path(os.environ.get("BLENDSQL_CHROMIUM", "/usr/bin/chromium"))
PAGE_TIMEOUT_MS = 20_000  # every wait on the page is bounded; a loaded machine is slow, not stuck


def _unavailable(why: str) -> None:
    """Skip (a developer's machine) or fail (CI sets BLENDSQL_REQUIRE_BROWSER=1)."""
    if REQUIRED:
        pytest.fail(f"browser tests are required here but {why}")
    pytest.skip(why)


def _sync_playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed: pip install -e '.[browser]' "
                     "(never `playwright install`; the tests use Debian's chromium)")
    return sync_playwright


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the session (started once: it takes seconds)."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} not found: apt-get install -y chromium "
                     "(or set BLENDSQL_CHROMIUM to a Chromium binary)")
    with _sync_playwright()() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"], timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page that cannot reach the network (only file: and 127.0.0.1 load)."""
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(PAGE_TIMEOUT_MS)

    def offline(route: Any) -> None:
        url = route.request.url
        local = url.startswith(("file:", "data:", "about:", "http://127.0.0.1"))
        route.continue_() if local else route.abort()

    pg.route("**/*", offline)
    try:
        yield pg
    finally:
        context.close()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def running(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` served by uvicorn on ``host`` (127.0.0.1 or ::1) in a thread; stopped (and
    joined) on exit. Yields the base URL (``http://[::1]:PORT`` for IPv6)."""
    uvicorn = pytest.importorskip("uvicorn", reason="pip install -e '.[web]'")
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=free_port(host),
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, name="blendsql-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{f'[{host}]' if ':' in host else host}:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "the test server did not stop"


TOKEN = re.compile(r'name="token" value="([^"]+)"')
CLIENT_TIMEOUT = 60  # seconds: a test's own bound on every request


def token_of(html: str) -> str:
    """The token the page's forms carry (every POST needs it)."""
    found = TOKEN.search(html)
    assert found, "the page has no form token"
    return found.group(1)


def page_token(base: str) -> str:
    """Read the page as a person's browser does and take its forms' token."""
    with urllib.request.urlopen(f"{base}/", timeout=CLIENT_TIMEOUT) as r:
        return token_of(r.read().decode("utf-8"))


def post_form(base: str, path: str, fields: dict[str, str],
              token: str | None = None) -> tuple[int, str]:
    """POST a form as the page does (with its token, read first unless given); a redirect
    is followed, as a browser does. Returns the final status and body."""
    data = urllib.parse.urlencode({**fields, "token": page_token(base) if token is None
                                   else token}).encode()
    try:
        with urllib.request.urlopen(f"{base}{path}", data=data, timeout=CLIENT_TIMEOUT) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8")
