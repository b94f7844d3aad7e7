"""The ``%%blendsql`` cell magic: variables bound as parameters, never as SQL text.

Also executed end to end as ``notebooks/magic.ipynb`` (tests/test_notebooks.py).
"""

from __future__ import annotations

import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from blendsql import BlendSQL, Smoothie  # noqa: E402
from blendsql._magic import bind_variables  # noqa: E402
from blendsql.db import example_db_path  # noqa: E402
from blendsql.models import FunctionModel  # noqa: E402


def test_names_outside_quotes_become_parameters() -> None:
    query, params = bind_variables(
        "SELECT '{a}', \"{a}\" FROM t WHERE x = {a} AND {{LLMMap('q {a}', t.c)}} AND y = {b}",
        {"a": "it's", "b": 3})
    assert query == ("SELECT '{a}', \"{a}\" FROM t WHERE x = :a AND {{LLMMap('q {a}', t.c)}} "
                     "AND y = :b")
    assert params == {"a": "it's", "b": 3}
    assert bind_variables("SELECT 'it''s {a}' || {a}", {"a": 1}) == ("SELECT 'it''s {a}' || :a", {"a": 1})
    with pytest.raises(UsageError, match="no variable 'missing'"):
        bind_variables("SELECT {missing}", {})


@pytest.fixture
def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "blendsql")
    yield ip
    for name in ("out", "bsql", "school"):
        ip.user_ns.pop(name, None)


def test_cell_magic_runs_the_query_with_bound_variables(shell: InteractiveShell) -> None:
    shell.user_ns["school"] = "Fresno State' OR '1'='1"
    result = shell.run_cell_magic("blendsql", "example -o out",
                                  "SELECT name FROM w WHERE school = {school}")
    assert isinstance(result, Smoothie) and shell.user_ns["out"] is result
    assert result.df.empty  # the value was compared, not pasted into the SQL
    shell.user_ns["school"] = "Fresno State"
    result = shell.run_cell_magic("blendsql", "example", "SELECT name FROM w WHERE school = {school}")
    assert len(result.df) == len(BlendSQL(example_db_path()).execute(
        "SELECT name FROM w WHERE school = 'Fresno State'").df) > 0


def test_cell_magic_uses_a_session_variable_and_its_model(shell: InteractiveShell) -> None:
    model = FunctionModel(lambda request: "Value: Pitcher" in request.prompt, name="pitcher-rule")
    shell.user_ns["bsql"] = BlendSQL(example_db_path(), model=model, cache=False)
    shell.user_ns["school"] = "Fresno State"
    result = shell.run_cell_magic(
        "blendsql", "bsql -o out",
        "SELECT name FROM w WHERE school = {school} AND {{LLMMap('Is this a pitcher?', w.position)}} = TRUE")
    assert list(result.df["name"]) == ["Bobby Jones"] and result.meta.model_calls >= 1


def test_errors_are_messages(shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert shell.run_cell_magic("blendsql", "example", "SELECT nope FROM w") is None
    assert "error:" in capsys.readouterr().err
    with pytest.raises(UsageError):
        shell.run_cell_magic("blendsql", "", "SELECT 1")
