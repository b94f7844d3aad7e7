"""Ingredient calls on a Spark session's executors.

On Spark, a map's candidate values are computed by Spark; the calls that answer
them may run there too, in the executors' Python workers (``mapInPandas`` over
partitions of the values), instead of all leaving from the driver:

- a **model**'s requests: the session model's executor copy
  (:func:`blendsql.db.spark_models.for_executors`:  (a client of a model server, or a pool of them, with its requests in flight
  divided among the tasks) is pickled once per job and answers its partition's
  requests; the responses (with the endpoint that answered each) come back to the
  driver. :class:`ExecutorModel` does this *under* the session's cache, so only
  misses travel, and answers are cached, counted, budgeted and traced on the driver
  exactly as when the driver calls the model;
- a **deterministic** map ingredient (no model): its ``run`` is shipped as it is
  (cloudpickle: a class defined in a notebook travels by value; one from a package
  must be installed on the executors) and runs on each partition's values.

Which calls ship is the ``executors`` option: ``'auto'`` (default) ships a model's
batch of at least :data:`MIN_BATCH` requests when the model is shippable
(:func:`blendsql.db.spark_models.shippable`: a client of a server, the executors
reach the same servers); ``'on'`` ships every
batch and every deterministic map (a model that does not pickle is refused with
a clear error); ``'off'`` never. Each shipped batch is one engine "statement" on
the backend's traced, time-limited path (a Spark job in its own job group,
cancelled past its limit), shown in the trace as
``ANSWER <n> ... ON <p> executor task(s)``.

:class:`SparkExecutors` is the Spark backend's executor model
(``SparkBackend.executors``): the engine reaches these calls through it only.
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from blendsql.db.executors import Executors, current_mode
from blendsql.db.spark_models import for_executors, shippable
from blendsql.db.spark_workers import usable
from blendsql.errors import BlendSQLError, ExecutionError, ModelError
from blendsql.models.base import DEFAULT_TIMEOUT, Model, Request, Response, Wrapper

if TYPE_CHECKING:
    import pandas as pd

    from blendsql.db.spark import SparkBackend

#: in ``'auto'``: the fewest requests of one batch worth a Spark job
MIN_BATCH = 256
#: requests of a model batch's first job; each next job takes twice as many, up to
#: :data:`MAX_ROUND`: answers are reported and cached job by job (the first soon), and
#: few jobs mean few pauses between them (a job's start and its slowest task's tail)
FIRST_ROUND = 4096
MAX_ROUND = 32768

# -- what runs on an executor ----------------------------------------------------------


class RequestWorker:
    """Answers a partition's requests with a copy of the session model."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def __call__(self, items: list[Any]) -> tuple[list[Any], list[str]]:
        return list(self.model.generate(items)), []


class ValueWorker:
    """Runs a deterministic map ingredient's ``run`` on a partition's values."""

    def __init__(self, ingredient: Any, question: Any, constraint: Any,
                 kwargs: dict[str, Any]) -> None:
        self.ingredient = ingredient
        self.question = question
        self.constraint = constraint
        self.kwargs = kwargs

    def __call__(self, items: list[Any]) -> tuple[list[Any], list[str]]:
        warnings: list[str] = []
        out = self.ingredient.run(self.question, items, model=None, db=None,
                                  constraint=self.constraint, warnings=warnings, **self.kwargs)
        if not isinstance(out, (list, tuple)) or len(out) != len(items):
            raise ValueError(f"{type(self.ingredient).__name__}.run returned "
                             f"{type(out).__name__} for {len(items)} values; a map "
                             "ingredient's run() returns a list as long as `values`")
        return list(out), [str(w) for w in warnings]


#: the rows a task returns: the item's index, its pickled output or error, and (on the
#: first row of a batch) the batch's pickled warnings
OUT_SCHEMA = "i long, out binary, error binary, notes binary"


