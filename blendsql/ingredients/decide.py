"""Decisions from the model's probabilities: scoring, calibration and cascades.

For a Bool or a short Choice, a map can ask the model for the log-probability
of every allowed answer (``Request(score=True)``) instead of taking its greedy
answer. This module turns those numbers into decisions:

- :func:`choose` picks the answer with the highest *calibrated* probability and
  reports it with the probability and the margin to the runner-up;
- calibration is an additive bias on the log-probabilities (a per-answer
  offset), found either from content-free inputs (:func:`contextual_bias`,
  Zhao et al. 2021: the model's prior for "yes" is divided out) or from the
  user's labelled examples (:func:`threshold_bias`: the log-odds threshold
  that classifies them best);
- a cascade sends the values the first model is not sure of to a second model
  (a LOTUS-style approximate operator with a target the user sets): the second
  model also decides a seeded sample of the values (:func:`cascade_sample`), and
  the first model keeps the values whose probability is above the lowest
  threshold at which, on that sample, it agrees with the second at least
  ``target`` of the time with 90% confidence (:func:`fit_cascade_threshold`,
  a one-sided Wilson bound). Without a sample, :func:`cascade_split` trusts the
  first model's own probabilities;
- an embedding proxy (:class:`EmbeddingProxy`, ``proxy='embedding'``) is a stage
  before any model: the map's model decides the same seeded sample, a
  nearest-centroid classifier over the values' embeddings is fitted on its
  answers, and the proxy decides, without a model call, the values it puts
  above the threshold that its leave-one-out answers on the sample meet at
  ``target`` (the same Wilson rule); the model decides the rest.

Options are validated here (:func:`check_choice`, :func:`check_target`) so an
ingredient reports a misspelt ``calibrate=`` the same way everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from blendsql.errors import IngredientError
from blendsql.models.base import Model
from blendsql.models.constraints import Bool, Choice, Constraint
from blendsql.models.scoring import LOG_FLOOR, normalise, scored_answers

#: ``calibrate=``: none (raw probabilities), contextual (content-free inputs), examples
#: (a threshold fitted on the labelled ``few_shot`` examples)
CALIBRATIONS = ("none", "contextual", "examples")
#: ``framing=``: question (the default prompt), labels (a yes/no question asked as a choice
#: between two labels), claim (the question read as a claim to check against the value)
FRAMINGS = ("question", "labels", "claim")
#: the content-free values of contextual calibration (Zhao et al. 2021 use these three)
CONTENT_FREE = ("N/A", "", "[MASK]")
DEFAULT_TARGET = 0.9
#: the cascade's sample: this fraction of the distinct values, at least CASCADE_MIN_SAMPLE
CASCADE_SAMPLE = 0.1
CASCADE_MIN_SAMPLE = 16
#: one-sided 90% normal quantile of the cascade's confidence bound
CASCADE_Z = 1.2816
#: ``proxy=``: none, or embedding (a nearest-centroid stage before the model)
PROXIES = ("none", "embedding")
#: the proxy's softmax temperature over cosine similarities (its probabilities only rank
#: values; the threshold that decides is fitted on the sample)
PROXY_TEMPERATURE = 20.0


@dataclass
class Decision:
    """One decided value: the answer, how sure the model was, and who decided.

    ``probabilities`` are calibrated (they decide), ``raw`` the model's own,
    both over the allowed answers; ``margin`` is the chosen answer's
    probability minus the runner-up's. Unscored decisions (greedy answers)
    have no probabilities and say why in ``note``.
    """

    value: Any
    answer: str | None = None
    probability: float | None = None
    margin: float | None = None
    probabilities: dict[str, float] | None = None
    raw: dict[str, float] | None = None
    stage: str = ""
    note: str | None = None
    threshold: float | None = None  # a cascade's fitted threshold, or a yes/no batch's P(TRUE) one
    rule: str | None = None  # a yes/no batch decision: 'split' or 'argmax' (decision='auto')

    @property
    def scored(self) -> bool:
        return self.probability is not None

    def record(self, value: Any) -> dict[str, Any]:
        """The trace record of this decision for input ``value``."""
        return {"value": value, "answer": self.value, "probability": self.probability,
                "margin": self.margin, "probabilities": self.probabilities, "raw": self.raw,
                "scored": self.scored, "stage": self.stage, "note": self.note,
                **({"threshold": self.threshold} if self.threshold is not None else {}),
                **({"rule": self.rule} if self.rule is not None else {})}


def check_choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    """``value`` as one of ``allowed`` (case-insensitive), else a clear error."""
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text is None or text not in allowed:
        raise IngredientError(f"{name}={value!r} is not one of: {', '.join(allowed)}",
                              hint=f"write e.g. {name}='{allowed[-1]}'")
    return text


def check_target(value: Any) -> float:
    """A cascade's target accuracy: a number strictly between 0 and 1."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    if not ok:
        raise IngredientError(f"target={value!r} is not an accuracy between 0 and 1",
                              hint="write e.g. target=0.9: values the first model is less "
                              "sure of go to the second")
    return float(value)


