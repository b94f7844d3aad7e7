"""Session fixtures shared by several test folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


def skip_unless_required(why: str | None, required_by: str) -> None:
    """Skip with ``why`` (a missing server, binary or package); fail instead when the
    environment variable ``required_by`` is 1 (CI, where the test must run)."""
    if why is None:
        return
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{required_by}=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL 15 server on 127.0.0.1 for this test session (tests/pg_server.py).

    Skips with the reason when it cannot start here; with
    ``BLENDSQL_REQUIRE_POSTGRES=1`` (CI) that is a failure instead.
    """
    from pg_server import PgServer, pg_missing

    skip_unless_required(pg_missing(), "BLENDSQL_REQUIRE_POSTGRES")
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """A local Spark session (``local[2]``) for this test session (tests/spark_session.py).

    Skips with the reason when pyspark or Java is missing; with
    ``BLENDSQL_REQUIRE_SPARK=1`` (CI) that is a failure instead.
    """
    from spark_session import spark_missing, start_session, stop_session

    skip_unless_required(spark_missing(), "BLENDSQL_REQUIRE_SPARK")
    spark = start_session()
    try:
        yield spark
    finally:
        stop_session(spark)
