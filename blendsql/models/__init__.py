"""Model backends behind one contract (see ``base.Model``).

``LlamaCpp``, ``OpenAI``, ``Recorded``, ``Guidance`` (and a plugin's model
classes) are the factories of the registered providers
(:mod:`blendsql.models.providers`), imported on first access so
``import blendsql`` stays fast; so is ``Pool`` (several OpenAI-compatible
endpoints of one model, :mod:`blendsql.models.pool`).
"""

from __future__ import annotations

from typing import Any

from blendsql.models.base import FunctionModel, Model, Request, Response, Usage
from blendsql.models.providers import by_factory_name
from blendsql.models.scoring import Distribution

__all__ = ["Distribution", "FunctionModel", "LlamaCpp", "Model", "OpenAI", "Pool", "Recorded",
           "Request", "Response", "Usage"]


def __getattr__(name: str) -> Any:
    if name == "Pool":
        from blendsql.models.pool import Pool

        return Pool
    provider = None if name.startswith("_") else by_factory_name(name)
    if provider is None:
        raise AttributeError(name)
    return provider.load()