def task(shipped: bytes) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function of one job: unpickle the worker once per task, call
    it on each batch of items, and return outputs or the error, item by item."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd
        from pyspark import cloudpickle

        try:
            worker = cloudpickle.loads(shipped)
        except Exception as e:  # noqa: BLE001 - e.g. a module the executors lack
            worker = _Unloadable(e)
        for batch in batches:
            n = len(batch)
            outs: list[bytes | None] = [None] * n
            errors: list[bytes | None] = [None] * n
            notes: list[bytes | None] = [None] * n
            try:
                # e.g. a value or constraint of a class the executors cannot import: the
                # error goes back to the driver like the worker's own
                items = [pickle.loads(b) for b in batch["item"]]
                answers, warnings = worker(items)
                if len(answers) != len(items):
                    raise ModelError(f"{len(answers)} answer(s) for {len(items)} item(s) on a "
                                     "Spark executor", hint="a Model must answer every request")
                outs = [_dumps(a) for a in answers]
                if warnings and items:
                    notes[0] = pickle.dumps(warnings)
            except Exception as e:  # noqa: BLE001 - sent back to the driver, raised there
                errors = [_dump_error(e)] * n
            yield pd.DataFrame({"i": batch["i"], "out": outs, "error": errors,
                                "notes": notes})

    return run


class _Unloadable:
    """What a task runs when the shipped worker did not unpickle there: the reason."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __call__(self, items: list[Any]) -> tuple[list[Any], list[str]]:
        raise ExecutionError(
            f"a Spark executor could not load what blendsql sent it: "
            f"{type(self.error).__name__}: {self.error}",
            hint="install blendsql (and the package defining your ingredient or model) on "
            "the executors, or run the calls on the driver with executors='off'")


def _dumps(value: Any) -> bytes:
    from pyspark import cloudpickle

    return bytes(cloudpickle.dumps(value))


def _dump_error(e: BaseException) -> bytes:
    """The exception pickled; one that does not pickle as a ModelError with its text."""
    try:
        data = _dumps(e)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - e.g. an exception holding a lock or a socket
        return _dumps(ModelError(f"{type(e).__name__}: {e}"))


def local_modules(objects: Sequence[Any]) -> list[ModuleType]:
    """Modules of the user's own code that ``objects`` need (their classes and base
    classes, and the functions, classes and objects they hold) and that are not
    installed: a script or test file beside the driver, which an executor could not
    import. Left out: ``__main__`` (a notebook, a script: cloudpickle already sends it
    by value), the standard library and installed packages (site-packages, the
    interpreter's own directories: an executor imports them; sent by value, e.g.
    ``functools``, they would not even pickle), and compiled modules."""
    found: dict[str, ModuleType] = {}
    for obj in objects:
        items: list[Any] = list(type(obj).__mro__)
        for v in getattr(obj, "__dict__", {}).values():
            items += list(v.__mro__) if isinstance(v, type) else [v if callable(v) else type(v)]
        for item in items:
            name = getattr(item, "__module__", None) or ""
            module = sys.modules.get(name)
            if module is not None and name not in found and _users_own(name, module):
                found[name] = module
    return list(found.values())


def _installed_dirs() -> tuple[str, ...]:
    """The interpreter's library directories (standard library, site-packages)."""
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _users_own(name: str, module: ModuleType) -> bool:
    """True for a module of the user's own source (see :func:`local_modules`)."""
    path = getattr(module, "__file__", None)
    top = name.split(".", 1)[0]
    if (path is None or name == "__main__" or module.__name__ != name
            or not str(path).endswith(".py")
            or top in ("blendsql", "pyspark", "builtins")
            or top in getattr(sys, "stdlib_module_names", ())
            or any(p in ("site-packages", "dist-packages") for p in Path(path).parts)):
        return False
    return not os.path.realpath(path).startswith(_installed_dirs())


def ship(worker: Any, what: str, carried: Sequence[Any] = ()) -> bytes:
    """``worker`` pickled for the executors (the user's own modules among ``carried``'s
    sent by value: :func:`local_modules`), or a clear error naming ``what`` it carries."""
    from pyspark import cloudpickle

    modules = [m for m in local_modules(carried)
               if m.__name__ not in cloudpickle.list_registry_pickle_by_value()]
    registered: list[ModuleType] = []
    try:
        for module in modules:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        return bytes(cloudpickle.dumps(worker))
    except Exception as e:  # noqa: BLE001 - a lock, a socket, loaded weights ...
        raise ExecutionError(
            f"{what} cannot be sent to Spark's executors: {type(e).__name__}: {e}",
            hint="run it on the driver with executors='off' (or 'auto': only clients of "
            "model servers are sent)") from None
    finally:
        for module in registered:  # only those registered here (the user's own stay)
            try:
                cloudpickle.unregister_pickle_by_value(module)
            except ValueError:  # unregistered meanwhile (another session's ship)
                pass