def check_sample(value: Any) -> float | int:
    """A cascade's sample: a fraction in (0, 1], or a count of values (0: no sample)."""
    ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or (
        isinstance(value, float) and 0 < value <= 1)
    if not ok:
        raise IngredientError(f"cascade_sample={value!r} is neither a fraction in (0, 1] nor a "
                              "count of values", hint="write e.g. cascade_sample=0.1 (a tenth "
                              "of the values), cascade_sample=20, or cascade_sample=0 to trust "
                              "the first model's probabilities")
    return value


def check_flag(name: str, value: Any) -> bool:
    """A boolean option (``scored=TRUE``); 1 / 0 count as SQLite writes them."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise IngredientError(f"{name}={value!r} is not TRUE or FALSE",
                          hint=f"write {name}=TRUE or {name}=FALSE")


def check_labels(value: Any) -> tuple[str, str]:
    """Two distinct, non-empty labels: the first means TRUE, the second FALSE."""
    items = tuple(value) if isinstance(value, (list, tuple)) else ()
    if isinstance(value, str):
        items = tuple(p.strip() for p in value.split(";"))
    labels = tuple(" ".join(str(x).split()) for x in items)
    if len(labels) != 2 or not all(labels) or labels[0].casefold() == labels[1].casefold():
        raise IngredientError(f"labels={value!r} is not two distinct labels",
                              hint="write labels=('POSITIVE', 'NEGATIVE'): the first is "
                              "the TRUE answer, the second the FALSE one")
    return labels[0], labels[1]


@dataclass(frozen=True)
class DecisionPolicy:
    """How a map decides Bool / Choice answers (validated options of one call).

    ``scored``: decide from each answer's probability and trace it; implied by
    ``calibrate`` other than 'none' and by a ``cascade`` model. ``framing``
    'labels' asks a yes/no question as a choice between ``labels`` (first =
    TRUE); 'claim' asks whether the question, read as a claim, holds for the
    value. ``cascade``: a second model for the values the first decides with
    a probability below ``target``.
    """

    scored: bool = False
    calibrate: str = "none"
    framing: str = "question"
    labels: tuple[str, str] | None = None
    cascade: Model | None = None
    target: float = DEFAULT_TARGET
    sample: float | int = CASCADE_SAMPLE
    proxy: str = "none"
    decision: str = "greedy"

    @property
    def active(self) -> bool:
        """True when answers are scored (and decisions traced)."""
        return (self.scored or self.calibrate != "none" or self.cascade is not None
                or self.proxy != "none" or self.decision != "greedy")

    @property
    def explicit(self) -> bool:
        """True when the user asked for scores (an unscored answer is then warned about)."""
        return (self.scored or self.calibrate != "none" or self.cascade is not None
                or self.proxy != "none" or self.decision in ("argmax", "expected"))

    @property
    def batch_split(self) -> bool:
        """True when a yes/no batch is decided by :func:`batch_threshold` (decision='auto'
        with no calibration, cascade or proxy, which decide by their own rules)."""
        return (self.decision == "auto" and self.calibrate == "none" and self.cascade is None
                and self.proxy == "none")

    def ask_constraint(self, constraint: Constraint, back: dict[str, Any]
                       ) -> tuple[Constraint, dict[str, Any]]:
        """The constraint the model is asked under, and the map from its answers back.

        Label framing asks ``Choice(labels)`` for a Bool call and maps the
        labels back to TRUE / FALSE; otherwise the call's own constraint.
        """
        if self.framing in ("labels", "claim") and not isinstance(constraint, Bool):
            raise IngredientError(
                f"framing={self.framing!r} is for a yes/no question, but this call's answer "
                f"is {constraint.describe()}",
                hint="compare the call with TRUE / FALSE, or give return_type='bool'")
        if self.framing == "labels" and self.labels is not None:
            return Choice(self.labels), {self.labels[0]: True, self.labels[1]: False}
        return constraint, back

    def check_scoreable(self, ask: Constraint, n_examples: int) -> None:
        """Calibration and cascades need answers that can be scored (a clear error otherwise)."""
        needs = "calibrate=" + repr(self.calibrate) if self.calibrate != "none" else (
            "cascade=" if self.cascade is not None else
            "proxy=" + repr(self.proxy) if self.proxy != "none" else None)
        if self.proxy != "none" and self.sample == 0:
            raise IngredientError(
                f"proxy={self.proxy!r} is fitted on a sample the model decides, and "
                "cascade_sample=0 takes none",
                hint="give cascade_sample=0.1 (the default) or a count such as 20")
        answers = scored_answers(ask)
        if needs is not None and answers is None:
            raise IngredientError(
                f"{needs} needs a yes/no or short multiple-choice answer, not {ask.describe()}",
                hint="compare the call with TRUE / FALSE or give options=; free text is "
                "decided greedily")
        if self.calibrate == "examples" and (answers is None or len(answers) != 2):
            raise IngredientError(
                "calibrate='examples' fits a threshold between two answers, and this call "
                f"has {len(answers or ())}",
                hint="use calibrate='contextual' for more than two options")
        if self.calibrate == "examples" and n_examples < 2:
            raise IngredientError(
                "calibrate='examples' needs labelled examples to fit its threshold",
                hint="give few_shot=[(value, answer), ...] with both answers among them")


def example_bias(scored: Sequence[tuple[Mapping[str, float], str]], answers: Sequence[str]
                 ) -> dict[str, float]:
    """:func:`threshold_bias` from labelled examples: (answer scores, the right answer text)."""
    first, second = answers[0], answers[1]
    labels = {right for _, right in scored}
    if labels != {first, second}:
        raise IngredientError(
            f"calibrate='examples' needs examples of both answers ({first!r} and {second!r}); "
            f"the examples only show {sorted(labels)}",
            hint="add a few_shot example of the missing answer")
    pairs = [(log_odds({a: s.get(a, LOG_FLOOR) for a in answers}, first, second),
              right == first) for s, right in scored]
    return threshold_bias(pairs, first)


# ---------------------------------------------------------------- decision rules


def calibrated(logprobs: Mapping[str, float], bias: Mapping[str, float]) -> dict[str, float]:
    """Probabilities over the answers after adding ``bias`` to their log-probabilities."""
    return normalise({a: lp + bias.get(a, 0.0) for a, lp in logprobs.items()})


def choose(logprobs: Mapping[str, float], bias: Mapping[str, float]
           ) -> tuple[str, float, float, dict[str, float]]:
    """(answer, its probability, margin to the runner-up, all probabilities), calibrated.

    Ties go to the answer listed first.
    """
    probs = calibrated(logprobs, bias)
    ranked = sorted(probs, key=lambda a: -probs[a])
    top = ranked[0]
    second = probs[ranked[1]] if len(ranked) > 1 else 0.0
    return top, probs[top], probs[top] - second, probs


def contextual_bias(content_free: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Contextual calibration: ``-log`` of the mean probability on content-free inputs.

    Adding it to a value's log-probabilities divides its probabilities by the
    model's prior (what it answers when the value says nothing), so a model
    that says "yes" to anything no longer decides by that habit.
    """
    if not content_free:
        return {}
    answers = list(content_free[0])
    mean = dict.fromkeys(answers, 0.0)
    for scores in content_free:
        for a, p in normalise(scores).items():
            mean[a] += p / len(content_free)
    return {a: -math.log(max(p, 1e-12)) for a, p in mean.items()}


