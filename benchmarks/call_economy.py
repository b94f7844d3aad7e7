"""Call-economy benchmark: how many values / model calls each query costs.

Model calls are the product's cost, so this compares, per query, the work of
(a) this engine (``BlendSQL(...).execute(q).meta``), (b) a naive row-by-row
evaluation (benchmarks/naive.py: every ingredient on every row of its
FROM/JOIN product), and (c) the PyPI package ``blendsql==0.1.28`` run in its
own venv (benchmarks/blendsql_0128_runner.py, JSON over stdin/stdout).

All three use the same deterministic recording ingredients (``IsPrefix``,
``TextLen`` maps, ``CountCtx`` QA), so "values passed" is counted alike: one
per map value handed over, one per QA invocation. Each query has a plain-SQL
twin (the ingredient replaced by SQL, as in tests/differential); rows of both
engines are compared with it. The minimal value set is computed with plain
SQL (the distinct, non-NULL candidate values of each map call after its plain
filters; one per QA call). A small subset also runs on the embedded llama.cpp
model (``blendsql.models.LlamaCpp()``) for model calls / tokens / seconds.

Data: Spider databases from tests/data/spider (copied fixtures) and two
HybridQA dev tables read from the benchmark data's hybridqa/ folder
(``$BLENDSQL_BENCH_DATA``, default ../shared/data; via ``hybridqa_to_sqlite``);
the HybridQA queries are skipped when that folder is missing.

The two 0.1.28 venvs are the peers ``blendsql-0.1.28`` (pinned) and
``blendsql-0.1.28-latest`` of benchmarks/envs.py, built on first use under the
cache dir (``$BSQL0128_VENV`` / ``$BSQL0128_VENV_LATEST`` name other venvs).

    python benchmarks/call_economy.py                # everything (~1-3 min)
    python benchmarks/call_economy.py --no-model --no-0128   # counts only; the model subset
                                                             # already in --out is kept
    python -m benchmarks call-economy                # the README's run, numbers beside the recorded
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
import venv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import envs  # noqa: E402
from benchmarks.naive import NaiveUnsupported, naive_evaluate, naive_totals  # noqa: E402
from benchmarks.protocol import data_dir  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.ingredients.base import IngredientRegistry, MapIngredient, QAIngredient  # noqa: E402

SPIDER = ROOT / "tests" / "data" / "spider"
HYBRIDQA = data_dir() / "hybridqa"
HYBRIDQA_TABLES = ("Vijay_Prakash_1", "Uttarakhand_Legislative_Assembly_3")
RESULTS = ROOT / "benchmarks" / "results" / "call_economy.json"
# 0.1.28 pins none of its data dependencies. "pinned" is the comparison venv, with
# pandas / polars / duckdb of its release time pinned exactly; "latest" is what a plain
# `pip install blendsql==0.1.28` resolves today (pandas 3 / polars 2 / duckdb 2), kept
# to report that it returns wrong rows there. Both are peers of benchmarks/envs.py (built
# under the cache dir); the environment variable names another venv instead.
PEERS_0128 = {"pinned": ("blendsql-0.1.28", "BSQL0128_VENV"),
              "latest": ("blendsql-0.1.28-latest", "BSQL0128_VENV_LATEST")}
VENVS_0128 = {which: (os.environ.get(var), list(envs.PEERS[peer].requirements))
              for which, (peer, var) in PEERS_0128.items()}
RUNNER = ROOT / "benchmarks" / "blendsql_0128_runner.py"


# -- deterministic recording ingredients (this engine's API) ---------------------------

def sqlite_text(value: Any) -> str:
    """``CAST(value AS TEXT)`` for the fixture values (str, int, REAL)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class _Counting:
    """Counts values handed over and invocations, so the numbers are measured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.values = 0
        self.invocations = 0


class IsPrefix(_Counting, MapIngredient):
    """True where the value's text starts with the question (twin: ``substr``)."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.values += len(values)
        self.invocations += 1
        return [sqlite_text(v).startswith(question or "") for v in values]


class TextLen(_Counting, MapIngredient):
    """Length of the value's text (twin: ``length(CAST(x AS TEXT))``)."""

    def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
        self.values += len(values)
        self.invocations += 1
        return [len(sqlite_text(v)) for v in values]


class CountCtx(_Counting, QAIngredient):
    """Rows of the context table (twin: ``(SELECT COUNT(*) FROM (<context>))``)."""

    def run(self, question: str | None, context: pd.DataFrame | None,
            options: list[Any] | None, **kwargs: Any) -> Any:
        self.values += 1
        self.invocations += 1
        return 0 if context is None else len(context)


def fresh_ingredients() -> list[Any]:
    """New counters for one query run."""
    return [IsPrefix(), TextLen(), CountCtx()]


# -- the query set --------------------------------------------------------------------

@dataclass
class Case:
    """One benchmark query with its plain-SQL twin and minimal value sets.

    ``minimal``: alternatives (valid evaluation orders), each a list of
    one-column SQL queries whose distinct non-NULL values one map call must
    see; the minimal count of an alternative is their summed sizes plus
    ``qa`` (one per QA call). ``limit``: the query has a LIMIT an engine could
    stop early on; ``minimal`` then holds the full candidate set (no early stop).
    """

    id: str
    db: str
    sql: str
    twin: str
    minimal: list[list[str]]
    features: list[str]
    qa: int = 0
    limit: bool = False
    sample_of: str | None = None  # twin without LIMIT (rows must come from it)
    model_sql: str | None = None  # LLM variant for the embedded-model subset
    extra: dict[str, Any] = field(default_factory=dict)


