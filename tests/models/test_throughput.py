"""Model throughput: several values per prompt, prompt order on the wire.

Fakes answer instantly and record what they were asked; the one test that
starts a real llama.cpp server is marked ``server``. No timing assertions.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import BlendSQLError
from blendsql.ingredients import LLMMap
from blendsql.models import OpenAI
from blendsql.models.base import FunctionModel, Request
from blendsql.models.constraints import Bool, ListOf

FRUITS = {"apple", "pear", "plum", "fig"}


def make_db(tmp_path: Path, values: list[str]) -> str:
    path = tmp_path / "v.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (v TEXT)")
        con.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
    con.close()
    return str(path)


def listed_values(prompt: str) -> list[str]:
    """The numbered values of a batched prompt, in order."""
    return re.findall(r"^\d+\. (.*)$", prompt, flags=re.M)


def fruit_lists(seen: list[Request]) -> FunctionModel:
    """Answers each batched prompt with the true fruit flags of its listed values."""

    def answer(req: Request) -> Any:
        seen.append(req)
        return json.dumps([v in FRUITS for v in listed_values(req.prompt)])

    return FunctionModel(answer, name="fruit-lists")


def fruit_query(k: Any) -> str:
    return ("SELECT v, {{LLMMap('Is this a fruit?', 't::v', return_type='bool', "
            f"values_per_prompt={k!r})" "}} AS a FROM t")


def test_values_per_prompt_packs_k_distinct_values_per_request(tmp_path: Path) -> None:
    values = ["apple", "car", "pear", "shoe", "apple", "plum", "lamp", "fig"]
    seen: list[Request] = []
    bsql = BlendSQL(make_db(tmp_path, values), model=fruit_lists(seen), cache=False)
    df = bsql.execute(fruit_query(3)).df
    assert dict(zip(df["v"], df["a"], strict=True)) == {v: int(v in FRUITS) for v in values}
    # 7 distinct values, 3 per prompt: 3 requests of 3, 3 and 1 values, each asked once
    assert [len(listed_values(r.prompt)) for r in seen] == [3, 3, 1]
    assert sorted(v for r in seen for v in listed_values(r.prompt)) == sorted(set(values))
    assert [r.constraint for r in seen] == [ListOf(Bool(), 3, 3), ListOf(Bool(), 3, 3),
                                            ListOf(Bool(), 1, 1)]
    assert all("JSON list of" in r.prompt for r in seen)


def test_one_value_per_prompt_stays_the_default(tmp_path: Path) -> None:
    seen: list[Request] = []

    def answer(req: Request) -> Any:
        seen.append(req)
        return "true"

    bsql = BlendSQL(make_db(tmp_path, ["apple", "car"]), model=FunctionModel(answer), cache=False)
    bsql.execute("SELECT {{LLMMap('Is this a fruit?', 't::v', return_type='bool')}} FROM t")
    assert len(seen) == 2 and all(r.constraint == Bool() for r in seen)


def test_wrong_length_list_leaves_its_values_null_with_a_warning(tmp_path: Path) -> None:
    def answer(req: Request) -> Any:
        n = len(listed_values(req.prompt))
        return json.dumps([True] * (n + 1 if "car" in req.prompt else n))

    bsql = BlendSQL(make_db(tmp_path, ["apple", "car", "pear", "fig"]),
                    model=FunctionModel(answer), cache=False)
    result = bsql.execute(fruit_query(2))
    got = dict(zip(result.df["v"], result.df["a"], strict=True))
    assert got["pear"] == 1 and got["fig"] == 1
    assert pd.isna(got["apple"]) and pd.isna(got["car"])
    assert any(s.kind == "warning" for s in result.trace)


def test_choice_answers_map_back_per_item(tmp_path: Path) -> None:
    def answer(req: Request) -> Any:
        return json.dumps(["1" if v in FRUITS else "2" for v in listed_values(req.prompt)])

    fruit_code = LLMMap(name="FruitCode", options=[1, 2], values_per_prompt=2)
    bsql = BlendSQL(make_db(tmp_path, ["apple", "car", "fig"]), model=FunctionModel(answer),
                    ingredients=[fruit_code], cache=False)
    df = bsql.execute("SELECT v, {{FruitCode('Fruit (1) or not (2)?', 't::v')}} AS a FROM t").df
    assert dict(zip(df["v"], df["a"], strict=True)) == {"apple": 1, "car": 2, "fig": 1}


@pytest.mark.parametrize("k", [0, -2, 1.5, "x", True])
def test_bad_values_per_prompt_is_a_clear_error(tmp_path: Path, k: Any) -> None:
    bsql = BlendSQL(make_db(tmp_path, ["apple"]), model=fruit_lists([]), cache=False)
    with pytest.raises(BlendSQLError, match="values_per_prompt"):
        bsql.execute(fruit_query(k))


@pytest.mark.server
def test_batched_llmmap_on_llamacpp_server(tmp_path: Path, llamacpp_server: str) -> None:
    values = ["red apple", "blue car", "ripe pear", "old shoe", "green fig"]
    model = OpenAI("smollm2", llamacpp_server, max_concurrency=2, timeout=60)
    result = BlendSQL(make_db(tmp_path, values), model=model, cache=False).execute(fruit_query(3))
    assert result.meta.model_calls == 2
    # the server enforces a list of exactly k booleans: every value gets an answer
    assert sorted(result.df["v"]) == sorted(values)
    assert set(result.df["a"]) <= {0, 1} and result.df["a"].notna().all()
