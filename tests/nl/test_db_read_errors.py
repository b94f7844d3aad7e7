"""The plain-language layer's own database reads fail as blendsql errors, never raw sqlite3 ones.

The layer reads through the backend, which turns every driver error into an
ExecutionError with a hint; ``reads_database`` remains the safety net for a
driver exception that would escape anyway."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ExecutionError
from blendsql.models.base import FunctionModel
from blendsql.nl import Conversation, Parser
from blendsql.nl.ask import ask
from blendsql.nl.conversation import Turn
from blendsql.nl.dberrors import read_error

PETS = Path(__file__).resolve().parents[1] / "data" / "spider" / "pets_1" / "pets_1.sqlite"
QUERY = "SELECT COUNT(*) FROM Pets"


def _interrupting(tmp_path: Path) -> tuple[BlendSQL, FunctionModel]:
    """A session whose connection the caller interrupts (a progress handler of theirs)."""
    model = FunctionModel(lambda req: QUERY)
    conn = sqlite3.connect(PETS, check_same_thread=False)
    bsql = BlendSQL(conn, model=model, cache=False)
    conn.set_progress_handler(lambda: 1, 1)
    return bsql, model


@pytest.mark.sqlite_only("interrupts a SQLite connection through its progress handler")
def test_parse_turns_an_interrupted_read_into_an_execution_error(tmp_path):
    bsql, model = _interrupting(tmp_path)
    with pytest.raises(ExecutionError) as info:
        Parser(model).parse("How many pets?", bsql.db.conn, bsql.registry)
    assert "interrupted" in info.value.message and "progress handler" in (info.value.hint or "")
    # the backend's error, naming the statement the layer ran (not a raw sqlite3 error)
    assert "\n  in: SELECT" in info.value.message


@pytest.mark.sqlite_only("interrupts a SQLite connection through its progress handler")
def test_conversation_ask_and_correct_never_leak_a_sqlite_error(tmp_path):
    bsql, model = _interrupting(tmp_path)
    conv = Conversation(bsql, Parser(model), classify_acts=False)
    with pytest.raises(BlendSQLError):
        conv.ask("How many pets are there?")
    conv.history.append(Turn("How many pets?", "inform_sql", "", program=QUERY, question="How many pets?"))
    turn = conv.correct("count the students instead")  # each candidate's failure is recorded
    assert turn.program is None and turn.error
    assert all(c.error and "ExecutionError" in c.error for c in turn.candidates)


@pytest.mark.sqlite_only("interrupts a SQLite connection through its progress handler")
def test_ask_with_fallback_never_leaks_a_sqlite_error(tmp_path):
    bsql, _ = _interrupting(tmp_path)
    with pytest.raises(BlendSQLError):
        ask(bsql, "How many pets are there?")


def test_a_locked_database_gets_a_hint_about_the_other_connection(tmp_path):
    db = tmp_path / "pets.sqlite"
    shutil.copy(PETS, db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        reader = sqlite3.connect(db, timeout=0.05)
        with pytest.raises(sqlite3.OperationalError) as raw:
            reader.execute("SELECT count(*) FROM Pets").fetchall()
        err = read_error(raw.value, "reading the schema")
        assert isinstance(err, ExecutionError) and "lock" in (err.hint or "")
        reader.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_reads_database_turns_any_driver_error_into_ours_and_passes_ours_through():
    from blendsql.nl.dberrors import reads_database

    @reads_database("testing")
    def raw() -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(ExecutionError) as info:
        raw()
    assert "while testing" in info.value.message and "lock" in (info.value.hint or "")

    @reads_database("testing")
    def ours() -> None:
        raise ExecutionError("mine", hint="h")

    with pytest.raises(ExecutionError) as info:
        ours()
    assert info.value.message == "mine"

    @reads_database("testing")
    def bug() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        bug()