# -- the driver's side -----------------------------------------------------------------


class SparkExecutors(Executors):
    """The Spark backend's executor model (see the module docstring)."""

    def __init__(self, backend: SparkBackend) -> None:
        self.backend = backend

    def placement(self, needs_model: bool, calls: Any,
                  model: Callable[[], Any]) -> str | None:
        """Where a map step's calls run, for the plan: None on the driver, else how they
        are spread over the executors (``calls``: the step's model calls, a ``Bound``;
        ``model()``: the session model, asked only when it matters)."""
        mode = current_mode()
        if mode == "off":
            return None
        checked = self.backend.checked_executors()
        if checked is not None and not checked.ok and mode != "on":
            return None  # the executors cannot run blendsql: the calls stay on the driver
        tasks = self.backend.executor_slots()
        if not needs_model:
            return f"run() on {tasks} executor task(s)" if mode == "on" else None
        if calls.high == 0 or not (mode == "on" or _ships_by_default(model)):
            return None
        if mode == "on" or calls.low >= MIN_BATCH:
            return f"model requests on {tasks} executor task(s)"
        if calls.high is None or calls.high >= MIN_BATCH:
            return (f"model requests on {tasks} executor task(s) if {MIN_BATCH} or more "
                    "are not cached")
        return None

    def runs_values(self, ingredient: Any) -> bool:
        """Whether a deterministic map's values run on the executors now (``'on'``)."""
        return current_mode() == "on" and not getattr(ingredient, "needs_model", True)

    def map_values(self, ingredient: Any, question: Any, values: list[Any], constraint: Any,
                   warnings: list[str], kwargs: dict[str, Any], limit: float) -> list[Any]:
        """A deterministic map ingredient's outputs for ``values``, computed on the
        executors (``run`` shipped with its question and options); its warnings added
        to ``warnings``."""
        if not values:
            return []
        backend = self.backend
        usable(backend, "on")  # only 'on' ships a deterministic map: a failed check is an error
        name = getattr(ingredient, "name", type(ingredient).__name__)
        shipped = ship(ValueWorker(ingredient, question, constraint, kwargs),
                       f"the ingredient {name}", [ingredient])
        outs, notes = backend.run_on_executors(
            shipped, values, f"value(s) for {getattr(ingredient, 'name', 'a map')}", limit)
        warnings += notes
        return outs


def _ships_by_default(model: Callable[[], Any]) -> bool:
    """Whether the session model ``model()`` ships with ``'auto'``; False when asking
    loads a model that fails to load (a plan must not fail for the note: running the
    query reports the model's error)."""
    try:
        return shippable(model())
    except BlendSQLError:
        return False


