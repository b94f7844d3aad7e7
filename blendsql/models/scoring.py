"""Scoring the allowed answers of a short constraint as a whole.

For a ``Bool`` or a short ``Choice`` a request may ask for ``score=True``:
the backend then returns, in ``Response.scores``, the log-probability the
model gives to each allowed answer text (the sum over its tokens, right after
the prompt), instead of only the answer its greedy decoding would pick.
Decisions, confidences and calibration (``blendsql.ingredients.decide``) are
built on those numbers. This module holds what every backend shares: which
answers a constraint allows, how log-probabilities become probabilities, and
:class:`Distribution`, the way a :class:`~blendsql.models.FunctionModel`
states the probabilities a test wants.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.constraints import Bool, Choice, Constraint

#: a Choice with more options than this is decided greedily (scoring every option of a
#: column of thousands of values would cost one evaluation per option and value)
MAX_SCORED_OPTIONS = 64
#: the answer texts a Bool is scored on (the spelling its grammar and prompt ask for)
BOOL_ANSWERS = ("true", "false")
#: log-probability standing for "no probability at all" (keeps arithmetic and JSON finite)
LOG_FLOOR = -1000.0


def scored_answers(constraint: Constraint) -> tuple[str, ...] | None:
    """The answer texts ``constraint`` allows, when they can be scored one by one; else None."""
    if isinstance(constraint, Bool):
        return BOOL_ANSWERS
    if isinstance(constraint, Choice) and 1 < len(constraint.options) <= MAX_SCORED_OPTIONS:
        return constraint.options
    return None


def why_unscored(constraint: Constraint) -> str:
    """Why a request under ``constraint`` cannot be scored (for the trace)."""
    if isinstance(constraint, Choice) and len(constraint.options) > MAX_SCORED_OPTIONS:
        return f"{len(constraint.options)} options (more than {MAX_SCORED_OPTIONS} are not scored)"
    if isinstance(constraint, Choice):
        return "a single option"
    return f"{constraint.describe()} is not a choice between answers"


def floor(logprob: float) -> float:
    """``logprob`` clamped to :data:`LOG_FLOOR` (``-inf`` and NaN included)."""
    if math.isnan(logprob) or logprob < LOG_FLOOR:
        return LOG_FLOOR
    return float(logprob)


def logsumexp(xs: Iterable[float]) -> float:
    """log(sum(exp(x))), stable; :data:`LOG_FLOOR` for an empty input."""
    items = list(xs)
    if not items:
        return LOG_FLOOR
    top = max(items)
    return top + math.log(sum(math.exp(x - top) for x in items))


def normalise(logprobs: Mapping[str, float]) -> dict[str, float]:
    """Probabilities over the given answers (a softmax of their log-probabilities)."""
    if not logprobs:
        return {}
    total = logsumexp(logprobs.values())
    return {a: math.exp(lp - total) for a, lp in logprobs.items()}


def best(logprobs: Mapping[str, float]) -> str:
    """The answer with the highest score (the first one on a tie)."""
    return max(logprobs, key=lambda a: logprobs[a])


@dataclass(frozen=True)
class Distribution:
    """Probabilities of a request's allowed answers, returned by a ``FunctionModel``'s function.

    ``Distribution({True: 0.3, False: 0.7})`` for a Bool, ``Distribution({'POSITIVE': 0.9,
    'NEGATIVE': 0.1})`` for a Choice. Keys are answers as the constraint accepts them (a
    bool, 'yes', an option in any case); values are probabilities or weights (they are
    normalised over the allowed answers; an answer left out has none). The model answers
    with the most probable one and, when asked to score, reports them all.
    """

    probs: Mapping[Any, float]

    def logprobs(self, constraint: Constraint) -> dict[str, float]:
        """Log-probabilities keyed by the constraint's answer texts (every allowed one)."""
        answers = scored_answers(constraint)
        if answers is None:
            raise ModelError(f"a Distribution was returned for {constraint.describe()}",
                             hint="only Bool and Choice (up to "
                             f"{MAX_SCORED_OPTIONS} options) answers can carry probabilities")
        out = dict.fromkeys(answers, 0.0)
        for key, p in self.probs.items():
            text = answer_text(key, constraint, answers)
            if not isinstance(p, (int, float)) or isinstance(p, bool) or p < 0 or math.isnan(p):
                raise ModelError(f"probability {p!r} of {key!r} is not a non-negative number",
                                 hint="give each answer a probability or weight >= 0")
            out[text] += float(p)
        if not any(out.values()):
            raise ModelError("every answer of the Distribution has probability 0",
                             hint="give at least one allowed answer a positive probability")
        return {a: floor(math.log(p)) if p > 0 else LOG_FLOOR for a, p in out.items()}


def answer_text(key: Any, constraint: Constraint, answers: tuple[str, ...]) -> str:
    """The allowed answer text that ``key`` stands for (a clear error when none)."""
    try:
        value = constraint.check(key)
    except (ValueError, TypeError) as e:
        raise ModelError(f"{key!r} is not an allowed answer ({constraint.describe()}): {e}",
                         hint="key a Distribution by the constraint's answers") from None
    if isinstance(constraint, Bool):
        return BOOL_ANSWERS[0] if value else BOOL_ANSWERS[1]
    text = str(value)
    if text not in answers:
        raise ModelError(f"{key!r} is not an allowed answer ({constraint.describe()})",
                         hint="key a Distribution by the constraint's answers")
    return text


def spellings(constraint: Constraint) -> dict[str, tuple[str, ...]]:
    """Texts that count as each allowed answer when reading a server's tokens: a Bool's
    'true' also as 'yes', 'false' also as 'no' (both parse so); an option as itself."""
    if isinstance(constraint, Bool):
        return {"true": ("true", "yes"), "false": ("false", "no")}
    return {a: (a,) for a in scored_answers(constraint) or ()}


def from_top_logprobs(top: Iterable[tuple[str, float]], answers: Mapping[str, tuple[str, ...]]
                      ) -> tuple[dict[str, float] | None, str | None]:
    """Answer scores from the alternatives a server listed for the first answer token.

    ``answers`` maps each allowed answer to its spellings (:func:`spellings`).
    Each listed token that (stripped, case-folded) begins a spelling of exactly
    one answer adds its probability to that answer; an answer no listed token
    begins gets the smallest listed log-probability (an upper bound: it was not
    among the top ones). Returns ``(None, why)`` when a listed token begins two
    answers (the first token cannot tell them apart) or when no listed token
    begins any answer.
    """
    pairs = [(t.strip().casefold(), floor(lp)) for t, lp in top]
    folded = {a: tuple(x.casefold() for x in xs) for a, xs in answers.items()}
    mass: dict[str, list[float]] = {a: [] for a in answers}
    for token, lp in pairs:
        if not token:
            continue
        hits = [a for a, xs in folded.items() if any(x.startswith(token) for x in xs)]
        if len(hits) > 1:
            return None, (f"the first token {token!r} begins {len(hits)} answers; "
                          "one token's probabilities cannot tell them apart")
        if hits:
            mass[hits[0]].append(lp)
    if not any(mass.values()):
        return None, "no allowed answer among the server's top log-probabilities"
    bound = min(lp for _, lp in pairs)
    return {a: logsumexp(lps) if lps else bound for a, lps in mass.items()}, None
