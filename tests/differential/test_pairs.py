"""Differential tests over the query pairs in ``pairs.py``.

1. Fixture checks (plain sqlite3 only): every twin and every expectation query
   runs, twins return rows, ids are unique.
2. Oracle check: for map-only pairs, the BlendSQL query evaluated row by row
   with the ingredients as SQLite functions equals the twin.
3. Engine checks: BlendSQL returns the twin's rows, and the ingredients received
   the values the contract promises (exact / within / needs, no NULLs, no
   duplicates within one call, ``meta.values_passed`` consistent).
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from typing import Any

import pytest

from .common import (
    UNORDERED_ON_SPARK,
    assert_same_rows,
    connect_readonly,
    db_path,
    df_rows,
    distinct_values,
    normalise_cell,
    normalise_rows,
    run_blend,
    run_sql,
    skip_unless_portable,
    without_limit,
)
from .common import distinct_values as distinct_on
from .ingredients import Recorder
from .pairs import PAIRS, Pair
from .reference import ingredient_names, is_map_only, register_maps, to_reference_sql

PAIR_PARAMS = [pytest.param(p, id=p.id) for p in PAIRS]
MAP_ONLY_PARAMS = [pytest.param(p, id=p.id) for p in PAIRS if is_map_only(p.query)]
VALUE_PARAMS = [
    pytest.param(p, id=p.id) for p in PAIRS
    if p.exact or p.within or p.needs or p.cascade or p.once
]
CASCADE_PARAMS = [pytest.param(p, id=p.id) for p in PAIRS if p.cascade]
KNOWN_NAMES = {"startswith", "length", "upper", "countrows", "maxoption", "firstoption",
               "lowerjoin", "concat"}


# ----------------------------------------------------------------- fixtures


def test_enough_pairs_with_unique_ids() -> None:
    """The suite promises at least 70 pairs; duplicate ids would hide cases."""
    ids = [p.id for p in PAIRS]
    assert len(ids) >= 70
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]


def test_fixture_databases_present() -> None:
    """Each pair's database was copied under tests/data/spider."""
    for db in {p.db for p in PAIRS}:
        assert db_path(db).is_file(), db


@pytest.mark.parametrize("pair", PAIR_PARAMS)
def test_twin_executes_and_returns_rows(pair: Pair) -> None:
    """A twin that errors or returns nothing would make the pair meaningless."""
    rows, ncols = run_sql(pair.db, pair.twin, pair.params)
    assert ncols >= 1
    assert rows, f"twin of {pair.id} returns no rows: weak test"
    if pair.order == "sample":
        assert pair.sample_of is not None
        full, _ = run_sql(pair.db, pair.sample_of, pair.params)
        assert len(full) > len(rows), "sample pair must actually cut rows"
    assert ingredient_names(pair.query) <= KNOWN_NAMES
    twin_code = re.sub(r"'(?:[^']|'')*'", "''", pair.twin)  # string literals may hold braces
    assert "{{" not in twin_code and "<<" not in twin_code.replace("Age << 1", "")


@pytest.mark.parametrize("pair", VALUE_PARAMS)
def test_expectation_queries_execute(pair: Pair) -> None:
    """Expectation queries are plain SQL with one column; each must run."""
    for kind in (pair.exact, pair.within, pair.needs):
        for key, sql in kind.items():
            rows, ncols = run_sql(pair.db, sql)
            assert ncols == 1, (pair.id, key)
            if kind is pair.needs:
                assert rows, (pair.id, key, "an empty 'needs' asserts nothing")
    for key, needed in pair.needs.items():
        if key in pair.within:
            extra = distinct_values(pair.db, needed) - distinct_values(pair.db, pair.within[key])
            assert not extra, f"{pair.id}: needs not within bound for {key}: {extra}"


@pytest.mark.parametrize("pair", MAP_ONLY_PARAMS)
def test_twin_matches_row_by_row_oracle(pair: Pair) -> None:
    """The twin equals the query with maps run as per-row SQL functions."""
    con = connect_readonly(pair.db)
    try:
        register_maps(con)
        cur = con.execute(to_reference_sql(pair.query), pair.params)
        oracle = normalise_rows(cur.fetchall())
    finally:
        con.close()
    twin, _ = run_sql(pair.db, pair.twin, pair.params)
    if pair.order == "sample":
        assert pair.sample_of is not None
        full, _ = run_sql(pair.db, pair.sample_of, pair.params)
        assert len(oracle) == len(twin)
        assert not Counter(oracle) - Counter(full)
        return
    assert_same_rows(oracle, twin, pair.order == "exact", f"oracle vs twin: {pair.id}")


