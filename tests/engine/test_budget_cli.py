"""``--option budget=model_calls:N,...`` on the command line: typed like every option."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest

from blendsql import Budget
from blendsql.cli import main
from blendsql.errors import OptionError
from blendsql.models.base import FunctionModel
from blendsql.options import parse_option_text


def test_budget_from_text() -> None:
    assert parse_option_text("budget", "model_calls:3, dollars:0.5") == Budget(model_calls=3,
                                                                               dollars=0.5)
    assert parse_option_text("budget", "none") is None
    for bad in ("calls:3", "model_calls:x", "model_calls:-1", "model_calls:2.5"):
        with pytest.raises(OptionError, match="(?i)budget"):
            parse_option_text("budget", bad)


def test_cli_run_stops_at_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (k TEXT)")
    con.executemany("INSERT INTO t VALUES (?)", [(f"v{i}",) for i in range(6)])
    con.commit()
    con.close()
    out, err = io.StringIO(), io.StringIO()
    rc = main(["run", str(path), "SELECT k FROM t WHERE {{LLMMap('ok?', t.k)}} = TRUE",
               "--no-cache", "--option", "budget=model_calls:2"],
              model=FunctionModel(lambda r: "true"), stdout=out, stderr=err)
    assert rc == 2 and "model_calls" in err.getvalue() and "limit 2" in err.getvalue()
