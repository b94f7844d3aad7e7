"""Where a query's ingredient calls may run besides the driver: a backend's executors.

A backend whose engine has workers of its own (Spark's executors) declares
``Capabilities(executors=True)`` and returns its executor model from
``Backend.executors``: the engine asks it where a map step's calls run (for
the plan) and whether a deterministic map's values run there, and hands it
those values. Models' batches are the backend's own business
(``Backend.distribute``). Nothing outside the backend's modules knows which
engine the executors belong to.

The ``executors`` option of a query (``'auto'``, ``'on'``, ``'off'``) is set
for one use of the backend (``session(executors=...)`` sets :data:`EXECUTOR_MODE`)
and read by an executor model with :func:`current_mode`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

#: the ``executors`` option's values
MODES = ("auto", "on", "off")

#: the ``executors`` option of the calls made now (set per use: ``Backend.session(executors=)``)
EXECUTOR_MODE: ContextVar[str] = ContextVar("blendsql_executors", default="auto")


def current_mode() -> str:
    """The ``executors`` option of the calls made now."""
    return EXECUTOR_MODE.get()


class Executors(ABC):
    """A backend's executor model: which of a query's calls run on its workers."""

    @abstractmethod
    def placement(self, needs_model: bool, calls: Any,
                  model: Callable[[], Any]) -> str | None:
        """Where a map step's calls run, for the plan: None on the driver, else how they
        are spread over the executors (``calls``: the step's model calls, a ``Bound``;
        ``model()``: the session model, asked only when it matters). Never raises for a
        model that fails to load."""

    @abstractmethod
    def runs_values(self, ingredient: Any) -> bool:
        """Whether a deterministic map ingredient's values run on the executors now."""

    @abstractmethod
    def map_values(self, ingredient: Any, question: Any, values: list[Any], constraint: Any,
                   warnings: list[str], kwargs: dict[str, Any], limit: float) -> list[Any]:
        """A deterministic map ingredient's outputs for ``values``, computed on the
        executors (its ``run`` shipped with its question and options, under ``limit``
        seconds); the workers' warnings added to ``warnings``."""
