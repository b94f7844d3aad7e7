"""LLMMap: a question answered for each distinct value of a column."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar

from blendsql.errors import IngredientError, ModelError
from blendsql.ingredients import _llm, prompts
from blendsql.ingredients.base import IngredientOption, MapIngredient
from blendsql.ingredients.decide import (
    CALIBRATIONS,
    CASCADE_SAMPLE,
    CONTENT_FREE,
    DECISIONS,
    DEFAULT_TARGET,
    FRAMINGS,
    PROXIES,
    Decision,
    DecisionPolicy,
    EmbeddingProxy,
    batch_threshold,
    cascade_sample,
    cascade_split,
    check_choice,
    check_flag,
    check_labels,
    check_numeric_options,
    check_sample,
    check_target,
    choose,
    contextual_bias,
    example_bias,
    expected_value,
    fit_cascade_threshold,
    log_odds,
    sample_size,
)
from blendsql.models.base import Model, Request, Response
from blendsql.models.constraints import Bool, Constraint, ListOf, Text
from blendsql.models.scoring import LOG_FLOOR, answer_text, normalise, scored_answers
from blendsql.retrieval.embeddings import Embedder, default_embedder
from blendsql.text_values import render_scalar

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
        return render_scalar(value)
    labels = list(names or []) + [f"value {i + 1}" for i in range(len(names or []),
                                                                  len(value))]
    return "\n" + "\n".join(f"{label}: {render_scalar(v)}"
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

    A yes/no map (``= TRUE``, ``return_type='bool'``) decides from both answers'
    probabilities by default (``decision='auto'``): when the batch's log-odds of
    TRUE fall into two clear groups (at least 8 distinct values; a two-Gaussian
    fit beats one by the BIC) the threshold is the gap between them, else the
    more probable answer wins (:func:`~blendsql.ingredients.decide.batch_threshold`).
    A bias the same for every value (a model that leans to "yes") moves the
    threshold with it, so rare positives are not swamped. The trace keeps each
    value's probability, the threshold (as P(TRUE)) and the rule.
    ``decision='argmax'``: the more probable answer; ``decision='greedy'``: no
    scores (the greedy answer). For numeric options (a 1-5 score)
    ``decision='expected'`` returns the options' mean weighted by their
    probabilities (4.4 where the argmax says 4), which ranks values finer. A backend that cannot score keeps its greedy
    answer, noted in the trace::

        SELECT * FROM reviews WHERE {{LLMMap('Is this review positive?', reviews.text)}} = TRUE

    Other decisions from probabilities (a Bool or a Choice of up to 64 options;
    off by default for other than yes/no maps):

    - ``scored=TRUE``: each allowed answer is scored as a whole and the most
      probable one wins; probabilities and margins go to the trace
      (``Smoothie.confidence()``);
    - ``calibrate='contextual'``: probabilities are divided by those the model
      gives the content-free values 'N/A', '' and '[MASK]' (its prior);
      ``calibrate='examples'``: a log-odds threshold fitted on the labelled
      ``few_shot`` examples (each scored with the others as examples);
    - ``framing='labels'`` with ``labels=('POSITIVE', 'NEGATIVE')``: a yes/no
      question asked as a choice between two labels (the first is TRUE);
      ``framing='claim'``: the question is read as a claim to check;
    - a cascade, configured on an instance: ``LLMMap(cascade=big_model,
      target=0.9)``: ``big_model`` also decides a sample of the values
      (``cascade_sample=``: a tenth, at least 16), and the session model keeps
      only the values above the probability at which it agreed with
      ``big_model`` on the sample at least ``target`` of the time (90%
      confidence); ``big_model`` decides the rest. ``cascade_sample=0``:
      no sample, the session model's probability is compared with ``target``
      as it is. The trace counts the values each model decided and gives the
      fitted threshold;
    - ``proxy='embedding'``: a stage before the model. The model decides the
      cascade's seeded sample, a nearest-centroid classifier over the values'
      embeddings (the instance's ``embedder=``, else MiniLM when the
      ``embeddings`` extra is installed, else hashed n-grams) is fitted on its
      answers, and the proxy decides, with no model call, the values it is
      surer of than the probability at which its leave-one-out answers agreed
      with the model's on the sample at least ``target`` of the time (90%
      confidence); the model (and a ``cascade`` after it) decides the rest.
    """

    options_spec = (
        _llm.QUESTION, _llm.INSTRUCTIONS, _llm.TEMPLATE, _llm.FEW_SHOT, _llm.MAX_TOKENS,
        _llm.CONTEXT, _llm.CONTEXT_CHARS, *_llm.CONSTRAINT_OPTIONS,
        _llm.DEFAULT_INSTRUCTIONS, _llm.EXAMPLE_TEMPLATE, _llm.TEXT_MAX_TOKENS,
        IngredientOption("value_chars", (int,), "character budget of one value",
                         attribute=True),
        IngredientOption("values_per_prompt", (int,), "values per request, answered as a "
                         "JSON list (1: one value per request)", default=1),
        IngredientOption("scored", (bool, int), "decide from each answer's probability",
                         default=False),
        IngredientOption("calibrate", (str,), "none, contextual or examples", default="none"),
        IngredientOption("decision", (str,), "a yes/no map's rule: auto (a threshold found in "
                         "the batch's probabilities), argmax or greedy (unscored); other maps: "
                         "greedy unless scored=, or expected (numeric options: their "
                         "probability-weighted mean)", default="auto"),
        IngredientOption("framing", (str,), "question, labels or claim", default="question"),
        IngredientOption("labels", (list, tuple, str), "two labels: the TRUE one first"),
        IngredientOption("target", (float,), "a cascade's target accuracy, between 0 and 1",
                         default=DEFAULT_TARGET),
        IngredientOption("cascade_sample", (float, int), "the values the cascade's second "
                         "model also decides to fit its threshold: a fraction or a count",
                         default=CASCADE_SAMPLE),
        IngredientOption("cascade", (Model,), "a second model for the values the first is "
                         "unsure of", query=False),
        IngredientOption("proxy", (str,), "none, or embedding: a classifier over value "
                         "embeddings decides the values it is sure of before the model",
                         default="none"),
        IngredientOption("embedder", (Embedder,), "the embedding proxy's embedder",
                         query=False),
    )

    needs_model = True
    template: ClassVar[str] = prompts.MAP_TEMPLATE
    example_template: ClassVar[str] = prompts.MAP_EXAMPLE
    default_instructions: ClassVar[str] = prompts.MAP_INSTRUCTIONS
    text_max_tokens: ClassVar[int] = 48
    value_chars: ClassVar[int] = 2000
    context_chars: ClassVar[int] = 3000

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        model = self.require_model(kwargs)
        self.__dict__["_last_decisions"] = []
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
        per_prompt = _values_per_prompt(self.setting(kwargs, "values_per_prompt", 1))
        policy = self.decision_policy(kwargs, yes_no=isinstance(constraint, Bool),
                                      listed=per_prompt > 1)
        constraint, back = policy.ask_constraint(constraint, back)
        few_shot = normalize_few_shot(self.setting(kwargs, "few_shot"))
        if policy.active:
            policy.check_scoreable(constraint, len(few_shot))
        max_tokens = int(self.setting(
            kwargs, "max_tokens", _llm.max_tokens_for(constraint, model, self.text_max_tokens)))
        stop = ("\n",) if type(constraint) is Text else ()
        value_chars = int(self.setting(kwargs, "value_chars", self.value_chars))
        if per_prompt > 1:
            if policy.explicit or policy.framing != "question":
                raise IngredientError(
                    "values_per_prompt= cannot be combined with scored= / calibrate= / "
                    "cascade= / framing=",
                    hint="a list of answers is neither scored nor framed one by one: drop "
                    "values_per_prompt")
            return self.run_batched(values, per_prompt, question, constraint, back,
                                    max_tokens, value_chars, kwargs)
        prompt_for = self.prompt_builder(question, constraint, kwargs, model, max_tokens, policy)
        # one request per distinct rendered value; answers fan back out to the inputs
        prompt_of = [prompt_for(v) for v in values]
        first_value = dict(zip(reversed(prompt_of), reversed(values), strict=True))
        distinct = list(dict.fromkeys(prompt_of))

        def request(prompt: str) -> Request:
            return Request(prompt=prompt, constraint=constraint, max_tokens=max_tokens,
                           stop=stop, score=policy.active)

        requests = [request(p) for p in distinct]
        if policy.active:
            calibration = Calibration(self, question, constraint, kwargs, max_tokens, policy,
                                      request, few_shot)
            outputs = self.decide(model, requests, [first_value[p] for p in distinct],
                                  constraint, back, policy, calibration, kwargs)
        else:
            outputs = self.ask(model, requests, kwargs, back)
        answers = dict(zip(distinct, outputs, strict=True))
        return [answers[p] for p in prompt_of]

    def prompt_builder(
        self, question: str | None, constraint: Constraint, kwargs: dict[str, Any], model: Model,
        max_tokens: int, policy: DecisionPolicy,
        few_shot: list[tuple[str | None, Any, Any]] | None = None,
    ) -> Callable[[Any], str]:
        """``prompt_for(value)``: the prompt of one value, fitted to the context window.

        ``few_shot`` replaces the call's examples (calibration leaves one out).
        """
        value_chars = int(self.setting(kwargs, "value_chars", self.value_chars))
        fields = self.prompt_fields(question, constraint, kwargs, policy=policy, few_shot=few_shot)
        default_template = prompts.MAP_CLAIM_TEMPLATE if policy.framing == "claim" else self.template
        template = self.setting(kwargs, "template", default_template)
        names = kwargs.get("value_names")

        def prompt_for(value: Any) -> str:
            text = render_value(value, names)

            def build(scale: float) -> str:  # scale < 1 only when the prompt overflows n_ctx
                f = fields if scale == 1.0 else self.prompt_fields(
                    question, constraint, kwargs, scale, policy=policy, few_shot=few_shot)
                return str(template).format(**f, value=_llm.truncate(
                    text, _llm.scaled(value_chars, scale)))

            return _llm.fit_prompt(build, model, max_tokens)

        return prompt_for

    def decision_policy(self, kwargs: dict[str, Any], yes_no: bool = False,
                        listed: bool = False) -> DecisionPolicy:
        """The call's validated ``scored`` / ``calibrate`` / ``framing`` / ``labels`` /
        ``target`` / ``decision`` settings and the instance's ``cascade`` model.

        ``yes_no``: the call answers TRUE / FALSE; its default ``decision`` is then
        'auto' (scored, :func:`~blendsql.ingredients.decide.batch_threshold`), else
        'greedy'. ``listed``: ``values_per_prompt`` > 1, whose lists are never
        scored, so the default is 'greedy' there too.
        """
        raw_decision = self.setting(kwargs, "decision")
        if raw_decision is None:
            decision = "auto" if yes_no and not listed else "greedy"
        else:
            decision = check_choice("decision", raw_decision, DECISIONS)
            if decision == "auto" and not yes_no:
                decision = "argmax"  # no batch threshold between more than two answers
            if decision == "expected" and yes_no:
                raise IngredientError(
                    "decision='expected' averages numeric options; this call answers TRUE / FALSE",
                    hint="give options=('1', '2', '3', '4', '5') for a score, or drop decision=")
        framing = check_choice("framing", self.setting(kwargs, "framing", "question"), FRAMINGS)
        raw_labels = self.setting(kwargs, "labels")
        labels = check_labels(raw_labels) if raw_labels is not None else None
        if framing == "labels" and labels is None:
            raise IngredientError(
                "framing='labels' needs the two labels to choose between",
                hint="write labels=('POSITIVE', 'NEGATIVE'): the first is the TRUE answer")
        if labels is not None and framing == "question":
            framing = "labels"  # labels= alone asks for label framing
        cascade = self.options.get("cascade")  # a Model: checked by the constructor
        return DecisionPolicy(
            sample=check_sample(self.setting(kwargs, "cascade_sample", CASCADE_SAMPLE)),
            scored=check_flag("scored", self.setting(kwargs, "scored", False)),
            calibrate=check_choice("calibrate", self.setting(kwargs, "calibrate", "none"),
                                   CALIBRATIONS),
            framing=framing, labels=labels, cascade=cascade,
            target=check_target(self.setting(kwargs, "target", DEFAULT_TARGET)),
            proxy=check_choice("proxy", self.setting(kwargs, "proxy", "none"), PROXIES),
            decision=decision)

    @property
    def last_decisions(self) -> list[Decision]:
        """The decisions of the latest scored run, one per distinct prompt (else empty)."""
        decisions: list[Decision] = self.__dict__.setdefault("_last_decisions", [])
        return decisions

    def decide(
        self, model: Model, requests: list[Request], inputs: list[Any], ask: Constraint,
        back: dict[str, Any], policy: DecisionPolicy, calibration: Calibration,
        kwargs: dict[str, Any],
    ) -> list[Any]:
        """Scored decisions for ``requests`` (one per input), cascading the doubtful ones.

        With ``proxy='embedding'`` the proxy decides the values it is sure of
        first (:meth:`proxy_stage`); the model decides every other value; with a
        ``cascade`` model, values whose calibrated probability is below
        ``target`` (or that could not be scored) are decided again by it. Each
        decision is recorded on the model for the trace
        (``TraceStep.details['decisions']``).
        """
        stage = model.name
        bias = calibration.bias(model)
        out: list[Decision | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        if policy.proxy == "embedding":
            todo, known = self.proxy_stage(model, policy, requests, inputs, ask, back, bias,
                                           kwargs, out)
        else:
            known = {}
        ask_now = [i for i in todo if i not in known]
        fresh = scored_decisions(self, model, [requests[i] for i in ask_now], ask, back,
                                 bias, stage, kwargs)
        known.update(zip(ask_now, fresh, strict=True))
        decisions = [known[i] for i in todo]
        if policy.batch_split:
            decisions = split_decisions(decisions, ask, back)
        if policy.decision == "expected":
            check_numeric_options(scored_answers(ask) or ())
            decisions = [replace(d, value=expected_value(d.probabilities),
                                 rule="expected", note=d.note or "the options' mean weighted by "
                                 "their probabilities") if d.scored and d.probabilities else d
                         for d in decisions]
        if policy.cascade is not None:
            decisions = self.cascade(model, policy, decisions, [requests[i] for i in todo], ask,
                                     back, calibration, kwargs)
        for i, d in zip(todo, decisions, strict=True):
            out[i] = d
        final = [d for d in out if d is not None]
        assert len(final) == len(requests)
        model.record_decisions([d.record(v) for d, v in zip(final, inputs, strict=True)])
        self.__dict__["_last_decisions"] = final
        unscored = [d for d in final if not d.scored]
        if unscored and policy.explicit:
            self.warn(kwargs, f"{len(unscored)} of {len(final)} value(s) were not scored "
                      f"({unscored[0].note}); their greedy answers were kept")
        return [d.value for d in final]

    def proxy_stage(
        self, model: Model, policy: DecisionPolicy, requests: list[Request], inputs: list[Any],
        ask: Constraint, back: dict[str, Any], bias: dict[str, float], kwargs: dict[str, Any],
        out: list[Decision | None],
    ) -> tuple[list[int], dict[int, Decision]]:
        """The embedding proxy's decisions, written into ``out``.

        The model decides the seeded sample; the proxy is fitted on its answers
        (:meth:`~blendsql.ingredients.decide.EmbeddingProxy.fit`) and decides the
        other values at or above its threshold. Returns the positions left to the
        model (the sample first decided, then the doubtful) and the sample's
        decisions by position.
        """
        embedder = self.proxy_embedder()
        names = kwargs.get("value_names")
        picked = cascade_sample([r.prompt for r in requests], sample_size(len(requests),
                                                                          policy.sample))
        sample = scored_decisions(self, model, [requests[i] for i in picked], ask, back, bias,
                                  model.name, kwargs)
        proxy = EmbeddingProxy.fit(embedder.name,
                                   embedder.embed([render_value(inputs[i], names) for i in picked]),
                                   [d.answer if d.scored else None for d in sample], policy.target)
        known = dict(zip(picked, sample, strict=True))
        stage = f"embedding proxy ({embedder.name})"
        rest = [i for i in range(len(requests)) if i not in known]
        todo = sorted(known)
        note = (f"proxy fitted on {proxy.sample} sampled answers of {model.name} "
                f"({proxy.loo_agreed} agreed when left out)")
        for i in known:
            known[i] = replace(known[i], note=known[i].note or f"proxy sample ({note})")
        if not math.isfinite(proxy.threshold):  # it decides nothing: embed no more
            return sorted(todo + rest), known
        vectors = embedder.embed([render_value(inputs[i], names) for i in rest])
        for i, guess in zip(rest, proxy.predict(vectors), strict=True):
            if guess.probability >= proxy.threshold:
                out[i] = Decision(answer_value(guess.answer, ask, back), guess.answer,
                                  guess.probability, margin(guess.probabilities),
                                  guess.probabilities, None, stage, note, proxy.threshold)
            else:
                todo.append(i)
        return sorted(todo), known

    def proxy_embedder(self) -> Embedder:
        """The instance's ``embedder=``, else the default one (loaded once per instance)."""
        given = self.options.get("embedder")
        if given is not None:
            return given  # type: ignore[no-any-return]
        cached = self.__dict__.get("_proxy_embedder")
        if cached is None:
            cached = self.__dict__["_proxy_embedder"] = default_embedder()
        return cached  # type: ignore[no-any-return]

    def cascade(
        self, model: Model, policy: DecisionPolicy, decisions: list[Decision],
        requests: list[Request], ask: Constraint, back: dict[str, Any],
        calibration: Calibration, kwargs: dict[str, Any],
    ) -> list[Decision]:
        """The second model's decisions where the first is not sure enough.

        With a sample (``policy.sample``), the second model decides the sampled
        values first, the threshold is fitted on them
        (:func:`~blendsql.ingredients.decide.fit_cascade_threshold`) and the
        second model also decides the other values below it; without one, the
        first model's probability is compared with ``target`` as it is.
        """
        assert policy.cascade is not None
        second = model.companion(policy.cascade)
        name = second.name if second.name != model.name else f"{second.name} (cascade)"
        bias = calibration.bias(second)
        size = sample_size(len(requests), policy.sample)
        out = list(decisions)
        if size == 0:
            doubtful = cascade_split(decisions, policy.target)
            threshold = None
        else:
            picked = cascade_sample([r.prompt for r in requests], size)
            oracle = scored_decisions(self, second, [requests[i] for i in picked], ask, back,
                                      bias, name, kwargs)
            threshold = fit_cascade_threshold(
                [(decisions[i].probability, decisions[i].value == d.value)
                 for i, d in zip(picked, oracle, strict=True)], policy.target)
            for i, d in zip(picked, oracle, strict=True):
                agreed = "agreed" if decisions[i].value == d.value else "disagreed"
                out[i] = replace(d, note=d.note or f"cascade sample ({model.name} {agreed})",
                                 threshold=threshold)
            chosen = set(picked)
            doubtful = []
            for i, d in enumerate(decisions):
                if i in chosen:
                    continue
                if d.probability is None or d.probability < threshold:
                    doubtful.append(i)
                else:
                    out[i] = replace(d, threshold=threshold)
        if doubtful:
            again = scored_decisions(self, second, [requests[i] for i in doubtful], ask, back,
                                     bias, name, kwargs)
            for i, d in zip(doubtful, again, strict=True):
                out[i] = replace(d, threshold=threshold)
        return out

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
        scale: float = 1.0, policy: DecisionPolicy | None = None,
        few_shot: list[tuple[str | None, Any, Any]] | None = None,
    ) -> dict[str, str]:
        """Everything in the prompt except the value (the shared, cacheable prefix).

        ``policy``: its framing picks the default instructions and shows
        few-shot answers as labels; ``few_shot`` replaces the call's examples.
        """
        context_chars = _llm.scaled(int(self.setting(kwargs, "context_chars", self.context_chars)),
                                    scale)
        policy = policy or DecisionPolicy()
        examples = normalize_few_shot(self.setting(kwargs, "few_shot")) if few_shot is None \
            else few_shot
        if policy.framing == "labels" and policy.labels is not None:
            examples = [(q, v, as_label(a, policy.labels)) for q, v, a in examples]
        instructions = prompts.MAP_CLAIM_INSTRUCTIONS if policy.framing == "claim" \
            else self.default_instructions
        return {
            "instructions": str(self.setting(kwargs, "instructions", instructions)),
            "question": question or "",
            "format": _llm.format_hint(constraint)
            + _llm.example_outputs_line(self.setting(kwargs, "example_outputs")),
            "context": _llm.render_context(kwargs.get("context", self.options.get("context")),
                                           context_chars),
            "examples": self.render_examples(question, examples),
        }

    def render_examples(
        self, question: str | None, examples: Sequence[tuple[str | None, Any, Any]],
    ) -> str:
        """Few-shot blocks in the same shape as the real query (question shown only if it differs)."""
        blocks = []
        for q, value, answer in examples:
            question_line = f"Question: {q}\n" if q and q != question else ""
            blocks.append(self.example_template.format(
                question_line=question_line, value=render_scalar(value),
                answer=render_scalar(answer)))
        return "".join(blocks)


