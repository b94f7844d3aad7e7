"""The ``backend`` fixture: engine checks run on SQLite, DuckDB, PostgreSQL and Spark.

DuckDB and PostgreSQL get copies of the same Spider fixtures
(``blendsql.db.transfer``), Spark the same tables as DataFrames of one local
session; the twins are the same SQL texts, run through each backend's
translation. PostgreSQL needs a server (tests/pg_server.py), Spark pyspark and
Java (tests/spark_session.py); without them those cases skip with a message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .common import BACKENDS, use_postgres, use_spark


@pytest.fixture(scope="session")
def _pg_for_differential(request: pytest.FixtureRequest) -> Iterator[Any]:
    server = request.getfixturevalue("postgres_server")
    use_postgres(server)
    yield server


@pytest.fixture(scope="session")
def _spark_for_differential(request: pytest.FixtureRequest) -> Iterator[Any]:
    session = request.getfixturevalue("spark_session")
    use_spark(session)
    yield session


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """A backend name; 'postgres' starts (once) or skips the test server, 'spark' the
    local Spark session."""
    name = str(request.param)
    if name == "duckdb":
        pytest.importorskip("duckdb")
    if name == "postgres":
        request.getfixturevalue("_pg_for_differential")
    if name == "spark":
        request.getfixturevalue("_spark_for_differential")
    return name
