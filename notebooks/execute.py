"""Re-execute notebooks top to bottom and save them with their outputs (run before committing).

    python notebooks/execute.py                   # every notebook here
    python notebooks/execute.py quickstart.ipynb  # one

Runs offline: the notebooks use Python ingredients or blendsql's embedded model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent
CELL_TIMEOUT = 300  # seconds per cell: the embedded model on a loaded machine


def execute(path: Path) -> None:
    """Execute ``path`` in its own directory and write it back with outputs."""
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    print(f"executed {path.name}")


def main(argv: list[str]) -> int:
    paths = [HERE / a for a in argv] if argv else sorted(HERE.glob("*.ipynb"))
    for path in paths:
        execute(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
