"""IsPitcher: an alias ingredient, i.e. a named shorthand for a longer call.

``SELECT name FROM w WHERE {{IsPitcher(w.position)}}`` expands to
``{{LLMMap('Is this baseball position a pitcher?', w.position, return_type='bool')}} = TRUE``
before planning; the expansion is parsed, so the argument stays one expression.
"""

from __future__ import annotations

from blendsql.errors import IngredientError
from blendsql.ingredients import AliasIngredient

QUESTION = "Is this baseball position a pitcher?"


class IsPitcher(AliasIngredient):
    """A boolean test on a position column, written once and reused."""

    def run(self, *args: str, **kwargs: str) -> str:
        if len(args) != 1 or kwargs:
            raise IngredientError(f"{self.name} takes exactly one column",
                                  hint=f"write {{{{{self.name}(w.position)}}}}")
        return f"{{{{LLMMap('{QUESTION}', {args[0]}, return_type='bool')}}}} = TRUE"
