"""LLMQA and LLMValidate: one question over a context table, answered once."""

from __future__ import annotations

from typing import Any, ClassVar

import pandas as pd

from blendsql.errors import IngredientError
from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import IngredientOption, QAIngredient
from blendsql.ingredients.decide import check_flag
from blendsql.models.base import Model, Request
from blendsql.models.constraints import Bool, Constraint, Text
from blendsql.models.scoring import scored_answers
from blendsql.text_values import render_scalar


def normalize_qa_examples(examples: Any) -> list[tuple[str, Any, Any]]:
    """QA few-shot examples as (question, answer, context or None)."""
    if not examples:
        return []
    out: list[tuple[str, Any, Any]] = []
    for ex in examples:
        if isinstance(ex, dict) and "question" in ex and "answer" in ex:
            out.append((str(ex["question"]), ex["answer"], ex.get("context")))
        elif isinstance(ex, (list, tuple)) and len(ex) == 2:
            out.append((str(ex[0]), ex[1], None))
        else:
            raise IngredientError(
                f"few-shot example {ex!r} is not understood",
                hint="use (question, answer) or {'question':..., 'answer':..., 'context':...}",
            )
    return out


class LLMQA(_llm.LLMIngredientMixin, QAIngredient):
    """Answers one question, optionally over a context table, once per query.

    ``<<LLMQA('Which city is 120 miles west of Sydney?', (SELECT ...), options='w::city')>>``.
    The context is serialised as a compact pipe-separated table cut to a
    character budget (``context_chars``, long cells to ``cell_chars``);
    ``options`` become a Choice constraint and the chosen option is returned
    with its original type. ``scored=TRUE`` (a Choice or a yes/no answer):
    each allowed answer is scored as a whole and the most probable one wins;
    its probability and margin go to the trace (``Smoothie.confidence()``).
    """

    options_spec = (
        _llm.QUESTION, _llm.INSTRUCTIONS, _llm.TEMPLATE, _llm.FEW_SHOT, _llm.MAX_TOKENS,
        _llm.CONTEXT, _llm.CONTEXT_CHARS, _llm.CELL_CHARS, *_llm.CONSTRAINT_OPTIONS,
        _llm.DEFAULT_INSTRUCTIONS, _llm.EXAMPLE_TEMPLATE, _llm.TEXT_MAX_TOKENS,
        IngredientOption("scored", (bool, int), "decide from each answer's probability",
                         default=False),
    )

    needs_model = True
    template: ClassVar[str] = prompts.QA_TEMPLATE
    example_template: ClassVar[str] = prompts.QA_EXAMPLE
    default_instructions: ClassVar[str] = prompts.QA_INSTRUCTIONS
    text_max_tokens: ClassVar[int] = 64
    context_chars: ClassVar[int] = 6000
    cell_chars: ClassVar[int] = 800

    def run(
        self, question: str | None, context: pd.DataFrame | None, options: list[Any] | None,
        **kwargs: Any,
    ) -> Any:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        if not question:
            raise IngredientError(
                f"{self.name} needs a question",
                hint=f"write <<{self.name}('question', (SELECT ...))>>",
            )
        constraint, back = _llm.resolve_constraint(
            options=options if options is not None else self.setting(kwargs, "options"),
            return_type=self.setting(kwargs, "return_type"),
            inferred=kwargs.get("constraint"),
            default=Text(),
        )
        max_tokens = int(self.setting(
            kwargs, "max_tokens", _llm.max_tokens_for(constraint, model, self.text_max_tokens)))
        template = self.setting(kwargs, "template", self.template)
        fixed = {
            "instructions": self.setting(kwargs, "instructions", self.default_instructions),
            "examples": self.render_examples(kwargs),
            "question": question,
            "format": _llm.format_hint(constraint)
            + _llm.example_outputs_line(self.setting(kwargs, "example_outputs")),
        }
        cuts: list[str] = []

        def build(scale: float) -> str:
            cuts.clear()  # only the last (fitting) rendering counts
            return template.format(
                **fixed, context=self.render_context_arg(context, kwargs, scale, question, cuts))

        prompt = _llm.fit_prompt(build, model, max_tokens)
        stop = ("\n",) if type(constraint) is Text else ()
        request = Request(prompt=prompt, constraint=constraint, max_tokens=max_tokens, stop=stop)
        if check_flag("scored", self.setting(kwargs, "scored", False)):
            answer = self.scored_answer(model, request, constraint, back, question, kwargs)
        else:
            answer = self.ask(model, [request], kwargs, back)[0]
        self.note_cuts(kwargs, cuts)
        return answer

    def scored_answer(self, model: Model, request: Request, constraint: Constraint,
                      back: dict[str, Any], question: str, kwargs: dict[str, Any]) -> Any:
        """The most probable allowed answer, recorded for the trace (under the question)
        with its probability and margin."""
        from blendsql.ingredients.llm_map import scored_decisions

        if scored_answers(constraint) is None:
            raise IngredientError(
                f"scored=TRUE needs options= or a yes/no answer, not {constraint.describe()}",
                hint="give options=(...) or return_type='bool'; free text is decided greedily")
        (decision,) = scored_decisions(self, model, [request], constraint, back, {},
                                       model.name, kwargs)
        model.record_decisions([decision.record(question)])
        if not decision.scored:
            self.warn(kwargs, f"the answer was not scored ({decision.note}); the greedy "
                      "answer was kept")
        return decision.value

    def render_context_arg(self, context: Any, kwargs: dict[str, Any], scale: float = 1.0,
                           question: str | None = None, cuts: list[str] | None = None) -> str:
        """The positional context, else a ``context=`` keyword, within the (scaled) budget;
        long cells (passages) keep the sentences most relevant to ``question``."""
        if context is None:
            context = self.setting(kwargs, "context")
        return _llm.render_context(
            context,
            _llm.scaled(int(self.setting(kwargs, "context_chars", self.context_chars)), scale),
            int(self.setting(kwargs, "cell_chars", self.cell_chars)),
            question, cuts,
        )

    @staticmethod
    def note_cuts(kwargs: dict[str, Any], cuts: list[str]) -> None:
        """A trace note (through the engine's ``warnings`` list) when long cells were cut.

        Not logged: cutting passages to fit is normal operation, but what the model
        did not see must be findable in the trace.
        """
        sink = kwargs.get("warnings")
        if cuts and isinstance(sink, list):
            cols = ", ".join(dict.fromkeys(cuts))
            sink.append(f"context cut to fit the prompt: {len(cuts)} long cell(s) ({cols}) keep "
                        "the sentences most relevant to the question")

    def render_examples(self, kwargs: dict[str, Any]) -> str:
        """Few-shot question/answer pairs (with their small context when given)."""
        blocks = []
        for q, answer, ctx in normalize_qa_examples(self.setting(kwargs, "few_shot")):
            blocks.append(_llm.render_context(ctx, 1000) + self.example_template.format(
                question=q, answer=render_scalar(answer)))
        return "".join(blocks)


