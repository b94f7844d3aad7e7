"""The built-in ingredients the engine registers in every session.

``BUILTINS`` is the list the engine imports; each entry is a class (the
registry instantiates it under its class name). Users add their own with
``BlendSQL(db, ingredients=[...])``.
"""

from __future__ import annotations

from blendsql.ingredients.base import Ingredient
from blendsql.ingredients.llm_join import LLMJoin
from blendsql.ingredients.llm_map import LLMMap
from blendsql.ingredients.llm_qa import LLMQA, LLMValidate
from blendsql.ingredients.llm_rank import LLMRank
from blendsql.ingredients.suql import ANSWER, SUMMARY

BUILTINS: list[type[Ingredient]] = [LLMMap, LLMQA, LLMJoin, LLMValidate, LLMRank, ANSWER, SUMMARY]

__all__ = ["ANSWER", "BUILTINS", "LLMJoin", "LLMMap", "LLMQA", "LLMRank", "LLMValidate", "SUMMARY"]
