"""A failing backend is a ModelError everywhere the session model is used
(execute, ask, Conversation), never a raw exception."""

from __future__ import annotations

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError, ModelError
from blendsql.models import FunctionModel
from blendsql.models.base import Model, Request, Response
from blendsql.models.guard import GuardedModel, guarded
from blendsql.nl import Conversation


def _boom(req: Request) -> str:
    raise RuntimeError("backend down")


class Broken(Model):
    """A user's backend that raises its own exception type."""

    name = "broken"
    cacheable = False

    def generate(self, requests: object) -> list[Response]:
        raise ConnectionError("refused")


DB = {"city": pd.DataFrame({"Name": ["Cairo", "Nice"], "Pop": [9, 1]})}


@pytest.mark.parametrize("model", [FunctionModel(_boom), Broken()], ids=["function", "custom"])
@pytest.mark.parametrize("cache", [False, True])
def test_execute_reports_a_model_error(model: Model, cache: bool) -> None:
    b = BlendSQL(DB, model=model, cache=cache)
    for q in ("SELECT {{LLMQA('Where?')}} AS a",
              "SELECT Name FROM city WHERE {{LLMMap('Big?', city.Name)}} = TRUE"):
        with pytest.raises(ModelError):
            b.execute(q)


@pytest.mark.parametrize("model", [FunctionModel(_boom), Broken()], ids=["function", "custom"])
def test_ask_and_conversation_report_a_model_error(model: Model) -> None:
    """The backend's RuntimeError / ConnectionError reaches the caller as a BlendSQLError."""
    b = BlendSQL(DB, model=model, cache=False)
    with pytest.raises(BlendSQLError):
        b.ask("Which cities are big?")
    with pytest.raises(BlendSQLError):
        Conversation(b).ask("Which cities are big?")


def test_guarded_passes_through_and_wraps_once() -> None:
    inner = FunctionModel(lambda r: "ok", name="fn")
    g = guarded(inner)
    assert isinstance(g, GuardedModel) and guarded(g) is g
    assert g.name == "fn" and g.identity() == inner.identity() and g.timeout == inner.timeout
    assert g.generate([Request("x")])[0].text == "ok"