P = "substr(CAST({x} AS TEXT), 1, length('{p}')) = '{p}'"


def pre(x: str, p: str) -> str:
    """Twin of ``{{IsPrefix('p', x)}} = TRUE``."""
    return P.format(x=x, p=p)


CASES: list[Case] = [
    Case("and_filter_city", "world_1",
         "SELECT Name FROM city WHERE CountryCode = 'USA' AND {{IsPrefix('S', city.Name)}} = TRUE",
         f"SELECT Name FROM city WHERE CountryCode = 'USA' AND {pre('Name', 'S')}",
         [["SELECT DISTINCT Name FROM city WHERE CountryCode = 'USA'"]], ["and-filter"]),
    Case("and_filter_two_plain", "world_1",
         "SELECT Name, Population FROM city WHERE Population > 1000000 AND District <> '' "
         "AND {{IsPrefix('M', city.District)}} = TRUE",
         f"SELECT Name, Population FROM city WHERE Population > 1000000 AND District <> '' "
         f"AND {pre('District', 'M')}",
         [["SELECT DISTINCT District FROM city WHERE Population > 1000000 AND District <> ''"]],
         ["and-filter", "duplicates"]),
    Case("dup_continent", "world_1",
         "SELECT Name FROM country WHERE {{IsPrefix('Europe', country.Continent)}} = TRUE",
         f"SELECT Name FROM country WHERE {pre('Continent', 'Europe')}",
         [["SELECT DISTINCT Continent FROM country"]], ["duplicates"]),
    Case("dup_countrycode", "world_1",
         "SELECT COUNT(*) FROM city WHERE {{IsPrefix('B', city.CountryCode)}} = TRUE",
         f"SELECT COUNT(*) FROM city WHERE {pre('CountryCode', 'B')}",
         [["SELECT DISTINCT CountryCode FROM city"]], ["duplicates", "aggregate"]),
    Case("dup_language_filter", "world_1",
         "SELECT CountryCode FROM countrylanguage WHERE IsOfficial = 'T' "
         "AND {{IsPrefix('Span', countrylanguage.Language)}} = TRUE",
         f"SELECT CountryCode FROM countrylanguage WHERE IsOfficial = 'T' AND {pre('Language', 'Span')}",
         [["SELECT DISTINCT Language FROM countrylanguage WHERE IsOfficial = 'T'"]],
         ["and-filter", "duplicates"]),
    Case("join_city_country", "world_1",
         "SELECT ci.Name FROM city AS ci JOIN country AS co ON ci.CountryCode = co.Code "
         "WHERE co.Continent = 'Oceania' AND {{IsPrefix('A', co.Region)}} = TRUE",
         f"SELECT ci.Name FROM city AS ci JOIN country AS co ON ci.CountryCode = co.Code "
         f"WHERE co.Continent = 'Oceania' AND {pre('co.Region', 'A')}",
         [["SELECT DISTINCT co.Region FROM city AS ci JOIN country AS co "
           "ON ci.CountryCode = co.Code WHERE co.Continent = 'Oceania'"]],
         ["join", "and-filter", "duplicates"]),
    Case("join_country_language", "world_1",
         "SELECT co.Name, cl.Language FROM country AS co JOIN countrylanguage AS cl "
         "ON co.Code = cl.CountryCode WHERE co.Region = 'Caribbean' "
         "AND {{IsPrefix('E', cl.Language)}} = TRUE",
         f"SELECT co.Name, cl.Language FROM country AS co JOIN countrylanguage AS cl "
         f"ON co.Code = cl.CountryCode WHERE co.Region = 'Caribbean' AND {pre('cl.Language', 'E')}",
         [["SELECT DISTINCT cl.Language FROM country AS co JOIN countrylanguage AS cl "
           "ON co.Code = cl.CountryCode WHERE co.Region = 'Caribbean'"]],
         ["join", "and-filter", "duplicates"]),
    Case("join_hiring", "employee_hire_evaluation",
         "SELECT e.Name, h.Shop_ID FROM employee AS e JOIN hiring AS h "
         "ON e.Employee_ID = h.Employee_ID WHERE {{IsPrefix('B', e.City)}} = TRUE",
         f"SELECT e.Name, h.Shop_ID FROM employee AS e JOIN hiring AS h "
         f"ON e.Employee_ID = h.Employee_ID WHERE {pre('e.City', 'B')}",
         [["SELECT DISTINCT e.City FROM employee AS e JOIN hiring AS h "
           "ON e.Employee_ID = h.Employee_ID"]], ["join"]),
    Case("cascade_two_maps", "world_1",
         "SELECT Name FROM city WHERE CountryCode = 'CHN' AND {{IsPrefix('S', city.Name)}} = TRUE "
         "AND {{TextLen('len', city.District)}} > 6",
         f"SELECT Name FROM city WHERE CountryCode = 'CHN' AND {pre('Name', 'S')} "
         f"AND length(District) > 6",
         [["SELECT DISTINCT Name FROM city WHERE CountryCode = 'CHN'",
           f"SELECT DISTINCT District FROM city WHERE CountryCode = 'CHN' AND {pre('Name', 'S')}"],
          ["SELECT DISTINCT District FROM city WHERE CountryCode = 'CHN'",
           "SELECT DISTINCT Name FROM city WHERE CountryCode = 'CHN' AND length(District) > 6"]],
         ["cascade", "and-filter"]),
    Case("cascade_join_two_maps", "world_1",
         "SELECT co.Name, cl.Language FROM country AS co JOIN countrylanguage AS cl "
         "ON co.Code = cl.CountryCode WHERE {{IsPrefix('Europe', co.Continent)}} = TRUE "
         "AND {{IsPrefix('G', cl.Language)}} = TRUE",
         f"SELECT co.Name, cl.Language FROM country AS co JOIN countrylanguage AS cl "
         f"ON co.Code = cl.CountryCode WHERE {pre('co.Continent', 'Europe')} "
         f"AND {pre('cl.Language', 'G')}",
         [["SELECT DISTINCT co.Continent FROM country AS co JOIN countrylanguage AS cl "
           "ON co.Code = cl.CountryCode",
           "SELECT DISTINCT cl.Language FROM country AS co JOIN countrylanguage AS cl "
           f"ON co.Code = cl.CountryCode WHERE {pre('co.Continent', 'Europe')}"],
          ["SELECT DISTINCT cl.Language FROM country AS co JOIN countrylanguage AS cl "
           "ON co.Code = cl.CountryCode",
           "SELECT DISTINCT co.Continent FROM country AS co JOIN countrylanguage AS cl "
           f"ON co.Code = cl.CountryCode WHERE {pre('cl.Language', 'G')}"]],
         ["cascade", "join", "duplicates"]),
    Case("subquery_in", "world_1",
         "SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM countrylanguage "
         "WHERE IsOfficial = 'T' AND {{IsPrefix('Fr', countrylanguage.Language)}} = TRUE)",
         f"SELECT Name FROM country WHERE Code IN (SELECT CountryCode FROM countrylanguage "
         f"WHERE IsOfficial = 'T' AND {pre('Language', 'Fr')})",
         [["SELECT DISTINCT Language FROM countrylanguage WHERE IsOfficial = 'T'"]],
         ["subquery", "and-filter", "duplicates"]),
    Case("cte_filter", "world_1",
         "WITH big AS (SELECT Name, District FROM city WHERE Population > 2000000) "
         "SELECT Name FROM big WHERE {{IsPrefix('S', big.District)}} = TRUE",
         f"WITH big AS (SELECT Name, District FROM city WHERE Population > 2000000) "
         f"SELECT Name FROM big WHERE {pre('District', 'S')}",
         [["SELECT DISTINCT District FROM city WHERE Population > 2000000"]], ["cte"]),
    Case("car_models", "car_1",
         "SELECT MakeId, Make FROM car_names WHERE {{IsPrefix('ford', car_names.Model)}} = TRUE",
         f"SELECT MakeId, Make FROM car_names WHERE {pre('Model', 'ford')}",
         [["SELECT DISTINCT Model FROM car_names"]], ["duplicates"]),
    Case("pets_students", "pets_1",
         "SELECT Fname FROM Student WHERE Sex = 'F' AND {{IsPrefix('B', Student.city_code)}} = TRUE",
         f"SELECT Fname FROM Student WHERE Sex = 'F' AND {pre('city_code', 'B')}",
         [["SELECT DISTINCT city_code FROM Student WHERE Sex = 'F'"]], ["and-filter", "duplicates"]),
    Case("select_map", "world_1",
         "SELECT Name, {{TextLen('len', city.District)}} AS n FROM city WHERE CountryCode = 'NLD'",
         "SELECT Name, length(District) AS n FROM city WHERE CountryCode = 'NLD'",
         [["SELECT DISTINCT District FROM city WHERE CountryCode = 'NLD'"]],
         ["select", "and-filter", "duplicates"]),
    Case("select_map_join", "concert_singer",
         "SELECT s.Name, {{TextLen('len', s.Country)}} AS n FROM singer AS s "
         "JOIN singer_in_concert AS c ON s.Singer_ID = c.Singer_ID",
         "SELECT s.Name, length(s.Country) AS n FROM singer AS s "
         "JOIN singer_in_concert AS c ON s.Singer_ID = c.Singer_ID",
         [["SELECT DISTINCT s.Country FROM singer AS s JOIN singer_in_concert AS c "
           "ON s.Singer_ID = c.Singer_ID"]], ["select", "join", "duplicates"]),
    Case("select_map_group", "world_1",
         "SELECT {{TextLen('len', country.Region)}} AS n, COUNT(*) AS c FROM country GROUP BY n",
         "SELECT length(Region) AS n, COUNT(*) AS c FROM country GROUP BY n",
         [["SELECT DISTINCT Region FROM country"]], ["select", "group-by", "duplicates"]),
    Case("qa_context_where", "world_1",
         "SELECT Name FROM country WHERE Population > "
         "{{CountCtx('how many?', (SELECT Code FROM country WHERE Continent = 'Europe'))}} * 1000000",
         "SELECT Name FROM country WHERE Population > "
         "(SELECT COUNT(*) FROM (SELECT Code FROM country WHERE Continent = 'Europe')) * 1000000",
         [[]], ["qa", "qa-context"], qa=1),
    Case("qa_context_select", "concert_singer",
         "SELECT {{CountCtx('how many?', (SELECT Name FROM singer WHERE Age > 30))}} AS n",
         "SELECT (SELECT COUNT(*) FROM (SELECT Name FROM singer WHERE Age > 30)) AS n",
         [[]], ["qa", "qa-context", "select"], qa=1),
    Case("qa_and_map", "concert_singer",
         "SELECT Name FROM singer WHERE Age > {{CountCtx('q', (SELECT Age FROM singer WHERE Age > 40))}} "
         "AND {{IsPrefix('J', singer.Name)}} = TRUE",
         f"SELECT Name FROM singer WHERE Age > (SELECT COUNT(*) FROM (SELECT Age FROM singer "
         f"WHERE Age > 40)) AND {pre('Name', 'J')}",
         [["SELECT DISTINCT Name FROM singer WHERE Age > 3"]], ["qa", "cascade"], qa=1),
    Case("limit_simple", "world_1",
         "SELECT Name FROM city WHERE {{IsPrefix('A', city.Name)}} = TRUE LIMIT 5",
         f"SELECT Name FROM city WHERE {pre('Name', 'A')} LIMIT 5",
         [["SELECT DISTINCT Name FROM city"]], ["limit"], limit=True,
         sample_of=f"SELECT Name FROM city WHERE {pre('Name', 'A')}"),
    Case("limit_filter", "world_1",
         "SELECT Name FROM city WHERE CountryCode = 'USA' AND {{IsPrefix('S', city.Name)}} = TRUE LIMIT 3",
         f"SELECT Name FROM city WHERE CountryCode = 'USA' AND {pre('Name', 'S')} LIMIT 3",
         [["SELECT DISTINCT Name FROM city WHERE CountryCode = 'USA'"]], ["limit", "and-filter"],
         limit=True,
         sample_of=f"SELECT Name FROM city WHERE CountryCode = 'USA' AND {pre('Name', 'S')}"),
    Case("limit_join", "world_1",
         "SELECT co.Name, ci.Name FROM country AS co JOIN city AS ci ON ci.CountryCode = co.Code "
         "WHERE {{IsPrefix('K', ci.District)}} = TRUE LIMIT 2",
         f"SELECT co.Name, ci.Name FROM country AS co JOIN city AS ci ON ci.CountryCode = co.Code "
         f"WHERE {pre('ci.District', 'K')} LIMIT 2",
         [["SELECT DISTINCT ci.District FROM country AS co JOIN city AS ci "
           "ON ci.CountryCode = co.Code"]], ["limit", "join", "duplicates"], limit=True,
         sample_of=f"SELECT co.Name, ci.Name FROM country AS co JOIN city AS ci "
         f"ON ci.CountryCode = co.Code WHERE {pre('ci.District', 'K')}"),
    Case("hqa_songs_language", "hybridqa:Vijay_Prakash_1",
         "SELECT movie, song FROM w WHERE year > 2005 AND {{IsPrefix('Tam', w.language)}} = TRUE",
         f"SELECT movie, song FROM w WHERE year > 2005 AND {pre('language', 'Tam')}",
         [["SELECT DISTINCT language FROM w WHERE year > 2005 AND language IS NOT NULL"]],
         ["hybridqa", "and-filter", "duplicates"]),
    Case("hqa_party_count", "hybridqa:Uttarakhand_Legislative_Assembly_3",
         "SELECT party_affiliation, COUNT(*) AS n FROM w "
         "WHERE {{IsPrefix('B', w.party_affiliation)}} = TRUE GROUP BY party_affiliation",
         f"SELECT party_affiliation, COUNT(*) AS n FROM w WHERE {pre('party_affiliation', 'B')} "
         f"GROUP BY party_affiliation",
         [["SELECT DISTINCT party_affiliation FROM w WHERE party_affiliation IS NOT NULL"]],
         ["hybridqa", "duplicates", "aggregate"]),
    Case("hqa_qa_context", "hybridqa:Uttarakhand_Legislative_Assembly_3",
         "SELECT {{CountCtx('How many INC members?', "
         "(SELECT elected_member FROM w WHERE party_affiliation = 'INC'))}} AS n",
         "SELECT (SELECT COUNT(*) FROM (SELECT elected_member FROM w "
         "WHERE party_affiliation = 'INC')) AS n",
         [[]], ["hybridqa", "qa", "qa-context"], qa=1),
    Case("hqa_limit", "hybridqa:Vijay_Prakash_1",
         "SELECT song FROM w WHERE {{IsPrefix('A', w.composer)}} = TRUE LIMIT 1",
         f"SELECT song FROM w WHERE {pre('composer', 'A')} LIMIT 1",
         [["SELECT DISTINCT composer FROM w WHERE composer IS NOT NULL"]],
         ["hybridqa", "limit", "duplicates"], limit=True,
         sample_of=f"SELECT song FROM w WHERE {pre('composer', 'A')}"),
]

