"""An OpenAI-compatible server in a thread, for tests of clients, pools and the engine.

It answers ``/v1/chat/completions`` with a text derived from the prompt (``answer``)
after a small fixed latency, with a slot limit, and ``/v1/models``. A server can be
killed mid-batch (requests it holds are dropped without an answer, new connections
are refused) and started again on the same port.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DELAY = 0.02  # seconds each completion takes
SLOTS = 4  # completions a server runs at once (the pool's max_concurrency per endpoint)


def expected(prompt: str) -> str:
    """The one right answer to ``prompt``, whichever server gives it."""
    return "ans-" + prompt[::-1]


class FakeServer:
    """An OpenAI-compatible server in a thread; ``kill()`` and ``restart()`` on demand."""

    def __init__(self, delay: float = DELAY, slots: int = SLOTS, status: int = 200,
                 answer: Callable[[str], str] | None = None) -> None:
        self.delay = delay
        self.answer = answer or expected
        self.status = status
        self.slots = threading.BoundedSemaphore(slots)
        self.lock = threading.Lock()
        self.received: list[str] = []  # prompts that reached the server
        self.answered: list[str] = []  # prompts it answered
        self.in_flight = 0
        self.max_in_flight = 0
        self.dead = False
        self.kill_at: int | None = None  # die on receiving this many requests
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # /v1/models
                self._send(200, {"object": "list", "data": [
                    {"id": "m", "object": "model", "owned_by": "someone"}]})

            def do_POST(self) -> None:  # /v1/chat/completions
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                prompt = body["messages"][-1]["content"]
                with state.slots:
                    with state.lock:
                        state.received.append(prompt)
                        if len(state.received) == state.kill_at:  # mid-request: it is lost
                            state.dead = True
                            threading.Thread(target=state.kill).start()
                        state.in_flight += 1
                        state.max_in_flight = max(state.max_in_flight, state.in_flight)
                    time.sleep(state.delay)
                    with state.lock:
                        state.in_flight -= 1
                        if state.dead:  # killed meanwhile: drop the connection unanswered
                            self.close_connection = True
                            return
                        if state.status == 200:
                            state.answered.append(prompt)
                if state.status != 200:
                    self._send(state.status, {"error": {"message": "no", "type": "x"}})
                    return
                self._send(200, {
                    "id": "x", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": state.answer(prompt)}}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.dead = False
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()

    def kill(self) -> None:
        """Refuse new connections; requests in progress end without an answer."""
        self.dead = True
        server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def restart(self) -> None:
        """Serve again on the same port (counts start afresh)."""
        with self.lock:
            self.received.clear()
            self.answered.clear()
        self.start()
