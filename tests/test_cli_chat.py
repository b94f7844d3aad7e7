"""``blendsql chat``: the REPL over piped stdin, in a real process and in-process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from blendsql import cli
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.grounding import UNRELATED_ANCHORS

PETS = Path(__file__).resolve().parent / "data" / "spider" / "pets_1" / "pets_1.sqlite"
ROOT = Path(__file__).resolve().parents[1]


def test_chat_subprocess_piped_stdin_needs_no_model():
    """Shortcut turns and commands only: the embedded model must not even be loaded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BLENDSQL_BASE_URL", None)
    env.pop("BLENDSQL_MODEL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "blendsql.cli", "chat", str(PETS)],
        input="hello\n:explain\n:help\nthanks\n:correct\nbye\nnot reached\n",
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "bot: Hello! Ask me a question about the database."
    assert "bot: there is no query to explain yet." in lines
    assert any(":correct FEEDBACK" in ln for ln in lines)
    assert "bot: You're welcome! Anything else?" in lines
    assert any(ln.startswith("bot: say what to change") for ln in lines)
    assert lines[-1] == "bot: Goodbye!"
    assert "not reached" not in proc.stdout


def test_chat_subprocess_missing_db_is_a_clean_error():
    proc = subprocess.run([sys.executable, "-m", "blendsql.cli", "chat", "/nonexistent.sqlite"],
                          input="", capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert proc.returncode == cli.EXIT_USER_ERROR
    assert "database file not found" in proc.stderr and "Traceback" not in proc.stderr


def test_chat_main_answers_questions_with_an_injected_model(monkeypatch):
    q = "How many dogs are there?"

    def fn(req: Request) -> str:
        p = req.prompt.rstrip()
        if p.endswith("Act:"):
            return "inform_sql"
        if p.endswith("Answerable:"):  # "dogs" names no table: the model is asked (unscored)
            return "no" if any(a in p.rsplit("Question:", 1)[1] for a in UNRELATED_ANCHORS) else "yes"
        assert p.endswith("BlendSQL:")
        return "SELECT COUNT(*) FROM Pets WHERE Pets.PetType = 'dog'"

    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{q}\n:explain\n:quit\n"))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["chat", str(PETS), "--no-cache"], model=FunctionModel(fn), stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert "bot: The answer is 2. I searched the table Pets for rows where Pets.PetType is 'dog'." in text
    assert "program: SELECT COUNT(*) FROM Pets WHERE Pets.PetType = 'dog'" in text
    assert "2. Keep only the rows where Pets.PetType is 'dog'." in text


def test_chat_is_listed_in_help():
    help_text = cli.build_parser().format_help()
    assert "chat" in help_text
