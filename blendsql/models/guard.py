"""A model whose failures are always ``ModelError``s.

Why: a backend (a user's ``Model`` subclass, a ``FunctionModel``'s function,
llama.cpp) may raise anything. Inside ``execute`` the engine names the
ingredient that failed, but ``BlendSQL.ask``, ``Conversation`` and the parser
call the session model directly, and a raw ``RuntimeError`` there broke the
promise of one error hierarchy. The session wraps its model once, here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from blendsql.errors import BlendSQLError, ModelError
from blendsql.models.base import Model, Request, Response, Wrapper


class GuardedModel(Wrapper):
    """Delegates to ``inner``; any non-blendsql exception from it becomes a ModelError."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        return self._guard(lambda: self.inner.generate(requests))

    def generate_each(self, requests: Sequence[Request],
                      on_result: Callable[[int, Response], None]) -> list[Response]:
        return self._guard(lambda: self.inner.generate_each(requests, on_result))

    def _guard(self, call: Callable[[], list[Response]]) -> list[Response]:
        try:
            return call()
        except BlendSQLError:
            raise
        except Exception as e:  # noqa: BLE001 - any backend failure, reported as ours
            raise ModelError(
                f"model {self.inner.name!r} failed: {type(e).__name__}: {e}",
                hint="check the model backend (is the server up, the key valid, the "
                "function correct?)") from e

    def __getattr__(self, item: str) -> object:
        # backend-specific helpers (tokenizer, context size, llm, ...) pass through
        if item.startswith("__") or item == "inner":
            raise AttributeError(item)
        return getattr(self.inner, item)


def guarded(model: Model) -> Model:
    """``model`` wrapped once (a guarded model is returned as is)."""
    return model if isinstance(model, GuardedModel) else GuardedModel(model)
