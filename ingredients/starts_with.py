"""StartsWith: the smallest possible map ingredient (no model).

``SELECT * FROM w WHERE {{StartsWith('New', w.city)}} = TRUE``
"""

from __future__ import annotations

from typing import Any

from blendsql.ingredients import MapIngredient


class StartsWith(MapIngredient):
    """True where the value starts with the given prefix (case-sensitive)."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        prefix = "" if question is None else str(question)
        return [str(v).startswith(prefix) for v in values]
