"""Shared test registry for the grammar tests: the built-in names as plain subclasses."""

from __future__ import annotations

import pytest

from blendsql.ingredients.base import (
    IngredientRegistry,
    JoinIngredient,
    MapIngredient,
    QAIngredient,
)


class LLMMap(MapIngredient):
    """Stand-in map ingredient (never run by grammar tests)."""


class LLMQA(QAIngredient):
    """Stand-in QA ingredient."""


class LLMJoin(JoinIngredient):
    """Stand-in join ingredient."""


class LLMValidate(QAIngredient):
    """Stand-in validate ingredient."""


class ANSWER(MapIngredient):
    """Stand-in SUQL ANSWER."""


class SUMMARY(MapIngredient):
    """Stand-in SUQL SUMMARY."""


class StartsWith(MapIngredient):
    """True where the value starts with the given prefix."""


def make_registry() -> IngredientRegistry:
    """The registry every grammar test parses against."""
    return IngredientRegistry([LLMMap, LLMQA, LLMJoin, LLMValidate, ANSWER, SUMMARY, StartsWith])


@pytest.fixture(scope="session")
def registry() -> IngredientRegistry:
    return make_registry()
