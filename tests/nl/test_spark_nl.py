"""The plain-language layer on Spark SQL: the same reads through the Backend.

Spark tables given as DataFrames (``BlendSQL({"w": df})``); a scripted model
writes the programs. Spark has no full-text search, so the layer must work
from the tables alone: ask, a conversation with a correction, and every
statement it ran in the trace.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl import Conversation, Parser
from blendsql.nl.dberrors import is_driver_error
from blendsql.nl.serialize import list_tables
from blendsql.nl.source import NL_ORIGIN

PLAYERS = pd.DataFrame({"player": ["Buster Posey", "Joe Smith", "Al Jones"],
                        "position": ["Catcher", "Pitcher", "Pitcher"],
                        "school": ["Florida State", "Georgia", "Rice"], "pick": [5, 12, 30]})


def script(req: Request) -> str:
    tail = req.prompt.rstrip()
    if tail.endswith("BlendSQL:"):
        return "SELECT w.player FROM w WHERE w.position = 'Pitcher' ORDER BY w.pick"
    if tail.endswith("Corrected query:"):
        return "SELECT w.player FROM w WHERE w.position = 'Catcher'"
    return "Georgia"


@pytest.fixture(scope="module")
def bsql(spark_session: Any) -> BlendSQL:
    return BlendSQL({"w": spark_session.createDataFrame(PLAYERS)}, model=FunctionModel(script),
                    cache=False)


def test_the_schema_and_prompt_come_from_spark(bsql: BlendSQL) -> None:
    (table,) = list_tables(bsql)
    assert table.name == "w" and table.columns == ("player", "position", "school", "pick")
    assert not table.is_documents
    prompt = Parser(FunctionModel(script), examples=[]).first_prompt(
        "Which pitcher went to Georgia?", bsql, bsql.registry)
    assert "Joe Smith | Pitcher | Georgia | 12" in prompt


def test_ask_answers_and_traces_every_statement(bsql: BlendSQL) -> None:
    answer = bsql.ask("Which players are pitchers?")
    assert answer.answer == ["Joe Smith", "Al Jones"] and not answer.fallback_used
    nl = [s for s in answer.trace if s.details.get("source") == NL_ORIGIN]
    assert nl and all(s.sql for s in nl)


def test_a_conversation_is_corrected_on_spark(bsql: BlendSQL) -> None:
    conv = Conversation(bsql, Parser(FunctionModel(script), examples=[]), classify_acts=False,
                        correction_sources=("edit",))
    assert conv.ask("Which players are pitchers?").answer == ["Joe Smith", "Al Jones"]
    fixed = conv.correct("I meant catchers")
    assert fixed.program == "SELECT w.player FROM w WHERE w.position = 'Catcher'"
    assert fixed.answer == "Buster Posey"


def test_spark_exceptions_count_as_driver_errors(bsql: BlendSQL) -> None:
    from pyspark.errors import AnalysisException

    assert is_driver_error(AnalysisException("x"))
