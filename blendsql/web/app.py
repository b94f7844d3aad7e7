"""The Starlette app behind ``blendsql serve``.

Why plain GET forms and no JavaScript: the page is a local, read-only view;
a query in the URL can be bookmarked and reloaded, and the result is the same
self-contained Smoothie HTML as in Jupyter. Why a worker thread, a lock and a
deadline per request: a BlendSQL session runs one query at a time, a model
call can be slow, and a browser tab must get an answer (a clear time-out
message) instead of hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from blendsql._display import CSS, esc, trace_html, wrap
from blendsql.errors import BlendSQLError, ExecutionError
from blendsql.web.live import DEFAULT_PROGRESS_AFTER, Progress, reporting, respond

DEFAULT_QUERY_TIMEOUT = 60.0  # seconds for one query, model calls included
DEFAULT_ASK_TIMEOUT = 300.0  # a question writes a program first (slow with the embedded model)
MAX_INPUT_CHARS = 100_000  # a query / question longer than this is refused before any work

T = TypeVar("T")

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# the page has no script at all: forbid every script, so an escaping slip cannot run one
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


class SecurityHeaders:
    """ASGI middleware: the headers above on every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def allowed_hosts_for(host: str) -> list[str]:
    """Host headers the page answers: this machine's names (a web page elsewhere that
    rebinds its DNS name to 127.0.0.1 must not read the results), plus ``host``;
    any name when listening on every interface (the user chose that, and was warned)."""
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return [*LOCAL_HOSTS, *([host] if host not in LOCAL_HOSTS else [])]

