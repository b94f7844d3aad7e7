"""``.ci/guarded``: a test process that crashes fails CI, whatever the runner says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GUARD = Path(__file__).resolve().parents[1] / ".ci" / "guarded"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def guarded(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(GUARD), sys.executable, "-c", code],
                          capture_output=True, text=True, timeout=60)


def test_a_clean_run_passes_with_its_output_and_exit_code() -> None:
    done = guarded("print('3 passed')")
    assert done.returncode == 0 and "3 passed" in done.stdout
    assert guarded("raise SystemExit(5)").returncode == 5  # pytest's "no tests" stays visible


def test_a_runner_killed_by_a_signal_fails() -> None:
    done = guarded("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert done.returncode == 1 and "died of signal 11" in done.stderr


def test_a_crashed_child_fails_even_when_the_runner_exits_0() -> None:
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-c', "
            "'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)']); print('1 passed')")
    done = guarded(code)  # the child inherits PYTHONFAULTHANDLER=1 and reports its crash
    assert done.returncode == 1 and "a test process crashed" in done.stderr
