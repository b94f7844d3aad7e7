"""The Starlette app behind ``blendsql serve``: the query page, the question box and
the conversation (``web/chat.py``), over one session (``web/engine.py``).

Why plain HTML forms and no JavaScript: the page is a local, read-only view,
and the result is the same self-contained Smoothie HTML as in Jupyter.
Running a query, asking and sending a chat message spend model calls, so each
is a POST that carries the page's token and is checked for its origin
(``web/guard.py``); a GET only shows the page, with ``/?q=...`` or
``/ask?question=...`` pre-filling the box (a link can share a query, never
run it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from blendsql._display import esc, smoothie_html
from blendsql.errors import ExecutionError, ParseError
from blendsql.plan.steps import FinalQuery
from blendsql.smoothie import HTML_MAX_ROWS
from blendsql.web.chat import Chat, routes
from blendsql.web.engine import MAX_INPUT_CHARS, Engine, Outcome, check_length, guarded
from blendsql.web.guard import Guard, Refused, new_token, read_form, token_input
from blendsql.web.live import DEFAULT_PROGRESS_AFTER, Progress, reporting, respond
from blendsql.web.page import schema_html, shell

DEFAULT_QUERY_TIMEOUT = 60.0  # seconds for one query, model calls included
DEFAULT_ASK_TIMEOUT = 300.0  # a question writes a program first (slow with the embedded model)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
# the page has no script at all: forbid every script, so an escaping slip cannot run one.
# Referrer-Policy same-origin, not no-referrer: under no-referrer a browser sends
# ``Origin: null`` with the page's own form posts, and the origin check needs the real one.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cross-origin-resource-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
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
    """Host names the page answers: this machine's names (a web page elsewhere that
    rebinds its DNS name to 127.0.0.1 must not read the results), plus ``host``;
    any name when listening on every interface (the user chose that, and was warned).
    The ``Host`` header must also carry the server's port (``web/guard.py``)."""
    host = host.strip().strip("[]")
    if host in ("0.0.0.0", "::", ""):
        return ["*"]
    return [*LOCAL_HOSTS, *([host] if host not in LOCAL_HOSTS else [])]


def render_run(engine: Engine, query: str) -> str:
    """The Smoothie view of one query.

    A query with ingredient calls is planned and priced first, then that plan runs
    (``BlendSQL.run(BlendSQL.plan(q))``, as ``blendsql explain --analyze``), so the
    trace ends with each step's estimate beside its actual figures; any other query
    (plain SQL, or SQL only SQLite reads) is executed as it is.
    """
    check_length(query, "query")
    bsql = engine.bsql
    try:
        plan = bsql.plan(query, timeout=engine.query_timeout)
    except ParseError:  # execute reports it, or runs SQLite's own syntax as it is
        plan = None
    if plan is None or all(isinstance(s, FinalQuery) for s in plan.steps):
        return str(bsql.execute(query, timeout=engine.query_timeout).to_html())
    done = bsql.run(plan)
    return smoothie_html(done.df, done.meta, done.trace, HTML_MAX_ROWS, plan=done.plan)


def render_explain(engine: Engine, query: str) -> str:
    """The query's steps in plain words (no model call)."""
    from blendsql.nl import explain

    check_length(query, "query")
    lines = explain(query, engine.bsql.registry)
    items = "".join(f"<li>{esc(line.split('. ', 1)[-1], 2000)}</li>" for line in lines)
    return f"<div class='explain'><b>What this query does</b><ol>{items}</ol></div>"


def render_ask(engine: Engine, question: str) -> str:
    """A plain-language answer, the program written for it and its Smoothie."""
    check_length(question, "question")
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