def log_odds(logprobs: Mapping[str, float], first: str, second: str) -> float:
    """log P(first) - log P(second)."""
    return logprobs[first] - logprobs[second]


def fit_threshold(scored: Sequence[tuple[float, bool]]) -> float:
    """The log-odds threshold that classifies ``(log-odds, is_first)`` pairs best.

    Candidates are 0 (no change), the midpoints between neighbouring scores
    and points past both ends; the most accurate wins, then the one nearest 0
    (the smallest change to the model's own decision).
    """
    xs = sorted({s for s, _ in scored})
    candidates = {0.0, xs[0] - 1.0, xs[-1] + 1.0}
    candidates.update((a + b) / 2 for a, b in zip(xs, xs[1:], strict=False))

    def correct(t: float) -> int:
        return sum((s > t) == first for s, first in scored)

    return max(sorted(candidates), key=lambda t: (correct(t), -abs(t)))


def threshold_bias(scored: Sequence[tuple[float, bool]], first: str) -> dict[str, float]:
    """The bias that moves the decision boundary of ``first`` to :func:`fit_threshold`."""
    return {first: -fit_threshold(scored)}


def cascade_split(decisions: Sequence[Decision], target: float) -> list[int]:
    """Positions of the decisions a second model should take: unscored, or less sure than
    ``target`` (the chosen answer's calibrated probability below it)."""
    return [i for i, d in enumerate(decisions)
            if d.probability is None or d.probability < target]


