"""A Smoothie's HTML rendered in headless Chromium: what a person sees, and what a click opens.

Screenshots land in the test's tmp dir (set BLENDSQL_SCREENSHOTS=DIR to keep copies).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.ingredients import MapIngredient

pytestmark = pytest.mark.browser

EVIL = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>"


class Shout(MapIngredient):
    """Upper-cases each value (deterministic, no model)."""

    def run(self, question, values, **kwargs):
        return [str(v).upper() for v in values]


def _smoothie() -> Any:
    players = pd.DataFrame({
        "name": ["Ann Lee", "Bo Diaz", "Cy Young", EVIL] + [f"Extra {i}" for i in range(30)],
        "position": ["Pitcher", "Catcher", "Pitcher", "Pitcher"] + ["Outfield"] * 30,
    })
    bsql = BlendSQL({"players": players}, ingredients=[Shout])
    return bsql.execute("SELECT name, {{Shout('loud', players.name)}} AS loud FROM players "
                        "ORDER BY name")


def keep(shot: Path) -> Path:
    """Copy a screenshot to BLENDSQL_SCREENSHOTS when set (for a person to look at)."""
    target = os.environ.get("BLENDSQL_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)
    assert shot.stat().st_size > 5_000, "a blank page screenshot is tiny"
    return shot


def test_smoothie_html_in_chromium(page, tmp_path):
    s = _smoothie()
    doc = tmp_path / "smoothie.html"
    doc.write_text(f"<!doctype html><meta charset='utf-8'><body>{s.to_html()}</body>",
                   encoding="utf-8")
    page.goto(doc.as_uri())

    table = page.locator("table.bsql-rows")
    assert table.locator("th").all_inner_texts() == ["name", "loud"]
    assert "ANN LEE" in table.inner_text()
    assert page.get_by_text("showing 20 of 34 rows", exact=False).is_visible()
    meta = page.locator(".bsql-meta").inner_text()
    assert "34 rows" in meta and "values passed" in meta and "model calls" in meta
    # the markup in the data is shown as text and never ran
    assert page.evaluate("window.__pwned") is None
    assert EVIL[:20] in table.inner_text()

    final_sql = page.locator("pre.bsql-sql").last
    assert not final_sql.is_visible()  # the trace starts closed
    page.screenshot(path=str(tmp_path / "smoothie-closed.png"), full_page=True)
    page.locator("details.bsql-trace > summary").click()
    steps = page.locator("table.bsql-steps > tbody > tr")
    assert steps.count() == len(s.trace)
    assert "final query" in page.locator("table.bsql-steps").inner_text()
    bars = page.locator(".bsql-bar")
    widths = [b.bounding_box()["width"] for b in bars.all()]
    assert max(widths) > 50  # the slowest step's bar is drawn across its box

    ingredient_row = steps.filter(has_text="Shout (map)")
    ingredient_row.locator("summary").click()
    io = ingredient_row.locator("table.bsql-io").inner_text()
    assert "Ann Lee\tANN LEE" in io
    final_row = steps.filter(has_text="final query")
    final_row.locator("summary").click()
    assert final_sql.is_visible() and "SELECT" in final_sql.inner_text()
    shot = tmp_path / "smoothie-open.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)


def test_notebook_export_in_chromium(page, tmp_path):
    """A notebook executed by nbclient and exported by nbconvert shows the same view."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nbconvert = pytest.importorskip("nbconvert", reason="pip install -e '.[browser]'")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            "import pandas as pd\n"
            "from blendsql import BlendSQL\n"
            "from blendsql.ingredients import MapIngredient\n"
            "class Shout(MapIngredient):\n"
            "    def run(self, question, values, **kwargs):\n"
            "        return [str(v).upper() for v in values]\n"
            "bsql = BlendSQL({'t': pd.DataFrame({'x': ['a', 'b']})}, ingredients=[Shout])\n"
            "bsql.execute(\"SELECT x, {{Shout('q', t.x)}} AS y FROM t ORDER BY x\")"),
    ])
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    doc = tmp_path / "notebook.html"
    doc.write_text(body, encoding="utf-8")
    page.goto(doc.as_uri(), wait_until="domcontentloaded")

    table = page.locator("table.bsql-rows")
    assert table.inner_text().split() == ["x", "y", "a", "A", "b", "B"]
    assert page.locator(".bsql-meta").is_visible()
    page.locator("details.bsql-trace > summary").click()
    assert page.locator("table.bsql-steps").is_visible()
    # Jupyter's stylesheet right-aligns table cells; the step text must still read from the left
    step_cell = page.locator("table.bsql-steps td").nth(2)
    assert step_cell.evaluate("e => getComputedStyle(e).textAlign") in ("left", "start")
    shot = tmp_path / "notebook.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)