def page(title: str, query: str, question: str, result: str, schema: str, token: str) -> str:
    """The query page: the query and ask forms (posted, with the page's token), then the result."""
    return shell(title, f"""<form method="post" action="/" id="query-form">
{token_input(token)}
<label for="q">Query</label>
<textarea id="q" name="q" rows="6" spellcheck="false">{esc(query, MAX_INPUT_CHARS)}</textarea>
<button type="submit" name="action" value="run">Run</button>
<button type="submit" name="action" value="explain">Explain</button>
</form>
<form method="post" action="/ask" id="ask-form">
{token_input(token)}
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
    requests whose Host is in ``allowed_hosts`` (with the server's port) are
    answered (DNS rebinding); every POST must come from the page itself: its
    origin and the page's token, random per app (``web/guard.py``).
    ``chat_acts=False``: the conversation skips the model's dialogue-act choice.
    ``progress_after``: seconds after which a running query's page is streamed
    with live progress (``None``: never; see ``blendsql.web.live``).
    """
    if progress_after is not None and (isinstance(progress_after, bool)
                                       or not isinstance(progress_after, (int, float))
                                       or not progress_after >= 0):
        raise ExecutionError(f"progress_after must be >= 0 seconds or None, not {progress_after!r}",
                             hint="e.g. progress_after=1.0")

    engine = Engine(bsql, query_timeout, ask_timeout)
    token = new_token()

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

        return await respond(work, lambda result: page(title, query, question, result, side,
                                                       token),
                             progress_after)

    async def form(request: Request) -> dict[str, str]:
        """The posted form, its type and token checked (``Refused`` otherwise)."""
        return read_form(await request.body(), request.headers.get("content-type"), token)

    async def refused(e: Refused) -> Response:
        return HTMLResponse(page(title, "", "", e.html(), await schema(), token), e.status)

    async def show(request: Request) -> Response:
        """The page; ``?q=`` / ``?question=`` pre-fill the boxes and run nothing."""
        query = request.query_params.get("q", "")
        question = request.query_params.get("question", "")
        return HTMLResponse(page(title, query, question, "", await schema(), token))

    async def run(request: Request) -> Response:
        try:
            fields = await form(request)
        except Refused as e:
            return await refused(e)
        query = fields.get("q", "")
        if not query.strip():
            return HTMLResponse(page(title, query, "", "", await schema(), token))
        renderer = render_explain if fields.get("action") == "explain" else render_run
        return await answer(lambda: renderer(engine, query), engine.query_timeout, query, "")

    async def ask(request: Request) -> Response:
        try:
            fields = await form(request)
        except Refused as e:
            return await refused(e)
        question = fields.get("question", "")
        if not question.strip():
            return HTMLResponse(page(title, "", question, "", await schema(), token))
        return await answer(lambda: render_ask(engine, question), engine.ask_timeout, "", question)

    async def health(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ok")

    show_chat, post_chat = routes(Chat(engine, chat_acts), title, schema, progress_after,
                                  token=token)
    app = Starlette(routes=[Route("/", show, methods=["GET"]), Route("/", run, methods=["POST"]),
                            Route("/ask", show, methods=["GET"]),
                            Route("/ask", ask, methods=["POST"]), Route("/health", health),
                            Route("/chat", show_chat, methods=["GET"]),
                            Route("/chat", post_chat, methods=["POST"])],
                    middleware=[Middleware(SecurityHeaders),
                                Middleware(Guard, allowed_hosts=list(allowed_hosts))])
    app.state.engine = engine
    return app


def serve(bsql: Any, host: str = "127.0.0.1", port: int = 8000, **app_kwargs: Any) -> None:
    """Run the page with uvicorn until interrupted (127.0.0.1: only this machine can reach it;
    ``::1`` or ``[::1]``: the same over IPv6)."""
    import uvicorn

    host = host.strip().strip("[]")
    app_kwargs.setdefault("allowed_hosts", allowed_hosts_for(host))
    uvicorn.run(create_app(bsql, **app_kwargs), host=host, port=port, log_level="warning")


__all__ = ["create_app", "serve"]
