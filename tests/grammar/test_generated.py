"""Hypothesis-generated *valid* BlendSQL: every one parses, round-trips and keeps its calls."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blendsql.grammar import IngredientCall, parse, to_blendsql

from .conftest import make_registry
from .fixtures import meta_signature

REGISTRY = make_registry()
NAMES = ["LLMMap", "llmqa", "LLMQA", "StartsWith", "SUMMARY", "answer", "LLMValidate"]
WORDS = st.sampled_from(["a", "b", "c", "x y", "it''s", "{{not}}", "<<no>>", "-- no", "a\\b", ""])


@st.composite
def literal(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["str", "int", "float", "bool", "null", "param"]))
    if kind == "str":
        return f"'{draw(WORDS)}'"
    if kind == "int":
        return str(draw(st.integers(-50, 50)))
    if kind == "float":
        return str(draw(st.floats(0, 100, allow_nan=False)).__round__(3))
    if kind == "bool":
        return draw(st.sampled_from(["TRUE", "FALSE"]))
    if kind == "null":
        return "NULL"
    return "?"


Gen = tuple[str, int]  # (text, number of ingredient calls in it)


def _join(parts: list[Gen], sep: str) -> Gen:
    return sep.join(p[0] for p in parts), sum(p[1] for p in parts)


def expr(depth: int) -> st.SearchStrategy[Gen]:
    """A value expression; at depth > 0 it may hold calls and subqueries."""
    base = st.one_of(
        literal(),
        st.sampled_from(["t.c", "w.name", "name", "'t::c'", "'w::school team'", "x.a"]),
        st.builds(lambda a, b: f"{a} || {b}", literal(), st.sampled_from(["t.c", "'!'"])),
        st.lists(literal(), min_size=2, max_size=3).map(lambda xs: f"({', '.join(xs)})"),
    ).map(lambda text: (text, 0))
    if depth <= 0:
        return base
    return st.one_of(
        base,
        call(depth - 1),
        st.builds(
            lambda e, c: (f"(SELECT {e[0]} FROM t WHERE {c[0]} = TRUE)", e[1] + c[1]),
            expr(depth - 1), call(depth - 1),
        ),
    )


def call(depth: int) -> st.SearchStrategy[Gen]:
    """An ingredient call in either brace style with positional and keyword arguments."""

    @st.composite
    def build(draw: st.DrawFn) -> Gen:
        name = draw(st.sampled_from(NAMES))
        args = draw(st.lists(expr(depth), max_size=3))
        keys = draw(st.lists(st.sampled_from(["options", "k", "context", "return_type"]),
                             max_size=2, unique=True))
        for k in keys:
            value, n = draw(expr(depth))
            args.append((f"{k}={value}", n))
        sep = draw(st.sampled_from([", ", ",", " ,\n  "]))
        open_, close = draw(st.sampled_from([("{{", "}}"), ("<<", ">>"), ("{{ ", " }}")]))
        text, n = _join(args, sep)
        return f"{open_}{name}({text}){close}", n + 1

    return build()


@st.composite
def query(draw: st.DrawFn) -> Gen:
    select = _join(draw(st.lists(st.one_of(expr(2), call(1)), min_size=1, max_size=3)), ", ")
    where = draw(call(1))
    extra = draw(st.sampled_from(["", " AND a << 2 > b >> 1", " AND t.c GLOB 'x*'",
                                  " /* {{ c }} */", " -- tail {{\n"]))
    order, n_order = draw(st.sampled_from([("", 0), (" ORDER BY {{LLMMap('o', t.c)}}", 1),
                                           (" LIMIT ? OFFSET 2", 0)]))
    text = f"SELECT {select[0]} FROM t WHERE {where[0]} = TRUE{extra}{order}"
    return text, select[1] + where[1] + n_order


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query())
def test_generated_queries_round_trip(generated: Gen) -> None:
    text, n_calls = generated
    tree = parse(text, REGISTRY)
    calls = sorted(tree.find_all(IngredientCall), key=lambda c: c.call_id)
    assert len(calls) == n_calls
    positions = [c.meta["position"] for c in calls]
    assert positions == sorted(positions)
    rendered = to_blendsql(tree)
    again = parse(rendered, REGISTRY)
    assert again == tree
    assert meta_signature(again) == meta_signature(tree)
    assert to_blendsql(again) == rendered
