"""No report item of any quality benchmark can see its own answer.

For every report item of Spider, SParC, CoSQL, SPLASH and HybridQA, the
benchmark script builds the real prompt it would send (no model call); the
check fails when a shown example is on the item's database, asks the same
question, has the same SQL (normalised) or returns the same result on the
item's database, or when the item's question or gold SQL appears in the prompt
beyond what the item itself gives. Needs the benchmark data
(``../shared/data`` or ``$BLENDSQL_BENCH_DATA``); skipped without it.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks import protocol  # noqa: E402

DATA = protocol.data_dir()


def _need(*folders: str) -> None:
    missing = [f for f in folders if not (DATA / f).is_dir()]
    if missing:
        pytest.skip(f"benchmark data not found ({', '.join(missing)} under {protocol.DATA_ENV} "
                    "or ../shared/data)")


@functools.cache
def _built(name: str) -> list[protocol.PromptCheck]:
    if name == "spider":
        _need("spider")
        from benchmarks import spider

        return spider.leak_checks(DATA, n=200)
    if name in ("sparc", "cosql"):
        _need("spider", name)
        import conversation

        return conversation.leak_checks(DATA, name, questions=150)
    if name == "splash":
        _need("spider", "splash")
        import splash

        return splash.leak_checks(DATA, n=150)
    _need("hybridqa")
    from benchmarks import hybridqa

    return hybridqa.leak_checks(DATA / "hybridqa", n=150)


def _checks(name: str) -> list[protocol.PromptCheck]:
    folders = {"spider": ("spider",), "sparc": ("spider", "sparc"), "cosql": ("spider", "cosql"),
               "splash": ("spider", "splash"), "hybridqa": ("hybridqa",)}[name]
    _need(*folders)
    return _built(name)


@pytest.mark.parametrize("name", ["spider", "sparc", "cosql", "splash", "hybridqa"])
def test_no_report_item_sees_its_answer(name: str) -> None:
    checks = _checks(name)
    assert len(checks) >= 150, f"{name}: only {len(checks)} report prompts built"
    oracle = protocol.ResultOracle()
    leaks = [leak for c in checks for leak in protocol.prompt_leaks(c, oracle)]
    assert not leaks, f"{len(leaks)} leaks, e.g.\n" + "\n".join(leaks[:10])


@pytest.mark.parametrize("name", ["spider", "sparc", "cosql", "splash"])
def test_report_set_reaches_every_database(name: str) -> None:
    checks = _checks(name)
    dbs = {c.target.db for c in checks}
    assert len(dbs) >= 10, f"{name}: report set on {len(dbs)} databases"
    if name == "spider":
        assert len(dbs) == 20


def _old_pool_filter(pool, target, oracle=None):  # noqa: ANN001, ANN202 - the filter it stands for
    """The pool filter before the protocol (8c1666a): Spider removed only an example whose SQL
    equalled gold's after lower-casing; SParC / CoSQL / SPLASH's cross-database filter kept all."""
    golds = {" ".join(s.lower().rstrip(";").split()) for s in target.sqls}
    return [e for e in pool if " ".join(e.program.lower().rstrip(";").split()) not in golds]


@pytest.mark.parametrize("name", ["spider", "sparc"])
def test_the_check_finds_the_leaks_of_the_old_pool_filter(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _need("spider", name)
    monkeypatch.setattr(protocol, "leak_free", _old_pool_filter)
    if name == "spider":
        from benchmarks import spider

        checks = spider.leak_checks(DATA, n=20)
    else:
        import conversation

        checks = conversation.leak_checks(DATA, name, questions=20)
    leaky = [c for c in checks if protocol.prompt_leaks(c, protocol.ResultOracle())]
    assert len(leaky) == len(checks)  # every item saw examples of its own database
