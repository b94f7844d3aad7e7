"""blendsql: SQLite SQL with language-model ingredients; one query is the whole plan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from blendsql.budget import Budget, Prices
from blendsql.errors import BlendSQLError, BudgetExceededError
from blendsql.smoothie import Meta, Smoothie, TraceStep

__version__ = "0.2.0"
__all__ = ["BlendSQL", "BlendSQLError", "Budget", "BudgetExceededError", "Meta", "Prices",
           "Smoothie", "TraceStep", "__version__", "load_ipython_extension"]

if TYPE_CHECKING:
    from blendsql.blend import BlendSQL


def __getattr__(name: str) -> Any:
    if name == "BlendSQL":
        from blendsql.blend import BlendSQL

        return BlendSQL
    raise AttributeError(name)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext blendsql``: registers the ``%%blendsql DB`` cell magic (see
    :mod:`blendsql._magic`). IPython is imported only here."""
    from blendsql._magic import load

    load(ipython)
