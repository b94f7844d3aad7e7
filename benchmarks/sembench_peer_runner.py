"""SemBench's movie queries in a peer's own API (executed INSIDE the peer's venv).

``benchmarks/sembench_peers.py`` starts this file with the venv's python of LOTUS or
Palimpzest (``benchmarks/envs.py``) and talks JSON over stdin / stdout:

    stdin:  {"peer": "lotus" | "palimpzest", "base_url": str, "model": str,
             "reviews": [{"id", "reviewId", "reviewText"}, ...],   # no label column
             "instances": [{"key", "query", "movies", "sample"}, ...]}
    stdout: {"version": str, "results": [{"key", "columns", "rows", "seconds", "error"}, ...]}

Each query is written as SemBench's own runners write it for that system
(``src/scenario/movie/runner/{lotus,palimpzest}_runner``) and as the peer's docs show:
LOTUS ``sem_filter`` / ``sem_map`` / ``sem_join`` on pandas frames (a self-join of the
movie's reviews for the pairs), Palimpzest 0.7 (the newest release that runs on Python 3.11:
0.8 and 0.9 import ``typing.TypeAliasType``, new in 3.12) ``pz.Dataset`` with ``sem_filter``,
``sem_add_columns``, ``limit``, ``count``, ``average``, ``groupby`` (it has no semantic join:
the pairs queries are not applicable). The model is the OpenAI-compatible server at
``base_url`` (LOTUS: LiteLLM's ``hosted_vllm/`` route; Palimpzest: its OpenAI client through
``OPENAI_BASE_URL``, under one of its model names). This file must not import anything
from this repository.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

POSITIVE_FILTER = "Determine if the following movie review is clearly positive."
SAME = "These two movie reviews express the same sentiment - either both are positive or both are negative."
OPPOSITE = "These two movie reviews express opposite sentiments - one is positive and the other is negative."
SENTIMENT = ("Classify the sentiment of this review as either 'POSITIVE' or 'NEGATIVE'. Only output the "
             "exact word 'POSITIVE' or 'NEGATIVE' with no additional text.")
SCORE = ("Score from 1 to 5 how much did the reviewer like the movie based on provided rubrics.\n\n"
         "Rubrics:\n5: Very positive. Strong positive sentiment, indicating high satisfaction.\n"
         "4: Positive. Noticeably positive sentiment, indicating general satisfaction.\n"
         "3: Neutral. Expresses no clear positive or negative sentiment.\n"
         "2: Negative. Noticeably negative sentiment, indicating some level of dissatisfaction.\n"
         "1: Very negative. Strong negative sentiment, indicating high dissatisfaction.\n\n"
         "Only provide the score number (1-5) with no other comments.")
LIMITS = {"Q1": 5, "Q2": 5, "Q5": 10, "Q6": 10}


def scope(reviews: Any, inst: dict[str, Any]) -> Any:
    """The instance's reviews (plain pandas: its sample, or its movies)."""
    if inst.get("sample"):
        return reviews[reviews["reviewId"].isin(inst["sample"])]
    return reviews[reviews["id"].isin(inst["movies"])]


def score_value(text: Any) -> float:
    """A 1-5 answer as a number; 3 when it is not one (SemBench's runners do the same)."""
    try:
        x = float(str(text).strip())
    except ValueError:
        return 3.0
    return x if 1 <= x <= 5 else 3.0


# ---------------------------------------------------------------- LOTUS


def lotus_setup(base_url: str, model: str) -> None:
    import lotus
    from lotus.models import LM

    # max_batch_size: LOTUS sends 64 requests at once by default; the server has one slot,
    # so more than a few in flight only queue there (and connections time out)
    lotus.settings.configure(lm=LM(model=f"hosted_vllm/{model}", api_base=base_url, max_ctx_len=4096,
                                   max_tokens=64, max_batch_size=4))


def lotus_query(reviews: Any, inst: dict[str, Any]) -> Any:
    """One instance in LOTUS (pandas accessors registered by ``import lotus``)."""
    import pandas as pd

    q, df = inst["query"], scope(reviews, inst)
    if q in ("Q1", "Q2", "Q3", "Q4"):
        kept = df.sem_filter(POSITIVE_FILTER + ' Review: "{reviewText}".')
        if q == "Q3":
            return pd.DataFrame({"positive_review_cnt": [len(kept)]})
        if q == "Q4":
            return pd.DataFrame({"positivity_ratio": [len(kept) / len(df) if len(df) else 0.0]})
        return kept[["reviewId"]].head(LIMITS[q])
    if q in ("Q5", "Q6", "Q7"):
        condition = SAME if q == "Q5" else OPPOSITE
        joined = df.sem_join(df, condition + ' Review 1: "{reviewText:left}" Review 2: "{reviewText:right}"')
        joined = joined[joined["reviewId:left"] != joined["reviewId:right"]]
        out = joined[["id:left", "reviewId:left", "reviewId:right"]]
        return out.head(LIMITS[q]) if q in LIMITS else out
    if q == "Q8":
        mapped = df.sem_map(SENTIMENT + " Review: {reviewText}")
        counts = mapped["_map"].str.strip().str.upper().value_counts().reset_index()
        counts.columns = ["scoreSentiment", "count"]
        return counts
    mapped = df.sem_map(SCORE.replace("Only provide", "Review: {reviewText}\n\nOnly provide"))
    mapped = mapped.assign(reviewScore=mapped["_map"].map(score_value))
    if q == "Q9":
        return mapped[["reviewId", "reviewScore"]]
    return mapped.groupby("id", as_index=False)["reviewScore"].mean().rename(
        columns={"id": "movieId", "reviewScore": "movieScore"})