def sample_size(n: int, sample: float | int, minimum: int = CASCADE_MIN_SAMPLE) -> int:
    """How many of ``n`` values the cascade's sample takes: a count as given, a fraction
    of ``n`` but at least ``minimum``; never more than ``n``."""
    if isinstance(sample, int):
        return min(n, sample)
    return min(n, max(minimum, math.ceil(sample * n)))


def cascade_sample(keys: Sequence[str], size: int) -> list[int]:
    """Positions of ``size`` of the values, picked by a hash of each value's prompt:
    the same values on every run (and in any order), so reruns hit the cache."""
    import hashlib

    def rank(i: int) -> str:
        return hashlib.sha256(keys[i].encode("utf-8", "surrogatepass")).hexdigest()

    return sorted(sorted(range(len(keys)), key=rank)[:size])


def wilson_lower(k: int, n: int, z: float = CASCADE_Z) -> float:
    """The lower end of the Wilson interval of ``k`` successes in ``n`` (0 when n is 0)."""
    if n == 0:
        return 0.0
    p = k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


def fit_cascade_threshold(sample: Sequence[tuple[float | None, bool]], target: float,
                          z: float = CASCADE_Z) -> float:
    """The lowest probability at which the first model may decide alone.

    ``sample``: (the first model's probability for its answer, whether the second
    model gave the same answer) for each sampled value. The threshold ``t`` is
    the lowest sampled probability such that the sampled values at or above it
    agree at least ``target`` of the time by the lower end of a one-sided 90%
    Wilson interval; ``inf`` when no threshold does (every value goes to the
    second model). Unscored values (None) count for no threshold.
    """
    scored = sorted(((p, agree) for p, agree in sample if p is not None), key=lambda x: -x[0])
    best = math.inf
    agreed = 0
    for n, (p, agree) in enumerate(scored, 1):
        agreed += agree
        if n < len(scored) and scored[n][0] == p:
            continue  # ties: a threshold keeps all values of one probability or none
        if wilson_lower(agreed, n, z) >= target:
            best = p
    return best


def stage_counts(decisions: Sequence[Decision]) -> dict[str, int]:
    """How many values each stage (model) decided, in the order stages first appear."""
    out: dict[str, int] = {}
    for d in decisions:
        out[d.stage] = out.get(d.stage, 0) + 1
    return out


@dataclass(frozen=True)
class ProxyAnswer:
    """The proxy's answer for one value and its probability over the answers it knows."""

    answer: str
    probability: float
    probabilities: dict[str, float]


def proxy_probabilities(sims: np.ndarray, answers: Sequence[str],
                        temperature: float = PROXY_TEMPERATURE) -> dict[str, float]:
    """Softmax of ``temperature`` times the cosine similarities to each answer's centroid."""
    z = temperature * (sims - sims.max())
    e = np.exp(z)
    return {a: float(x) for a, x in zip(answers, e / e.sum(), strict=True)}


