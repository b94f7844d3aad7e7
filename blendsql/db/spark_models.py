"""How a model travels to a Spark session's executors, decided by the model's type.

A model answers a batch on the executors when a copy of it answers the same in
another process: a client of a model server, rebuilt there from its settings.
Which types can, and how each is copied for one of ``share`` tasks answering
at once, is this registry's, not the model's: :func:`register_shippable` adds
a type (a subclass takes its nearest registered base's rule), and a model
wrapped in a :class:`~blendsql.models.base.Wrapper` (a cache, a guard) ships
as its inner model does. blendsql's own clients (``OpenAI``, ``Pool``) are
registered here; a model of any other type answers on the driver unless the
``executors='on'`` option ships it as it pickles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blendsql.models.base import Model, Wrapper
from blendsql.models.guard import GuardedModel
from blendsql.models.openai_compat import OpenAI
from blendsql.models.pool import Pool

#: ``copy(model, share)``: a copy of ``model`` for one of ``share`` tasks answering at once
Copier = Callable[[Any, int], Model]

_COPIERS: dict[type, Copier] = {}


def register_shippable(cls: type, copy: Copier) -> None:
    """Declare that models of type ``cls`` answer the same on the executors, copied there
    by ``copy(model, share)`` (sent its settings, never its connections); ``share``:
    how many tasks answer at once (a client divides its requests in flight among them).
    A type registered again takes the new ``copy``."""
    if not isinstance(cls, type) or not callable(copy):
        raise TypeError("register_shippable(cls, copy) takes a class and a callable")
    _COPIERS[cls] = copy


def _copier(model: Any) -> Copier | None:
    return next((_COPIERS[c] for c in type(model).__mro__ if c in _COPIERS), None)


def shippable(model: Any) -> bool:
    """True when ``model``'s requests may run on the executors by default
    (``executors='auto'``): its type, or a wrapper's inner model's, is registered."""
    if isinstance(model, Wrapper):
        return shippable(model.inner)
    return _copier(model) is not None


def for_executors(model: Any, share: int) -> Model:
    """The copy of ``model`` sent to one of ``share`` tasks: a registered type's copy,
    else the model itself (shipped as it pickles, with ``executors='on'``)."""
    copy = _copier(model)
    return copy(model, share) if copy is not None else model


register_shippable(OpenAI, lambda m, share: m.for_workers(share))
register_shippable(Pool, lambda m, share: m.for_workers(share))
# a guard ships around its inner model's copy, and only as far as that one ships
register_shippable(GuardedModel, lambda m, share: GuardedModel(for_executors(m.inner, share)))
