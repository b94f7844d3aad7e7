"""Live progress as a person sees it in headless Chromium: one bar that moves, then the result."""

from __future__ import annotations

import pytest

from .conftest import running
from .test_display_browser import keep
from .test_serve_progress import MAP_QUERY, WAIT, GatedModel, session

pytestmark = pytest.mark.browser
pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402


def test_a_person_sees_one_moving_bar_then_the_rows(page, tmp_path):
    model = GatedModel(free=8)
    try:
        with running(create_app(session(model), progress_after=0.0)) as base:
            page.goto(base)
            page.fill("#q", MAP_QUERY)
            # the page is still loading while the model works: do not wait for the load event
            with page.expect_navigation(wait_until="commit"):
                page.click("#query-form button[value=run]")
            assert model.waiting.wait(WAIT)
            bar = page.locator(".live-progress .tick:not(:has(+ .tick)) progress")
            bar.wait_for(state="visible")
            page.wait_for_function(
                "() => { const b = document.querySelector('.live-progress .tick:not(:has(+ .tick)) progress');"
                " return b && b.value === 8 && b.max === 20; }")
            # only the newest block is shown, however many have arrived
            visible = page.locator(".live-progress .tick").evaluate_all(
                "ts => ts.filter(t => getComputedStyle(t).display !== 'none').length")
            assert visible == 1
            assert "LLMMap" in page.locator(".live-progress").inner_text()
            shot = tmp_path / "serve-progress.png"
            page.screenshot(path=str(shot), full_page=True)
            keep(shot)

            model.gate.set()
            page.wait_for_selector("table.bsql-rows")
            assert page.locator("table.bsql-rows tbody tr").count() == 20
            assert not page.locator(".live-progress").is_visible()
            done = tmp_path / "serve-progress-done.png"
            page.screenshot(path=str(done), full_page=True)
            keep(done)
    finally:
        model.gate.set()
