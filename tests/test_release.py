"""Release metadata: one version, a Keep a Changelog history, complete package metadata.

``.ci/run`` builds the sdist and the wheel and runs ``twine check --strict`` on them.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

import pytest

import blendsql

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CHANGELOG = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def test_the_version_is_written_once() -> None:
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "blendsql.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", blendsql.__version__)


def test_changelog_has_unreleased_on_top_and_the_current_version_released() -> None:
    headings = re.findall(r"^## .*$", CHANGELOG, re.M)
    assert headings[0] == "## [Unreleased]"
    releases = RELEASE.findall(CHANGELOG)
    assert releases and releases[0][0] == blendsql.__version__
    assert len(headings) == 1 + len(releases), "every other ## heading is a dated release"
    dates = [dt.date.fromisoformat(d) for _, d in releases]
    assert dates == sorted(dates, reverse=True)
    versions = [tuple(map(int, v.split("."))) for v, _ in releases]
    assert versions == sorted(versions, reverse=True)


def test_package_metadata_is_complete() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and (ROOT / "LICENSE").is_file()
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert project["readme"] == "README.md" and project["authors"] and project["keywords"]
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= set(project["urls"])
    assert any(c.startswith("Programming Language :: Python :: 3.") for c in project["classifiers"])
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639
    assert "huggingface_hub>=0.23" in project["dependencies"]


def test_cli_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    from blendsql.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"blendsql {blendsql.__version__}"
