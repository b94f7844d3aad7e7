"""LLMJoin: align two value sets, cheapest evidence first."""

from __future__ import annotations

from typing import Any, ClassVar

from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import IN_QUERY, IngredientOption, JoinIngredient
from blendsql.models.base import Request
from blendsql.text_values import is_missing, render_scalar


def normalize_key(v: Any) -> str:
    """Case- and whitespace-insensitive form used for exact matching and fuzzy scoring."""
    return " ".join(render_scalar(v).split()).casefold()


def shortlist(value: Any, candidates: list[Any], k: int | None) -> list[Any]:
    """The ``k`` candidates closest to ``value`` by rapidfuzz WRatio, best first.

    Why: the model then chooses among a handful of plausible options instead
    of reading the whole right column once per left value.
    """
    if k is None or k >= len(candidates):
        return list(candidates)
    from rapidfuzz import fuzz, process

    keys = [normalize_key(c) for c in candidates]
    hits = process.extract(normalize_key(value), keys, scorer=fuzz.WRatio, processor=None,
                           limit=k)
    return [candidates[index] for _, _, index in hits]


class LLMJoin(_llm.LLMIngredientMixin, JoinIngredient):
    """Semantic join condition: ``JOIN t2 ON {{LLMJoin(t1.a, t2.b)}}``.

    1. Values equal after case/whitespace normalisation are matched without
       the model.
    2. Each remaining left value gets a rapidfuzz shortlist of ``k`` right
       values (default 5; ``k=None`` shows all).
    3. The model picks one of the shortlist or ``none`` (a Choice constraint),
       one request per remaining left value.

    Returns ``{left: right}``; unmatched left values are left out (they join
    nothing). Right values stay candidates after an exact match, since a join
    may be many-to-one.
    """

    options_spec = (
        _llm.QUESTION, _llm.INSTRUCTIONS, _llm.TEMPLATE, _llm.DEFAULT_INSTRUCTIONS,
        IngredientOption("k", (int,), "right values shortlisted per left value (0: all)"),
        IngredientOption("default_k", (int,), "k when neither the call nor the instance sets "
                         "it", query=False, init=False, attribute=True),
    )

    needs_model = True
    template: ClassVar[str] = prompts.JOIN_TEMPLATE
    default_instructions: ClassVar[str] = prompts.JOIN_INSTRUCTIONS
    default_k: ClassVar[int] = 5

    def run(
        self, left_values: list[Any], right_values: list[Any], question: str | None = None,
        **kwargs: Any,
    ) -> dict[Any, Any]:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        rights: dict[str, Any] = {}
        for r in right_values:
            if not is_missing(r):
                rights.setdefault(normalize_key(r), r)
        mapping: dict[Any, Any] = {}
        pending: list[Any] = []
        for left in dict.fromkeys(v for v in left_values if not is_missing(v)):
            hit = rights.get(normalize_key(left))
            if hit is not None:
                mapping[left] = hit
            else:
                pending.append(left)
        if not pending or not rights:
            return mapping
        # k=None (or k<=0) means "show every candidate", so None is not "absent" here
        k = (self.checked("k", kwargs["k"], IN_QUERY) if "k" in kwargs
             else self.options.get("k", self.default_k))
        k = None if k is None or int(k) <= 0 else int(k)
        candidates = list(rights.values())
        requests, backs = [], []
        for left in pending:
            request, back = self.request_for(left, shortlist(left, candidates, k), question,
                                             kwargs, model.count_tokens)
            requests.append(request)
            backs.append(back)
        answers = self.ask(model, requests, kwargs)
        for left, answer, back in zip(pending, answers, backs, strict=True):
            if isinstance(answer, str) and answer in back:
                mapping[left] = back[answer]
        return mapping

    def request_for(
        self, left: Any, options: list[Any], question: str | None, kwargs: dict[str, Any],
        count_tokens: Any,
    ) -> tuple[Request, dict[str, Any]]:
        """The prompt and Choice for one left value; ``back`` maps option text to the right value."""
        _, back = _llm.choice_for(options)
        none = "none"
        if none.casefold() in {b.casefold() for b in back}:
            none = "none of these"
        choice, _ = _llm.choice_for([*back, none])
        prompt = self.setting(kwargs, "template", self.template).format(
            instructions=str(self.setting(kwargs, "instructions", self.default_instructions))
            .replace("{none}", none),
            question=f"Task: {question}\n" if question else "",
            candidates="\n".join(f"- {b}" for b in back),
            value=render_scalar(left),
        )
        longest = max(count_tokens(o) for o in choice.options)
        return Request(prompt=prompt, constraint=choice, max_tokens=min(512, 2 * longest + 4)), back