def test_oracle_rewrites_paper_refs_and_braces() -> None:
    """The oracle's rewrite itself: both brace styles, paper refs, shifts kept."""
    sql = to_reference_sql(
        "SELECT a << 1 FROM t WHERE <<Length('t::c')>> >> 1 = {{StartsWith('x', t.d)}}"
    )
    assert sql == 'SELECT a << 1 FROM t WHERE bsql_length("t"."c") >> 1 = bsql_startswith(\'x\', t.d)'


# ----------------------------------------------------------------- engine


def _check_rows(pair: Pair, smoothie: Any, backend: str = "sqlite") -> None:
    """Compare engine rows with the twin according to the pair's order mode."""
    twin, ncols = run_sql(pair.db, pair.twin, pair.params, backend)
    got = df_rows(smoothie.df)
    assert len(smoothie.df.columns) == ncols, (list(smoothie.df.columns), ncols)
    order, sample_of = pair.order, pair.sample_of
    if backend == "spark" and pair.id in UNORDERED_ON_SPARK:
        order, sample_of = "sample", without_limit(pair.twin)
    if order == "sample":
        assert sample_of is not None
        full, _ = run_sql(pair.db, sample_of, pair.params, backend)
        assert len(got) == len(twin), f"{pair.id}: {got} vs {twin}"
        assert not Counter(got) - Counter(full), f"{pair.id}: rows not from the full result"
        return
    assert_same_rows(got, twin, order == "exact", f"engine vs twin: {pair.id}")


@pytest.mark.parametrize("pair", PAIR_PARAMS)
def test_engine_matches_twin(pair: Pair, backend: str) -> None:
    """The correctness contract: same rows as the plain-SQL twin, on every backend."""
    skip_unless_portable(pair.id, backend)
    smoothie, _ = run_blend(pair.db, pair.query, pair.params, backend)
    _check_rows(pair, smoothie, backend)


def _passed(ingredients: dict[str, Recorder], key: str) -> list[Any]:
    """Values recorded for an expectation key (``Name``, ``Name:q``, ``Name.right``)."""
    if key.endswith(".right"):
        return ingredients[key[: -len(".right")]].passed_right()
    name, _, question = key.partition(":")
    return ingredients[name].passed(question or None)


def _check_calls_clean(ingredients: dict[str, Recorder]) -> None:
    """NULLs are never passed; one call never gets the same value twice (per side)."""
    for name, ing in ingredients.items():
        for call in ing.calls:
            assert None not in call.values, f"{name} got NULL"
            assert None not in call.right_values, f"{name} got NULL on the right"
            for side in (call.values, call.right_values):
                norm = [normalise_cell(v) for v in side]
                dupes = [v for v, n in Counter(norm).items() if n > 1]
                assert not dupes, f"{name} got duplicates in one call: {dupes}"


@pytest.mark.parametrize("pair", VALUE_PARAMS)
def test_engine_passes_promised_values(pair: Pair, backend: str) -> None:
    """Planner work: exactly / at most / at least the values the contract names."""
    skip_unless_portable(pair.id, backend)
    smoothie, ingredients = run_blend(pair.db, pair.query, pair.params, backend)
    _check_calls_clean(ingredients)
    for key, sql in pair.exact.items():
        got = {normalise_cell(v) for v in _passed(ingredients, key)}
        want = distinct_values(pair.db, sql, backend)
        assert got == want, (
            f"{pair.id} {key}: extra {sorted(map(repr, got - want))[:10]}, "
            f"missing {sorted(map(repr, want - got))[:10]}"
        )
    for key, sql in pair.within.items():
        got = {normalise_cell(v) for v in _passed(ingredients, key)}
        extra = got - distinct_values(pair.db, sql, backend)
        assert not extra, f"{pair.id} {key}: values outside the candidate set: {extra}"
    for key, sql in pair.needs.items():
        got = {normalise_cell(v) for v in _passed(ingredients, key)}
        missing = distinct_values(pair.db, sql, backend) - got
        assert not missing, f"{pair.id} {key}: needed values never passed: {missing}"
    for key in pair.once:  # identical calls share one evaluation: each value once overall
        got = [repr(normalise_cell(v)) for v in _passed(ingredients, key)]
        twice = sorted({v for v in got if got.count(v) > 1})
        assert not twice, f"{pair.id} {key}: values passed more than once: {twice[:10]}"


@pytest.mark.parametrize("pair", CASCADE_PARAMS)
def test_cascade_fixture_is_well_formed(pair: Pair) -> None:
    """Two keys; each 'second' set is inside its 'first' set and both run."""
    assert len(pair.cascade) == 2
    for _key, first, second in pair.cascade:
        assert distinct_values(pair.db, second) <= distinct_values(pair.db, first)
        assert distinct_values(pair.db, second)


