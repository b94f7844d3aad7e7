"""LLMRank: values ordered by a question, through pairwise comparisons (a semantic top-k).

``ORDER BY {{LLMRank('How enthusiastic is the review?', reviews.text)}} DESC LIMIT 5``

The model never scores a value on its own; it is asked which of two values
ranks higher on the question. A knockout tournament over the distinct values
finds the best one in ``n - 1`` comparisons; each next one replays only the
path of the value just taken out, ``ceil(log2 n)`` comparisons at most, so the
top ``k`` cost at most ``n - 1 + (k - 1) * ceil(log2 n)`` model calls
(:func:`tournament_calls`), never ``n^2``. Under ``ORDER BY ... LIMIT k`` (the
engine passes ``k`` and the direction; ``k=`` in the call overrides) only the
top ``k`` are fully ordered; the others share one score below them. Without a
limit every value is ranked (``n log n`` comparisons).

The output is a number per value, higher = ranks higher on the question: the
best value gets ``n``, the next ``n - 1``, ...; values outside the top ``k``
get 0. With ``ASC`` the tournament looks for the lowest-ranked values instead
(the lowest gets 1, the next 2, ...; the rest ``k + 1``), so ``ORDER BY ... ASC
LIMIT k`` returns them in order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from blendsql.errors import IngredientError
from blendsql.ingredients import _llm
from blendsql.ingredients.base import IngredientOption, MapIngredient
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Choice
from blendsql.text_values import render_scalar

RANK_INSTRUCTIONS = (
    "You compare two values on a question. Answer with the letter of the value that "
    "ranks higher on the question: A or B.")
RANK_TEMPLATE = "{instructions}\n\nQuestion: {question}\n\nA: {a}\n\nB: {b}\n\nAnswer:"
PAIR = Choice(("A", "B"))

#: one comparison: (values to compare) -> True when the first ranks higher
Comparator = Callable[[Sequence[tuple[Any, Any]]], list[bool]]


def tournament_calls(n: int, k: int | None = None) -> int:
    """The most comparisons :func:`top_k` makes for ``n`` values and the top ``k``
    (None: all of them): ``n - 1`` for the first, ``ceil(log2 n)`` for each next; never
    more than the ``n (n - 1) / 2`` pairs (no pair is asked twice)."""
    if n <= 1:
        return 0
    k = n if k is None else max(1, min(k, n))
    return min(n - 1 + (k - 1) * math.ceil(math.log2(n)), n * (n - 1) // 2)


def top_k(items: Sequence[Any], k: int | None, better: Comparator) -> list[int]:
    """Positions of the best ``k`` of ``items`` (all with None), best first.

    A knockout tournament: the first round compares neighbours, the winners meet
    in the next, up to the champion (each round one batch of comparisons, so a
    backend may run them together). Taking the champion out replays only its
    path to the root. ``better(pairs)`` answers, for each pair of items, whether
    the first ranks higher; a comparison is never asked twice.
    """
    n = len(items)
    if n == 0:
        return []
    k = n if k is None else max(0, min(k, n))
    size = 1
    while size < n:
        size *= 2
    tree: list[int | None] = [None] * (2 * size)
    for i in range(n):
        tree[size + i] = i
    memo: dict[tuple[int, int], bool] = {}

    def decide(pairs: list[tuple[int, int]]) -> None:
        ask = [p for p in dict.fromkeys(pairs) if p not in memo and (p[1], p[0]) not in memo]
        if ask:
            for p, first in zip(ask, better([(items[a], items[b]) for a, b in ask]),
                                strict=True):
                memo[p] = bool(first)

    def winner(a: int | None, b: int | None) -> int | None:
        if a is None or b is None:
            return a if b is None else b
        if (a, b) in memo:
            return a if memo[(a, b)] else b
        return b if memo[(b, a)] else a

    level = list(range(size, 2 * size))
    while len(level) > 1:  # build round by round, each round one batch
        parents = sorted({i // 2 for i in level})
        decide([(tree[2 * p], tree[2 * p + 1]) for p in parents  # type: ignore[misc]
                if tree[2 * p] is not None and tree[2 * p + 1] is not None])
        for p in parents:
            tree[p] = winner(tree[2 * p], tree[2 * p + 1])
        level = parents
    out: list[int] = []
    while len(out) < k and tree[1] is not None:
        best = tree[1]
        out.append(best)
        if len(out) == k:
            break  # the next champion is not needed: no replay
        node = size + best
        tree[node] = None
        node //= 2
        while node >= 1:  # replay the champion's path only
            a, b = tree[2 * node], tree[2 * node + 1]
            if a is not None and b is not None:
                decide([(a, b)])
            tree[node] = winner(a, b)
            node //= 2
    return out


def rank_scores(n: int, order: Sequence[int], descending: bool) -> list[int]:
    """Scores that ``ORDER BY`` sorts into ``order`` (best-first positions).

    Descending: the first gets ``n``, the next ``n - 1``, ...; the rest 0.
    Ascending (``order`` then lists the lowest first): 1, 2, ...; the rest ``len(order) + 1``.
    """
    if descending:
        out = [0] * n
        for rank, i in enumerate(order):
            out[i] = n - rank
    else:
        out = [len(order) + 1] * n
        for rank, i in enumerate(order):
            out[i] = rank + 1
    return out


def pair_order(a: str, b: str) -> bool:
    """Whether ``a`` is shown first: a fixed order from a hash of both texts, so the
    model's habit of preferring the first (or second) slot does not follow the table's order."""
    ha = hashlib.sha256(a.encode("utf-8", "surrogatepass")).hexdigest()
    hb = hashlib.sha256(b.encode("utf-8", "surrogatepass")).hexdigest()
    return ha <= hb


def _positive_int(name: str, raw: Any) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise IngredientError(f"{name}={raw!r} is not a positive whole number",
                              hint=f"write e.g. {name}=5, or leave it out under ORDER BY ... LIMIT")
    return raw


class LLMRank(_llm.LLMIngredientMixin, MapIngredient):
    """Orders values by a question: ``ORDER BY {{LLMRank('How enthusiastic?', t.text)}} DESC LIMIT 5``.

    The model compares two values at a time ("which ranks higher: A or B?"); a
    knockout tournament picks the top ``k`` in at most ``n - 1 + (k - 1) *
    ceil(log2 n)`` comparisons (``bsql.plan`` shows the estimate). ``k`` and the
    direction come from the query's ``ORDER BY ... LIMIT`` (``k=`` /
    ``descending=`` in the call override them); without a limit every value is
    ranked. Output: a number per value, higher = ranks higher (best = number of
    values; outside the top ``k``: 0; with ``ASC`` the lowest get 1, 2, ...).

    Call keywords: ``k``, ``descending``, ``instructions``, ``template`` (fields
    ``instructions``, ``question``, ``a``, ``b``), ``value_chars``.
    """

    options_spec = (
        _llm.QUESTION, _llm.INSTRUCTIONS,
        IngredientOption("template", (str,), "the comparison prompt (fields instructions, "
                         "question, a, b)", attribute=True),
        IngredientOption("k", (int,), "how many values to order fully (default: the query's "
                         "LIMIT + OFFSET, else all)"),
        IngredientOption("descending", (bool, int), "the best first (default: the ORDER BY "
                         "direction, else TRUE)"),
        IngredientOption("value_chars", (int,), "character budget of one value", attribute=True),
    )

    needs_model = True
    #: the engine passes ``k`` / ``descending`` from the ORDER BY ... LIMIT around the call
    ordered_by_limit: ClassVar[bool] = True
    value_chars: ClassVar[int] = 1500
    template: ClassVar[str] = RANK_TEMPLATE

    def estimate_model_calls(self, n_values: int, k: int | None = None) -> int:
        """At most ``n - 1 + (k - 1) * ceil(log2 n)`` comparisons (:func:`tournament_calls`)."""
        return tournament_calls(n_values, k)

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        if not question:
            raise IngredientError(f"{self.name} needs a question to rank by",
                                  hint=f"write {{{{{self.name}('How enthusiastic is the review?', "
                                  "t.text)}} in ORDER BY ... LIMIT k")
        k = _positive_int("k", self.setting(kwargs, "k"))
        raw_desc = self.setting(kwargs, "descending", True)
        if not isinstance(raw_desc, (bool, int)) or raw_desc not in (0, 1):
            raise IngredientError(f"descending={raw_desc!r} is not TRUE or FALSE",
                                  hint="write descending=TRUE (best first) or FALSE")
        descending = bool(raw_desc)
        if not values:
            return []
        keys = [render_scalar(v) for v in values]
        distinct = list(dict.fromkeys(keys))
        better = self.comparator(model, str(question), kwargs, descending)
        order = top_k(distinct, k, better)
        scores = dict(zip(distinct, rank_scores(len(distinct), order, descending), strict=True))
        self.__dict__["_last_order"] = [distinct[i] for i in order]
        return [scores[t] for t in keys]

    @property
    def last_order(self) -> list[str]:
        """The values the latest run ordered fully, best first (lowest first with ASC)."""
        order: list[str] = self.__dict__.get("_last_order", [])
        return order

    def comparator(self, model: Model, question: str, kwargs: dict[str, Any],
                   descending: bool) -> Comparator:
        """``better(pairs)``: one batch of A-or-B requests, each pair shown in a fixed order.

        With ``descending=False`` a pair's winner is the one the model does *not*
        prefer (the tournament then finds the lowest-ranked values). An answer that
        does not parse counts for the value shown first, with a warning.
        """
        template = str(self.setting(kwargs, "template", self.template))
        instructions = str(self.setting(kwargs, "instructions", RANK_INSTRUCTIONS))
        chars = int(self.setting(kwargs, "value_chars", self.value_chars))

        def prompt(a: str, b: str) -> str:
            def build(scale: float) -> str:
                budget = _llm.scaled(chars, scale)
                return template.format(instructions=instructions, question=question,
                                       a=_llm.truncate(a, budget), b=_llm.truncate(b, budget))

            return _llm.fit_prompt(build, model, 2)

        def better(pairs: Sequence[tuple[Any, Any]]) -> list[bool]:
            shown = [(a, b) if pair_order(a, b) else (b, a) for a, b in pairs]
            requests = [Request(prompt=prompt(a, b), constraint=PAIR, max_tokens=2)
                        for a, b in shown]
            answers = self.ask(model, requests, kwargs)
            out = []
            for (a, _b), (x, _y), ans in zip(pairs, shown, answers, strict=True):
                first_shown_wins = ans != "B"
                a_wins = first_shown_wins if x == a else not first_shown_wins
                out.append(a_wins if descending else not a_wins)
            return out

        return better
