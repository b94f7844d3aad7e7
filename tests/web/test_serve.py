"""``blendsql serve``: the app over HTTP (no browser) and the CLI entry."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ExecutionError
from blendsql.ingredients import MapIngredient

from .conftest import CLIENT_TIMEOUT, post_form, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402

#: plain responses (no live progress): these tests read statuses and redirects, and a
#: loaded machine must not turn a quick request into a streamed page (test_serve_progress.py)
PLAIN = None


class Shout(MapIngredient):
    """Upper-cases each value (deterministic)."""

    def run(self, question, values, **kwargs):
        return [str(v).upper() for v in values]


class Gate(MapIngredient):
    """Blocks until the test opens the gate: a slow model without sleeping."""

    entered = threading.Event()
    opened = threading.Event()
    finished = threading.Event()

    def run(self, question, values, **kwargs):
        Gate.entered.set()
        Gate.opened.wait(60)
        Gate.finished.set()
        return [True for _ in values]


def engine(**kw: Any) -> BlendSQL:
    df = pd.DataFrame({"name": ["ann", "bob", "cy"], "team": ["red", "blue", "red"]})
    return BlendSQL({"people": df}, ingredients=[Shout, Gate], **kw)


def run(base: str, query: str, action: str = "run") -> tuple[int, str]:
    """Type ``query`` in the page's box and press Run (or Explain): a POST with the token."""
    return post_form(base, "/", {"q": query, "action": action})


def test_query_renders_rows_counters_and_trace():
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        status, body = run(base, "SELECT name, {{Shout('x', people.name)}} AS up FROM people "
                                 "WHERE team = 'red' ORDER BY name")
    assert status == 200
    assert "<td>ANN</td>" in body and "<td>CY</td>" in body and "BOB" not in body
    assert "2 rows × 2 columns" in body and "values passed" in body
    assert "details class='bsql-trace'" in body and "Shout (map)" in body
    assert "<b>people</b>" in body  # the schema list


def test_the_query_is_echoed_escaped():
    evil = "SELECT '</textarea><script>alert(1)</script>' AS x"
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        status, body = run(base, evil)
    assert status == 200
    assert "<script>alert" not in body
    assert "&lt;/textarea&gt;&lt;script&gt;" in body


def test_errors_show_message_and_hint_not_a_traceback():
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        status, body = run(base, "SELECT {{Shuot('x', people.name)}} FROM people")
    assert status == 400
    assert "role='alert'" in body and "ParseError" in body and "Hint:" in body
    assert "Shout" in body  # the did-you-mean hint
    assert "Traceback" not in body


def test_writes_are_refused_and_the_data_stays():
    bsql = engine()
    with running(create_app(bsql, progress_after=PLAIN)) as base:
        status, body = run(base, "DELETE FROM people")
        assert status == 400 and "role='alert'" in body
        status, body = run(base, "SELECT COUNT(*) AS n FROM people")
    assert status == 200 and "<td class='num'>3</td>" in body


def test_a_writable_session_is_refused():
    with pytest.raises(ExecutionError, match="read-only"):
        create_app(engine(allow_writes=True))


def test_explain_needs_no_model():
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        status, body = run(base, "SELECT name FROM people WHERE {{LLMMap('is it red?', "
                                 "people.team)}} = TRUE", action="explain")
    assert status == 200 and "What this query does" in body and "LLMMap" in body


def test_slow_requests_time_out_and_a_busy_session_says_so():
    for event in (Gate.entered, Gate.opened, Gate.finished):
        event.clear()
    # plain responses (no live progress), so the status says what happened
    app = create_app(engine(), query_timeout=1.0, progress_after=PLAIN)
    slow = "SELECT name FROM people WHERE {{Gate('x', people.name)}} = TRUE"
    try:
        with running(app) as base:
            status, body = run(base, slow)
            assert status == 504 and "Timed out" in body  # the page answers, the work goes on
            assert Gate.entered.is_set() and not Gate.finished.is_set()
            status, body = run(base, "SELECT name FROM people")
            assert status == 503 and "Busy" in body
            Gate.opened.set()
            assert Gate.finished.wait(30)
            for _ in range(50):  # the abandoned worker releases the session right after
                status, body = run(base, "SELECT name FROM people")
                if status == 200:
                    break
            assert status == 200 and "<td>bob</td>" in body
    finally:
        Gate.opened.set()