def as_label(answer: Any, labels: tuple[str, str]) -> Any:
    """A few-shot yes/no answer shown as its label (TRUE: the first); others unchanged."""
    try:
        return labels[0] if Bool().check(answer) else labels[1]
    except (ValueError, TypeError):
        return answer


def scored_decisions(
    ing: _llm.LLMIngredientMixin, model: Model, requests: list[Request], ask: Constraint,
    back: dict[str, Any], bias: dict[str, float], stage: str, kwargs: dict[str, Any],
) -> list[Decision]:
    """One batch of scored requests; each answer decided by :func:`choose` under ``bias``.

    A response without scores keeps its greedy answer, noted as unscored.
    """
    responses = score_batch(ing.name, model, requests)
    answers = scored_answers(ask) or ()
    out = []
    for resp in responses:
        if resp.scores is None or resp.error is not None or not answers:
            value, err = _llm.interpret(resp, ask, back, True)
            if err is not None:
                ing.warn(kwargs, err)
            note = resp.unscored or ("the backend does not score answers"
                                     if resp.error is None else resp.error)
            out.append(Decision(value, stage=stage, note=note))
            continue
        scores = {a: resp.scores.get(a, LOG_FLOOR) for a in answers}
        answer, prob, margin, probs = choose(scores, bias)
        out.append(Decision(answer_value(answer, ask, back), answer, prob, margin, probs,
                            normalise(scores), stage))
    return out


