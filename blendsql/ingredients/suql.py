"""SUQL's free-text primitives: ``ANSWER(text, 'question')`` and ``SUMMARY(text)``.

SUQL (Liu et al., NAACL 2024) writes them as plain SQL functions over text
columns, e.g. ``WHERE answer(reviews, 'is it good for kids?') = 'Yes'``; here
they are map ingredients, so they follow the same one-call-per-distinct-value
rule. A text value may be one string or a JSON array of strings (all reviews
of a restaurant); arrays are shown as a bulleted list within a budget.
A value with no text at all maps to NULL without a model call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from blendsql.errors import IngredientError
from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import IngredientOption, MapIngredient
from blendsql.ingredients.llm_map import normalize_few_shot
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Constraint, Text
from blendsql.text_values import render_scalar, text_items


class _TextMap(_llm.LLMIngredientMixin, MapIngredient):
    """Shared per-text loop: render each distinct text, ask once, fan answers back."""

    options_spec: ClassVar[tuple[IngredientOption, ...] | None] = (
        _llm.INSTRUCTIONS, _llm.TEMPLATE, _llm.MAX_TOKENS, _llm.DEFAULT_INSTRUCTIONS,
        _llm.TEXT_MAX_TOKENS,
        IngredientOption("text_chars", (int,), "character budget of one text", attribute=True),
    )

    needs_model = True
    bare_call: ClassVar[bool] = True  # SUQL writes ANSWER(...) / SUMMARY(...) without braces
    text_chars: ClassVar[int] = 4000
    text_max_tokens: ClassVar[int] = 128

    def answer_texts(
        self, model: Model, values: list[Any], build: Callable[[str], str],
        constraint: Constraint,
        back: dict[str, Any], kwargs: dict[str, Any],
    ) -> list[Any]:
        """``build(text) -> prompt`` for each distinct non-empty text; empty texts -> None."""
        budget = int(self.setting(kwargs, "text_chars", self.text_chars))
        max_tokens = int(self.setting(
            kwargs, "max_tokens", _llm.max_tokens_for(constraint, model, self.text_max_tokens)))
        prompt_of: list[str | None] = []
        for v in values:
            items = text_items(v)
            if not items:
                prompt_of.append(None)
                continue
            prompt_of.append(_llm.fit_prompt(
                partial(self._render, build, items, budget), model, max_tokens))
        distinct = list(dict.fromkeys(p for p in prompt_of if p is not None))
        requests = [Request(prompt=p, constraint=constraint, max_tokens=max_tokens)
                    for p in distinct]
        answers = dict(zip(distinct, self.ask(model, requests, kwargs, back, short_text=False),
                           strict=True))
        return [None if p is None else answers[p] for p in prompt_of]


    @staticmethod
    def _render(build: Callable[[str], str], items: list[str], budget: int, scale: float) -> str:
        """The prompt for one value's documents at a scaled character budget."""
        return build(_llm.render_texts(items, _llm.scaled(budget, scale, floor=80)))


class ANSWER(_TextMap):
    """``ANSWER(text, 'question')``: the question answered from each text (SUQL's ``answer``).

    The text comes first and the question second, as in SUQL. The output is
    free text unless ``options=`` / ``return_type=`` / an inferred constraint
    (``= 'Yes'``, ``= TRUE``) says otherwise.
    """

    options_spec = (_llm.QUESTION, _llm.FEW_SHOT, *_llm.CONSTRAINT_OPTIONS)

    template: ClassVar[str] = prompts.ANSWER_TEMPLATE
    default_instructions: ClassVar[str] = prompts.ANSWER_INSTRUCTIONS

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[int | None, int]:
        """SUQL order: (text, question)."""
        if len(args) != 2:
            raise IngredientError(
                f"{self.name} takes a text and a question, got {len(args)} arguments",
                hint=f"write {self.name}(reviews, 'Is it good for kids?')",
            )
        return 1, 0

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        if not question:
            raise IngredientError(f"{self.name} needs a question",
                                  hint=f"write {self.name}(reviews, 'Is it good for kids?')")
        constraint, back = _llm.resolve_constraint(
            options=self.setting(kwargs, "options"),
            return_type=self.setting(kwargs, "return_type"),
            inferred=kwargs.get("constraint"),
            default=Text(),
            examples=self.setting(kwargs, "example_outputs"),
        )
        examples = "".join(
            f"\nText: {render_scalar(v)}\nAnswer: {render_scalar(a)}\n"
            for _, v, a in normalize_few_shot(self.setting(kwargs, "few_shot")))
        template = self.setting(kwargs, "template", self.template)
        fixed = {
            "instructions": self.setting(kwargs, "instructions", self.default_instructions),
            "question": question,
            "format": _llm.format_hint(constraint, text_hint="")
            + _llm.example_outputs_line(self.setting(kwargs, "example_outputs")),
            "examples": examples,
        }
        return self.answer_texts(
            model, values, lambda text: template.format(**fixed, text=text), constraint, back,
            kwargs)


class SUMMARY(_TextMap):
    """``SUMMARY(text)``: a one-or-two sentence summary of each text (SUQL's ``summary``)."""

    template: ClassVar[str] = prompts.SUMMARY_TEMPLATE
    default_instructions: ClassVar[str] = prompts.SUMMARY_INSTRUCTIONS
    text_max_tokens: ClassVar[int] = 160

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> tuple[int | None, int]:
        """One argument: the text."""
        if len(args) != 1:
            raise IngredientError(
                f"{self.name} takes one text argument, got {len(args)}",
                hint=f"write {self.name}(reviews)",
            )
        return None, 0

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        """Always free text: a summary is text by definition, whatever surrounds the call."""
        model = self.require_model(kwargs)
        template = self.setting(kwargs, "template", self.template)
        instructions = self.setting(kwargs, "instructions", self.default_instructions)
        return self.answer_texts(
            model, values, lambda text: template.format(instructions=instructions, text=text),
            Text(), {}, kwargs)