# ---------------------------------------------------------------- Palimpzest

#: Palimpzest 0.7.x names its models; this one is served by ``base_url`` (the OpenAI
#: client reads ``OPENAI_BASE_URL``), whatever model the server holds
PZ_MODEL = "GPT_4o_MINI"


class Unsupported(Exception):
    """The peer's release has no operator for this query (scored as not applicable)."""


def pz_config(base_url: str, model: str) -> Any:
    """One model (the server's), no mixtures / critics / RAG reduction: one call per item
    and operator, as the other systems make."""
    import os

    import palimpzest as pz
    from palimpzest.constants import Model

    os.environ["OPENAI_BASE_URL"] = base_url
    os.environ.setdefault("OPENAI_API_KEY", "sk-local")
    return pz.QueryProcessorConfig(policy=pz.MaxQuality(), execution_strategy="sequential",
                                   available_models=[getattr(Model, PZ_MODEL)], verbose=False,
                                   progress=False, allow_mixtures=False, allow_critic=False,
                                   allow_rag_reduction=False, allow_split_merge=False)


def pz_query(reviews: Any, inst: dict[str, Any], config: Any) -> Any:
    """One instance in Palimpzest 0.7 (``pz.Dataset`` over a DataFrame; the plan runs on
    ``.run(config)``, a fresh config each time: a run changes the one it is given).

    0.7 has no semantic join (the pairs queries are not applicable), and its count /
    average aggregates fail (an assertion in ``DataRecord.from_parent``), so the
    aggregates of Q3, Q4, Q8 and Q10 are computed with pandas over its records;
    every model call is Palimpzest's own.
    """
    import palimpzest as pz
    import pandas as pd

    q = inst["query"]
    if q in ("Q5", "Q6", "Q7"):
        raise Unsupported("Palimpzest 0.7 has no semantic join")
    df = scope(reviews, inst).rename(columns={"id": "movieId"}).reset_index(drop=True)
    ds = pz.Dataset(df)
    if q in ("Q1", "Q2", "Q3"):
        ds = ds.sem_filter(POSITIVE_FILTER, depends_on=["reviewText"])
        if q == "Q3":
            return pd.DataFrame({"positive_review_cnt": [len(ds.run(config()).to_df())]})
        return ds.project(["reviewId"]).limit(LIMITS[q]).run(config()).to_df()
    if q == "Q4":
        out = ds.sem_add_columns([{"name": "positivity", "type": int,
                                   "desc": "Return 1 if the following review is positive, and 0 if it "
                                           "is not. Only output a single number (1 or 0)."}],
                                 depends_on=["reviewText"]).run(config()).to_df()
        values = pd.to_numeric(out.get("positivity", pd.Series(dtype=float)), errors="coerce")
        return pd.DataFrame({"positivity_ratio": [float(values.fillna(0).mean()) if len(values) else 0.0]})
    if q == "Q8":
        out = ds.sem_add_columns([{"name": "sentiment", "type": str, "desc": SENTIMENT}],
                                 depends_on=["reviewText"]).run(config()).to_df()
        labels = out.get("sentiment", pd.Series(dtype=str)).astype(str).str.strip().str.upper()
        counts = labels.value_counts().reset_index()
        counts.columns = ["scoreSentiment", "count"]
        return counts
    out = ds.sem_add_columns([{"name": "reviewScore", "type": int, "desc": SCORE}],
                             depends_on=["reviewText"]).run(config()).to_df()
    out = out.assign(reviewScore=out.get("reviewScore", pd.Series(dtype=float)).map(score_value))
    if q == "Q9":
        return out[["reviewId", "reviewScore"]]
    return out.groupby("movieId", as_index=False)["reviewScore"].mean().rename(
        columns={"reviewScore": "movieScore"})


# ---------------------------------------------------------------- main


def cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def main() -> None:
    import importlib.metadata

    import pandas as pd

    request = json.load(sys.stdin)
    answer_to, sys.stdout = sys.stdout, sys.stderr  # the peers' libraries print to stdout
    peer = request["peer"]
    reviews = pd.DataFrame(request["reviews"], columns=["id", "reviewId", "reviewText"])
    if peer == "lotus":
        lotus_setup(request["base_url"], request["model"])
        run = lotus_query
    elif peer == "palimpzest":
        def run(df: Any, inst: dict[str, Any]) -> Any:
            return pz_query(df, inst, lambda: pz_config(request["base_url"], request["model"]))
    else:
        raise SystemExit(f"unknown peer {peer!r}")
    results = []
    for inst in request["instances"]:
        t0 = time.perf_counter()
        out: dict[str, Any] = {"key": inst["key"]}
        try:
            df = run(reviews, inst)
            out.update(columns=[str(c) for c in df.columns],
                       rows=[[cell(v) for v in r] for r in df.itertuples(index=False, name=None)], error=None)
        except Unsupported as e:
            out.update(columns=[], rows=[], error=None, unsupported=str(e))
        except Exception as e:  # noqa: BLE001 - a failure is a result to score
            out.update(columns=[], rows=[], error=f"{type(e).__name__}: {e}"[:400],
                       trace=traceback.format_exc()[-1500:])
        out["seconds"] = round(time.perf_counter() - t0, 3)
        results.append(out)
    dist = {"lotus": "lotus-ai", "palimpzest": "palimpzest"}[peer]
    json.dump({"version": importlib.metadata.version(dist), "results": results}, answer_to)


if __name__ == "__main__":
    main()
