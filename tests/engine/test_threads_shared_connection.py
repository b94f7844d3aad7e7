"""Several sessions over one connection share one lock: used from several threads
they serialise instead of deadlocking (the lock is the connection's, not the wrapper's)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from blendsql import BlendSQL
from blendsql.db.database import _CONN_LOCKS, Database


def test_sessions_over_one_connection_share_its_lock(world: Path) -> None:
    con = sqlite3.connect(world, check_same_thread=False)
    a, b = BlendSQL(con), BlendSQL(con)
    assert a.db._lock is b.db._lock
    c = BlendSQL(str(world))
    d = BlendSQL(Database(c.db))  # a wrapper around a wrapper: the same connection
    assert c.db._lock is d.db._lock and c.db._lock is not a.db._lock


def test_the_shared_lock_is_forgotten_with_the_last_session(world: Path) -> None:
    import gc

    con = sqlite3.connect(world)
    sessions = [BlendSQL(con) for _ in range(3)]
    assert _CONN_LOCKS[id(con)][1] == 3
    del sessions
    gc.collect()
    assert id(con) not in _CONN_LOCKS


SCRIPT = textwrap.dedent('''
    import sqlite3, sys, threading
    from blendsql import BlendSQL
    from blendsql.ingredients import MapIngredient

    class StartsWith(MapIngredient):
        def run(self, question, values, **kw):
            return [str(v).startswith(question) for v in values]

    con = sqlite3.connect(sys.argv[1], check_same_thread=False)
    q = "SELECT Name FROM city WHERE {{StartsWith('A', city.Name)}} = TRUE ORDER BY Name"
    serial = BlendSQL(con, ingredients=[StartsWith]).execute(q).df.values.tolist()
    results, errors = [], []

    def work():
        b = BlendSQL(con, ingredients=[StartsWith])  # one session per thread, one connection
        try:
            for _ in range(10):
                results.append(b.execute(q).df.values.tolist())
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors, errors
    assert len(results) == 60 and all(r == serial for r in results)
    print("ok")
''')


def test_sessions_over_one_connection_in_threads_agree_with_serial(world: Path,
                                                                   tmp_path: Path) -> None:
    """Run in a subprocess with a time limit: the failure mode is a frozen process."""
    script = tmp_path / "threads.py"
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script), str(world)], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