class LLMValidate(_llm.LLMIngredientMixin, QAIngredient):
    """True / false: does the context support the statement?

    ``WHERE <<LLMValidate('The team won the 1998 final', (SELECT * FROM games))>>``.
    Always a Bool constraint; an unparseable answer is NULL (with a warning).
    """

    options_spec = (
        _llm.QUESTION, _llm.INSTRUCTIONS, _llm.TEMPLATE, _llm.CONTEXT, _llm.CONTEXT_CHARS,
        _llm.CELL_CHARS, _llm.DEFAULT_INSTRUCTIONS,
    )

    needs_model = True
    template: ClassVar[str] = prompts.VALIDATE_TEMPLATE
    default_instructions: ClassVar[str] = prompts.VALIDATE_INSTRUCTIONS
    context_chars: ClassVar[int] = 6000
    cell_chars: ClassVar[int] = 400

    def run(
        self, question: str | None, context: pd.DataFrame | None, options: list[Any] | None,
        **kwargs: Any,
    ) -> bool | None:
        model = self.require_model(kwargs)
        question = question if question is not None else self.setting(kwargs, "question")
        if not question:
            raise IngredientError(
                f"{self.name} needs a statement to check",
                hint=f"write <<{self.name}('statement', (SELECT ...))>>",
            )
        if context is None:
            context = self.setting(kwargs, "context")
        template = self.setting(kwargs, "template", self.template)
        instructions = self.setting(kwargs, "instructions", self.default_instructions)
        context_chars = int(self.setting(kwargs, "context_chars", self.context_chars))
        cell_chars = int(self.setting(kwargs, "cell_chars", self.cell_chars))
        prompt = _llm.fit_prompt(
            lambda scale: template.format(
                instructions=instructions, question=question,
                context=_llm.render_context(context, _llm.scaled(context_chars, scale),
                                            cell_chars)),
            model, 4)
        request = Request(prompt=prompt, constraint=Bool(), max_tokens=4)
        value = self.ask(model, [request], kwargs)[0]
        return None if value is None else bool(value)
