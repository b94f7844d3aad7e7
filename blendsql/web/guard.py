"""What ``blendsql serve`` answers: only itself, from its own page, within size caps.

The page runs on the user's machine, and any web site the user visits can make
the browser send requests to it (a form that posts itself, a ``fetch`` in
``no-cors`` mode, an ``<img src>``). Those must not run queries (which spend
model calls) or change the conversation. The checks, in the order a request
meets them (``Guard``, an ASGI middleware in front of every route):

1. **Size caps before reading**: an address longer than :data:`MAX_URL_BYTES`
   is refused (414); a body announced longer than :data:`MAX_BODY_BYTES` is
   refused before one byte of it is read (413), and a body without a length
   (chunked) is read only up to the cap.
2. **Host allow-list** (DNS rebinding): the ``Host`` header must name this
   machine (``localhost``, ``127.0.0.1``, ``[::1]``, or the host the server was
   started on) *and* the port the server listens on (400).
3. **Fetch metadata** (resource isolation): another site's page may still link
   to the page (a top-level navigation shows it, nothing more), but cannot
   embed or fetch it (403).
4. **State-changing requests** (every POST: running a query, asking, a chat
   message): ``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``: typed by
   the user), ``Origin`` must be the server's own origin, the body must be a
   form (``application/x-www-form-urlencoded``), and it must carry the token
   embedded in the page's forms (``read_form``; 403 otherwise). The token is
   random per server start; another site cannot read the page to learn it.

Why not text patterns: the checks are on who sends the request, never on what
the query says. Clients that send neither ``Origin`` nor ``Sec-Fetch-Site``
(scripts, ``curl``) are not browsers driven by another site; they still need
the token, which they get by reading the page like a person does.
"""

from __future__ import annotations

import hmac
import secrets
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from blendsql._display import esc

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the longest request body accepted: a form with a query of ``MAX_INPUT_CHARS`` characters
#: of any script fits (a character is at most 4 UTF-8 bytes, 12 once percent-encoded)
MAX_BODY_BYTES = 2 * 1024 * 1024
#: the longest path + query string accepted (a GET only pre-fills the boxes; long queries are posted)
MAX_URL_BYTES = 8 * 1024
#: the most fields a posted form may have (the page's forms have three)
MAX_FORM_FIELDS = 16
#: the form field that carries the page's token
TOKEN_FIELD = "token"
#: ``Sec-Fetch-Site`` values of a request this page's own forms (or the user's address bar) sent
OWN_SITES = ("same-origin", "none")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
FORM_TYPE = "application/x-www-form-urlencoded"


@dataclass
class Refused(Exception):
    """A request the page does not answer: its status, what was wrong, and what to do."""

    status: int
    message: str
    hint: str = ""

    def __str__(self) -> str:
        return self.message

    def html(self) -> str:
        hint = f"<div class='hint'>Hint: {esc(self.hint, 2000)}</div>" if self.hint else ""
        return (f"<div class='error' role='alert'><b>Refused</b>: "
                f"<span class='message'>{esc(self.message, 2000)}</span>{hint}</div>")


def new_token() -> str:
    """A fresh random token for the page's forms (256 bits)."""
    return secrets.token_urlsafe(32)


def split_host(value: str) -> tuple[str, int | None]:
    """``Host`` header -> (lower-case name, port or None); ``[::1]:8000`` -> (``::1``, 8000).

    Raises ``ValueError`` for a value that is not a host name with an optional port.
    """
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 literal is bracketed, its port follows the bracket
        name, bracket, rest = value[1:].partition("]")
        if not bracket or not name or (rest and not rest.startswith(":")):
            raise ValueError(value)
        port_text = rest[1:] if rest else None
    else:
        name, colon, port_text_ = value.partition(":")
        if not name or ":" in port_text_:
            raise ValueError(value)
        port_text = port_text_ if colon else None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(value)
    return name, int(port_text)