PAGE_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;color:#1d2330;background:#fafafa}
header{padding:10px 20px;background:#1d2330;color:#fff;display:flex;gap:16px;align-items:baseline}
header h1{font-size:18px;margin:0} header .db{opacity:.8;font-size:13px}
header nav{margin-left:auto} header nav a{color:#fff;margin-left:14px}
main{display:grid;grid-template-columns:minmax(0,1fr) 240px;gap:20px;padding:16px 20px}
form{margin-bottom:14px} label{display:block;font-weight:600;margin-bottom:4px}
textarea,input[type=text]{width:100%;box-sizing:border-box;font:13px ui-monospace,monospace;padding:6px}
button{margin-top:6px;padding:4px 14px;font-size:13px;cursor:pointer}
.note{font-size:12px;opacity:.7;margin:4px 0}
.error{border:1px solid #d33;background:#fff0f0;padding:8px 12px;border-radius:4px;margin:8px 0}
.error .hint{opacity:.85} .answer{font-size:15px;margin:8px 0}
aside{font-size:12px} aside ul{padding-left:16px;margin:2px 0 8px}
pre.program{background:#eef;padding:6px;white-space:pre-wrap}
ol.turns{padding-left:18px} li.turn{margin-bottom:12px} .you{margin-bottom:2px} .act{opacity:.6}
"""


class Busy(Exception):
    """The session is still running an earlier request (its deadline passed, the thread did not)."""


@dataclass
class Outcome:
    """What one request produced: a page fragment and its HTTP status."""

    body: str
    status: int = 200


class Engine:
    """One BlendSQL session used by one request at a time, each under a deadline."""

    def __init__(self, bsql: Any, query_timeout: float, ask_timeout: float) -> None:
        if getattr(getattr(bsql, "db", None), "allow_writes", False):
            raise ExecutionError("blendsql serve is read-only",
                                 hint="open the session without allow_writes=True")
        self.bsql = bsql
        self.query_timeout = query_timeout
        self.ask_timeout = ask_timeout
        self._lock = threading.Lock()
        self._schema: list[tuple[str, list[str]]] | None = None

    async def call(self, fn: Callable[[], T], limit: float) -> T:
        """``fn()`` on a worker thread; ``TimeoutError`` (or ``Busy``) once ``limit`` seconds pass.

        The thread cannot be killed, so it is abandoned (it finishes in the
        background, bounded by the engine's own statement / model time limits).
        A request still waiting for the session when its time is up is told the
        session is busy, and its work is dropped rather than run for nobody.
        """
        started = threading.Event()
        abandoned = threading.Event()

        def locked() -> T:
            if not self._lock.acquire(timeout=limit):
                raise Busy()
            try:
                if abandoned.is_set():
                    raise Busy()
                started.set()
                return fn()
            finally:
                self._lock.release()

        try:
            with anyio.fail_after(limit):
                return await anyio.to_thread.run_sync(locked, abandon_on_cancel=True)
        except TimeoutError:
            abandoned.set()
            if not started.is_set():
                raise Busy() from None
            raise

    def schema(self) -> list[tuple[str, list[str]]]:
        """Tables and their columns, read once through the session's backend (any of
        SQLite, DuckDB, PostgreSQL; each read traced and time-limited like a query's).

        Hidden, as in ``blendsql schema``: the loader's metadata tables and
        FTS5's internal shadow tables (``documents_data`` ...).
        """
        if self._schema is None:
            from blendsql.db.loaders import META_COLUMNS, META_TABLES

            db = self.bsql.db
            with db.session(timeout=self.query_timeout):
                hidden = {META_COLUMNS, META_TABLES} | {
                    f"{v}{suffix}" for v in db.fts_tables()
                    for suffix in ("_data", "_idx", "_content", "_docsize", "_config")}
                self._schema = [(t, db.columns(t)) for t in db.tables() if t not in hidden]
        return self._schema


def error_html(e: BaseException) -> str:
    """An error as a person should read it: message, hint, and the trace up to the failure."""
    if isinstance(e, BlendSQLError):
        hint = f"<div class='hint'>Hint: {esc(e.hint, 2000)}</div>" if e.hint else ""
        trace = wrap(trace_html(e.trace, open_=True)) if e.trace else ""
        return (f"<div class='error' role='alert'><b>{esc(type(e).__name__)}</b>: "
                f"<span class='message'>{esc(e.message, 4000)}</span>{hint}</div>{trace}")
    if isinstance(e, Busy):
        return ("<div class='error' role='alert'><b>Busy</b>: an earlier request is still running "
                "on this session.<div class='hint'>Hint: wait for it, then submit again.</div></div>")
    if isinstance(e, TimeoutError):
        return ("<div class='error' role='alert'><b>Timed out</b>: the request took longer than "
                "its time limit.<div class='hint'>Hint: narrow the query (fewer rows reach the "
                "ingredients), or start the server with a larger --timeout.</div></div>")
    return (f"<div class='error' role='alert'><b>Internal error</b>: {esc(type(e).__name__)}: "
            f"{esc(e, 2000)}<div class='hint'>Hint: this is a bug in blendsql; please report the "
            "query.</div></div>")


def _status(e: BaseException) -> int:
    if isinstance(e, (TimeoutError, Busy)):
        return 503 if isinstance(e, Busy) else 504
    return 400 if isinstance(e, BlendSQLError) else 500


async def guarded(engine: Engine, fn: Callable[[], str], limit: float) -> Outcome:
    """Run a renderer under the deadline; every failure becomes a readable error block."""
    try:
        return Outcome(await engine.call(fn, limit))
    except Exception as e:  # noqa: BLE001 - the page shows every failure, never a traceback
        return Outcome(error_html(e), _status(e))


def _too_long(text: str, what: str) -> None:
    if len(text) > MAX_INPUT_CHARS:
        raise ExecutionError(f"the {what} is {len(text)} characters long",
                             hint=f"the page accepts at most {MAX_INPUT_CHARS} characters")


def render_run(engine: Engine, query: str) -> str:
    """The Smoothie view of one query."""
    _too_long(query, "query")
    return str(engine.bsql.execute(query, timeout=engine.query_timeout).to_html())


def render_explain(engine: Engine, query: str) -> str:
    """The query's steps in plain words (no model call)."""
    from blendsql.nl import explain

    _too_long(query, "query")
    lines = explain(query, engine.bsql.registry)
    items = "".join(f"<li>{esc(line.split('. ', 1)[-1], 2000)}</li>" for line in lines)
    return f"<div class='explain'><b>What this query does</b><ol>{items}</ol></div>"


def render_ask(engine: Engine, question: str) -> str:
    """A plain-language answer, the program written for it and its Smoothie."""
    _too_long(question, "question")
    answer = engine.bsql.ask(question)
    parts = [f"<div class='answer'><b>Answer:</b> <span class='answer-text'>"
             f"{esc(answer.answer, 4000)}</span></div>"]
    if answer.fallback_used:
        parts.append("<p class='note'>answered by end-to-end QA (the program failed or found "
                     "nothing)</p>")
    if answer.program:
        parts.append(f"<pre class='program'>{esc(answer.program, 8000)}</pre>")
    if getattr(answer, "error", None):
        parts.append(f"<p class='note'>program error: {esc(answer.error, 2000)}</p>")
    if answer.smoothie is not None:
        parts.append(answer.smoothie.to_html())
    return "".join(parts)


def schema_html(schema: list[tuple[str, list[str]]]) -> str:
    items = "".join(f"<li><b>{esc(t)}</b><ul>{''.join(f'<li>{esc(c)}</li>' for c in cols)}</ul></li>"
                    for t, cols in schema)
    return f"<aside id='schema'><b>Tables</b><ul>{items}</ul></aside>"


def shell(title: str, body: str, schema: str) -> str:
    """The page around a body: header with navigation, the schema on the side."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>{PAGE_CSS}</style><style>{CSS}</style></head>
<body><header><h1>blendsql</h1><span class="db">{esc(title)} · read-only</span>
<nav><a href="/">Query</a> <a href="/chat">Conversation</a></nav></header>
<main><div>{body}</div>{schema}</main></body></html>"""


def page(title: str, query: str, question: str, result: str, schema: str) -> str:
    """The query page: the query and ask forms, then the result."""
    return shell(title, f"""<form method="get" action="/" id="query-form">
<label for="q">Query</label>
<textarea id="q" name="q" rows="6" spellcheck="false">{esc(query, MAX_INPUT_CHARS)}</textarea>
<button type="submit" name="action" value="run">Run</button>
<button type="submit" name="action" value="explain">Explain</button>
</form>
<form method="get" action="/ask" id="ask-form">
<label for="question">Ask in plain language</label>
<input type="text" id="question" name="question" value="{esc(question, MAX_INPUT_CHARS)}">
<button type="submit">Ask</button>
<p class="note">The session's model writes a query; with the embedded model this can take a while.</p>
</form>
<section id="result">{result}</section>""", schema)


def create_app(bsql: Any, *, title: str = "database", query_timeout: float = DEFAULT_QUERY_TIMEOUT,
               ask_timeout: float = DEFAULT_ASK_TIMEOUT,
               allowed_hosts: Sequence[str] = LOCAL_HOSTS, chat_acts: bool = True,
               progress_after: float | None = DEFAULT_PROGRESS_AFTER) -> Starlette:
    """A Starlette app over ``bsql`` (a ``BlendSQL``; register custom ingredients on it first).

    Read-only: a session opened with ``allow_writes=True`` is refused. Only
    requests whose Host is in ``allowed_hosts`` are answered (DNS rebinding).
    ``chat_acts=False``: the conversation skips the model's dialogue-act choice.
    ``progress_after``: seconds after which a running query's page is streamed
    with live progress (``None``: never; see ``blendsql.web.live``).
    """
    from blendsql.web.chat import Chat, routes

    if progress_after is not None and (isinstance(progress_after, bool)
                                       or not isinstance(progress_after, (int, float))
                                       or not progress_after >= 0):
        raise ExecutionError(f"progress_after must be >= 0 seconds or None, not {progress_after!r}",
                             hint="e.g. progress_after=1.0")

    engine = Engine(bsql, query_timeout, ask_timeout)

    async def schema() -> str:
        if engine._schema is not None:
            return schema_html(engine._schema)
        try:
            return schema_html(await engine.call(engine.schema, engine.query_timeout))
        except Exception:  # noqa: BLE001 - the schema list is a convenience, never an error page
            return ""

    async def answer(fn: Callable[[], str], limit: float, query: str, question: str) -> Response:
        """The page for one request; streamed with live progress when it runs long."""
        side = await schema()

        async def work(progress: Progress) -> Outcome:
            return await guarded(engine, reporting(bsql, fn, progress), limit)

        return await respond(work, lambda result: page(title, query, question, result, side),
                             progress_after)

    async def index(request: Request) -> Response:
        query = request.query_params.get("q", "")
        if not query.strip():
            return HTMLResponse(page(title, query, "", "", await schema()))
        renderer = render_explain if request.query_params.get("action") == "explain" else render_run
        return await answer(lambda: renderer(engine, query), engine.query_timeout, query, "")

    async def ask(request: Request) -> Response:
        question = request.query_params.get("question", "")
        if not question.strip():
            return HTMLResponse(page(title, "", question, "", await schema()))
        return await answer(lambda: render_ask(engine, question), engine.ask_timeout, "", question)

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    show_chat, post_chat = routes(Chat(engine, chat_acts), title, schema, progress_after)
    app = Starlette(routes=[Route("/", index), Route("/ask", ask), Route("/health", health),
                            Route("/chat", show_chat, methods=["GET"]),
                            Route("/chat", post_chat, methods=["POST"])],
                    middleware=[Middleware(SecurityHeaders),
                                Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))])
    app.state.engine = engine
    return app


def serve(bsql: Any, host: str = "127.0.0.1", port: int = 8000, **app_kwargs: Any) -> None:
    """Run the page with uvicorn until interrupted (127.0.0.1: only this machine can reach it)."""
    import uvicorn

    app_kwargs.setdefault("allowed_hosts", allowed_hosts_for(host))
    uvicorn.run(create_app(bsql, **app_kwargs), host=host, port=port, log_level="warning")


__all__ = ["create_app", "error_html", "serve"]
