"""ENUM matching (SUQL §5.2): literals mapped into a small vocabulary, opt-in, traced."""

from __future__ import annotations

from pathlib import Path

from sqlglot import parse_one

from blendsql.models.base import FunctionModel, Request
from blendsql.plan.enum_match import comparisons, embedding_classifier, match_enums
from blendsql.retrieval.embeddings import HashingEmbedder

from .helpers import plain, rows, session

VOCAB = {("restaurants", "cuisine"): ["Coffee & Tea", "Italian", "Thai"]}


def _vocab(t: str, c: str) -> list[str] | None:
    return VOCAB.get((t, c))


def _never(text: str, values: list[str]) -> tuple[str | None, float, str]:
    return None, 0.0, "none"


def test_rule_rewrites_only_out_of_vocabulary_literals() -> None:
    tree = parse_one("SELECT * FROM restaurants r WHERE r.cuisine = 'coffee' "
                     "AND name = 'x' OR 'thai' = cuisine OR cuisine IN ('Italian', 'ITALIAN ')")
    classify = embedding_classifier(HashingEmbedder(), 0.3)
    out, rewrites = match_enums(tree, _vocab, classify)
    sql = out.sql()
    assert "'Coffee & Tea'" in sql and "'Thai' = cuisine" in sql
    assert "name = 'x'" in sql and "IN ('Italian', 'Italian')" in sql
    assert {(r.literal, r.replacement) for r in rewrites} == {
        ("coffee", "Coffee & Tea"), ("thai", "Thai"), ("ITALIAN ", "Italian")}
    assert tree.sql().count("'coffee'") == 1, "the rule must not mutate its input"


def test_rule_leaves_unplaceable_and_large_vocabularies() -> None:
    tree = parse_one("SELECT * FROM restaurants WHERE cuisine = 'pizza'")
    out, rewrites = match_enums(tree, _vocab, _never)
    assert out == tree and rewrites == []
    big = {("restaurants", "cuisine"): [f"v{i}" for i in range(51)]}
    out, rewrites = match_enums(parse_one("SELECT * FROM restaurants WHERE cuisine = 'V1'"),
                                lambda t, c: big.get((t, c)), _never)
    assert rewrites == []


def test_literals_in_ingredient_arguments_are_not_comparisons() -> None:
    from blendsql.grammar import parse
    from blendsql.ingredients.base import IngredientRegistry

    from .helpers import Has

    tree = parse("SELECT * FROM restaurants WHERE {{Has('coffee', cuisine)}} = 'coffee'",
                 IngredientRegistry([Has]))
    assert comparisons(tree) == []


def test_end_to_end_embedding(rdb: Path) -> None:
    q = "SELECT COUNT(*) FROM restaurants WHERE cuisine = 'coffee'"
    with session(rdb) as s:
        assert rows(s.execute(q).df) == [(0,)]
    with session(rdb, enum_match="hashing", enum_threshold=0.3) as s:
        out = s.execute(q)
    assert rows(out.df) == plain(
        rdb, "SELECT COUNT(*) FROM restaurants WHERE cuisine = 'Coffee & Tea'")
    steps = [t for t in out.trace if t.kind == "plan" and t.details.get("enum_match")]
    assert len(steps) == 1 and steps[0].details["replacement"] == "Coffee & Tea"
    assert out.meta.model_calls == 0


def test_end_to_end_model_choice(rdb: Path) -> None:
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return "Sushi Bars" if "'raw fish'" in req.prompt else "(none of these)"

    from blendsql import BlendSQL

    with BlendSQL(str(rdb), model=FunctionModel(fn), cache=False, enum_match="model") as s:
        out = s.execute("SELECT COUNT(*) FROM restaurants WHERE cuisine = 'raw fish' "
                        "OR cuisine = 'zzz'")
    assert rows(out.df) == plain(
        rdb, "SELECT COUNT(*) FROM restaurants WHERE cuisine = 'Sushi Bars'")
    assert len(seen) == 2 and out.meta.model_calls == 2
