"""LLMMap: a question answered for each distinct value of a column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from blendsql.errors import IngredientError
from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import MapIngredient
from blendsql.models.base import Request
from blendsql.models.constraints import Constraint, Text


def normalize_few_shot(examples: Any) -> list[tuple[str | None, Any, Any]]:
    """Few-shot examples as (question or None, value, answer) triples.

    Accepted shapes, so users can write what is natural: ``(value, answer)``,
    ``(question, value, answer)``, or dicts with ``value``/``input`` and
    ``answer``/``output`` (and optionally ``question``).
    """
    if not examples:
        return []
    out: list[tuple[str | None, Any, Any]] = []
    for ex in examples:
        if isinstance(ex, dict):
            value = ex.get("value", ex.get("input"))
            answer = ex.get("answer", ex.get("output"))
            if value is None or answer is None:
                raise IngredientError(
                    f"few-shot example {ex!r} lacks a value or an answer",
                    hint="write {'value': ..., 'answer': ...} (optionally 'question')",
                )
            out.append((ex.get("question"), value, answer))
        elif isinstance(ex, (list, tuple)) and len(ex) in (2, 3):
            out.append((None, ex[0], ex[1]) if len(ex) == 2 else (ex[0], ex[1], ex[2]))
        else:
            raise IngredientError(
                f"few-shot example {ex!r} is not understood",
                hint="use (value, answer), (question, value, answer) or a dict",
            )
    return out


def render_value(value: Any, names: Sequence[str] | None = None) -> str:
    """A value as prompt text; a tuple (several value columns) as one line per column.

    Why labelled lines: ``LLMMap('Do these two reviews agree?', r1.text, r2.text)``
    must show the model both values and which is which.
    """
    if not isinstance(value, tuple):
        return _llm.render_scalar(value)
    labels = list(names or []) + [f"value {i + 1}" for i in range(len(names or []),
                                                                  len(value))]
    return "\n" + "\n".join(f"{label}: {_llm.render_scalar(v)}"
                     for label, v in zip(labels, value, strict=False))


class LLMMap(_llm.LLMIngredientMixin, MapIngredient):
    """Answers ``question`` about each value: ``{{LLMMap('Is this a pitcher?', 'w::position')}}``.

    One request per distinct value, all in one ``generate`` batch; every
    prompt shares the same prefix (instructions, question, answer format,
    context, few-shot examples) and ends with the value, so llama.cpp reuses
    the cached prefix. The output constraint is ``options=`` (a Choice), else
    ``return_type=``, else the constraint the planner inferred, else short text.

    Configure reusable instances with options::

        LLMMap(name="IsPitcher", question="Is this position a pitcher?",
               few_shot=[("sp", True), ("1b", False)], return_type="bool")

    Several value columns (``LLMMap('Do these two reviews agree?', r1.text,
    r2.text)``): one request per distinct tuple, the prompt showing each
    column's value on its own line, labelled by the column.

    Call keywords: ``options``, ``return_type``, ``example_outputs``,
    ``context`` (a table or text shown before the value), ``few_shot``,
    ``instructions``, ``max_tokens``, ``value_chars``, ``context_chars``.
    """

    needs_model = True
    template: ClassVar[str] = prompts.MAP_TEMPLATE
    example_template: ClassVar[str] = prompts.MAP_EXAMPLE
    default_instructions: ClassVar[str] = prompts.MAP_INSTRUCTIONS
    text_max_tokens: ClassVar[int] = 48
    value_chars: ClassVar[int] = 2000

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        if question is None and self.setting(kwargs, "instructions") is None:
            raise IngredientError(
                f"{self.name} needs a question",
                hint=f"write {{{{{self.name}('Is this a pitcher?', 't::col')}}}} or make an "
                "instance with question= / instructions=",
            )
        if not values:
            return []
        constraint, back = self.pick_constraint(kwargs)
        max_tokens = int(self.setting(
            kwargs, "max_tokens", _llm.max_tokens_for(constraint, model, self.text_max_tokens)))
        stop = ("\n",) if type(constraint) is Text else ()
        value_chars = int(self.setting(kwargs, "value_chars", self.value_chars))
        fields = self.prompt_fields(question, constraint, kwargs)
        template = self.setting(kwargs, "template", self.template)

        names = kwargs.get("value_names")

        def prompt_for(value: Any) -> str:
            text = render_value(value, names)

            def build(scale: float) -> str:  # scale < 1 only when the prompt overflows n_ctx
                f = fields if scale == 1.0 else self.prompt_fields(
                    question, constraint, kwargs, scale)
                return template.format(**f, value=_llm.truncate(
                    text, _llm.scaled(value_chars, scale)))

            return _llm.fit_prompt(build, model, max_tokens)

        # one request per distinct rendered value; answers fan back out to the inputs
        prompt_of = [prompt_for(v) for v in values]
        distinct = list(dict.fromkeys(prompt_of))
        requests = [
            Request(prompt=p, constraint=constraint, max_tokens=max_tokens, stop=stop)
            for p in distinct
        ]
        answers = dict(zip(distinct, self.ask(model, requests, kwargs, back), strict=True))
        return [answers[p] for p in prompt_of]

    def pick_constraint(self, kwargs: dict[str, Any]) -> tuple[Constraint, dict[str, Any]]:
        """Explicit options / return_type beat the planner's inferred ``constraint``."""
        return _llm.resolve_constraint(
            options=self.setting(kwargs, "options"),
            return_type=self.setting(kwargs, "return_type"),
            inferred=kwargs.get("constraint"),
            default=Text(),
            examples=self.setting(kwargs, "example_outputs"),
        )

    def prompt_fields(
        self, question: str | None, constraint: Constraint, kwargs: dict[str, Any],
        scale: float = 1.0,
    ) -> dict[str, str]:
        """Everything in the prompt except the value (the shared, cacheable prefix)."""
        context_chars = _llm.scaled(int(self.setting(kwargs, "context_chars", 3000)), scale)
        return {
            "instructions": str(self.setting(kwargs, "instructions", self.default_instructions)),
            "question": question or "",
            "format": _llm.format_hint(constraint)
            + _llm.example_outputs_line(self.setting(kwargs, "example_outputs")),
            "context": _llm.render_context(kwargs.get("context", self.options.get("context")),
                                           context_chars),
            "examples": self.render_examples(
                question, normalize_few_shot(self.setting(kwargs, "few_shot"))),
        }

    def render_examples(
        self, question: str | None, examples: Sequence[tuple[str | None, Any, Any]],
    ) -> str:
        """Few-shot blocks in the same shape as the real query (question shown only if it differs)."""
        blocks = []
        for q, value, answer in examples:
            question_line = f"Question: {q}\n" if q and q != question else ""
            blocks.append(self.example_template.format(
                question_line=question_line, value=_llm.render_scalar(value),
                answer=_llm.render_scalar(answer)))
        return "".join(blocks)
