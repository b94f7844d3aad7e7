"""RegexExtract: pull a pattern out of text, per value (no model).

``SELECT {{RegexExtract('([0-9]{4})', t.notes)}} AS year FROM t``

Returns the first capturing group when the pattern has one, else the whole
first match, else NULL. Useful next to LLM ingredients: cheap deterministic
extraction first, the model only where the pattern finds nothing.
"""

from __future__ import annotations

import re
from typing import Any

from blendsql.errors import IngredientError
from blendsql.ingredients import MapIngredient


class RegexExtract(MapIngredient):
    """First match of the pattern (group 1 if the pattern has groups), or NULL."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        if not question:
            raise IngredientError(f"{self.name} needs a pattern",
                                  hint=f"write {{{{{self.name}('[0-9]+', t.col)}}}}")
        try:
            pattern = re.compile(str(question))
        except re.error as e:
            raise IngredientError(f"{self.name}: bad regular expression {question!r}: {e}",
                                  hint="use Python `re` syntax, e.g. '([0-9]{4})'") from e
        out: list[Any] = []
        for v in values:
            m = pattern.search(str(v))
            if m is None:
                out.append(None)
            else:
                out.append(m.group(1) if pattern.groups else m.group(0))
        return out
