"""``blendsql explain DB QUERY``: the plan, printed without loading or calling a model."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

from blendsql.cli import main
from blendsql.models.base import FunctionModel, Request


def _refuse(req: Request) -> Any:
    raise AssertionError("explain must not call the model")


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "e.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (id INTEGER, kind TEXT)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, f"k{i % 4}") for i in range(20)])
    con.commit()
    con.close()
    return path


def test_explain_prints_the_plan_with_estimates(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    q = "SELECT id FROM t WHERE id > 3 AND {{LLMMap('Is it rare?', t.kind)}} = TRUE"
    rc = main(["explain", str(_db(tmp_path)), q], model=FunctionModel(_refuse),
              stdout=out, stderr=err)
    text = out.getvalue()
    assert rc == 0, err.getvalue()
    assert "[call] call LLMMap on 4 value(s)" in text
    assert "model calls=4" in text and "[final] final query" in text
    assert "SELECT DISTINCT t.kind FROM t WHERE id > 3" in text


def test_explain_reports_user_errors(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    db = str(_db(tmp_path))
    rc = main(["explain", db, "SELECT {{Nope(t.id)}} FROM t"], stdout=out, stderr=err)
    assert rc == 2 and "unknown ingredient" in err.getvalue()
    rc = main(["explain", db, "SELECT 1", "--option", "lazzy=false"],
              stdout=out, stderr=err)
    assert rc == 2 and "did you mean 'lazy'" in err.getvalue()