def split_decisions(decisions: list[Decision], ask: Constraint, back: dict[str, Any]
                    ) -> list[Decision]:
    """A yes/no batch decided by :func:`~blendsql.ingredients.decide.batch_threshold`.

    The TRUE answer is the first scored answer ('true', or the first label); each
    scored value answers TRUE when its log-odds of TRUE over FALSE is above the
    batch's threshold. Each decision keeps its own probabilities and records the
    threshold as P(TRUE) and the rule ('split' or 'argmax'); unscored values keep
    their greedy answer.
    """
    answers = scored_answers(ask) or ()
    scored = [d for d in decisions if d.scored and d.raw is not None]
    if len(answers) != 2 or not scored:
        return decisions
    first, second = answers
    def odds(d: Decision) -> float:
        raw = d.raw or {}
        return log_odds({a: math.log(max(raw.get(a, 0.0), 1e-300)) for a in answers},
                        first, second)

    found = batch_threshold([odds(d) for d in scored])
    out = []
    for d in decisions:
        if not d.scored or d.raw is None:
            out.append(d)
            continue
        answer = first if odds(d) > found.log_odds else second
        probs = d.raw
        out.append(replace(d, value=answer_value(answer, ask, back), answer=answer,
                           probability=probs[answer], margin=probs[answer] - probs[
                               second if answer == first else first],
                           probabilities=probs, threshold=found.probability, rule=found.rule,
                           note=d.note or found.why))
    return out


