"""Golden files of schema serialisation over real Spider databases.

Regenerate after a deliberate format change with
``python tests/nl/test_serialize_golden.py --regen`` (and again with
``BLENDSQL_NL_BACKEND=duckdb`` and ``=postgresql``: those backends have their own
golden files, their schema text is built from the catalogue, not SQLite's DDL) and
read the diff.
"""

import sqlite3
import sys
from pathlib import Path

import pytest
from nl_backend import NL_BACKEND  # tests/nl/nl_backend.py

from blendsql.nl.serialize import bridge_hints, format_hints, serialize_schema

HERE = Path(__file__).parent
DBS = ["concert_singer", "pets_1"]
QUESTIONS = {
    "concert_singer": "How many singers from the Netherlands sang in concerts at Hampden Park?",
    "pets_1": "What is the average age of students who have a dog?",
}


def golden_path(db: str) -> Path:
    suffix = "" if NL_BACKEND == "sqlite" else f".{NL_BACKEND}"
    return HERE / "golden" / f"schema_{db}{suffix}.txt"


def render(db: str) -> str:
    path = HERE.parent / "data" / "spider" / db / f"{db}.sqlite"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    hints = format_hints(bridge_hints(conn, QUESTIONS[db]))
    return serialize_schema(conn, n_rows=2) + "\n\n" + hints + "\n"


@pytest.mark.parametrize("db", DBS)
def test_schema_matches_golden(db):
    assert render(db) == golden_path(db).read_text()


if __name__ == "__main__" and "--regen" in sys.argv:
    import tempfile

    import blendsql.nl.source as source

    server = None
    if NL_BACKEND == "duckdb":
        from nl_backend import DuckMirror

        source.open_database = DuckMirror(Path(tempfile.mkdtemp())).open  # type: ignore[assignment]
    elif NL_BACKEND == "postgresql":
        sys.path.insert(0, str(HERE.parent))
        from nl_backend import PgMirror
        from pg_server import PgServer

        server = PgServer()
        source.open_database = PgMirror(Path(tempfile.mkdtemp()), server).open  # type: ignore[assignment]
    try:
        for name in DBS:
            golden_path(name).parent.mkdir(exist_ok=True)
            golden_path(name).write_text(render(name))
    finally:
        if server is not None:
            server.stop()
