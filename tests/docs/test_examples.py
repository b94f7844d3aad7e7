"""Every Python and shell example of the README and the documentation site runs.

Each page's runnable fences (see ``fences.py``) run in order in a scratch folder, with
the answer cache there too, and with a scripted stand-in model wherever an example leaves
the model to the default (``BlendSQL(db)``, or a ``blendsql`` command without model
flags): the examples show how to call blendsql, and the tests of the real models are
elsewhere (marker ``model``). Fences that cannot run here say why on the line before
them; there are few, and each gives its reason.
"""

from __future__ import annotations

import io
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fences import (  # noqa: E402
    PYTHON,
    ROOT,
    SHELL,
    Fence,
    fences,
    pages,
    scripted_model,
    shell_commands,
    with_server_urls,
)

PAGES = pages()
ALL = [f for p in PAGES for f in fences(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())]
RUN_PAGES = sorted({f.page for f in ALL if f.runnable})
MAX_SKIPPED = 12  # fences that cannot run here (servers, clusters, installs); keep it small


def _spark_missing() -> str | None:
    from spark_session import spark_missing

    return spark_missing()


def run_shell(fence: Fence, model: Any) -> None:
    from blendsql import cli

    for command in shell_commands(fence.code):
        argv = shlex.split(command, comments=True)
        assert argv[0] == "blendsql", (
            f"{fence.page}:{fence.line}: `{command}` is not a blendsql command; "
            "mark the fence <!-- no-test: REASON --> if it cannot run in the tests")
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(argv[1:], stdout=out, stderr=err, model=model)
        assert code == 0, f"{fence.page}:{fence.line}: `{command}` exited {code}:\n{err.getvalue()}"
        assert out.getvalue().strip(), f"{fence.page}:{fence.line}: `{command}` printed nothing"


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A scratch folder and cache, and the scripted model as the default model."""
    from blendsql.blend import BlendSQL

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BLENDSQL_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("BLENDSQL_MODEL", "BLENDSQL_BASE_URL", "BLENDSQL_PROVIDER", "BLENDSQL_MODEL_NAME"):
        monkeypatch.delenv(name, raising=False)
    model = scripted_model()
    original = BlendSQL._load_model

    def load(self: BlendSQL) -> Any:
        return model if self._model_arg is None else original(self)

    monkeypatch.setattr(BlendSQL, "_load_model", load)
    from blendsql.models.providers import providers, unregister_provider

    before = set(providers())
    yield model
    for name in set(providers()) - before:  # providers an example registered
        unregister_provider(name)


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_examples_run(page: str, sandbox: Any, request: pytest.FixtureRequest) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    ran = 0
    for fence in [f for f in ALL if f.page == page and f.runnable]:
        code = fence.code
        if fence.needs == "spark":
            why = _spark_missing()
            if why is not None:
                assert os.environ.get("BLENDSQL_REQUIRE_SPARK") != "1", why
                continue
        elif fence.needs == "postgres":
            from pg_server import pg_missing

            why = pg_missing()
            if why is not None:
                assert os.environ.get("BLENDSQL_REQUIRE_POSTGRES") != "1", why
                continue
            code = with_server_urls(code, request.getfixturevalue("postgres_server"))
        elif fence.needs:
            raise AssertionError(f"{page}:{fence.line}: unknown need {fence.needs!r}")
        if fence.lang in PYTHON:
            exec(compile(code, f"{page}:{fence.line}", "exec"), namespace)  # noqa: S102
        else:
            run_shell(fence, sandbox)
        ran += 1
    assert ran, f"{page}: no example ran"


def test_examples_are_found_and_few_are_skipped() -> None:
    runnable = [f for f in ALL if f.runnable]
    skipped = [f for f in ALL if f.lang in PYTHON | SHELL and f.skip is not None]
    assert len(runnable) >= 25, len(runnable)
    assert len(skipped) <= MAX_SKIPPED, [f"{f.page}:{f.line} ({f.skip})" for f in skipped]
    for f in skipped:
        assert len(f.skip or "") > 10, f"{f.page}:{f.line}: say why the fence cannot run"
    assert {"README.md", "docs/getting-started.md", "docs/cookbook.md"} <= set(RUN_PAGES)


def test_the_collector_reads_markers() -> None:
    text = ("a\n\n```python\nx = 1\n```\n\n<!-- no-test: needs a server -->\n```bash\n"
            "pip install x\n```\n<!-- test: needs spark -->\n\n```python\ny\n```\n```text\nout\n```\n")
    found = fences(text, "p.md")
    assert [(f.lang, f.skip, f.needs, f.runnable) for f in found] == [
        ("python", None, None, True), ("bash", "needs a server", None, False),
        ("python", None, "spark", True), ("text", None, None, False)]
    assert found[0].code == "x = 1" and found[0].line == 3
    assert shell_commands("blendsql run a \\\n  'b'  # c\n# only a comment\n") == ["blendsql run a  'b'  # c"]

    class Server:
        def create_db(self, name: str) -> str:
            return f"postgresql://u@127.0.0.1:5999/{name}"

    assert with_server_urls("a('postgresql://localhost/cs'); b('postgresql://localhost/cs')",
                            Server()) == ("a('postgresql://u@127.0.0.1:5999/cs'); "
                                          "b('postgresql://u@127.0.0.1:5999/cs')")
