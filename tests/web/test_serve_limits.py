"""``blendsql serve`` as a real server: size caps under a 100 MB body, and IPv6 loopback (issue 39).

The server runs in its own process so that its memory can be read from
``/proc`` (Linux); each test starts it on a free local port and stops it.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models import FunctionModel

from .conftest import CLIENT_TIMEOUT, free_port, post_form, running, token_of

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402
from blendsql.web.guard import MAX_BODY_BYTES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BIG = 100 * 1024 * 1024  # the body of the report: 100 MB
CHUNK = b"x" * 65536
#: how much the server's peak memory may grow while refusing a 100 MB body; reading it
#: whole grew it by ~200 MB; reading up to the cap (2 MB) grows it by about that much
GROWTH_LIMIT = 8 * 1024 * 1024
FORM = "application/x-www-form-urlencoded"
MAP_QUERY = "SELECT x FROM w WHERE {{LLMMap('is it odd?', w.x)}} = TRUE"

SERVER = """
import sys
import pandas as pd
import uvicorn
from blendsql import BlendSQL
from blendsql.web import create_app
app = create_app(BlendSQL({"w": pd.DataFrame({"x": ["a"]})}), progress_after=None)
uvicorn.run(app, host=sys.argv[1], port=int(sys.argv[2]), log_level="warning")
"""


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def wait_until_up(url: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.communicate()[1]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise RuntimeError("the server did not start")


@contextmanager
def server_process(args: list[str], url: str) -> Iterator[subprocess.Popen]:
    """A server in its own process (this checkout first on its path); stopped on exit."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, *args], env=env, cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(url, proc)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


def peak_memory(pid: int) -> int:
    """The process's peak resident memory in bytes (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def send_big_body(port: int, chunked: bool) -> tuple[int, int]:
    """POST a 100 MB form to /chat, stopping as soon as the server answers.

    Returns (status, bytes sent). The server may close the connection while the
    body is still coming; the answer is read before that can lose it.
    """
    head = (f"POST /chat HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {FORM}\r\n"
            + ("Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {BIG}\r\n")
            + "\r\n").encode()
    frame = (f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n") if chunked else CHUNK
    sent = 0
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT) as sock:
        sock.sendall(head)
        try:
            while sent < BIG:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:
                    break
                sock.sendall(frame)
                sent += len(CHUNK)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: read what it said
        try:
            while b"\r\n" not in answer:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        except ConnectionResetError:
            pass
    assert answer.startswith(b"HTTP/1.1 "), f"no answer from the server ({answer!r})"
    return int(answer.split()[1]), sent


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads memory from /proc (Linux)")
def test_a_100_mb_body_is_refused_without_growing_the_server():
    port = free_port()
    with server_process(["-c", SERVER, "127.0.0.1", str(port)],
                        f"http://127.0.0.1:{port}/health") as proc:
        base = f"http://127.0.0.1:{port}"
        # warm up the paths a refusal takes (a page, a refused small post)
        with urllib.request.urlopen(f"{base}/", timeout=CLIENT_TIMEOUT) as r:
            token_of(r.read().decode())
        assert post_form(base, "/chat", {"kind": "say", "text": "hi"}, token="wrong")[0] == 403
        before = peak_memory(proc.pid)
        for chunked in (False, True):
            status, sent = send_big_body(port, chunked)
            assert status == 413, f"chunked={chunked}"
            assert sent < BIG  # refused while the body was still coming
        grown = peak_memory(proc.pid) - before
        assert grown < GROWTH_LIMIT, f"the server's peak memory grew by {grown / 2**20:.1f} MB"
        # and it still answers
        with urllib.request.urlopen(f"{base}/health", timeout=CLIENT_TIMEOUT) as r:
            assert r.status == 200


def test_a_body_just_under_the_cap_is_read_and_judged():
    with running(create_app(BlendSQL({"w": pd.DataFrame({"x": ["a"]})}),
                            progress_after=None)) as base:
        status, body = post_form(base, "/chat", {"kind": "say",
                                                 "text": "x" * (MAX_BODY_BYTES - 200)})
    assert status == 400 and "characters" in body  # the message length error, not 413


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_the_page_works_on_ipv6_loopback():
    calls: list[object] = []
    bsql = BlendSQL({"w": pd.DataFrame({"x": ["a", "b"]})},
                    model=FunctionModel(lambda r: calls.append(r) or "true"), cache=False)
    with running(create_app(bsql, progress_after=None), host="::1") as base:
        assert base.startswith("http://[::1]:")
        with urllib.request.urlopen(f"{base}/", timeout=CLIENT_TIMEOUT) as r:  # Host: [::1]:PORT
            assert r.status == 200
            token = token_of(r.read().decode())
        own = {"Origin": base, "Sec-Fetch-Site": "same-origin", "Content-Type": FORM}
        req = urllib.request.Request(f"{base}/", data=urllib.parse.urlencode(
            {"q": MAP_QUERY, "token": token}).encode(), headers=own)
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT) as r:
            assert r.status == 200 and "<td>a</td>" in r.read().decode()
        assert len(calls) == 2
        port = base.rsplit(":", 1)[1]
        other = {**own, "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "cross-site"}
        req = urllib.request.Request(f"{base}/", data=f"q=SELECT+1&token={token}".encode(),
                                     headers=other)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT)
        assert refused.value.code == 403 and len(calls) == 2


@pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_cli_serve_on_ipv6_answers_its_own_address():
    """The report: ``blendsql serve --host ::1`` refused its own browser and printed an
    address that is not a URL."""
    port = free_port("::1")
    url = f"http://[::1]:{port}/"
    cli = "import sys; from blendsql.cli import main; sys.exit(main())"
    with server_process(["-c", cli, "serve", "example", "--host", "::1", "--port", str(port)],
                        url) as proc:
        with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT) as r:
            assert r.status == 200 and 'id="query-form"' in r.read().decode()
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
    assert f"at {url} " in out
