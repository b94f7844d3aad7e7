"""Property-based differential tests: random queries, BlendSQL vs plain twin.

A small grammar over world_1 (country, optionally joined with city) builds one
random query *structure*; rendering it twice gives the BlendSQL query (with
ingredients) and the plain-SQL twin (with their SQL equivalents). Both must
return the same rows. The grammar mixes plain and ingredient predicates under
AND / OR / NOT (three-valued logic included: several columns hold NULLs),
``?`` parameters, ingredient SELECT columns and ORDER BY keys, LIMIT / OFFSET
and a plain or ingredient join. Bounded so the suite stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from .common import (
    assert_same_rows,
    connect_readonly,
    df_rows,
    distinct_values,
    normalise_cell,
    normalise_rows,
    run_blend,
    run_sql,
)
from .ingredients import ascii_upper, sqlite_text
from .reference import is_map_only, register_maps, to_reference_sql

DB = "world_1"


@dataclass
class Rendered:
    """The two texts of one random structure, plus what the check needs."""

    query: str
    twin: str
    params: list[Any] = field(default_factory=list)
    uses: dict[str, set[str]] = field(default_factory=dict)  # ingredient -> columns

    def use(self, ingredient: str, column: str) -> None:
        """Remember which column an ingredient reads (for the value bound check)."""
        self.uses.setdefault(ingredient, set()).add(column)


def _merge(parts: list[Rendered], q_join: str, t_join: str, wrap: str = "{}") -> Rendered:
    """Combine rendered sub-parts with the same connective in both texts."""
    out = Rendered(
        wrap.format(q_join.join(p.query for p in parts)),
        wrap.format(t_join.join(p.twin for p in parts)),
    )
    for p in parts:
        out.params.extend(p.params)
        for ing, cols in p.uses.items():
            out.uses.setdefault(ing, set()).update(cols)
    return out


# Columns by table alias: (column, kind) with kind text / int / real.
COUNTRY_COLS = [
    ("c.Name", "text"), ("c.Region", "text"), ("c.HeadOfState", "text"),
    ("c.LocalName", "text"), ("c.IndepYear", "int"), ("c.Continent", "text"),
    ("c.LifeExpectancy", "real"),
]
CITY_COLS = [("ci.Name", "text"), ("ci.District", "text"), ("ci.Population", "int")]
JOIN_REGIONS = (
    "c.Region IN ('Nordic Countries', 'Caribbean', 'Southern Africa', 'British Islands', "
    "'Polynesia', 'Baltic Countries')"
)
PREFIXES = ["A", "B", "S", "C", "Ma", "Uni", "1", "19", "E", "", "N"]


@st.composite
def plain_leaf(draw: st.DrawFn, joined: bool) -> Rendered:
    """A plain predicate, identical in both texts (sometimes with a ``?``)."""
    choices = [
        ("c.Population > {}", st.sampled_from([0, 100000, 5000000, 50000000])),
        ("c.Continent = {}", st.sampled_from(["'Asia'", "'Europe'", "'Africa'", "'Oceania'"])),
        ("c.LifeExpectancy < {}", st.sampled_from([50, 65.5, 75])),
        ("c.IndepYear > {}", st.sampled_from([1800, 1950, 1990])),
        ("c.IndepYear IS NULL{}", st.just("")),
    ]
    if joined:
        choices.append(("ci.Population > {}", st.sampled_from([10000, 200000, 1000000])))
    template, values = draw(st.sampled_from(choices))
    value = draw(values)
    if value != "" and not isinstance(value, str) and draw(st.booleans()):
        text = template.format("?")
        out = Rendered(text, text, [value])
        return out
    text = template.format(value)
    return Rendered(text, text)


@st.composite
def ingredient_leaf(draw: st.DrawFn, joined: bool) -> Rendered:
    """An ingredient predicate and its exact SQL twin."""
    column, kind = draw(st.sampled_from(COUNTRY_COLS + (CITY_COLS if joined else [])))
    which = draw(st.sampled_from(["starts", "length", "upper"]))
    if which == "starts":
        prefix = draw(st.sampled_from(PREFIXES))
        call = f"{{{{StartsWith('{prefix}', {column})}}}}"
        twin = f"(substr(CAST({column} AS TEXT), 1, {len(prefix)}) = '{prefix}')"
        form = draw(st.sampled_from(["= TRUE", "= FALSE", ""]))
        out = Rendered(f"{call} {form}".strip(), f"{twin} {form}".strip())
        out.use("StartsWith", column)
        return out
    if which == "length":
        op = draw(st.sampled_from([">", "<", "=", "<="]))
        k = draw(st.integers(min_value=4, max_value=12))
        out = Rendered(f"<<Length({column})>> {op} {k}", f"length({column}) {op} {k}")
        out.use("Length", column)
        return out
    # Compare with a real value of the column so the predicate is not always false.
    value = draw(st.sampled_from(sorted(_column_values(column), key=sqlite_text)))
    target = "'" + ascii_upper(sqlite_text(value)).replace("'", "''") + "'"
    op = draw(st.sampled_from(["=", ">=", "<"]))
    out = Rendered(f"{{{{upper({column})}}}} {op} {target}", f"upper({column}) {op} {target}")
    out.use("Upper", column)
    return out


def predicate(joined: bool) -> st.SearchStrategy[Rendered]:
    """Random boolean trees of leaves under AND / OR / NOT, depth bounded."""
    leaves = st.one_of(plain_leaf(joined), ingredient_leaf(joined))

    def extend(children: st.SearchStrategy[Rendered]) -> st.SearchStrategy[Rendered]:
        pairs = st.lists(children, min_size=2, max_size=3)
        # OR listed twice: long AND chains of selective leaves are mostly empty.
        # Comparing two truth values (= / IS NOT) puts predicates in places that
        # are neither positive nor negative, where relaxing one is not sound.
        two = st.lists(children, min_size=2, max_size=2)
        return st.one_of(
            pairs.map(lambda ps: _merge(ps, " AND ", " AND ", "({})")),
            pairs.map(lambda ps: _merge(ps, " OR ", " OR ", "({})")),
            pairs.map(lambda ps: _merge(ps, " OR ", " OR ", "({})")),
            children.map(lambda p: _merge([p], "", "", "(NOT {})")),
            two.map(lambda ps: _merge(ps, ") = (", ") = (", "(({}))")),
            two.map(lambda ps: _merge(ps, ") IS NOT (", ") IS NOT (", "(({}))")),
        )

    return st.recursive(leaves, extend, max_leaves=5)


@st.composite
def country_source(draw: st.DrawFn) -> tuple[Rendered, Rendered]:
    """``country`` as itself, a filtered derived table or a filtered CTE.

    Returns (WITH prefix, FROM item); the inner filter is itself a random
    predicate, so ingredients also run in inner scopes before outer ones.
    """
    shape = draw(st.sampled_from(["table", "derived", "cte"]))
    if shape == "table":
        return Rendered("", ""), Rendered("country c", "country c")
    inner = draw(predicate(False))
    if shape == "derived":
        return Rendered("", ""), _merge([inner], "", "", "(SELECT * FROM country c WHERE {}) c")
    return _merge([inner], "", "", "WITH cc AS (SELECT * FROM country c WHERE {}) "), Rendered(
        "cc c", "cc c"
    )


def _order_limit(draw: st.DrawFn, key: str) -> tuple[list[Rendered], bool]:
    """Optional ORDER BY (plain or on an ingredient, always total) and LIMIT/OFFSET."""
    order = draw(st.sampled_from(["none", "plain", "ingredient"]))
    parts: list[Rendered] = []
    if order == "plain":
        parts.append(Rendered(f" ORDER BY {key}", f" ORDER BY {key}"))
    elif order == "ingredient":
        ob = Rendered(f" ORDER BY {{{{Length(c.Name)}}}} DESC, {key}",
                      f" ORDER BY length(c.Name) DESC, {key}")
        ob.use("Length", "c.Name")
        parts.append(ob)
    if order != "none":
        limit = draw(st.sampled_from([None, 1, 5, 20]))
        if limit is not None:
            offset = draw(st.sampled_from([0, 2]))
            text = f" LIMIT {limit} OFFSET {offset}"
            parts.append(Rendered(text, text))
    return parts, order != "none"


@st.composite
def queries(draw: st.DrawFn) -> tuple[Rendered, bool]:
    """A whole query; returns it and whether row order is to be compared."""
    prefix, country = draw(country_source())
    joined = draw(st.booleans())
    if joined:
        join = draw(st.sampled_from(["plain", "ingredient"]))
        on = (
            Rendered("ci.CountryCode = c.Code", "ci.CountryCode = c.Code")
            if join == "plain"
            else Rendered("{{LowerJoin(ci.CountryCode, c.Code)}}",
                          "lower(trim(ci.CountryCode)) = lower(trim(c.Code))")
        )
        source = _merge(
            [Rendered("city ci JOIN ", "city ci JOIN "), country, Rendered(" ON ", " ON "), on],
            "", "",
        )
        key = "c.Code, ci.ID"
    else:
        source = country
        key = "c.Code"
    where = draw(predicate(joined))
    if joined:
        # Keep joined queries small (~250 city rows) so 100 examples stay fast;
        # it also puts a plain filter in front of every ingredient cascade.
        where = _merge([Rendered(JOIN_REGIONS, JOIN_REGIONS), where], " AND ", " AND ")
    if draw(st.integers(0, 3)) == 0:
        # Grouped shape: aggregates over an ingredient, HAVING over an ingredient.
        columns = Rendered("c.Continent, COUNT(*), SUM({{Length(c.Name)}})",
                           "c.Continent, COUNT(*), SUM(length(c.Name))")
        columns.use("Length", "c.Name")
        having = draw(ingredient_leaf(False))
        tail = [Rendered(" GROUP BY c.Continent", " GROUP BY c.Continent"),
                _merge([having], "", "", " HAVING SUM({}) >= 1"),
                Rendered(" ORDER BY c.Continent", " ORDER BY c.Continent")]
        ordered = True
    else:
        columns = Rendered(key, key)
        if draw(st.booleans()):
            column, _ = draw(st.sampled_from(COUNTRY_COLS))
            extra = Rendered(f"{{{{Length({column})}}}}", f"length({column})")
            extra.use("Length", column)
            columns = _merge([columns, extra], ", ", ", ")
        tail, ordered = _order_limit(draw, key)
    parts = [
        prefix,
        _merge([columns], "", "", "SELECT {}"),
        _merge([source], "", "", " FROM {}"),
        _merge([where], "", "", " WHERE {}"),
        *tail,
    ]
    return _merge(parts, "", ""), ordered


@cache
def _column_values(column: str) -> frozenset[Any]:
    """All distinct non-NULL values of an aliased column (c. / ci.)."""
    alias, name = column.split(".")
    table = "country" if alias == "c" else "city"
    return frozenset(distinct_values(DB, f"SELECT DISTINCT {name} FROM {table}"))


def test_grammar_renders_valid_twins() -> None:
    """The twin renderer is right, checked without the engine.

    Twins run, ``?`` counts agree, and where the oracle applies (maps only) the
    query evaluated row by row equals the twin.
    """

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(queries())
    def check(item: tuple[Rendered, bool]) -> None:
        rendered, ordered = item
        run_sql(DB, rendered.twin, rendered.params)
        assert rendered.query.count("?") == rendered.twin.count("?") == len(rendered.params)
        if not is_map_only(rendered.query):
            return
        want, _ = run_sql(DB, rendered.twin, rendered.params)
        con = connect_readonly(DB)
        try:
            register_maps(con)
            rows = con.execute(to_reference_sql(rendered.query), rendered.params).fetchall()
        finally:
            con.close()
        assert_same_rows(normalise_rows(rows), want, ordered, rendered.query)

    check()


@pytest.mark.filterwarnings("ignore")
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    report_multiple_bugs=False,  # one shrunk failure is enough; keeps a red run short
)
@given(queries())
def test_random_queries_match_twin(item: tuple[Rendered, bool]) -> None:
    """Same rows from the engine and the twin; maps see only real, non-NULL values."""
    rendered, ordered = item
    want, ncols = run_sql(DB, rendered.twin, rendered.params)
    target(float(min(len(want), 30)), label="rows (steer away from empty results)")
    smoothie, ingredients = run_blend(DB, rendered.query, rendered.params)
    assert len(smoothie.df.columns) == ncols
    assert_same_rows(df_rows(smoothie.df), want, ordered,
                     f"query: {rendered.query}\ntwin:  {rendered.twin}\nparams: {rendered.params}")
    for name, columns in rendered.uses.items():
        bound: set[Any] = set().union(*(_column_values(c) for c in columns))
        got = {normalise_cell(v) for v in ingredients[name].passed()}
        assert None not in got
        assert got <= bound, f"{name} got values outside its columns: {got - bound}"


def plain_predicate() -> st.SearchStrategy[Rendered]:
    """Random boolean trees of plain (ingredient-free) leaves."""

    def extend(children: st.SearchStrategy[Rendered]) -> st.SearchStrategy[Rendered]:
        pairs = st.lists(children, min_size=2, max_size=3)
        return st.one_of(
            pairs.map(lambda ps: _merge(ps, " AND ", " AND ", "({})")),
            pairs.map(lambda ps: _merge(ps, " OR ", " OR ", "({})")),
            children.map(lambda p: _merge([p], "", "", "(NOT {})")),
        )

    return st.recursive(plain_leaf(False), extend, max_leaves=4)


@st.composite
def single_map_queries(draw: st.DrawFn) -> tuple[Rendered, str, str, list[Any]]:
    """One map predicate AND-ed with a random plain filter (in any scope shape).

    Returns the query, the map's name, and the plain-SQL candidate query (with
    its parameters) that ARCHITECTURE.md §3 says yields exactly the values the
    map receives: the same scope, projection ``DISTINCT value``, NULLs dropped.
    """
    plain = draw(plain_predicate())
    leaf = draw(ingredient_leaf(False))
    ((ingredient, columns),) = leaf.uses.items()
    (column,) = columns
    shape = draw(st.sampled_from(["table", "derived", "cte"]))
    inner = draw(plain_predicate()) if shape != "table" else Rendered("", "")
    prefix, source = "", "country c"
    if shape == "derived":
        source = f"(SELECT * FROM country c WHERE {inner.twin}) c"
    elif shape == "cte":
        prefix, source = f"WITH cc AS (SELECT * FROM country c WHERE {inner.twin}) ", "cc c"
    conj = [plain, leaf] if draw(st.booleans()) else [leaf, plain]
    where = _merge(conj, " AND ", " AND ")
    head = f"{prefix}SELECT c.Code FROM {source} WHERE "
    query = Rendered(head + where.query, head + where.twin, inner.params + where.params)
    candidates = (
        f"{prefix}SELECT DISTINCT {column} FROM {source} WHERE {plain.twin} "
        f"AND {column} IS NOT NULL"
    )
    return query, ingredient, candidates, inner.params + plain.params


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(single_map_queries())
def test_single_map_gets_exactly_its_candidates(
    item: tuple[Rendered, str, str, list[Any]],
) -> None:
    """One map under AND with plain filters receives exactly the filtered values."""
    rendered, ingredient, candidates, candidate_params = item
    want, _ = run_sql(DB, rendered.twin, rendered.params)
    smoothie, ingredients = run_blend(DB, rendered.query, rendered.params)
    assert_same_rows(df_rows(smoothie.df), want, False, rendered.query)
    expected, _ = run_sql(DB, candidates, candidate_params)
    got = {normalise_cell(v) for v in ingredients[ingredient].passed()}
    assert got == {r[0] for r in expected}, rendered.query
