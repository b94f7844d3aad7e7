"""The Parser with the evaluation model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) on Spider fixtures.

Runs only when the GGUF is present: ``BLENDSQL_EVAL_MODEL`` (any copy of the file),
or where ``python -m benchmarks.envs build eval-model`` puts it
(tests/nl/eval_model.py); skipped otherwise. Each
question is a Spider dev question listed in ``dev_ids.txt`` (the tuning split:
no question of the report split is used here) on a database in
``tests/data/spider``. The Parser sees the shipped pool without any example on
the question's database (the benchmark protocol's cross-database condition), so
the question's own entry in the pool cannot hand it the answer. Its program must
run and return the gold query's rows. They guard what the benchmark measures:
the plain-language layer writing plain SQL (no spurious ingredient) that is
right, through free decoding, retrieved examples and validation. Slow (tens of
seconds per question on a loaded 2-core machine).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from eval_model import MARKS, MODEL_PATH  # noqa: E402 - tests/nl/eval_model.py
from nl_backend import NL_BACKEND  # noqa: E402 - tests/nl/nl_backend.py

from blendsql import BlendSQL
from blendsql.nl.parser import Parser, load_examples

DATA = Path(__file__).parents[1] / "data" / "spider"
pytestmark = MARKS

# (database, question, gold SQL): Spider dev questions in dev_ids.txt (their indices in dev.json
# in the ids below)
CASES = [
    # a filter and DISTINCT on one table
    ("concert_singer", "What are all distinct countries where singers above age 20 are from?",
     "SELECT DISTINCT country FROM singer WHERE age  >  20"),
    # the schema's pet_age / PetType spellings (a model writes age / pet_type)
    ("pets_1", "What type of pet is the youngest animal, and how much does it weigh?",
     "SELECT pettype ,  weight FROM pets ORDER BY pet_age LIMIT 1"),
    ("pets_1", "Find the maximum weight for each type of pet. List the maximum weight and pet type.",
     "SELECT max(weight) ,  petType FROM pets GROUP BY petType"),
    # a join and a count per group
    ("concert_singer", "For each stadium, how many concerts play there?",
     "SELECT T2.name ,  count(*) FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id  =  T2.stadium_id "
     "GROUP BY T1.stadium_id"),
    # an aggregate with a condition
    ("car_1", "What is the average miles per gallon(mpg) of the cars with 4 cylinders?",
     "SELECT avg(mpg) FROM CARS_DATA WHERE Cylinders  =  4"),
]
IDS = ["concert_singer-8", "pets_1-68", "pets_1-49", "concert_singer-23", "car_1-117"]


@pytest.fixture(scope="module")
def model():
    from blendsql.models import LlamaCpp

    return LlamaCpp(MODEL_PATH, n_ctx=4096, n_threads=1, timeout=900)


def rows(conn: sqlite3.Connection, sql: str) -> Counter:
    return Counter(tuple(round(v, 4) if isinstance(v, float) else v for v in r)
                   for r in conn.execute(sql).fetchall())


@pytest.mark.parametrize("db, question, gold", CASES, ids=IDS)
def test_parser_program_runs_and_matches_gold(db, question, gold, model, request):
    if NL_BACKEND != "sqlite" and request.node.callspec.id == "concert_singer-23":
        # on a copy's schema text (tables in name order, typed columns, sorted value lists)
        # the model joins stadium to singer_in_concert; parity is measured on 100 Spider
        # questions instead (benchmarks/README.md, "The Parser on DuckDB")
        pytest.xfail(f"the evaluation model picks another join on the {NL_BACKEND} copy")
    path = DATA / db / f"{db}.sqlite"
    bsql = BlendSQL(str(path), model=model, cache=False)
    try:
        pool = [e for e in load_examples("spider") if e.db != db]
        assert pool and all(e.db for e in pool)
        parsed = Parser(model, examples=pool).parse(question, bsql.db.conn, bsql.registry)
        assert parsed.program is not None, parsed.attempts
        assert "{{" not in parsed.program and "<<" not in parsed.program  # plain SQL suffices
        result = bsql.execute(parsed.program)
        got = Counter(tuple(round(v, 4) if isinstance(v, float) else v for v in r)
                      for r in result.df.itertuples(index=False, name=None))
        # the gold answer is SQLite's, on the original file (the session may be a mirror)
        gold_conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            assert got == rows(gold_conn, gold), parsed.program
        finally:
            gold_conn.close()
    finally:
        bsql.close()