class ExecutorModel(Wrapper):
    """The session model on a Spark backend: batches answered on the executors (see the
    module docstring), smaller ones or with ``executors='off'`` by ``inner`` itself.

    Sits under the cache: its identity is ``inner``'s, so cached answers are shared
    with a driver-side run of the same model. Called from a thread other than the one
    holding the backend's session (an ingredient's own worker thread, while its query
    holds the session), a batch is answered by ``inner`` on the driver: a job there
    would wait for the session its own query holds (``lock_timeout``).
    """

    def __init__(self, inner: Model, backend: SparkBackend) -> None:
        self.inner = inner
        self.backend = backend

    @property
    def streams_results(self) -> bool:  # type: ignore[override]
        # a batch shipped with 'on' comes back job by job: metering must not cut it into
        # chunks of a few requests (one Spark job each) for the progress bar
        return self.inner.streams_results or current_mode() == "on"

    def ships(self, n: int) -> bool:
        """Whether a batch of ``n`` requests runs on the executors now."""
        mode = current_mode()
        owner = getattr(self.backend, "_owner", None)
        return n > 0 and owner in (None, threading.get_ident()) and (mode == "on" or (
            mode == "auto" and shippable(self.inner) and n >= MIN_BATCH))

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self.generate_each(requests, lambda _i, _r: None)

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None]) -> list[Response]:
        if not self.ships(len(requests)) or not usable(self.backend, current_mode()):
            return self.inner.generate_each(requests, on_result)
        # no more tasks than an endpoint's max_concurrency: each task keeps at least one
        # request in flight per endpoint, so more tasks would overload the servers
        partitions = min(self.backend.executor_slots(), _most_tasks(self.inner))
        copy = for_executors(self.inner, partitions)
        shipped = ship(RequestWorker(copy), f"the model {self.inner.name!r}", [copy])
        out: list[Response] = []
        for start, stop in rounds(len(requests)):
            part = list(requests[start:stop])
            answers, _notes = self.backend.run_on_executors(
                shipped, part, f"model request(s) to {self.inner.name}",
                self._job_limit(part, partitions), tasks=partitions)
            for j, resp in enumerate(answers):
                if not isinstance(resp, Response):
                    raise ModelError(f"an executor returned {type(resp).__name__} for a "
                                     "model request", hint="see the Spark executor's log")
                on_result(start + j, resp)
            out += answers
        return out

    def _job_limit(self, requests: Sequence[Request], partitions: int) -> float:
        """A bound on one job: the longest a request may take (its limit per attempt,
        its retries and their back-off, a pool's failovers), per wave of requests in
        flight on the tasks, plus time to start the tasks."""
        own = [r.timeout for r in requests if r.timeout is not None]
        limits: list[float | None] = [max(own)] if own else []
        if len(own) < len(requests):  # some requests take the model's own limit
            limits.append(None)
        worst = max(_worst_request(self.inner, t) for t in limits)
        in_flight = max(1, partitions * _in_flight(self.inner, partitions))
        waves = math.ceil(len(requests) / in_flight)
        return worst * waves + 120.0

    def __getattr__(self, item: str) -> object:
        # backend-specific helpers (prices, tokenizer, endpoints ...) pass through
        if item.startswith("__") or item in ("inner", "backend"):
            raise AttributeError(item)
        return getattr(self.inner, item)


def rounds(n: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each job's requests: :data:`FIRST_ROUND`, then doubling up to
    :data:`MAX_ROUND`."""
    out, start, size = [], 0, FIRST_ROUND
    while start < n:
        out.append((start, min(n, start + size)))
        start, size = start + size, min(MAX_ROUND, 2 * size)
    return out


def _most_tasks(model: Model) -> int:
    """The most tasks worth starting for ``model``: its endpoints' smallest
    ``max_concurrency`` (a very large number when it has none)."""
    eps = getattr(model, "endpoints", None)
    if isinstance(eps, list) and eps:
        return min(_most_tasks(e) for e in eps)
    conc = getattr(model, "max_concurrency", None)
    return max(1, conc) if isinstance(conc, int) and not isinstance(conc, bool) else 1 << 30


def _worst_request(model: Model, timeout: float | None) -> float:
    """Seconds one request may take on ``model`` at worst: ``timeout`` (None: the
    model's own) per attempt, with its retries and their back-off; on a pool, as many
    times as it may be sent (failover)."""
    eps = getattr(model, "endpoints", None)
    if isinstance(eps, list) and eps:
        attempts = int(getattr(model, "max_attempts", None) or len(eps) + 1)
        return attempts * max(_worst_request(e, timeout) for e in eps)
    per = timeout if timeout is not None else float(
        getattr(model, "timeout", None) or DEFAULT_TIMEOUT)
    retries = int(getattr(model, "max_retries", 0) or 0)
    return per * (1 + retries) + retries * float(getattr(model, "max_backoff", 0.0) or 0.0)


def _in_flight(model: Model, share: int) -> int:
    """Requests one task's copy keeps in flight (1 when the model does not say)."""
    eps = getattr(model, "endpoints", None)
    if isinstance(eps, list) and eps:
        return sum(_in_flight(e, share) for e in eps)
    conc = getattr(model, "max_concurrency", None)
    return max(1, -(-int(conc) // share)) if isinstance(conc, int) else 1