def test_ask_shows_the_answer_or_the_error(monkeypatch):
    from blendsql.errors import ModelError
    from blendsql.nl.ask import Answer

    bsql = engine()
    program = "SELECT name FROM people WHERE team = 'blue'"

    def fake_ask(question: str, **kw: Any) -> Answer:
        if "fail" in question:
            raise ModelError("the model is unreachable", hint="start the server")
        return Answer(answer="bob", program=program, smoothie=bsql.execute(program),
                      fallback_used=False)

    monkeypatch.setattr(bsql, "ask", fake_ask)
    with running(create_app(bsql, progress_after=PLAIN)) as base:
        status, body = post_form(base, "/ask", {"question": "who is <b>blue</b>?"})
        assert status == 200
        assert "class='answer-text'>bob<" in body and "team = &#x27;blue&#x27;" in body
        assert "value=\"who is &lt;b&gt;blue&lt;/b&gt;?\"" in body
        status, body = post_form(base, "/ask", {"question": "please fail"})
    assert status == 400 and "the model is unreachable" in body and "start the server" in body


def test_cli_serve_defaults_to_localhost(monkeypatch, capsys):
    import blendsql.web
    from blendsql import cli

    seen: dict[str, Any] = {}

    def fake_serve(bsql: Any, host: str, port: int, **kw: Any) -> None:
        seen.update(host=host, port=port, bsql=bsql, **kw)

    monkeypatch.setattr(blendsql.web, "serve", fake_serve)
    assert cli.main(["serve", "example", "--port", "8765", "--timeout", "7"]) == 0
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8765
    assert seen["query_timeout"] == 7 and seen["ask_timeout"] == 35
    assert seen["bsql"].db.allow_writes is False
    assert "http://127.0.0.1:8765/" in capsys.readouterr().out


def test_cli_serve_warns_when_listening_beyond_this_machine(monkeypatch, capsys):
    import blendsql.web
    from blendsql import cli

    monkeypatch.setattr(blendsql.web, "serve", lambda *a, **k: None)
    assert cli.main(["serve", "example", "--host", "0.0.0.0"]) == 0
    assert "other machines can reach" in capsys.readouterr().err


def test_cli_serve_missing_database_is_a_clear_error(capsys):
    from blendsql import cli

    assert cli.main(["serve", "/nonexistent/x.db"]) == 2
    assert "database file not found" in capsys.readouterr().err


def get_with_host(url: str, host: str) -> int:
    req = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=CLIENT_TIMEOUT) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_only_this_machine_s_host_names_are_answered():
    """A page elsewhere whose DNS name is rebound to 127.0.0.1 must not read results."""
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        port = base.rsplit(":", 1)[1]
        assert get_with_host(f"{base}/health", f"localhost:{port}") == 200
        assert get_with_host(f"{base}/health", f"127.0.0.1:{port}") == 200
        assert get_with_host(f"{base}/health", f"evil.example:{port}") == 400
        assert get_with_host(f"{base}/health", "localhost") == 400  # not the server's port
        assert get_with_host(f"{base}/health", "localhost:1") == 400


def test_pages_forbid_every_script():
    with running(create_app(engine(), progress_after=PLAIN)) as base:
        with urllib.request.urlopen(f"{base}/?q=SELECT+1", timeout=CLIENT_TIMEOUT) as r:
            csp = r.headers["content-security-policy"]
            assert r.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in csp and "script-src" not in csp


def test_serve_allows_the_chosen_host_name(monkeypatch):
    import uvicorn

    from blendsql.web.app import allowed_hosts_for, serve

    assert allowed_hosts_for("127.0.0.1") == ["127.0.0.1", "localhost", "::1"]
    assert "myhost.lan" in allowed_hosts_for("myhost.lan")
    assert allowed_hosts_for("0.0.0.0") == ["*"]
    apps: list = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    serve(engine(), "127.0.0.1", 1)
    with running(apps[0]) as base:
        port = base.rsplit(":", 1)[1]
        assert get_with_host(f"{base}/health", f"evil.example:{port}") == 400
        assert get_with_host(f"{base}/health", f"localhost:{port}") == 200
        assert get_with_host(f"{base}/health", f"[::1]:{port}") == 200
