"""FuzzyJoin: a join ingredient on string similarity alone (no model).

``SELECT * FROM a JOIN b ON {{FuzzyJoin(a.name, b.name)}}``

Each left value joins its most similar right value (rapidfuzz WRatio on
case- and whitespace-normalised text) if the score reaches ``threshold``
(0-100, default 85; set per instance: ``FuzzyJoin(threshold=90)`` or per
call: ``{{FuzzyJoin(a.x, b.y, threshold=70)}}``). A cheap first pass before
(or instead of) ``LLMJoin``.
"""

from __future__ import annotations

from typing import Any

from rapidfuzz import fuzz, process

from blendsql.errors import IngredientError
from blendsql.ingredients import IngredientOption, JoinIngredient


def _norm(v: Any) -> str:
    return " ".join(str(v).split()).casefold()


class FuzzyJoin(JoinIngredient):
    """Best fuzzy match per left value above a score threshold."""

    # declared options are checked wherever they are given: FuzzyJoin(treshold=90),
    # {{FuzzyJoin(a.x, b.y, threshold='high')}} and a subclass's default_threshold = 'x'
    # are IngredientOptionErrors with a did-you-mean hint
    options_spec = (
        IngredientOption("threshold", (float,), "least score (0-100) of a match"),
        IngredientOption("default_threshold", (float,), "threshold when the call and the "
                         "instance set none", query=False, init=False, attribute=True),
    )
    default_threshold = 85.0

    def run(self, left_values: list[Any], right_values: list[Any], question: str | None = None,
            **kwargs: Any) -> dict[Any, Any]:
        cutoff = float(self.setting(kwargs, "threshold", self.default_threshold))
        if not 0 <= cutoff <= 100:
            raise IngredientError(f"{self.name}: threshold={cutoff!r} is not a score",
                                  hint="use a score between 0 and 100, e.g. threshold=85")
        rights = [r for r in right_values if r is not None]
        keys = [_norm(r) for r in rights]
        out: dict[Any, Any] = {}
        for left in left_values:
            if left is None or not keys:
                continue
            best = process.extractOne(_norm(left), keys, scorer=fuzz.WRatio, processor=None,
                                      score_cutoff=cutoff)
            if best is not None:
                out[left] = rights[best[2]]
        return out
