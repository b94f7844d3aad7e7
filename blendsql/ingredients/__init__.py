"""Ingredients: the base classes users subclass and the built-in LLM ingredients.

``from blendsql.ingredients import MapIngredient, LLMMap`` is the public way
in. Importing this package loads pandas (already needed by the base classes)
but no model backend: ingredients receive the model from the engine.
"""

from __future__ import annotations

from blendsql.ingredients.base import (
    AliasIngredient,
    Ingredient,
    IngredientOption,
    IngredientRegistry,
    JoinIngredient,
    MapIngredient,
    QAIngredient,
    StringIngredient,
)
from blendsql.ingredients.builtin import (
    ANSWER,
    BUILTINS,
    LLMQA,
    SUMMARY,
    LLMJoin,
    LLMMap,
    LLMRank,
    LLMValidate,
)

__all__ = [
    "ANSWER",
    "BUILTINS",
    "SUMMARY",
    "AliasIngredient",
    "Ingredient",
    "IngredientOption",
    "IngredientRegistry",
    "JoinIngredient",
    "LLMJoin",
    "LLMMap",
    "LLMQA",
    "LLMRank",
    "LLMValidate",
    "MapIngredient",
    "QAIngredient",
    "StringIngredient",
]