# LLM variants for the embedded-model subset (small candidate sets on purpose).
MODEL_CASES: list[tuple[str, str, str]] = [
    ("llm_map_filter", "concert_singer",
     "SELECT Name FROM singer WHERE Age > 30 AND "
     "{{LLMMap('Is this country in Europe?', singer.Country)}} = TRUE"),
    ("llm_map_select_join", "concert_singer",
     "SELECT s.Name, {{LLMMap('Is this country in Europe?', s.Country)}} AS eu FROM singer AS s "
     "JOIN singer_in_concert AS c ON s.Singer_ID = c.Singer_ID"),
    ("llm_qa_context", "concert_singer",
     "SELECT {{LLMQA('Which stadium has the largest capacity?', "
     "(SELECT Name, Capacity FROM stadium))}} AS a"),
    ("llm_map_limit", "hybridqa:Vijay_Prakash_1",
     "SELECT song FROM w WHERE {{LLMMap('Is this a Tamil movie?', w.movie)}} = TRUE LIMIT 1"),
]


# -- databases ------------------------------------------------------------------------

def build_hybridqa(tmp: Path) -> dict[str, Path]:
    """SQLite files for the HybridQA tables (empty dict if the data is missing)."""
    if not (HYBRIDQA / "tables.jsonl").is_file():
        return {}
    from blendsql.db import hybridqa_to_sqlite, load_hybridqa

    out: dict[str, Path] = {}
    for record in load_hybridqa(HYBRIDQA, HYBRIDQA_TABLES):
        path = tmp / f"{record['table_id']}.sqlite"
        hybridqa_to_sqlite(record, path).close()
        out[f"hybridqa:{record['table_id']}"] = path
    return out


