"""The conversation page of ``blendsql serve``: ask, clarify, correct, explain, on the same session.

One ``blendsql.nl.Conversation`` per server: the page is a local, single-user
tool. A message is a POST answered by a redirect to ``/chat`` (so reloading
the page never sends it twice); it carries the page's token and is checked
for its origin like every POST (``web/guard.py``). The history is rendered
from the conversation's own turns.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from blendsql._display import esc
from blendsql.errors import ExecutionError
from blendsql.web.engine import (
    Engine,
    Outcome,
    check_length,
    error_html,
    guarded,
)
from blendsql.web.guard import Refused, read_form, token_input
from blendsql.web.live import Progress, reporting, respond
from blendsql.web.page import shell

KINDS = ("say", "correct", "reset")


class Chat:
    """The server's conversation and the outcome of the last message (shown once)."""

    def __init__(self, engine: Engine, classify_acts: bool = True) -> None:
        self.engine = engine
        self.classify_acts = classify_acts
        self._conv: Any = None
        self.last_error: Outcome | None = None

    @property
    def conversation(self) -> Any:
        """Created on first use (importing ``blendsql.nl`` is not free)."""
        if self._conv is None:
            from blendsql.nl import Conversation

            self._conv = Conversation(self.engine.bsql, classify_acts=self.classify_acts)
        return self._conv

    def send(self, kind: str, text: str) -> str:
        """Run one message (on the worker thread); returns nothing to show, the turns do."""
        if kind == "reset":
            self._conv = None
            return ""
        check_length(text, "message")
        if not text.strip():
            raise ExecutionError("the message is empty", hint="type a question or a correction")
        if kind == "correct":
            if self.conversation.last_query_turn() is None:
                raise ExecutionError("there is no query to correct yet",
                                     hint="ask a question first, then say what to change")
            self.conversation.correct(text)
        else:
            self.conversation.ask(text)
        return ""


def _explain(program: str, registry: Any) -> str:
    """The program's steps in plain words (no model); nothing when it cannot be explained."""
    from blendsql.nl import explain

    try:
        lines = explain(program, registry)
    except Exception:  # noqa: BLE001 - an explanation is extra; the program is shown anyway
        return ""
    items = "".join(f"<li>{esc(line.split('. ', 1)[-1], 2000)}</li>" for line in lines)
    return f"<details class='explain'><summary>Explain this query</summary><ol>{items}</ol></details>"


def turn_html(turn: Any, registry: Any, last: bool) -> str:
    """One exchange: what the user said, the reply, the program; the last one with its result."""
    parts = [f"<div class='you'><b>you:</b> {esc(turn.utterance, 4000)}</div>",
             f"<div class='bot'><b>blendsql</b> <span class='act'>({esc(turn.act)})</span>: "
             f"<span class='response'>{esc(turn.response, 4000)}</span></div>"]
    if turn.options:
        parts.append("<p class='note'>Did you mean: " + ", ".join(esc(o) for o in turn.options)
                     + "? Answer in the box below.</p>")
    if turn.diff and turn.previous_program:
        parts.append(f"<p class='note'>changed: {esc(turn.diff, 2000)}</p>")
    if turn.program:
        parts.append(f"<pre class='program'>{esc(turn.program, 8000)}</pre>")
        if last:
            parts.append(_explain(turn.program, registry))
    if turn.error:
        parts.append(f"<p class='note'>error: {esc(turn.error, 2000)}</p>")
    if last and turn.smoothie is not None:
        parts.append(turn.smoothie.to_html())
    return f"<li class='turn'>{''.join(parts)}</li>"


def history_html(chat: Chat, pending: str | None = None) -> str:
    """The turns so far; ``pending``: a message being answered right now, shown last."""
    turns = list(chat._conv.history) if chat._conv is not None else []
    registry = chat.engine.bsql.registry
    last = len(turns) - 1 if pending is None else -1
    items = "".join(turn_html(t, registry, i == last) for i, t in enumerate(turns))
    if pending is not None:
        items += (f"<li class='turn pending'><div class='you'><b>you:</b> "
                  f"{esc(pending, 4000)}</div></li>")
    return (f"<ol class='turns'>{items}</ol>" if items
            else "<p class='note'>Ask a question about the tables on the right.</p>")


def chat_body(chat: Chat, outcome: Outcome | None = None, token: str = "") -> str:
    """The history, the last message's error if it failed, and the message form."""
    history = history_html(chat)
    error = outcome.body if outcome is not None else ""
    return f"""<h2>Conversation</h2>{history}{error}
<form method="post" action="/chat" id="chat-form">
{token_input(token)}
<label for="say">Message</label>
<input type="text" id="say" name="text" autocomplete="off">
<button type="submit" name="kind" value="say">Send</button>
<button type="submit" name="kind" value="correct">Correct the last query</button>
<button type="submit" name="kind" value="reset">New conversation</button>
<p class="note">Questions, clarifications and corrections use the session's model; with the
embedded model a reply can take a while.</p>
</form>"""


#: the end of a streamed reply: on to the conversation page (no script: a refresh and a link)
CONTINUE = ("<meta http-equiv='refresh' content='0;url=/chat'>"
            "<p class='note'><a href='/chat' id='continue'>Show the reply</a></p>")


def routes(chat: Chat, title: str, schema: Any,
           progress_after: float | None = None, *, token: str) -> tuple[Any, Any]:
    """``GET /chat`` (the page) and ``POST /chat`` (one message, then a redirect).

    ``token``: the page's token; a message without it is refused (403) and
    changes nothing.

    A message still being answered after ``progress_after`` seconds gets a
    streamed page with live progress instead of the redirect; it ends by
    going on to ``/chat``, which shows the reply (or its error).
    """

    async def show(request: Request) -> Response:
        outcome = chat.last_error
        chat.last_error = None  # an error is shown once, with the page that follows it
        body = shell(title, chat_body(chat, outcome, token), await schema())
        return HTMLResponse(body, outcome.status if outcome is not None else 200)

    async def post(request: Request) -> Response:
        try:  # the body was read under the size cap (web/guard.py)
            form = read_form(await request.body(), request.headers.get("content-type"), token)
        except Refused as e:
            return HTMLResponse(shell(title, chat_body(chat, Outcome(e.html(), e.status), token),
                                      await schema()), e.status)
        kind = form.get("kind") or "say"
        text = form.get("text", "")
        if kind not in KINDS:
            chat.last_error = Outcome(error_html(ExecutionError(
                f"unknown action {kind!r}", hint="use the page's buttons")), 400)
            return RedirectResponse("/chat", status_code=303)

        async def work(progress: Progress) -> Outcome:
            send = reporting(chat.engine.bsql, lambda: chat.send(kind, text), progress)
            outcome = await guarded(chat.engine, send, chat.engine.ask_timeout)
            chat.last_error = outcome if outcome.status != 200 else None
            return outcome

        # a slow reply streams progress under the conversation so far, then leads to the page;
        # the history is read before the worker can change it
        side, history = await schema(), history_html(chat, "" if kind == "reset" else text)
        return await respond(work, lambda result: shell(title, f"<h2>Conversation</h2>{history}"
                                                               f"{result}", side),
                             progress_after,
                             plain=lambda outcome: RedirectResponse("/chat", status_code=303),
                             final=lambda outcome: CONTINUE)

    return show, post
