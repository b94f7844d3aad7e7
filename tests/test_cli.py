"""The ``blendsql`` command line: arguments, exit codes, output, progress."""

from __future__ import annotations

import argparse
import io
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import cli
from blendsql.db.loaders import example_db_path, from_frames
from blendsql.errors import ExecutionError, IngredientError, ModelError
from blendsql.ingredients.base import MapIngredient
from blendsql.smoothie import Meta, Smoothie, TraceStep

ROOT = Path(__file__).resolve().parent.parent


class StartsWith(MapIngredient):
    """True where the value starts with the question text (deterministic, no model)."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        return [str(v).startswith(question or "") for v in values]


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it: a fresh process, real argv, real exit code."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    for var in ("BLENDSQL_MODEL", "BLENDSQL_BASE_URL", "BLENDSQL_MODEL_NAME"):
        if env is None or var not in env:
            full_env.pop(var, None)
    return subprocess.run(
        [sys.executable, "-m", "blendsql.cli", *args],
        capture_output=True, text=True, env=full_env, input=stdin, cwd=ROOT, timeout=120,
    )


def ns(**kw: Any) -> argparse.Namespace:
    base = {"base_url": None, "model": None, "model_name": None, "api_key": None}
    return argparse.Namespace(**{**base, **kw})


# ------------------------------------------------------------ argument errors


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["run"],
        ["run", "example"],
        ["frobnicate", "example"],
        ["run", "example", "SELECT 1", "--progress", "--no-progress"],
        ["run", "example", "SELECT 1", "--format", "xml"],
    ],
)
def test_bad_arguments_exit_2_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    assert "usage: blendsql" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["run", "example"], ["run", "example", "q", "--bogus"]])
def test_bad_arguments_in_a_real_process(argv: list[str]) -> None:
    res = run_cli(*argv)
    assert res.returncode == 2
    assert "usage: blendsql" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "no_such.db", "SELECT 1"], "database file not found"),
        (["schema", "no_such.db"], "database file not found"),
        (["run", "example", "SELECT 1", "--model", "/no/such/model.gguf"], "model file not found"),
        (["run", "example", "SELECT 1", "--params", "{bad"], "--params is not valid JSON"),
        (["run", "example", "SELECT 1", "--params", "3"], "JSON list or object"),
        (["run", "example", "@/no/such/query.sql"], "query file not found"),
        (["run", "example", "SELECT 1", "--base-url", "http://127.0.0.1:9/v1"], "no model name"),
        (["run", "example", "SELECT 1", "--ingredient", "nocolon"], "bad --ingredient"),
        (["run", "example", "SELECT 1", "--ingredient", "no_such_mod_xyz:X"], "cannot load"),
    ],
)
def test_user_errors_print_message_and_hint_exit_2(
    argv: list[str], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("BLENDSQL_MODEL", "BLENDSQL_BASE_URL", "BLENDSQL_MODEL_NAME"):
        monkeypatch.delenv(var, raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(argv, stdout=out, stderr=err) == 2
    assert err.getvalue().startswith("error: ")
    assert needle in err.getvalue()
    assert "Hint:" in err.getvalue()
    assert out.getvalue() == ""


def test_user_error_in_a_real_process_has_no_traceback() -> None:
    res = run_cli("run", "example", "SELECT 1", env={"BLENDSQL_MODEL": "/no/such/env.gguf"})
    assert res.returncode == 2
    assert res.stderr.startswith("error: model file not found: /no/such/env.gguf")
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


def test_not_a_database_file(tmp_path: Path) -> None:
    bogus = tmp_path / "x.db"
    bogus.write_text("this is not sqlite")
    res = run_cli("schema", str(bogus))
    assert res.returncode == 2 and res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr


# ------------------------------------------------------------ schema


def test_schema_of_example_db() -> None:
    res = run_cli("schema", "example")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "w (20 rows)" in lines
    assert "documents (FTS5 documents, 37 rows)" in lines
    assert "  school TEXT  -- 'School'" in lines
    assert not any(line.startswith("documents_data") for line in lines)  # FTS shadow tables
    assert not any(line.startswith("_columns") for line in lines)


def test_describe_schema_meta_tables_on_request() -> None:
    conn = from_frames({"t": pd.DataFrame({"Big Number": [1, 2]})}, ["hello world"])
    text = cli.describe_schema(conn)
    assert "t (2 rows)" in text and "  big_number INTEGER  -- 'Big Number'" in text
    assert "_columns" not in text
    assert "_columns (" in cli.describe_schema(conn, show_meta=True)
    assert cli.describe_schema(sqlite3.connect(":memory:")) == "(no tables)"


def _schema_lines(*argv: str) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["schema", *argv], stdout=out, stderr=err) == 0, err.getvalue()
    return out.getvalue().splitlines()


@pytest.fixture
def loaded_sqlite(tmp_path: Path) -> Path:
    """A SQLite file as the loader writes it (a typed table + its original headers)."""
    path = tmp_path / "players.db"
    frame = pd.DataFrame({"Player Name": ["Ann", "Bo"], "Goals": [1203, 7]})
    from_frames({"players": frame}, None, path).close()
    return path


def test_schema_of_a_duckdb_file(loaded_sqlite: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    from blendsql.db.transfer import sqlite_to_duckdb

    target = sqlite_to_duckdb(loaded_sqlite, loaded_sqlite.with_suffix(".duckdb"))
    con = duckdb.connect(str(target))
    con.execute("CREATE VIEW scorers AS SELECT player_name FROM players WHERE goals > 100")
    con.close()
    assert _schema_lines(str(target)) == [
        "players (2 rows)",
        "  player_name VARCHAR  -- 'Player Name'",
        "  goals BIGINT  -- 'Goals'",
        "scorers (1 rows)",
        "  player_name VARCHAR",
    ]
    assert "_columns (2 rows)" in _schema_lines(str(target), "--all")
    # the same listing, read-only, when a Parquet file opens an in-memory DuckDB
    parquet = loaded_sqlite.with_suffix(".parquet")
    con = duckdb.connect(str(target), read_only=True)
    con.execute(f"COPY players TO '{parquet}' (FORMAT parquet)")
    con.close()
    assert _schema_lines(str(parquet)) == [
        "players (2 rows)", "  player_name VARCHAR", "  goals BIGINT"]


def test_schema_of_a_file_that_is_no_duckdb_database(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    bogus = tmp_path / "x.duckdb"
    bogus.write_text("this is not duckdb")
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["schema", str(bogus)], stdout=out, stderr=err) == 2
    assert err.getvalue().startswith("error: ") and "Hint:" in err.getvalue()


def test_schema_of_a_postgres_database(loaded_sqlite: Path, postgres_server: Any) -> None:
    from blendsql.db.transfer import sqlite_to_postgres

    url = str(postgres_server.create_db("cli_schema"))
    sqlite_to_postgres(loaded_sqlite, url)
    assert _schema_lines(url) == [
        "players (2 rows)",
        "  player_name text  -- 'Player Name'",
        "  goals bigint  -- 'Goals'",
    ]


# ------------------------------------------------------------ resolution helpers


def test_parse_params_and_read_query(tmp_path: Path) -> None:
    assert cli.parse_params(None) is None
    assert cli.parse_params('["a", 2]') == ["a", 2]
    assert cli.parse_params('{"pos": "Pitcher"}') == {"pos": "Pitcher"}
    with pytest.raises(ExecutionError):
        cli.parse_params('"a"')
    q = tmp_path / "q.sql"
    q.write_text("SELECT 42")
    assert cli.read_query(f"@{q}") == "SELECT 42"
    assert cli.read_query("-", io.StringIO("SELECT 7")) == "SELECT 7"
    assert cli.read_query("SELECT 1") == "SELECT 1"


def test_resolve_db_example_and_paths(tmp_path: Path) -> None:
    assert cli.resolve_db("example") == example_db_path()
    f = tmp_path / "a.db"
    sqlite3.connect(f).close()
    assert cli.resolve_db(str(f)) == f
    with pytest.raises(ExecutionError):
        cli.resolve_db(str(tmp_path / "missing.db"))


def test_resolve_model_precedence() -> None:
    assert cli.resolve_model(ns(), env={}) is None
    with pytest.raises(ModelError):
        cli.resolve_model(ns(base_url="http://x/v1"), env={})
    with pytest.raises(ModelError) as err:
        cli.resolve_model(ns(), env={"BLENDSQL_MODEL": "/nope.gguf"})
    assert "/nope.gguf" in str(err.value)
    # the flag wins over the environment
    with pytest.raises(ModelError) as err:
        cli.resolve_model(ns(model="/flag.gguf"), env={"BLENDSQL_MODEL": "/env.gguf"})
    assert "/flag.gguf" in str(err.value)


def test_resolve_model_endpoint() -> None:
    pytest.importorskip("blendsql.models.openai_compat")
    m = cli.resolve_model(ns(), env={"BLENDSQL_BASE_URL": "http://127.0.0.1:9/v1",
                                     "BLENDSQL_MODEL_NAME": "served", "BLENDSQL_API_KEY": "k"})
    assert type(m).__name__ == "OpenAI"
    assert "served" in m.identity()
    # --model doubles as the served model's name when --model-name is absent
    m2 = cli.resolve_model(ns(base_url="http://127.0.0.1:9/v1", model="gpt-x"), env={})
    assert "gpt-x" in m2.identity()


def test_load_ingredient_from_file(tmp_path: Path) -> None:
    mod = tmp_path / "my_ingredients.py"
    mod.write_text(textwrap.dedent("""
        from blendsql.ingredients.base import MapIngredient

        class Upper(MapIngredient):
            def run(self, question, values, **kw):
                return [str(v).upper() for v in values]

        not_an_ingredient = 3
    """))
    cls = cli.load_ingredient(f"{mod}:Upper")
    assert cls().run(None, ["a"]) == ["A"]
    with pytest.raises(IngredientError):
        cli.load_ingredient(f"{mod}:not_an_ingredient")
    with pytest.raises(IngredientError):
        cli.load_ingredient(f"{tmp_path / 'missing.py'}:Upper")
    assert cli.load_ingredient("blendsql.ingredients.base:MapIngredient") is MapIngredient


# ------------------------------------------------------------ output and progress


def _smoothie() -> Smoothie:
    df = pd.DataFrame({"name": ["Bobby Jones", "Brent Gates"], "n": [1, 2]})
    meta = Meta(values_passed=5, model_calls=3, prompt_tokens=40, completion_tokens=6, seconds=0.25)
    trace = [TraceStep("sql", "SELECT ...", rows_out=2, seconds=0.001)]
    return Smoothie(df, meta, trace)


def test_render_formats() -> None:
    s = _smoothie()
    table = cli.render(s, "table", 100)
    assert table.splitlines()[0].split() == ["name", "n"]
    assert "Brent Gates" in table
    assert cli.render(s, "csv", 100).splitlines() == ["name,n", "Bobby Jones,1", "Brent Gates,2"]
    assert cli.render(s, "json", 100) == '[{"name":"Bobby Jones","n":1},{"name":"Brent Gates","n":2}]'
    empty = Smoothie(pd.DataFrame({"a": []}), Meta())
    assert cli.render(empty, "table", 100).startswith("(no rows)")


def test_progress_bar_draws_and_finishes_line() -> None:
    buf = io.StringIO()
    bar = cli.ProgressBar(buf, width=10, min_interval=0.0)
    bar("LLMMap", 0, 4)
    bar("LLMMap", 2, 4)
    bar("LLMMap", 4, 4)
    text = buf.getvalue()
    assert "\rLLMMap [#####.....] 2/4" in text
    assert text.endswith("\rLLMMap [##########] 4/4\n")
    bar.close()  # idempotent once the line is finished
    assert buf.getvalue() == text


def test_progress_bar_throttles_but_always_draws_the_end() -> None:
    buf = io.StringIO()
    bar = cli.ProgressBar(buf, width=4, min_interval=3600)
    for i in range(1, 101):
        bar("M", i, 100)
    assert buf.getvalue().count("\r") == 2  # first draw + the final one
    assert buf.getvalue().endswith("100/100\n")


def test_progress_is_passed_only_to_an_engine_that_accepts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import blendsql

    seen: dict[str, Any] = {}

    class WithProgress:
        def __init__(self, db: Any, model: Any = None, ingredients: Any = (), *,
                     cache: bool = True, progress: Any = None) -> None:
            seen.update(db=db, cache=cache, progress=progress)

    class WithoutProgress:
        def __init__(self, db: Any, model: Any = None, ingredients: Any = (), *,
                     cache: bool = True) -> None:
            seen.update(db=db, cache=cache, progress="absent")

    bar = cli.ProgressBar(io.StringIO())
    monkeypatch.setattr(blendsql, "BlendSQL", WithProgress, raising=False)
    cli._make_engine(Path("x.db"), None, (), False, bar)
    assert seen == {"db": "x.db", "cache": False, "progress": bar}
    monkeypatch.setattr(blendsql, "BlendSQL", WithoutProgress, raising=False)
    cli._make_engine(Path("x.db"), None, (), True, bar)
    assert seen["progress"] == "absent"


# ------------------------------------------------------------ end to end (needs the engine)


def _engine() -> None:
    pytest.importorskip("blendsql.blend", reason="the engine (blendsql/blend.py) is not in this tree")


def test_run_with_deterministic_ingredient_matches_plain_sql() -> None:
    _engine()
    out, err = io.StringIO(), io.StringIO()
    q = "SELECT name FROM w WHERE {{StartsWith('Second', w.position)}} = TRUE ORDER BY name"
    rc = cli.main(["run", "example", q, "--trace", "--no-progress", "--format", "csv"],
                  ingredients=[StartsWith], stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    got = out.getvalue().splitlines()
    conn = sqlite3.connect(example_db_path())
    expected = [r[0] for r in conn.execute(
        "SELECT name FROM w WHERE position LIKE 'Second%' ORDER BY name")]
    assert got == ["name", *expected] and len(expected) == 3
    assert "values passed" in err.getvalue()
    assert "Trace:" in err.getvalue()


def test_run_subprocess_with_ingredient_file_and_params(tmp_path: Path) -> None:
    _engine()
    mod = tmp_path / "ing.py"
    mod.write_text(textwrap.dedent("""
        from blendsql.ingredients.base import MapIngredient

        class StartsWith(MapIngredient):
            def run(self, question, values, **kw):
                return [str(v).startswith(question) for v in values]
    """))
    q = "SELECT COUNT(*) AS n FROM w WHERE school = ? AND {{StartsWith('Pitcher', w.position)}} = TRUE"
    res = run_cli("run", "example", q, "--params", '["Pepperdine"]',
                  "--ingredient", f"{mod}:StartsWith", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == '[{"n":1}]'


def test_run_parse_error_is_clean() -> None:
    _engine()
    res = run_cli("run", "example", "SELECT name FROM w WHERE {{StartsWith('x', w.position)")
    assert res.returncode == 2
    assert res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr


def test_example_db_qa_over_documents_through_the_engine() -> None:
    """The DESIGN's LLMQA-over-documents demo runs on the bundled database."""
    _engine()
    from blendsql import BlendSQL
    from blendsql.models import FunctionModel
    from blendsql.models.base import Request

    contexts: list[str] = []

    def reader(req: Request) -> str:
        # answer with the option whose words appear in the retrieved passage titles
        contexts.append(req.prompt or str(req.messages))
        options: tuple[str, ...] = tuple(getattr(req.constraint, "options", ()))
        text = contexts[-1]
        return next((o for o in options if f"{o} Rainbow Warriors" in text), "none")

    q = (
        "SELECT name FROM w WHERE school = {{LLMQA('Which school has teams called Rainbow "
        "Warriors?', (SELECT title, content FROM documents WHERE documents MATCH "
        "'rainbow OR warriors' ORDER BY rank LIMIT 2), options='w::school')}}"
    )
    s = BlendSQL(str(example_db_path()), model=FunctionModel(reader), cache=False).execute(q)
    assert s.df["name"].tolist() == ["Bill Blanchette"]
    assert any("Hawaii Rainbow Warriors" in c for c in contexts)


def test_csv_file_becomes_a_typed_table(tmp_path: Path) -> None:
    f = tmp_path / "Top Players.csv"
    f.write_text("Player Name,Goals,Club\nAnn,\"1,203\",Reds\nBo,7,\n")
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["schema", str(f)], stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue().splitlines() == [
        "top_players (2 rows)",
        "  player_name TEXT  -- 'Player Name'",
        "  goals INTEGER  -- 'Goals'",
        "  club TEXT  -- 'Club'",
    ]
    _engine()
    out = io.StringIO()
    rc = cli.main(["run", str(f), "SELECT player_name, goals FROM top_players WHERE goals > 100",
                   "--format", "csv", "--no-progress"], stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    assert out.getvalue().splitlines() == ["player_name,goals", "Ann,1203"]
    out = io.StringIO()
    rc = cli.main(["run", str(f), "SELECT player_name FROM top_players WHERE club IS NULL",
                   "--format", "csv", "--no-progress"], stdout=out, stderr=err)
    assert rc == 0 and out.getvalue().splitlines() == ["player_name", "Bo"]