def db_file(db: str, hqa: dict[str, Path]) -> Path | None:
    """Path of a case's database, or None when unavailable."""
    if db.startswith("hybridqa:"):
        return hqa.get(db)
    return SPIDER / db / f"{db}.sqlite"


def ro(path: Path) -> sqlite3.Connection:
    """Read-only connection (the benchmark never changes a database)."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


# -- row comparison -------------------------------------------------------------------

def norm(value: Any) -> Any:
    """One comparable value per SQL value (NULL/NaN -> None, bool -> int, floats rounded)."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return int(value) if value.is_integer() else round(value, 9)
    return value


def norm_rows(rows: Any) -> list[tuple[Any, ...]]:
    """Normalise each cell of each row."""
    return [tuple(norm(v) for v in row) for row in rows]


def rows_agree(case: Case, got: list[tuple[Any, ...]] | None, conn: sqlite3.Connection) -> bool:
    """Same multiset as the twin (for LIMIT: same count, every row from the unlimited twin)."""
    if got is None:
        return False
    want = norm_rows(conn.execute(case.twin).fetchall())
    if case.sample_of is None:
        return Counter(got) == Counter(want)
    pool = Counter(norm_rows(conn.execute(case.sample_of).fetchall()))
    return len(got) == len(want) and not (Counter(got) - pool)


