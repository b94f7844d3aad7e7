"""``blendsql explain DB QUERY``: the plan, printed without loading or calling a model;
``--analyze`` runs it and prints each step's estimate beside its actual figures."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path
from typing import Any

import pytest

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


def _answer(req: Request) -> Any:
    return "true" if "k1" in (req.prompt or str(req.messages)) else "false"


@pytest.mark.parametrize("backend", ["sqlite", "duckdb"])
def test_explain_analyze_shows_estimate_beside_actual(tmp_path: Path, backend: str) -> None:
    db = _db(tmp_path)
    if backend == "duckdb":
        pytest.importorskip("duckdb")
        from blendsql.db.transfer import sqlite_to_duckdb

        db = sqlite_to_duckdb(db, tmp_path / "e.duckdb")
    out, err = io.StringIO(), io.StringIO()
    q = "SELECT id FROM t WHERE id > 3 AND {{LLMMap('Is it rare?', t.kind)}} = TRUE"
    calls: list[Request] = []

    def answer(req: Request) -> Any:
        calls.append(req)
        return _answer(req)

    rc = main(["explain", "--analyze", str(db), q], model=FunctionModel(answer),
              stdout=out, stderr=err)
    text = out.getvalue()
    assert rc == 0, err.getvalue()
    assert text.startswith("plan (analyzed) for:")
    assert "[call] call LLMMap on 4 value(s)" in text and "model calls=4" in text
    assert "actual: values=4  model calls=" in text  # the estimate, then what ran
    assert text.count("      actual: ") == 2 and "\nactual: values=4" in text
    assert calls, "--analyze runs the plan"
