"""The conversation page of ``blendsql serve`` (ask, correct, reset), with a scripted model."""

from __future__ import annotations

import urllib.error
import urllib.request

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models import FunctionModel

from .conftest import CLIENT_TIMEOUT, post_form, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402

#: plain responses (no live progress): these tests read statuses and redirects, and a
#: loaded machine must not turn a quick request into a streamed page (test_serve_progress.py)
PLAIN = None


def scripted_engine(programs: list[str]) -> BlendSQL:
    """A session whose model writes the given programs in turn (then repeats the last)."""
    queue = list(programs)

    def write(request):
        return queue.pop(0) if len(queue) > 1 else queue[0]

    people = pd.DataFrame({"name": ["ann", "bob", "cy"], "team": ["red", "blue", "red"]})
    return BlendSQL({"people": people}, model=FunctionModel(write), cache=False)


def post(base: str, kind: str, text: str = "") -> tuple[int, str]:
    """Send a message as the page's form does (with its token); after the redirect to GET /chat."""
    return post_form(base, "/chat", {"kind": kind, "text": text})


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=CLIENT_TIMEOUT) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_ask_then_correct_then_reset():
    bsql = scripted_engine(["SELECT name FROM people WHERE team = 'red' ORDER BY name",
                            "SELECT name FROM people WHERE team = 'blue' ORDER BY name"])
    with running(create_app(bsql, chat_acts=False, progress_after=PLAIN)) as base:
        status, body = post(base, "say", "who is on the <i>red</i> team?")
        assert status == 200
        assert "who is on the &lt;i&gt;red&lt;/i&gt; team?" in body
        assert "team = &#x27;red&#x27;" in body and "<td>ann</td>" in body and "<td>cy</td>" in body
        assert "Explain this query" in body

        status, body = post(base, "correct", "no, the blue team")
        assert status == 200
        assert body.count("class='turn'") == 2 and "(correct)" in body
        assert "<td>bob</td>" in body and "<td>ann</td>" not in body  # only the last result

        status, body = post(base, "reset")
        assert status == 200 and "class='turn'" not in body


def test_correcting_before_asking_is_a_clear_error_shown_once():
    with running(create_app(scripted_engine(["SELECT 1"]), chat_acts=False, progress_after=PLAIN)) as base:
        status, body = post(base, "correct", "the other one")
        assert status == 400 and "no query to correct yet" in body and "Hint:" in body
        status, body = get(f"{base}/chat")
        assert status == 200 and "role='alert'" not in body


def test_empty_and_unknown_messages_are_refused():
    with running(create_app(scripted_engine(["SELECT 1"]), chat_acts=False, progress_after=PLAIN)) as base:
        status, body = post(base, "say", "   ")
        assert status == 400 and "the message is empty" in body
        status, body = post(base, "drop", "x")
        assert status == 400 and "unknown action" in body


def test_a_failing_model_shows_an_error_not_a_traceback():
    def broken(request):
        raise RuntimeError("model exploded")

    people = pd.DataFrame({"name": ["ann"]})
    bsql = BlendSQL({"people": people}, model=FunctionModel(broken), cache=False)
    with running(create_app(bsql, chat_acts=False, progress_after=PLAIN)) as base:
        status, body = post(base, "say", "who?")
    assert "Traceback" not in body
    # a ModelError (400) or, while the model's exception escapes the conversation, 500
    assert status in (400, 500) and "role='alert'" in body and "model exploded" in body