def minimal_counts(case: Case, conn: sqlite3.Connection) -> list[int]:
    """Minimal values passed, one number per valid evaluation order."""
    out = []
    for alt in case.minimal:
        n = case.qa
        for sql in alt:
            n += sum(1 for (v,) in conn.execute(sql).fetchall() if v is not None)
        out.append(n)
    return out


# -- the three evaluators -------------------------------------------------------------

def run_engine(case: Case, path: Path) -> dict[str, Any]:
    """This engine with the counting ingredients: meta counters + recorded values."""
    ings = fresh_ingredients()
    t0 = time.perf_counter()
    try:
        bsql = BlendSQL(str(path), ingredients=ings, cache=False)
        sm = bsql.execute(case.sql)
        bsql.close()
    except Exception as e:  # noqa: BLE001 - a failing query is a result
        return {"error": f"{type(e).__name__}: {str(e)[:300]}", "rows": None,
                "seconds": time.perf_counter() - t0}
    return {"error": None, "rows": norm_rows(sm.df.astype(object).itertuples(index=False, name=None)),
            "values_passed": sm.meta.values_passed, "model_calls": sm.meta.model_calls,
            "prompt_tokens": sm.meta.prompt_tokens, "ingredient_calls": sm.meta.ingredient_calls,
            "recorded_values": sum(i.values for i in ings),
            "recorded_invocations": sum(i.invocations for i in ings),
            "recorded_per_ingredient": {i.name: i.values for i in ings if i.invocations},
            "seconds": time.perf_counter() - t0}


def run_naive(case: Case, path: Path) -> dict[str, Any]:
    """The row-by-row baseline with the same ingredients."""
    ings = fresh_ingredients()
    conn = ro(path)
    t0 = time.perf_counter()
    try:
        calls = naive_evaluate(conn, case.sql, IngredientRegistry(ings))
    except NaiveUnsupported as e:
        return {"error": str(e)}
    finally:
        conn.close()
    tot = naive_totals(calls)
    assert tot["values_passed"] == sum(i.values for i in ings) or any(c.kind == "qa" for c in calls)
    return {"error": None, **tot, "per_call": [c.values_passed for c in calls],
            "seconds": time.perf_counter() - t0}


def venv_0128_location(which: str) -> str:
    """Where the venv is, as the results record it (no folder of this machine)."""
    override, _ = VENVS_0128[which]
    if override:
        return f"${PEERS_0128[which][1]}"
    return envs.portable(envs.peer_folder(PEERS_0128[which][0]))


DEPS_0128 = ("pandas", "polars", "duckdb")


def deps_0128(which: str) -> str | None:
    """``"pandas X, polars Y, duckdb Z"`` as installed in that 0.1.28 venv: read from the
    stamp benchmarks/envs.py wrote (its ``pip freeze``), else asked of the venv's python;
    None when the venv is not there."""
    override, _ = VENVS_0128[which]
    found: dict[str, str] = {}
    if not override:
        stamp = envs.read_stamp(envs.peer_folder(PEERS_0128[which][0])) or {}
        for line in stamp.get("installed") or []:
            name, sep, version = str(line).partition("==")
            if sep and name.lower() in DEPS_0128:
                found[name.lower()] = version
    py = Path(override) / "bin" / "python" if override else envs.peer_python_path(PEERS_0128[which][0])
    for dist in DEPS_0128:
        if dist not in found and py.is_file():
            version = envs.installed_version(py, dist)
            if version:
                found[dist] = version
    return ", ".join(f"{d} {found[d]}" for d in DEPS_0128 if d in found) or None


