"""One BlendSQL session used from several threads: correct results, no deadlock.

Why a subprocess for the stress test: the deadlock this guards against is
between Python's GIL and SQLite's connection mutex, and it freezes the
whole process (a ``join(timeout=...)`` in the same process would never get
to run). The child runs the threads; the parent kills it after a global
time limit, so a deadlock fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from blendsql import BlendSQL
from blendsql.db.database import SessionBusyError
from blendsql.ingredients.base import MapIngredient

from .conftest import WORLD

STRESS = r'''
import json, sys, threading
from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient

class StartsWith(MapIngredient):
    def run(self, question, values, **kwargs):
        return [str(v).startswith(str(question)) for v in values]

class Len(MapIngredient):
    def run(self, question, values, **kwargs):
        return [len(str(v)) for v in values]

QUERIES = [
    "SELECT Name FROM city WHERE CountryCode = 'NLD' ORDER BY ID",
    "SELECT COUNT(*) AS n FROM city",
    "SELECT Name FROM city WHERE {{StartsWith('Am', city.Name)}} = TRUE ORDER BY ID",
    "SELECT Name, {{Len('n', city.Name)}} AS n FROM city WHERE CountryCode = 'BEL' ORDER BY ID",
    "SELECT {{Len('n', city.District)}} AS n, COUNT(*) AS c FROM city GROUP BY n ORDER BY n",
]
source = sys.argv[1]
if sys.argv[2] == "handed-in":
    import sqlite3
    source = sqlite3.connect(source, check_same_thread=False)
b = BlendSQL(source, ingredients=[StartsWith, Len], cache=False)
rows = lambda q: b.execute(q).df.values.tolist()
serial = {q: rows(q) for q in QUERIES}
errors, mismatches = [], []

def work(t):
    for i in range(20):
        q = QUERIES[(t + i) % len(QUERIES)]
        try:
            if rows(q) != serial[q]:
                mismatches.append(q)
        except Exception as e:  # reported to the parent
            errors.append(f"{type(e).__name__}: {e}")

threads = [threading.Thread(target=work, args=(t,), daemon=True) for t in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=240)
print(json.dumps({"alive": sum(t.is_alive() for t in threads), "errors": errors[:5],
                  "mismatches": mismatches[:5]}))
'''


@pytest.mark.parametrize("source", ["opened", "handed-in"])
def test_eight_threads_share_one_session(tmp_path: Path, source: str) -> None:
    """Threads on one session take turns; none freezes the process, plain SQL included."""
    script = tmp_path / "stress.py"
    script.write_text(STRESS)
    try:
        out = subprocess.run([sys.executable, str(script), str(WORLD), source],
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("8 threads x 20 queries on one session did not finish: deadlock")
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"alive": 0, "errors": [], "mismatches": []}


class Gate(MapIngredient):
    """Blocks inside the query until released (holds the session meanwhile)."""

    entered = threading.Event()
    release = threading.Event()

    def run(self, question: Any, values: list, **kwargs: Any) -> list:
        Gate.entered.set()
        assert Gate.release.wait(60), "never released"
        return [True for _ in values]


def test_a_busy_session_raises_after_its_wait_limit() -> None:
    b = BlendSQL(str(WORLD), ingredients=[Gate], cache=False)
    b.db.lock_timeout = 0.05
    Gate.entered.clear()
    Gate.release.clear()
    result: list[Any] = []
    holder = threading.Thread(target=lambda: result.append(b.execute(
        "SELECT Name FROM city WHERE {{Gate('x', city.Name)}} = TRUE")), daemon=True)
    holder.start()
    try:
        assert Gate.entered.wait(60)
        with pytest.raises(SessionBusyError) as info:
            b.execute("SELECT COUNT(*) FROM city")
        assert info.value.hint and "thread" in info.value.hint
    finally:
        Gate.release.set()
        holder.join(60)
    assert not holder.is_alive() and len(result[0].df) == 4079
    assert b.execute("SELECT COUNT(*) AS n FROM city").df["n"].tolist() == [4079]
