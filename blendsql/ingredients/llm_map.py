"""LLMMap: a question answered for each distinct value of a column."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from blendsql.errors import IngredientError
from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import MapIngredient
from blendsql.models.base import Request
from blendsql.models.constraints import Constraint, ListOf, Text

BATCH_HINT = ("There are {n} values, numbered. Answer with a JSON list of {n} answers, "
              "one per value, in the same order.\n")


def prompts_batch_hint(n: int) -> str:
    """The format line added when several values share one prompt."""
    return BATCH_HINT.format(n=n)


def _values_per_prompt(raw: Any) -> int:
    """``values_per_prompt=`` as a positive int (a clear error otherwise)."""
    try:
        n = int(raw)
    except (TypeError, ValueError):
        n = 0
    if isinstance(raw, bool) or n < 1 or n != raw:
        raise IngredientError(f"values_per_prompt={raw!r} is not a positive whole number",
                              hint="use values_per_prompt=1 (default) or e.g. 8")
    return n


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
    ``instructions``, ``max_tokens``, ``value_chars``, ``context_chars``,
    ``values_per_prompt`` (opt-in: k values per request, answered as a JSON list).
    """

    #: what a query may pass besides the engine's options= / return_type= / ... (checked at parse)
    query_kwargs = frozenset({"question", "instructions", "template", "few_shot", "max_tokens", "value_chars", "context", "context_chars", "values_per_prompt"})

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

        per_prompt = _values_per_prompt(self.setting(kwargs, "values_per_prompt", 1))
        if per_prompt > 1:
            return self.run_batched(values, per_prompt, question, constraint, back,
                                    max_tokens, value_chars, kwargs)
        # one request per distinct rendered value; answers fan back out to the inputs
        prompt_of = [prompt_for(v) for v in values]
        distinct = list(dict.fromkeys(prompt_of))
        requests = [
            Request(prompt=p, constraint=constraint, max_tokens=max_tokens, stop=stop)
            for p in distinct
        ]
        answers = dict(zip(distinct, self.ask(model, requests, kwargs, back), strict=True))
        return [answers[p] for p in prompt_of]

    def run_batched(
        self, values: list[Any], per_prompt: int, question: str | None, constraint: Constraint,
        back: dict[str, Any], max_tokens: int, value_chars: int, kwargs: dict[str, Any],
    ) -> list[Any]:
        """``values_per_prompt=k``: k distinct values per request, answered as a JSON list.

        Why: the instructions, question and examples are paid once per k values
        instead of once per value (a remote API bills them every time). Opt-in,
        because small models answer a list less accurately than one value (see
        ``benchmarks/model_throughput.py``). A list that does not parse leaves
        its k values NULL with a warning, like any unparseable answer.
        """
        model = self.require_model(kwargs)
        names = kwargs.get("value_names")
        texts = [render_value(v, names) for v in values]
        distinct = list(dict.fromkeys(texts))
        chunks = [distinct[i:i + per_prompt] for i in range(0, len(distinct), per_prompt)]
        template = self.setting(kwargs, "template", self.template)
        requests = []
        for chunk in chunks:
            shape = ListOf(item=constraint, min_len=len(chunk), max_len=len(chunk))

            def build(scale: float, chunk: list[str] = chunk, shape: ListOf = shape) -> str:
                fields = self.prompt_fields(question, constraint, kwargs, scale)
                fields["format"] += prompts_batch_hint(len(chunk))
                listed = "".join(f"\n{i}. {_llm.truncate(t, _llm.scaled(value_chars, scale))}"
                                 for i, t in enumerate(chunk, 1))
                return template.format(**fields, value=listed)

            budget = len(chunk) * (max_tokens + 3) + 4  # each answer plus '", ' and brackets
            requests.append(Request(prompt=_llm.fit_prompt(build, model, budget),
                                    constraint=shape, max_tokens=budget))
        answers: dict[str, Any] = {}
        for chunk, listed in zip(chunks, self.ask(model, requests, kwargs), strict=True):
            items = listed if isinstance(listed, list) else [None] * len(chunk)
            for text, item in zip(chunk, items, strict=True):
                answers[text] = back.get(item, item) if isinstance(item, str) and back else item
        return [answers[t] for t in texts]

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