@dataclass(frozen=True)
class EmbeddingProxy:
    """A nearest-centroid classifier over value embeddings, and the probability above
    which it may decide alone.

    ``centroids``: one unit vector per answer (the mean direction of the sampled
    values the model gave that answer). ``threshold``: fitted on leave-one-out
    answers for the sample (:func:`fit_cascade_threshold`); ``inf`` when the
    proxy never reaches ``target``, ``loo_agreed`` / ``sample`` say how it did.
    """

    embedder: str
    centroids: dict[str, np.ndarray]
    threshold: float
    sample: int
    loo_agreed: int

    @classmethod
    def fit(cls, embedder: str, vectors: np.ndarray, answers: Sequence[str | None],
            target: float) -> EmbeddingProxy:
        """Fit on the sample's unit vectors and the model's answers (None: unscored, skipped).

        Fewer than two distinct answers leave nothing to tell apart: threshold ``inf``.
        """
        keep = [i for i, a in enumerate(answers) if a is not None]
        labels = [str(answers[i]) for i in keep]
        vecs = np.asarray(vectors, dtype=np.float64)[keep]
        kinds = sorted(set(labels))
        sums = {a: vecs[[i for i, x in enumerate(labels) if x == a]].sum(axis=0) for a in kinds}
        counts = {a: labels.count(a) for a in kinds}
        centroids = {a: unit(sums[a]) for a in kinds}
        if len(kinds) < 2:
            return cls(embedder, centroids, math.inf, len(labels), 0)
        loo: list[tuple[float | None, bool]] = []
        for v, label in zip(vecs, labels, strict=True):
            others = {a: unit(sums[a] - (v if a == label else 0.0)) for a in kinds
                      if counts[a] - (a == label) > 0}
            if len(others) < 2:  # its answer's only example: the proxy could never give it
                loo.append((1.0, False))
                continue
            guess = predict_one(v, others)
            loo.append((guess.probability, guess.answer == label))
        threshold = fit_cascade_threshold(loo, target)
        agreed = sum(ok for _, ok in loo)
        return cls(embedder, centroids, threshold, len(labels), agreed)

    def predict(self, vectors: np.ndarray) -> list[ProxyAnswer]:
        """The nearest answer for each row of ``vectors`` (unit rows)."""
        return [predict_one(np.asarray(v, dtype=np.float64), self.centroids) for v in vectors]


