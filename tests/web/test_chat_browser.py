"""The conversation page in headless Chromium: type a question, read the reply, correct it."""

from __future__ import annotations

import pytest

from .conftest import running
from .test_chat import scripted_engine
from .test_display_browser import keep

pytestmark = pytest.mark.browser
pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402


def test_chat_in_the_browser(page, tmp_path):
    bsql = scripted_engine(["SELECT name FROM people WHERE team = 'red' ORDER BY name",
                            "SELECT name FROM people WHERE team = 'blue' ORDER BY name"])
    with running(create_app(bsql, title="people.db", chat_acts=False)) as base:
        page.goto(base)
        page.click("nav >> text=Conversation")
        page.fill("#say", "who plays for the red team?")
        page.click("#chat-form button[value=say]")
        page.wait_for_selector("li.turn")
        assert page.locator("table.bsql-rows tbody tr").all_inner_texts() == ["ann", "cy"]
        assert "red" in page.locator("pre.program").inner_text()
        page.click("text=Explain this query")
        assert page.locator("details.explain li").count() >= 2

        page.fill("#say", "no, the blue team")
        page.click("#chat-form button[value=correct]")
        page.wait_for_function("document.querySelectorAll('li.turn').length == 2")
        assert page.locator("table.bsql-rows tbody tr").all_inner_texts() == ["bob"]
        assert "(correct)" in page.locator("li.turn").last.inner_text()
        shot = tmp_path / "serve-chat.png"
        page.screenshot(path=str(shot), full_page=True)
        keep(shot)