def host_for_url(host: str) -> str:
    """A host as it is written in a URL: an IPv6 address in brackets (``::1`` -> ``[::1]``)."""
    host = host.strip()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def url_for(host: str, port: int) -> str:
    """The page's address for a listening host and port: ``http://[::1]:8000/``."""
    return f"http://{host_for_url(host)}:{port}/"


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers, names lower-case; a repeated header keeps its first value."""
    out: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        out.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return out


class Guard:
    """ASGI middleware: size caps, the Host allow-list and cross-site checks (module docstring).

    ``allowed_hosts``: host names answered (``"*"``: any name, for a server the
    user chose to open to the network); the port must be the one the server
    listens on (the ASGI scope's ``server``) unless ``"*"`` is given.
    """

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str],
                 max_body: int = MAX_BODY_BYTES, max_url: int = MAX_URL_BYTES) -> None:
        self.app = app
        self.any_host = "*" in allowed_hosts
        self.hosts = {h.strip().lower().strip("[]") for h in allowed_hosts if h != "*"}
        self.max_body = max_body
        self.max_url = max_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            headers = _headers(scope)
            self.check_url(scope)
            self.check_host(scope, headers)
            self.check_site(scope, headers)
            if scope["method"] not in SAFE_METHODS:
                self.check_origin(scope, headers)
            body = await self.read_body(scope, headers, receive)
        except Refused as refused:
            await refusal(refused, send)
            return
        if body is None:
            await self.app(scope, receive, send)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # then what the server says next (a disconnect)

        await self.app(scope, replay, send)

    def check_url(self, scope: Scope) -> None:
        path = scope.get("raw_path") or scope.get("path", "").encode("utf-8")
        length = len(path) + len(scope.get("query_string", b""))
        if length > self.max_url:
            raise Refused(414, f"the address is {length} bytes long; the page accepts at most "
                               f"{self.max_url}",
                          "paste a long query into the query box instead of the address")

    def check_host(self, scope: Scope, headers: dict[str, str]) -> None:
        if self.any_host:
            return
        value = headers.get("host", "")
        try:
            name, port = split_host(value)
        except ValueError:
            raise Refused(400, f"invalid Host header {value!r}",
                          "open the page at the address blendsql serve printed") from None
        server = scope.get("server")
        listening = server[1] if server and len(server) > 1 and server[1] else None
        if port is None:
            port = 443 if scope.get("scheme") == "https" else 80
        if name not in self.hosts or (listening is not None and port != listening):
            raise Refused(400, f"this page answers only to this machine's names, not Host "
                               f"{value!r}",
                          "open the page at the address blendsql serve printed "
                          "(localhost, 127.0.0.1 or [::1] with the server's port)")

    def check_site(self, scope: Scope, headers: dict[str, str]) -> None:
        """Another site may link to a page (a navigation), never embed or fetch it."""
        site = headers.get("sec-fetch-site")
        if site is None or site in OWN_SITES:
            return
        navigation = (headers.get("sec-fetch-mode") == "navigate"
                      and headers.get("sec-fetch-dest", "document") in ("document", "")
                      and scope["method"] in SAFE_METHODS)
        if not navigation:
            raise Refused(403, f"a request from another site ({site}) is refused",
                          "use the page itself: open it at the address blendsql serve printed")

    def check_origin(self, scope: Scope, headers: dict[str, str]) -> None:
        """A request that changes something must come from this page's own origin."""
        site = headers.get("sec-fetch-site")
        if site is not None and site not in OWN_SITES:
            raise Refused(403, f"a request from another site ({site}) is refused",
                          "submit the form on the page itself")
        origin = headers.get("origin")
        if origin is None:
            return  # not a browser (every browser sends Origin with a POST); the token decides
        own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()
        if origin.strip().lower() != own:
            raise Refused(403, f"a request from origin {origin!r} is refused; this page's "
                               f"origin is {own!r}",
                          "submit the form on the page itself")

    async def read_body(self, scope: Scope, headers: dict[str, str],
                        receive: Receive) -> bytes | None:
        """The body of a request that may change something, read up to the cap; ``None``
        for a GET (whose body, if any, is never read). A body announced or found longer
        than the cap is refused without reading the rest."""
        length = headers.get("content-length")
        if length is not None:
            if not length.strip().isdigit():
                raise Refused(400, f"invalid Content-Length {length!r}")
            if int(length) > self.max_body:
                raise Refused(413, f"the request body is {int(length)} bytes; the page accepts "
                                   f"at most {self.max_body}", "send a shorter query or message")
        if scope["method"] in SAFE_METHODS:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise Refused(413, f"the request body is longer than {self.max_body} bytes, "
                                   "the most the page accepts", "send a shorter query or message")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


async def refusal(refused: Refused, send: Send) -> None:
    """Answer with the refusal's status and a small page; the connection is closed after it
    (an unread body must not be taken for the next request)."""
    body = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Refused</title></head><body>{refused.html()}</body></html>").encode()
    await send({"type": "http.response.start", "status": refused.status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def read_form(body: bytes, content_type: str | None, token: str) -> dict[str, str]:
    """A posted form's fields (first value of each), after checking its type and token.

    Raises ``Refused``: 415 for a body that is not a form, 400 for one that
    does not decode, 403 for a missing or wrong token.
    """
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind != FORM_TYPE:
        raise Refused(415, f"the page accepts forms ({FORM_TYPE}), not {kind or 'no type'!r}",
                      "submit the form on the page itself")
    try:
        text = body.decode("utf-8")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=False,
                                       errors="strict", max_num_fields=MAX_FORM_FIELDS)
    except (UnicodeDecodeError, ValueError) as e:
        raise Refused(400, f"the form could not be read: {e}",
                      "submit the form on the page itself") from None
    fields: dict[str, str] = {}
    for key, value in pairs:
        fields.setdefault(key, value)
    if not same_token(fields.get(TOKEN_FIELD, ""), token):
        raise Refused(403, "the form's token is missing or out of date (the server was "
                           "restarted, or the form came from another site)",
                      "reload the page and submit again")
    return fields


def same_token(given: str, token: str) -> bool:
    """Constant-time comparison (bytes, so a non-ASCII value is just unequal); an empty
    expected token matches nothing."""
    return bool(token) and hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def token_input(token: str) -> str:
    """The hidden field every form of the page carries."""
    return f'<input type="hidden" name="{TOKEN_FIELD}" value="{esc(token)}">'


__all__ = ["MAX_BODY_BYTES", "MAX_URL_BYTES", "Guard", "Refused", "new_token", "read_form",
           "split_host", "token_input", "url_for"]