def test_committed_quickstart_reads_well_in_chromium(page, tmp_path):
    """The quickstart as a reader sees it before installing: the saved outputs, exported."""
    nbformat = pytest.importorskip("nbformat")
    nbconvert = pytest.importorskip("nbconvert", reason="pip install -e '.[browser]'")
    path = Path(__file__).parents[2] / "notebooks" / "quickstart.ipynb"
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nbformat.read(path, as_version=4))
    doc = tmp_path / "quickstart.html"
    doc.write_text(body, encoding="utf-8")
    page.goto(doc.as_uri(), wait_until="domcontentloaded")

    smoothies = page.locator("div.blendsql-smoothie:has(table.bsql-rows)")
    assert smoothies.count() >= 3
    assert "Southern Miss" in smoothies.nth(1).locator("table.bsql-rows").inner_text()
    model_run = smoothies.filter(has_text="LLMMap (map)")
    assert "model calls" in model_run.locator(".bsql-meta").inner_text()
    model_run.locator("details.bsql-trace > summary").click()
    step = model_run.locator("table.bsql-steps > tbody > tr").filter(has_text="LLMMap (map)")
    step.locator("summary").first.click()
    prompt = step.locator("pre.bsql-prompt").first
    assert prompt.is_visible() and "Is this position a pitcher?" in prompt.inner_text()
    step.scroll_into_view_if_needed()
    shot = tmp_path / "quickstart-model-step.png"
    page.screenshot(path=str(shot))
    keep(shot)


def test_a_plan_reads_as_a_table_with_token_bars_in_chromium(page, tmp_path):
    players = pd.DataFrame({"name": ["Ann Lee", "Bo Diaz", "Cy Young", EVIL],
                            "position": ["Pitcher", "Catcher", "Pitcher", "Outfield"]})
    bsql = BlendSQL({"players": players}, ingredients=[Shout])
    plan = bsql.plan("SELECT name FROM players WHERE {{LLMMap('is this a pitcher?', players.position)}}"
                     " = TRUE AND {{LLMMap('a famous name?', players.name)}} = TRUE")
    doc = tmp_path / "plan.html"
    doc.write_text(f"<!doctype html><meta charset='utf-8'><body>{plan._repr_html_()}</body>",
                   encoding="utf-8")
    page.goto(doc.as_uri())
    rows = page.locator("table.bsql-plan > tbody > tr")
    assert rows.count() == len(plan.steps) == 3
    assert "LLMMap" in rows.nth(0).inner_text() and "final" in rows.nth(2).inner_text()
    chips = page.locator(".bsql-meta").inner_text()
    assert "model calls" in chips and "prompt tokens (estimate)" in chips
    # the second map sees only what the first passes: its tokens are a range, drawn lighter
    assert page.locator("table.bsql-plan .bsql-range").count() >= 1
    assert rows.nth(0).locator(".bsql-tok").bounding_box()["width"] > 5
    rows.nth(1).locator("summary").click()
    assert "bound:" in rows.nth(1).inner_text()
    assert page.evaluate("window.__pwned") is None
    shot = tmp_path / "plan.png"
    page.screenshot(path=str(shot), full_page=True)
    keep(shot)
