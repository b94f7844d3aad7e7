"""Memoising planning work on a parsed tree (kept in the tree's ``meta``).

Why: ``BlendSQL.parse`` caches trees by query text, so the same tree comes
back on every run of a query; the planning steps that depend only on the
tree and the registry (checking names, expanding, naming columns, choosing
rules) then need doing once. A memo is never copied with its tree: a copy
may be changed, and must plan afresh.
"""

from __future__ import annotations

from typing import Any

from blendsql.ingredients.base import IngredientRegistry

RegistryKey = tuple[tuple[str, int], ...]


class TreeMemo:
    """Base of values stored in ``Expression.meta``; ``key`` is the registry they hold for."""

    key: RegistryKey

    def __deepcopy__(self, memo: dict[int, Any]) -> None:
        return None


def registry_key(registry: IngredientRegistry) -> RegistryKey:
    """Which ingredients (by name and identity) a memo was planned with."""
    return registry.identity
