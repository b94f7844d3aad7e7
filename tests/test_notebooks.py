"""Every notebook in notebooks/ executes top to bottom (their cells assert what they show),
and is committed with its outputs, so a reader sees results before installing anything.

A notebook whose metadata says ``"blendsql": {"needs_model": true}`` runs the
embedded model and carries the ``model`` marker. Notebooks that show a bigger model
(hybridqa, plain_language) replay its recorded answers (``blendsql.models.Recorded``,
``notebooks/recorded/``), so they run offline like the rest. Re-execute and save with
``python notebooks/execute.py``.
"""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 300  # seconds: the embedded model on a loaded machine


def _marks(path: Path) -> list:
    nb = nbformat.read(path, as_version=4)
    return [pytest.mark.model] if nb.metadata.get("blendsql", {}).get("needs_model") else []


RUNS = [pytest.param(p, id=p.stem, marks=_marks(p)) for p in NOTEBOOKS]
IDS = [p.stem for p in NOTEBOOKS]


def _html_outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]


def test_there_is_a_gallery():
    assert {"quickstart", "custom_ingredients", "cost_and_calls", "hybridqa",
            "plain_language"} <= set(IDS)


@pytest.mark.parametrize("path", RUNS)
def test_notebook_runs(path):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    assert _html_outputs(nb), "the Smoothie should render as HTML"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_with_outputs(path):
    """Executed in order, top to bottom, without errors, with the Smoothie's HTML saved."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name} is not saved executed top to bottom: run python notebooks/execute.py")
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name} was saved with an error output"
    assert _html_outputs(nb), f"{path.name} has no rendered Smoothie saved"
    text = path.read_text(encoding="utf-8")
    for private in ("/work/", "/home/", "/root/", "/tmp/"):
        assert private not in text, f"{path.name} leaks a local path ({private})"


def test_replaying_notebooks_need_no_model():
    """A notebook that replays recorded answers runs in the default (no-model) CI run,
    and the file it replays is committed beside it."""
    replaying = [p for p in NOTEBOOKS if "Recorded(" in p.read_text(encoding="utf-8")]
    assert {p.stem for p in replaying} >= {"hybridqa", "plain_language"}
    for path in replaying:
        nb = nbformat.read(path, as_version=4)
        assert not nb.metadata.get("blendsql", {}).get("needs_model"), f"{path.name} replays: no model needed"
        assert (path.parent / "recorded" / f"{path.stem}.json").is_file(), f"{path.name}: recording missing"