def unit(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to unit length (a zero vector stays zero)."""
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def predict_one(v: np.ndarray, centroids: Mapping[str, np.ndarray]) -> ProxyAnswer:
    """The answer whose centroid is nearest (cosine) to ``v``, with its proxy probability."""
    answers = list(centroids)
    sims = np.array([float(np.dot(v, centroids[a])) for a in answers])
    probs = proxy_probabilities(sims, answers)
    best = max(answers, key=lambda a: probs[a])
    return ProxyAnswer(best, probs[best], probs)


# ---------------------------------------------------------------- yes/no over a batch

#: ``decision=``: auto (a yes/no map's default: scored; a threshold from the batch's
#: own probabilities when they fall into two clear groups, else the more probable
#: answer), argmax (scored, the more probable answer), greedy (unscored: the answer
#: greedy decoding gives; no probabilities; the default of other maps), expected
#: (numeric options such as a 1-5 score: the mean of the options weighted by their
#: probabilities, not the most probable one)
DECISIONS = ("auto", "argmax", "expected", "greedy")
#: fewer distinct values than this: no batch threshold (two groups need evidence)
SPLIT_MIN_VALUES = 8
#: variance floor of a group's log-odds (a scripted model gives identical numbers)
SPLIT_VAR_FLOOR = 0.05
#: the two-group fit must beat one group by this many BIC units per extra parameter
SPLIT_BIC_PER_PARAM = 1.0


@dataclass(frozen=True)
class BatchThreshold:
    """The yes/no threshold of one batch: log-odds above ``log_odds`` answer TRUE.

    ``rule``: 'split' (two groups found in the batch) or 'argmax' (log-odds 0: the
    more probable answer). ``probability`` is the same threshold as P(TRUE);
    ``why`` says in words how it was chosen (for the trace).
    """

    log_odds: float
    rule: str
    why: str
    groups: tuple[int, int] | None = None

    @property
    def probability(self) -> float:
        return sigmoid(self.log_odds)


def sigmoid(x: float) -> float:
    """1 / (1 + exp(-x)), without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def batch_threshold(log_odds: Sequence[float], min_values: int = SPLIT_MIN_VALUES,
                    bic_per_param: float = SPLIT_BIC_PER_PARAM) -> BatchThreshold:
    """The threshold that splits a batch's log-odds into its two groups, when it has two.

    Why: a model's P(yes) carries a bias that is the same for every value of one
    question (its habit of answering "yes", the prompt, the answer tokens), so
    the number that separates the values is relative, not 0. Where positives are
    rare a bias toward "yes" turns many negatives into TRUE under the argmax;
    content-free calibration divides the prior out as if the classes were
    balanced, which adds false positives there. This rule assumes neither
    balance nor a sign of the bias: it sorts the values' log-odds, takes the cut
    under which two Gaussian groups explain them best (minimum-error thresholding,
    Kittler and Illingworth 1986: unlike Otsu's it does not assume groups of
    similar size), and keeps it only when two groups beat one by the BIC (three
    more parameters); a shift of every value's log-odds by the same constant moves
    the threshold with them, so the decisions do not change.

    With fewer than ``min_values`` distinct values, or one group (say every value
    is negative), it falls back to the argmax (log-odds 0) and says so.
    """
    xs = sorted(float(x) for x in log_odds)
    n = len(xs)
    if n < max(2, min_values):
        return BatchThreshold(0.0, "argmax", f"{n} value(s): fewer than {min_values}, "
                              "too few to find two groups; the more probable answer")
    arr = np.asarray(xs)
    prefix = np.cumsum(arr)
    prefix2 = np.cumsum(arr * arr)
    total, total2 = prefix[-1], prefix2[-1]
    def var(s: float, s2: float, m: int) -> float:
        return max(s2 / m - (s / m) ** 2, SPLIT_VAR_FLOOR)

    def two_groups(k: int) -> float:  # -2 log-likelihood of the cut below xs[k] (+ const)
        v0 = var(prefix[k - 1], prefix2[k - 1], k)
        v1 = var(total - prefix[k - 1], total2 - prefix2[k - 1], n - k)
        return k * math.log(v0) + (n - k) * math.log(v1) - 2 * (
            k * math.log(k / n) + (n - k) * math.log((n - k) / n))

    cuts = [k for k in range(1, n) if xs[k] != xs[k - 1]]  # equal numbers stay together
    if not cuts:
        return BatchThreshold(0.0, "argmax", "every value has the same probability; "
                              "the more probable answer")
    k = min(cuts, key=two_groups)
    one = n * math.log(var(total, total2, n))
    two = two_groups(k)
    gain = one - two  # -2 log-likelihood: one group minus two groups
    needed = 3 * bic_per_param * math.log(n)
    if gain <= needed:
        return BatchThreshold(0.0, "argmax", f"{n} values form one group (two groups gain "
                              f"{gain:.1f} < {needed:.1f} BIC); the more probable answer")
    t = (xs[k - 1] + xs[k]) / 2
    return BatchThreshold(t, "split", f"{n} values form two groups ({n - k} above, {k} "
                          f"below; BIC gain {gain:.1f} > {needed:.1f}); threshold midway "
                          "between them", (n - k, k))


def expected_value(probabilities: Mapping[str, float]) -> float:
    """The mean of numeric answers weighted by their probabilities (a 1-5 score read as an
    expectation: 0.6 on '4' and 0.4 on '5' is 4.4, where the argmax says 4)."""
    total = sum(probabilities.values())
    return sum(float(a) * p for a, p in probabilities.items()) / total if total else math.nan


def check_numeric_options(answers: Sequence[str]) -> None:
    """decision='expected' needs options that are numbers (a clear error otherwise)."""
    bad = []
    for a in answers:
        try:
            float(a)
        except ValueError:
            bad.append(a)
    if bad or not answers:
        raise IngredientError(
            f"decision='expected' averages numeric options, and {bad[:3] or 'none'} are not "
            "numbers", hint="give options=('1', '2', '3', '4', '5'), or use decision='argmax'")
