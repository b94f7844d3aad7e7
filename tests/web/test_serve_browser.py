"""``blendsql serve`` end to end: a person types a query in headless Chromium and reads the page."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.ingredients import MapIngredient

from .conftest import running
from .test_display_browser import keep

pytestmark = pytest.mark.browser
pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402


class Initials(MapIngredient):
    """A person's initials (deterministic, no model)."""

    def run(self, question, values, **kwargs):
        return ["".join(w[0] for w in str(v).split()) for v in values]


@pytest.fixture(scope="module")
def site() -> Any:
    people = pd.DataFrame({"name": ["Ann Lee", "Bo Diaz", "Cy Young", "Di Moss"],
                           "team": ["red", "blue", "red", "blue"]})
    bsql = BlendSQL({"people": people}, ingredients=[Initials])
    with running(create_app(bsql, title="people.db")) as base:
        yield base


def test_type_a_query_and_read_rows_and_trace(page, site, tmp_path):
    page.goto(site)
    assert "people.db" in page.locator("header").inner_text()
    assert "people" in page.locator("#schema").inner_text()
    page.fill("#q", "SELECT name, {{Initials('initials', people.name)}} AS ini FROM people "
                    "WHERE team = 'red' ORDER BY name")
    page.click("#query-form button[value=run]")
    page.wait_for_selector("table.bsql-rows")

    rows = page.locator("table.bsql-rows tbody tr").all_inner_texts()
    assert rows == ["Ann Lee\tAL", "Cy Young\tCY"]
    assert "2 rows" in page.locator(".bsql-meta").inner_text()
    # the query stays in the box, so it can be edited and run again
    assert "Initials" in page.input_value("#q")

    page.click("details.bsql-trace > summary")
    step = page.locator("table.bsql-steps > tbody > tr").filter(has_text="Initials (map)")
    step.locator("summary").click()
    assert "Ann Lee\tAL" in step.locator("table.bsql-io").inner_text()
    shot = tmp_path / "serve-query.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)


def test_a_bad_query_shows_the_error_on_the_page(page, site):
    page.goto(site)
    page.fill("#q", "SELECT {{Initals('x', people.name)}} FROM people")
    page.click("#query-form button[value=run]")
    alert = page.get_by_role("alert")
    assert "unknown ingredient" in alert.inner_text() and "Initials" in alert.inner_text()
    assert page.locator("table.bsql-rows").count() == 0


def test_explain_button(page, site):
    page.goto(site)
    page.fill("#q", "SELECT name FROM people WHERE {{Initials('x', people.name)}} = 'AL'")
    page.click("#query-form button[value=explain]")
    steps = page.locator(".explain li").all_inner_texts()
    assert steps and any("Initials" in s for s in steps)
