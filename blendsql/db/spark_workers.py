"""Can a Spark session's executors run blendsql's calls? Checked before trusting them.

Ingredient calls shipped to the executors (:mod:`blendsql.db.spark_calls`) need
blendsql, pandas and pyarrow importable in the executors' Python, blendsql at the
driver's version. A local Spark session started from a venv that is not on
``PATH`` (an IDE, a Jupyter kernel, cron) runs its workers with ``PYSPARK_PYTHON``
or else whatever ``python3`` is on ``PATH``, where none of them may be installed. So before the
first executor job of a Spark context one tiny probe job asks each task what it
can import (:func:`probe_function`, shipped by value, so it runs even where
blendsql cannot be imported); :func:`judge` turns the answers into a reason
and a fix. The result is remembered per Spark context.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any

from blendsql.errors import ExecutionError

#: what the executors' Python must import for blendsql's calls (mapInPandas: pandas, pyarrow)
NEEDED = ("blendsql", "pandas", "pyarrow")

_PROBE_SOURCE = '''
def probe(_task):
    import importlib
    import importlib.metadata
    import sys
    found = {"python": sys.executable, "python_version": "%d.%d" % sys.version_info[:2]}
    for name in NEEDED:
        try:
            module = importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure to import is the answer
            found[name] = None
            found[name + "_error"] = "%s: %s" % (type(e).__name__, e)
            continue
        try:
            found[name] = importlib.metadata.version(name)
        except Exception:  # noqa: BLE001 - importable without metadata (a source tree)
            found[name] = getattr(module, "__version__", "?")
    return found
'''


def probe_function() -> Any:
    """The probe run on each task: ``probe(task) -> {"python": ..., "<module>": version or
    None, ...}``. Made from source in a module of its own name, which the executors do
    not have, so cloudpickle ships it by value: it needs nothing but Python there."""
    space: dict[str, Any] = {"__name__": "blendsql_executor_probe", "NEEDED": NEEDED}
    exec(compile(_PROBE_SOURCE, "<blendsql executor probe>", "exec"), space)  # noqa: S102
    return space["probe"]


class WorkersNotReady(ExecutionError):
    """The executors' Python lacks what blendsql's calls need (the message says what)."""


@dataclass(frozen=True)
class WorkerCheck:
    """The executors' answer: ``ok``, and otherwise why not and how to fix it."""

    ok: bool
    reason: str
    fix: str = ""


def driver_version() -> str:
    """blendsql's version on the driver (its installed metadata; "?" from a bare source tree)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("blendsql")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def fix_hint(master: str, pythons: list[str]) -> str:
    """How to make the executors able to run blendsql, for this kind of master."""
    if master.startswith("local"):
        return ("let the Spark workers run this interpreter: os.environ['PYSPARK_PYTHON'] = "
                f"{sys.executable!r} (sys.executable) before the Spark session starts; Spark "
                "starts them with PYSPARK_PYTHON, else 'python3' from PATH")
    where = ", ".join(sorted(set(pythons))) or "the executors' Python"
    return (f"install blendsql[spark]=={driver_version()} (with pandas and pyarrow) into {where} on "
            "every executor, or set PYSPARK_PYTHON (spark.pyspark.python with spark-submit) to "
            "a Python that has them")


def judge(found: list[dict[str, Any]], master: str) -> None:
    """Raise an :class:`~blendsql.errors.ExecutionError` naming what the executors lack
    (a module, blendsql at another version); return when every task has it all."""
    version = driver_version()
    problems: list[str] = []
    pythons = [str(f.get("python")) for f in found]
    for f in found:
        for name in NEEDED:
            if f.get(name) is None:
                error = f.get(name + "_error", "not importable")
                problems.append(f"{f.get('python')} cannot import {name} ({error})")
        if f.get("blendsql") not in (None, "?", version):
            problems.append(f"{f.get('python')} has blendsql {f['blendsql']}, the driver "
                            f"{version}")
    if not found:
        problems.append("the probe job returned no answer")
    if problems:
        unique = list(dict.fromkeys(problems))
        raise WorkersNotReady("the Spark executors cannot run blendsql's calls: "
                             + "; ".join(unique[:3]), hint=fix_hint(master, pythons))


_LOCK = threading.Lock()
_CHECKS: dict[str, WorkerCheck] = {}


def remembered(key: str, check: WorkerCheck | None = None) -> Any:
    """The check remembered for a Spark context (``key``); with ``check``, remember it."""
    with _LOCK:
        if check is not None:
            _CHECKS[key] = check
        return _CHECKS.get(key)


def usable(backend: Any, mode: str) -> bool:
    """Whether calls may run on ``backend``'s executors now: its check passed. When it
    failed, ``'on'`` raises the check's error (the user asked for the executors);
    otherwise the calls stay on the driver, with a warning that says how to fix it
    (once per Spark context; the trace has the failed check as a step)."""
    import warnings

    first = backend.checked_executors() is None
    check = backend.check_executors()
    if check.ok:
        return True
    if mode == "on":
        raise ExecutionError(check.reason + " (executors='on')",
                             hint=check.fix + "; or let the calls run on the driver with "
                             "executors='auto' or 'off'")
    if first:
        warnings.warn(f"{check.reason}; the calls run on the driver instead. To fix it: "
                      f"{check.fix}", RuntimeWarning, stacklevel=2)
    return False
