"""A throwaway PostgreSQL 15 server for the backend tests (initdb into a temp dir).

Why a real server: read-only transactions, temp schemas and full-text
search are the server's behaviour; a fake would test nothing. The server
listens on 127.0.0.1 on a free port, trusts local connections and is
stopped (and its directory removed) when the test session ends. Where the
binaries are absent the tests skip with a message, unless
``BLENDSQL_REQUIRE_POSTGRES=1`` (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PG_BIN = Path(os.environ.get("BLENDSQL_PG_BIN", "/usr/lib/postgresql/15/bin"))


def pg_missing() -> str | None:
    """Why no server can be started here (None: it can)."""
    if not (PG_BIN / "initdb").is_file() or not (PG_BIN / "pg_ctl").is_file():
        return f"PostgreSQL binaries not found in {PG_BIN} (apt-get install postgresql-15)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """initdb + pg_ctl start on 127.0.0.1:<free port>; ``url(db)``; ``stop()``."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bsql_pg_"))
        self.port = _free_port()
        user = ["-U", "postgres"]
        run_as = self._run_as()
        data = self.dir / "data"
        subprocess.run([*run_as, str(PG_BIN / "initdb"), "-D", str(data), *user, "-A", "trust",
                        "-E", "UTF8", "--locale=C"], check=True, capture_output=True,
                       timeout=120)
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                f"-c fsync=off -c max_connections=60 -c shared_buffers=32MB")
        subprocess.run([*run_as, str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", opts, "-l",
                        str(self.dir / "log"), "-w", "-t", "60", "start"], check=True,
                       capture_output=True, timeout=120)
        self._run_as_cmd = run_as
        self.data = data

    def _run_as(self) -> list[str]:
        """PostgreSQL refuses to run as root: as root, run it as 'nobody'-like user."""
        if os.geteuid() != 0:
            return []
        for user in ("postgres", "nobody"):
            try:
                import pwd

                pwd.getpwnam(user)
            except KeyError:
                continue
            shutil.chown(self.dir, user)
            os.chmod(self.dir, 0o700)
            return ["runuser", "-u", user, "--"]
        raise RuntimeError("running as root and no unprivileged user to run PostgreSQL")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def create_db(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as con:
            con.execute(f'DROP DATABASE IF EXISTS "{name}"')
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run([*self._run_as_cmd, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m",
                        "immediate", "-w", "stop"], capture_output=True, timeout=60)
        for _ in range(20):
            try:
                shutil.rmtree(self.dir)
                return
            except OSError:
                time.sleep(0.1)
