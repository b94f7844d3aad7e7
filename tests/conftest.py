"""Session fixtures shared by several test folders."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL 15 server on 127.0.0.1 for this test session (tests/pg_server.py).

    Skips with the reason when it cannot start here; with
    ``BLENDSQL_REQUIRE_POSTGRES=1`` (CI) that is a failure instead.
    """
    from pg_server import PgServer, pg_missing

    why = pg_missing()
    if why is not None:
        if os.environ.get("BLENDSQL_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"BLENDSQL_REQUIRE_POSTGRES=1 but {why}")
        pytest.skip(why)
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

    why = spark_missing()
    if why is not None:
        if os.environ.get("BLENDSQL_REQUIRE_SPARK") == "1":
            pytest.fail(f"BLENDSQL_REQUIRE_SPARK=1 but {why}")
        pytest.skip(why)
    spark = start_session()
    try:
        yield spark
    finally:
        stop_session(spark)