def margin(probabilities: dict[str, float]) -> float:
    """The best answer's probability minus the runner-up's (1.0 with one answer)."""
    top = sorted(probabilities.values(), reverse=True)
    return top[0] - (top[1] if len(top) > 1 else 0.0)


def answer_value(answer: str, ask: Constraint, back: dict[str, Any]) -> Any:
    """The typed output for a chosen answer text ('true' -> True, a label -> its bool)."""
    value = ask.parse(answer)
    return back.get(value, value) if isinstance(value, str) and back else value


def score_batch(name: str, model: Model, requests: list[Request]) -> list[Response]:
    """``model.generate`` with every request scored (one response per request, checked)."""
    if not requests:
        return []
    responses = model.generate([replace(r, score=True) for r in requests])
    if len(responses) != len(requests):
        raise IngredientError(
            f"{name}: the model returned {len(responses)} answers for {len(requests)} requests",
            hint="a Model.generate implementation must return one Response per Request")
    return responses


class Calibration:
    """The calibration bias of one call, per model, computed once and memoised.

    ``contextual``: the prompt is asked with the content-free values
    (:data:`~blendsql.ingredients.decide.CONTENT_FREE`) and the model's mean
    probabilities become the bias (:func:`~blendsql.ingredients.decide.contextual_bias`).
    ``examples``: each labelled ``few_shot`` example is asked with the others as
    examples, and the log-odds threshold that classifies them best becomes the
    bias (:func:`~blendsql.ingredients.decide.example_bias`). The bias is kept on
    the ingredient instance, keyed by the model's identity and the prompt, so
    the many batches of one query (and later queries) pay for it once.
    """

    def __init__(self, ingredient: LLMMap, question: str | None, ask: Constraint,
                 kwargs: dict[str, Any], max_tokens: int, policy: DecisionPolicy,
                 request: Callable[[str], Request],
                 few_shot: list[tuple[str | None, Any, Any]]) -> None:
        self.ingredient = ingredient
        self.question = question
        self.ask = ask
        self.kwargs = kwargs
        self.max_tokens = max_tokens
        self.policy = policy
        self.request = request
        self.few_shot = few_shot

    def bias(self, model: Model) -> dict[str, float]:
        """The bias to add to ``model``'s answer log-probabilities ({} for calibrate='none')."""
        if self.policy.calibrate == "none":
            return {}
        prompt_for = self.builder(model, None)
        memo: dict[tuple[str, ...], dict[str, float]] = \
            self.ingredient.__dict__.setdefault("_calibration", {})
        key = (model.identity(), self.policy.calibrate, prompt_for(CONTENT_FREE[0]))
        if key not in memo:
            memo[key] = (self.contextual(model, prompt_for) if self.policy.calibrate == "contextual"
                         else self.examples(model))
        return memo[key]

    def builder(self, model: Model, few_shot: list[tuple[str | None, Any, Any]] | None
                ) -> Callable[[Any], str]:
        return self.ingredient.prompt_builder(self.question, self.ask, self.kwargs, model,
                                              self.max_tokens, self.policy, few_shot)

    def contextual(self, model: Model, prompt_for: Callable[[Any], str]) -> dict[str, float]:
        responses = score_batch(self.ingredient.name, model,
                                [self.request(prompt_for(v)) for v in CONTENT_FREE])
        if any(r.scores is None for r in responses):
            why = next(r.unscored for r in responses if r.scores is None)
            self.ingredient.warn(self.kwargs, "calibrate='contextual' skipped: the model could "
                                 f"not score the content-free inputs ({why or 'no scores'})")
            return {}
        answers = scored_answers(self.ask) or ()
        return contextual_bias([{a: (r.scores or {}).get(a, LOG_FLOOR) for a in answers}
                                for r in responses])

    def examples(self, model: Model) -> dict[str, float]:
        answers = scored_answers(self.ask) or ()
        requests = []
        for i, (_q, value, _a) in enumerate(self.few_shot):
            others = self.few_shot[:i] + self.few_shot[i + 1:]
            requests.append(self.request(self.builder(model, others)(value)))
        responses = score_batch(self.ingredient.name, model, requests)
        scored = []
        for (_q, _v, answer), resp in zip(self.few_shot, responses, strict=True):
            if resp.scores is None:
                self.ingredient.warn(self.kwargs, "calibrate='examples' skipped: the model "
                                     f"could not score an example ({resp.unscored or 'no scores'})")
                return {}
            scored.append((resp.scores, self.right_answer(answer, answers)))
        return example_bias(scored, answers)

    def right_answer(self, answer: Any, answers: tuple[str, ...]) -> str:
        """A few-shot answer as the answer text it stands for (a clear error otherwise)."""
        if self.policy.framing == "labels" and self.policy.labels is not None:
            answer = as_label(answer, self.policy.labels)
        try:
            return answer_text(answer, self.ask, answers)
        except ModelError as e:
            raise IngredientError(f"few-shot answer {answer!r} is not one of {list(answers)}",
                                  hint="label each few_shot example with one of the answers") \
                from e