def kept_model_subset(out: Path) -> dict[str, Any] | None:
    """The embedded-model subset already in ``out`` (a ``--no-model`` run keeps it, so the
    counts can be measured again without erasing the model numbers), else None."""
    try:
        sub = json.loads(out.read_text()).get("model_subset")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(sub, dict) or not sub.get("rows"):
        return None
    return {**sub, "kept": "not measured by this run: --no-model kept the subset of the "
                           "earlier run recorded in this file"}


def ensure_venv_0128(which: str) -> Path | None:
    """The 0.1.28 venv's python, created on first use (no torch is pulled in)."""
    override, packages = VENVS_0128[which]
    if not override:
        try:
            return envs.peer_python(PEERS_0128[which][0])
        except (envs.EnvError, OSError, subprocess.SubprocessError) as e:
            print(f"could not create the 0.1.28 venv: {e}", file=sys.stderr)
            return None
    where = Path(override)
    py = where / "bin" / "python"
    if py.exists():
        return py
    try:
        venv.create(where, with_pip=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *packages],
                       check=True, timeout=1800)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"could not create the 0.1.28 venv: {e}", file=sys.stderr)
        return None
    return py


def run_0128(cases: list[Case], paths: dict[str, Path], which: str = "pinned",
             model: dict[str, str] | None = None) -> tuple[str | None, dict[str, Any]]:
    """All cases through blendsql 0.1.28 in one subprocess."""
    py = ensure_venv_0128(which)
    if py is None:
        return None, {}
    request: dict[str, Any] = {
        "queries": [{"id": c.id, "db": str(paths[c.id]), "sql": c.sql} for c in cases]}
    if model is not None:
        request["model"] = model
    proc = subprocess.run([str(py), str(RUNNER)], input=json.dumps(request), text=True,
                          capture_output=True, timeout=1800, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return None, {}
    out = json.loads(proc.stdout)
    return str(out["version"]), {r["id"]: r for r in out["results"]}


def run_model_subset(hqa: dict[str, Path]) -> tuple[str, list[dict[str, Any]]]:
    """Our engine on the embedded llama.cpp model: model calls, tokens, seconds."""
    from blendsql.models import LlamaCpp

    model = LlamaCpp()
    name = str(getattr(model, "path", None) or getattr(model, "model_path", None) or "LlamaCpp()")
    out = []
    for cid, db, sql in MODEL_CASES:
        path = db_file(db, hqa)
        if path is None:
            continue
        conn = ro(path)
        naive_rows = _naive_llm_rows(conn, sql)
        conn.close()
        t0 = time.perf_counter()
        try:
            sm = BlendSQL(str(path), model=model, cache=False).execute(sql)
            row: dict[str, Any] = {"id": cid, "db": db, "sql": sql, "error": None,
                                   "rows": len(sm.df), **{k: getattr(sm.meta, k) for k in (
                                       "values_passed", "model_calls", "prompt_tokens",
                                       "completion_tokens")}}
        except Exception as e:  # noqa: BLE001
            row = {"id": cid, "db": db, "sql": sql, "error": f"{type(e).__name__}: {e}"}
        row["seconds"] = round(time.perf_counter() - t0, 3)
        row["naive_values"] = naive_rows
        out.append(row)
    return name, out


def _free_port() -> int:
    """An unused local TCP port for the llama.cpp server."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> bool:
    """Poll ``url`` until it answers (False if the server died or timed out)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(1)
    return False


def run_model_subset_0128(gguf: str, hqa: dict[str, Path]) -> dict[str, Any]:
    """0.1.28 on the same GGUF, through its OpenAI client and a local ``llama_cpp.server``.

    Why a server: 0.1.28 has no llama.cpp backend; ``llama_cpp.server`` (from
    llama-cpp-python, installed in this venv) serves the same file offline.
    Seconds include HTTP; calls and tokens are what its meta reports.
    """
    cases = [c for c in MODEL_CASES if db_file(c[1], hqa) is not None]
    port = _free_port()
    from blendsql.models.gguf import python_server_command

    proc = subprocess.Popen(python_server_command(gguf, "--host", "127.0.0.1", "--port", str(port),
                                                  "--n_ctx", "2048", "--n_threads", "2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        if not _wait_for(base + "/models", proc):
            return {"error": "llama_cpp.server did not start"}
        fake = [Case(cid, db, sql, "", [[]], []) for cid, db, sql in cases]
        paths = {cid: db_file(db, hqa) for cid, db, _ in cases}
        version, res = run_0128(fake, paths, model={"name": Path(gguf).name,  # type: ignore[arg-type]
                                                    "base_url": base})
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    rows = []
    for cid, db, _sql in cases:
        r = res.get(cid, {})
        rows.append({"id": cid, "db": db, "error": r.get("error"),
                     "rows": None if r.get("rows") is None else len(r["rows"]),
                     **(r.get("meta") or {}), "seconds": round(r.get("seconds") or 0, 3)})
    return {"version": version, "server": "llama_cpp.server (llama-cpp-python 0.3.36)", "rows": rows}


def _naive_llm_rows(conn: sqlite3.Connection, sql: str) -> int:
    """Naive values for an LLM query: the same walk with counting stand-ins named LLMMap/LLMQA."""
    class LLMMap(IsPrefix):
        pass

    class LLMQA(CountCtx):
        pass

    return naive_totals(naive_evaluate(conn, sql, IngredientRegistry([LLMMap(), LLMQA()])))[
        "values_passed"]


# -- report ---------------------------------------------------------------------------

def evaluate(case: Case, path: Path, old: dict[str, Any] | None) -> dict[str, Any]:
    """All numbers and checks for one case."""
    conn = ro(path)
    try:
        minimal = minimal_counts(case, conn)
        ours = run_engine(case, path)
        ours["rows_match_twin"] = rows_agree(case, ours.pop("rows"), conn)
        naive = run_naive(case, path)
        rec: dict[str, Any] = {"id": case.id, "db": case.db, "features": case.features,
                               "sql": case.sql, "twin": case.twin, "limit": case.limit,
                               "minimal_values": min(minimal), "minimal_alternatives": minimal,
                               "ours": ours, "naive": naive}
        if old is not None:
            old_rows = old.get("rows")
            rec["blendsql_0128"] = {
                "error": old.get("error"), "values_passed": old.get("map_values", 0) + old.get(
                    "qa_calls", 0), "ingredient_invocations": old.get("map_calls", 0) + old.get(
                    "qa_calls", 0), "meta": old.get("meta"), "seconds": old.get("seconds"),
                "rows_match_twin": rows_agree(case, None if old_rows is None else norm_rows(old_rows), conn)}
    finally:
        conn.close()
    rec["checks"] = checks(rec)
    return rec


def checks(rec: dict[str, Any]) -> dict[str, Any]:
    """Per-query targets: minimal values (or early stop under LIMIT), <= 0.1.28, same rows."""
    ours = rec["ours"]
    v = ours.get("values_passed")
    out: dict[str, Any] = {"rows_match_twin": ours["rows_match_twin"]}
    if v is None:
        return out
    if rec["limit"]:
        out["stops_early"] = v < rec["minimal_values"]
    else:
        # strict: the cheapest valid order; a valid but costlier cascade order is reported apart
        out["values_minimal"] = v == rec["minimal_values"]
        out["values_minimal_for_some_order"] = v in rec["minimal_alternatives"]
    old = rec.get("blendsql_0128")
    if old is not None and not old["error"]:
        out["not_more_than_0128"] = v <= old["values_passed"]
    return out


def totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Suite totals over queries every evaluator completed, and the target verdicts."""
    ok = [r for r in records if r["ours"].get("values_passed") is not None
          and not r["naive"].get("error")]
    ours = sum(r["ours"]["values_passed"] for r in ok)
    naive = sum(r["naive"]["values_passed"] for r in ok)
    out: dict[str, Any] = {"queries": len(records), "queries_in_totals": len(ok),
                           "ours_values_passed": ours, "naive_values_passed": naive,
                           "minimal_values": sum(r["minimal_values"] for r in ok),
                           "ours_over_naive": round(ours / naive, 4) if naive else None}
    nolim = [r for r in ok if not r["limit"]]
    ours_nl = sum(r["ours"]["values_passed"] for r in nolim)
    naive_nl = sum(r["naive"]["values_passed"] for r in nolim)
    out["without_limit_queries"] = {"queries": len(nolim), "ours_values_passed": ours_nl,
                                    "naive_values_passed": naive_nl,
                                    "ours_over_naive": round(ours_nl / naive_nl, 4) if naive_nl else None}
    both = [r for r in ok if r.get("blendsql_0128") and not r["blendsql_0128"]["error"]]
    if both:
        out["queries_with_0128"] = len(both)
        out["ours_values_on_0128_queries"] = sum(r["ours"]["values_passed"] for r in both)
        out["blendsql_0128_values_passed"] = sum(r["blendsql_0128"]["values_passed"] for r in both)
        out["naive_values_on_0128_queries"] = sum(r["naive"]["values_passed"] for r in both)
    failing = {k: [r["id"] for r in records if r["checks"].get(k) is False]
               for k in ("values_minimal", "stops_early", "not_more_than_0128", "rows_match_twin")}
    out["targets"] = {
        "values_minimal_everywhere": {"met": not failing["values_minimal"],
                                      "failing": failing["values_minimal"]},
        "at_most_tenth_of_naive": {"met": bool(naive) and ours * 10 <= naive,
                                   "ratio": out["ours_over_naive"]},
        "never_more_than_0128": {"met": not failing["not_more_than_0128"],
                                 "failing": failing["not_more_than_0128"]},
        "limit_stops_early": {"met": not failing["stops_early"], "failing": failing["stops_early"]},
        "rows_match_twin": {"met": not failing["rows_match_twin"],
                            "failing": failing["rows_match_twin"]},
    }
    out["blendsql_0128_rows_differ_from_twin"] = [
        r["id"] for r in records if r.get("blendsql_0128") and not r["blendsql_0128"]["error"]
        and not r["blendsql_0128"]["rows_match_twin"]]
    out["blendsql_0128_errors"] = [r["id"] for r in records
                                   if r.get("blendsql_0128") and r["blendsql_0128"]["error"]]
    return out


def machine() -> dict[str, Any]:
    """Where the numbers were measured."""
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
            "load_average_1_5_15": list(os.getloadavg()),
            "note": "shared 2-core box: seconds are noisy; counts are exact"}


def markdown(result: dict[str, Any]) -> str:
    """The README table: values passed per query for the three evaluators."""
    lines = ["| query | features | naive | 0.1.28 | ours | minimal | ours: targets |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in result["queries"]:
        old = r.get("blendsql_0128") or {}
        old_v = "err" if old.get("error") else old.get("values_passed", "-")
        if old and not old.get("error") and not old.get("rows_match_twin"):
            old_v = f"{old_v} (rows differ)"
        bad = [k for k, v in r["checks"].items() if v is False and k != "values_minimal_for_some_order"]
        lim = " (LIMIT: full candidate set)" if r["limit"] else ""
        lines.append(f"| {r['id']} | {', '.join(r['features'])} | {r['naive'].get('values_passed', 'n/a')} "
                     f"| {old_v} | {r['ours'].get('values_passed', 'err')} | {r['minimal_values']}{lim} "
                     f"| {'ok' if not bad else 'MISSES ' + ', '.join(bad)} |")
    t = result["totals"]
    lines.append(f"| **total** | | **{t['naive_values_passed']}** | "
                 f"**{t.get('blendsql_0128_values_passed', '-')}** | **{t['ours_values_passed']}** | "
                 f"**{t['minimal_values']}** | ours/naive = {t['ours_over_naive']} |")
    return "\n".join(lines) + "\n\n" + model_markdown(result.get("model_subset") or {})


def model_markdown(sub: dict[str, Any]) -> str:
    """The embedded-model subset: model calls, prompt tokens and seconds per engine."""
    old = {r["id"]: r for r in (sub.get("blendsql_0128") or {}).get("rows", [])}
    lines = ["| query | naive values | ours calls | ours prompt tok | ours s | rows "
             "| 0.1.28 calls | 0.1.28 prompt tok | 0.1.28 s | rows |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sub.get("rows", []):
        o = old.get(r["id"], {})
        lines.append(f"| {r['id']} | {r.get('naive_values')} | {r.get('model_calls')} | "
                     f"{r.get('prompt_tokens')} | {r.get('seconds')} | {r.get('rows')} | "
                     f"{o.get('num_generation_calls', '-')} | {o.get('prompt_tokens', '-')} | "
                     f"{o.get('seconds', '-')} | {o.get('rows', '-')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the suite and write benchmarks/results/call_economy.json."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-0128", action="store_true", help="skip blendsql==0.1.28")
    ap.add_argument("--no-model", action="store_true",
                    help="skip the embedded-model subset (the one already in --out is kept)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--markdown", action="store_true",
                    help="print the README table from an existing --out JSON and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    with tempfile.TemporaryDirectory() as tmpdir:
        hqa = build_hybridqa(Path(tmpdir))
        cases = [c for c in CASES if db_file(c.db, hqa) is not None]
        paths = {c.id: db_file(c.db, hqa) for c in cases}
        version, old = (None, {}) if args.no_0128 else run_0128(cases, paths)  # type: ignore[arg-type]
        _, latest = (None, {}) if args.no_0128 else run_0128(cases, paths, "latest")  # type: ignore[arg-type]
        records = []
        for c in cases:
            rec = evaluate(c, paths[c.id], old.get(c.id) if old else None)  # type: ignore[arg-type]
            if c.id in latest:
                conn = ro(paths[c.id])  # type: ignore[arg-type]
                try:
                    lrows = latest[c.id].get("rows")
                    rec["blendsql_0128_latest_deps_rows_match_twin"] = rows_agree(
                        c, None if lrows is None else norm_rows(lrows), conn)
                finally:
                    conn.close()
            records.append(rec)
            print(f"{c.id:24s} ours={rec['ours'].get('values_passed')} naive="
                  f"{rec['naive'].get('values_passed')} min={rec['minimal_values']} 0128="
                  f"{rec.get('blendsql_0128', {}).get('values_passed')} {rec['checks']}")
        model_name, model_rows = (None, []) if args.no_model else run_model_subset(hqa)
        old_model = ({} if args.no_model or args.no_0128 or model_name is None
                     else run_model_subset_0128(model_name, hqa))
    model_subset = {"model": model_name, "ours": "BlendSQL(db, model=LlamaCpp(), cache=False)",
                    "rows": model_rows, "blendsql_0128": old_model}
    if args.no_model:
        model_subset = kept_model_subset(args.out) or model_subset
    pinned_deps, latest_deps = (None, None) if args.no_0128 else (deps_0128("pinned"),
                                                                   deps_0128("latest"))
    result = {
        "benchmark": "call_economy",
        "command": "python " + " ".join([str(Path(sys.argv[0]).as_posix())] + sys.argv[1:]),
        "machine": machine(),
        "data": {"spider": str(SPIDER.relative_to(ROOT)),
                 "hybridqa": f"$BLENDSQL_BENCH_DATA/hybridqa (default ../shared/data) tables "
                             f"{list(HYBRIDQA_TABLES)} (dev ids)"},
        "ingredients": "deterministic counting IsPrefix / TextLen (map), CountCtx (QA)",
        "values_passed_definition": "one per map value handed to an ingredient, one per QA "
                                    "invocation (as Meta.values_passed); 0.1.28 counted by the "
                                    "same recording ingredients (its meta counts QA context rows)",
        "blendsql_0128": {"version": version,
                          "venv": {k: [venv_0128_location(k), v[1]] for k, v in VENVS_0128.items()},
                          "numbers_from": f"pinned venv ({pinned_deps or 'not there'})",
                          "latest_deps_rows_differ_from_twin": [
                              r["id"] for r in records
                              if r.get("blendsql_0128_latest_deps_rows_match_twin") is False],
                          "latest_deps": latest_deps and f"{latest_deps} (as pip resolved "
                                                         f"them when the venv was built)"},
        "model_subset": model_subset,
        "queries": records,
        "totals": totals(records),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result["totals"], indent=1))


if __name__ == "__main__":
    main()
