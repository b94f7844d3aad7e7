"""Model backends behind one contract (see ``base.Model``)."""

from __future__ import annotations

from typing import Any

from blendsql.models.base import FunctionModel, Model, Request, Response, Usage
from blendsql.models.scoring import Distribution

__all__ = ["Distribution", "FunctionModel", "LlamaCpp", "Model", "OpenAI", "Recorded", "Request",
           "Response", "Usage"]


def __getattr__(name: str) -> Any:
    # heavy backends import lazily so `import blendsql` stays fast
    if name == "LlamaCpp":
        from blendsql.models.llamacpp import LlamaCpp

        return LlamaCpp
    if name == "OpenAI":
        from blendsql.models.openai_compat import OpenAI

        return OpenAI
    if name == "Recorded":
        from blendsql.models.recorded import Recorded

        return Recorded
    raise AttributeError(name)
