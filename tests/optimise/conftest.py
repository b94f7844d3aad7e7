"""Fixtures: one generated 1000-row restaurants database per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import make_db


@pytest.fixture(scope="session")
def rdb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_db(tmp_path_factory.mktemp("optimise") / "restaurants.db")
