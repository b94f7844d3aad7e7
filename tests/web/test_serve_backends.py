"""``blendsql serve`` on DuckDB: the question box and the schema panel use the backend.

Both read through the session's backend, never through ``sqlite3``, so they work
on whatever the session was opened on.
"""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request

from .conftest import post_form, running

pytest.importorskip("starlette", reason="pip install -e '.[web]'")
pytest.importorskip("duckdb")
from blendsql.web import create_app  # noqa: E402

PROGRAM = "SELECT name FROM df WHERE team = 'blue'"


def _model(req: Request) -> str:
    return PROGRAM if req.prompt.rstrip().endswith("BlendSQL:") else "unknown"


def test_question_box_and_schema_on_a_duckdb_dataframe() -> None:
    df = pd.DataFrame({"name": ["ann", "bob", "cy"], "team": ["red", "blue", "red"]})
    bsql = BlendSQL(df, model=FunctionModel(_model), cache=False)
    assert bsql.db.name == "DuckDB"
    with running(create_app(bsql, progress_after=None)) as base:
        status, body = post_form(base, "/ask", {"question": "Who is on the blue team?"})
    assert status == 200
    assert "class='answer-text'>bob<" in body
    assert "team = &#x27;blue&#x27;" in body
    assert "<li><b>df</b><ul><li>name</li><li>team</li></ul></li>" in body  # the schema panel
