"""A generated restaurants table and deterministic recording ingredients.

Why generated: the lazy-evaluation measurements need ~1000 rows with a known
fraction of qualifying rows; a seeded generator makes every test exact.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from blendsql import BlendSQL
from blendsql.ingredients.base import MapIngredient
from blendsql.models.base import FunctionModel, Request

CUISINES = ["Coffee & Tea", "Italian", "Thai", "Mexican", "Sushi Bars", "Burgers",
            "Indian", "French", "Vegan", "Korean"]
PHRASES = ["great service", "slow kitchen", "cheap eats", "noisy room", "friendly staff",
           "good for kids", "large portions", "parking is hard", "fresh bread"]
MARK = "candlelit"  # the only word that makes ANSWER say 'yes' (see answer_model)


def make_db(path: Path, n: int = 1000, seed: int = 0, every: int = 37) -> Path:
    """``restaurants(id, name, cuisine, rating, reviews)``; every ``every``-th row is romantic."""
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE restaurants (id INTEGER PRIMARY KEY, name TEXT, cuisine TEXT, "
                "rating REAL, reviews TEXT, note TEXT)")
    rows = []
    for i in range(1, n + 1):
        reviews = [*rng.sample(PHRASES, 2), f"visited on day {i}"]
        if i % every == 0:
            reviews.append(f"a {MARK} dinner, very romantic")
        name = f"{rng.choice(['Blue', 'Red', 'Old', 'New', 'Little'])} "
        name += f"{rng.choice(['Oak', 'Moon', 'Harbor', 'Garden'])} {i}"
        rating = None if i % 50 == 0 else round(rng.uniform(1, 5), 1)
        note = None if i % 50 == 0 else f"note {i}"
        rows.append((i, name, CUISINES[i % len(CUISINES)], rating, json.dumps(reviews), note))
    con.executemany("INSERT INTO restaurants VALUES (?, ?, ?, ?, ?, ?)", rows)
    con.execute("CREATE TABLE owners (rid INTEGER, owner TEXT)")
    con.executemany("INSERT INTO owners VALUES (?, ?)",
                    [(i, f"owner{i % 7}") for i in range(1, n + 1, 3)])
    con.commit()
    con.close()
    return path


class Recording(MapIngredient):
    """Base: records every batch of values handed to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[list[Any]] = []

    @property
    def passed(self) -> list[Any]:
        return [v for b in self.batches for v in b]


class Has(Recording):
    """True when the value's text contains the question (case-insensitive); SQL twin:
    ``instr(lower(x), lower(q)) > 0``. Model-free."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.batches.append(list(values))
        q = str(question).lower()
        return [q in str(v).lower() for v in values]


class CostlyHas(Has):
    """Same as :class:`Has` but declares that it needs a model (it never uses it),
    so the cost model treats it as expensive per prompt token."""

    needs_model = True


class CheapHas(Has):
    """Same as :class:`Has`, also 'needing' a model: the two differ only in cost."""

    needs_model = True


def answer_model() -> FunctionModel:
    """A deterministic model for ANSWER: 'yes' iff the prompt's text holds MARK."""

    def fn(req: Request) -> str:
        prompt = req.prompt or " ".join(t for _, t in req.messages)
        return "yes" if MARK in prompt.lower() else "no"

    return FunctionModel(fn, name="answer-mark")


def session(db: Path, *ingredients: Any, **options: Any) -> BlendSQL:
    """A BlendSQL session over ``db`` with the answer model and no persistent cache."""
    options.setdefault("prefilter_cache", False)  # tests never write the user cache
    return BlendSQL(str(db), model=answer_model(), ingredients=ingredients, cache=False,
                    **options)


def plain(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a plain SQLite query (the twin)."""
    con = sqlite3.connect(db)
    try:
        return [tuple(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def rows(df: Any) -> list[tuple[Any, ...]]:
    """DataFrame rows as tuples (NaN -> None)."""
    return [tuple(None if (isinstance(v, float) and v != v) else v for v in r)
            for r in df.itertuples(index=False, name=None)]
