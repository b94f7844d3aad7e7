"""The page's trace ends with the plan that ran: each step's estimate beside its actual figures."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.ingredients import MapIngredient

from .conftest import post_form, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
from blendsql.web import create_app  # noqa: E402

ANALYZE = re.compile(r"<details class='bsql-analyze' open>(.*?)</details>\s*</div>",
                     re.S)
CELL = re.compile(r"<td class='[^']*\b(bsql-estimate|bsql-actual)\b[^']*'>(.*?)</td>", re.S)


class Shout(MapIngredient):
    """Upper-cases each value (deterministic)."""

    def run(self, question, values, **kwargs):
        return [str(v).upper() for v in values]


def _page(query: str) -> str:
    df = pd.DataFrame({"name": ["ann", "bob", "cy", "ann"], "team": ["red", "blue", "red", "red"]})
    bsql = BlendSQL({"people": df}, ingredients=[Shout])
    with running(create_app(bsql, progress_after=None)) as base:
        status, body = post_form(base, "/", {"q": query, "action": "run"})
    assert status == 200, body
    return body


def _step_rows(body: str) -> list[list[tuple[str, str]]]:
    """The analysed plan's rows: per step, its (class, text) estimate and actual cells."""
    found = ANALYZE.search(body)
    assert found is not None, "the trace has no estimate-vs-actual plan"
    tbody = found.group(1).split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [CELL.findall(row) for row in tbody.split("<tr>")[1:]]


def test_each_step_of_a_one_map_query_shows_its_estimate_and_actual() -> None:
    body = _page("SELECT name FROM people WHERE {{Shout('x', people.name)}} = 'ANN' "
                 "ORDER BY name")
    assert "2 rows ×" in body  # ann, ann
    assert "details class='bsql-trace'" in body  # the trace of statements, as before
    rows = _step_rows(body)
    assert len(rows) == 2  # the map's call step, then the final query
    for cells in rows:
        kinds = [k for k, _ in cells]
        assert kinds == ["bsql-estimate"] * 3 + ["bsql-actual"] * 5, cells
    call, final = ([text for _, text in cells] for cells in rows)
    # the map: 3 distinct names estimated and passed, no model call (deterministic)
    assert call[:2] == ["3", "0"] and call[3:5] == ["3", "0"]
    assert final[:3] == ["", "", ""]  # a final query is not priced
    assert final[6] == "2"  # its actual rows: ann, ann


def test_a_projection_map_shows_its_late_step() -> None:
    body = _page("SELECT name, {{Shout('x', people.name)}} AS up FROM people "
                 "WHERE team = 'red' ORDER BY name")
    assert "<td>ANN</td>" in body and "<td>CY</td>" in body
    final, late = ([text for _, text in cells] for cells in _step_rows(body))
    assert final[6] == "3" and late[:2] == ["2", "0"] and late[3] == "2"


def test_a_query_without_ingredients_has_no_plan_part() -> None:
    body = _page("SELECT name FROM people ORDER BY name")
    assert "<td>bob</td>" in body
    assert "<details class='bsql-analyze'" not in body