@pytest.mark.parametrize("pair", CASCADE_PARAMS)
def test_engine_and_predicates_cascade(pair: Pair, backend: str) -> None:
    """Under AND, one ingredient sees all candidates, the other only survivors."""
    skip_unless_portable(pair.id, backend)
    _, ingredients = run_blend(pair.db, pair.query, pair.params, backend)

    def distinct_values(db: str, sql: str) -> set[Any]:
        return distinct_on(db, sql, backend)

    (ka, a_first, a_second), (kb, b_first, b_second) = pair.cascade
    got_a = {normalise_cell(v) for v in _passed(ingredients, ka)}
    got_b = {normalise_cell(v) for v in _passed(ingredients, kb)}
    a_then_b = got_a == distinct_values(pair.db, a_first) and got_b == distinct_values(
        pair.db, b_second
    )
    b_then_a = got_b == distinct_values(pair.db, b_first) and got_a == distinct_values(
        pair.db, a_second
    )
    assert a_then_b or b_then_a, f"{pair.id}: {ka} got {len(got_a)}, {kb} got {len(got_b)}"


def _expected_values_passed(ingredients: dict[str, Recorder]) -> int:
    """Meta.values_passed as documented: map values + both join sides + QA calls."""
    total = 0
    for ing in ingredients.values():
        for call in ing.calls:
            if ing.kind == "qa":
                total += 1
            else:
                total += len(call.values) + len(call.right_values)
    return total


@pytest.mark.parametrize("pair", PAIR_PARAMS)
def test_engine_values_passed_counter(pair: Pair, backend: str) -> None:
    """``meta.values_passed`` counts exactly what reached the ingredients."""
    skip_unless_portable(pair.id, backend)
    smoothie, ingredients = run_blend(pair.db, pair.query, pair.params, backend)
    assert smoothie.meta.values_passed == _expected_values_passed(ingredients)


def test_engine_qa_called_once_per_call_site() -> None:
    """A QA ingredient runs once per query (not per row) and gets its options."""
    pair = next(p for p in PAIRS if p.id == "qa_options_int")
    smoothie, ingredients = run_blend(pair.db, pair.query)
    calls = ingredients["MaxOption"].calls
    assert len(calls) == 1
    want = distinct_values(pair.db, "SELECT DISTINCT Age FROM singer")
    assert {normalise_cell(o) for o in calls[0].options or []} - {None} == want
    _check_rows(pair, smoothie)


def test_engine_qa_context_is_the_subquery() -> None:
    """The QA context DataFrame holds the subquery's rows, as plain SQL gives them."""
    pair = next(p for p in PAIRS if p.id == "qa_in_select_with_join_context")
    _, ingredients = run_blend(pair.db, pair.query)
    calls = ingredients["CountRows"].calls
    assert len(calls) == 1 and calls[0].context is not None
    want, _ = run_sql(
        pair.db,
        "SELECT e.Name FROM employee e JOIN hiring h ON e.Employee_ID = h.Employee_ID "
        "WHERE h.Is_full_time = 'F'",
    )
    assert Counter(df_rows(calls[0].context)) == Counter(want)


def test_engine_leaves_database_unchanged(tmp_path: Any) -> None:
    """Temp tables live in the temp schema: the file's schema is the same after."""
    import shutil

    copy = tmp_path / "cs.sqlite"
    shutil.copy(db_path("concert_singer"), copy)
    before = sqlite3.connect(copy).execute("SELECT sql FROM sqlite_master").fetchall()
    pair = next(p for p in PAIRS if p.id == "multi_join_two_maps")
    from blendsql import BlendSQL

    from .ingredients import fresh_ingredients

    BlendSQL(str(copy), ingredients=list(fresh_ingredients().values())).execute(pair.query)
    after = sqlite3.connect(copy).execute("SELECT sql FROM sqlite_master").fetchall()
    assert before == after


def test_harness_detects_a_wrong_ingredient() -> None:
    """Sensitivity check: an ingredient that disagrees with its twin on one value
    must make the row comparison fail, or the suite could not catch anything."""
    from blendsql import BlendSQL

    from .ingredients import StartsWith

    class WrongStartsWith(StartsWith):
        """Says 'Joe Sharp' does not start with 'J'."""

        def run(self, question: str | None, values: list[Any], **kwargs: Any) -> list[Any]:
            out = super().run(question, values, **kwargs)
            return [False if v == "Joe Sharp" else o for v, o in zip(values, out, strict=True)]

    pair = next(p for p in PAIRS if p.id == "where_map_and_plain")
    bsql = BlendSQL(str(db_path(pair.db)), ingredients=[WrongStartsWith(name="StartsWith")])
    smoothie = bsql.execute(pair.query)
    twin, _ = run_sql(pair.db, pair.twin)
    with pytest.raises(AssertionError):
        assert_same_rows(df_rows(smoothie.df), twin, False, pair.id)
