"""CRUSH4SQL schema selection: each step alone, then end to end."""

from __future__ import annotations

import numpy as np
import pytest

from blendsql.errors import BlendSQLError, ModelError
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.schema_select import (
    SchemaGraph,
    SchemaSelector,
    build_prompt,
    columns_in_sql,
    entropy_weights,
    greedy_select,
    hallucinate,
    is_key_like,
    parse_hallucination,
    probe_texts,
    select_schema,
)
from blendsql.retrieval.embeddings import HashingEmbedder

# A tiny two-database union schema, like spider_UNION (db.table.column).
SCHEMA = [
    "music.singer.singer_id", "music.singer.name", "music.singer.age", "music.singer.country",
    "music.concert.concert_id", "music.concert.concert_name", "music.concert.year",
    "music.concert.stadium_id",
    "music.stadium.stadium_id", "music.stadium.name", "music.stadium.capacity",
    "music.singer_in_concert.singer_id", "music.singer_in_concert.concert_id",
    "pets.pet.pet_id", "pets.pet.pet_type", "pets.pet.weight", "pets.pet.pet_age",
    "pets.student.stu_id", "pets.student.first_name", "pets.student.age", "pets.student.major",
    "pets.has_pet.stu_id", "pets.has_pet.pet_id",
    "flights.airport.airport_code", "flights.airport.city", "flights.airport.country",
    "flights.flight.flight_no", "flights.flight.source_airport", "flights.flight.dest_airport",
]


# --- step 1: hallucination -------------------------------------------------

def test_prompt_contains_examples_and_question_last() -> None:
    p = build_prompt("How old is the oldest cat?")
    assert p.rstrip().endswith("Question: How old is the oldest cat?\nSchema:")
    assert "stadium.stadium_id" in p


def test_parse_hallucination_accepts_dotted_paren_and_bullets() -> None:
    text = "- pets.weight\n2. student.age\nstudent(major, age)\npets.weight\nQuestion: next"
    assert parse_hallucination(text) == ["pets.weight", "student.age", "student.major"]
    assert parse_hallucination("") == []
    assert len(parse_hallucination("\n".join(f"t.c{i}" for i in range(30)), limit=5)) == 5


def test_hallucinate_sends_few_shot_prompt_and_parses_lines() -> None:
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return "pet.weight\npet.pet_type\n"

    out = hallucinate("What is the weight of each cat?", FunctionModel(fn))
    assert out == ["pet.weight", "pet.pet_type"]
    assert "What is the weight of each cat?" in seen[0].prompt
    assert "Question:" in seen[0].stop


def test_backend_failure_becomes_model_error() -> None:
    def boom(req: Request) -> str:
        raise RuntimeError("connection refused")

    with pytest.raises(ModelError):
        hallucinate("q", FunctionModel(boom))


# --- step 2: probes --------------------------------------------------------

def test_probes_start_with_question_and_prefix_it() -> None:
    probes = probe_texts("Oldest cat?", ["pet.pet_age"])
    assert probes == ["Oldest cat?", "Oldest cat? pet . pet age"]
    assert probe_texts("q", ["a.b"], prefix_question=False) == ["q", "a . b"]


# --- step 3: entropy weights -----------------------------------------------

def test_peaked_probe_outweighs_flat_probe() -> None:
    peaked = np.array([0.9, 0.1, 0.1, 0.1, 0.1, 0.1])
    flat = np.array([0.5, 0.5, 0.49, 0.5, 0.5, 0.5])
    w = entropy_weights(np.vstack([peaked, flat]))
    assert w[0] > w[1]
    assert w.sum() == pytest.approx(1.0)


def test_all_flat_probes_get_uniform_weights() -> None:
    w = entropy_weights(np.full((3, 10), 0.3))
    assert np.allclose(w, 1 / 3)


def test_weights_depend_on_temperature_sensibly() -> None:
    s = np.array([[0.8, 0.6, 0.1, 0.1], [0.5, 0.45, 0.45, 0.4]])
    sharp = entropy_weights(s, temperature=0.01)
    assert sharp[0] > sharp[1]


# --- step 4: greedy --------------------------------------------------------

def test_key_like_names() -> None:
    assert all(is_key_like(c) for c in ["id", "stu_id", "StuID", "country_code", "petid"])
    assert not any(is_key_like(c) for c in ["name", "video", "valid_from", "idea"])


def test_greedy_respects_budget_and_never_repeats() -> None:
    rng = np.random.default_rng(0)
    sims = rng.random((4, len(SCHEMA)))
    graph = SchemaGraph.build(SCHEMA)
    for b in (0, 1, 5, len(SCHEMA), len(SCHEMA) + 10):
        picked = greedy_select(sims, np.full(4, 0.25), graph, b)
        assert len(picked) == min(b, len(SCHEMA))
        assert len(set(picked)) == len(picked)


def test_greedy_first_pick_covers_heaviest_probe() -> None:
    graph = SchemaGraph.build(SCHEMA)
    sims = np.zeros((2, len(SCHEMA)))
    sims[0, 5] = 0.9
    sims[1, 20] = 0.9
    picked = greedy_select(sims, np.array([0.8, 0.2]), graph, 2, lam=0.0)
    assert picked == [5, 20]


def test_greedy_prefers_connected_element_on_ties() -> None:
    graph = SchemaGraph.build(SCHEMA)
    name = SCHEMA.index("music.singer.name")
    age_singer = SCHEMA.index("music.singer.age")
    age_student = SCHEMA.index("pets.student.age")
    sims = np.zeros((1, len(SCHEMA)))
    sims[0, name] = 0.9
    sims[0, age_singer] = sims[0, age_student] = 0.5
    with_conn = greedy_select(sims, np.ones(1), graph, 2, lam=0.1)
    assert with_conn == [name, age_singer]
    # a tie broken by position alone would pick the same here; make the
    # unconnected one slightly better and check connectivity still wins
    sims[0, age_student] = 0.52
    assert greedy_select(sims, np.ones(1), graph, 2, lam=0.1) == [name, age_singer]
    assert greedy_select(sims, np.ones(1), graph, 2, lam=0.0) == [name, age_student]


def test_join_keys_of_other_tables_count_as_connected() -> None:
    graph = SchemaGraph.build(SCHEMA)
    cap = SCHEMA.index("music.stadium.capacity")
    concert_key = SCHEMA.index("music.concert.stadium_id")
    other = SCHEMA.index("flights.airport.city")
    sims = np.zeros((1, len(SCHEMA)))
    sims[0, cap] = 0.9
    sims[0, other] = 0.31
    sims[0, concert_key] = 0.3
    # stadium.stadium_id is in the same table; concert.stadium_id joins to it
    picked = greedy_select(sims, np.ones(1), graph, 3, lam=0.1, mu=0.3)
    assert concert_key in picked and other not in picked


def test_bare_id_joins_table_named_key() -> None:
    graph = SchemaGraph.build(["db.people.id", "db.people.name", "db.perp.people_id",
                               "db.perp.year", "other.x.people_id"])
    sims = np.array([[0.0, 0.0, 0.9, 0.0, 0.05]])
    picked = greedy_select(sims, np.ones(1), graph, 3, lam=0.1, mu=0.3)
    assert picked[0] == 2 and 0 in picked  # db.people.id joins perp.people_id
    assert 4 not in picked[:2]  # same name in another database is not a join


def test_schema_graph_with_explicit_tables_allows_dots_in_columns() -> None:
    elems = ["Census 2011.No. of households", "Census 2011.State"]
    g = SchemaGraph.build(elems, tables=["Census 2011", "Census 2011"])
    assert g.table_ids.tolist() == [0, 0]
    with pytest.raises(BlendSQLError):
        SchemaGraph.build(elems, tables=["Census 2011"])


# --- end to end ------------------------------------------------------------

def _model(answer: str) -> FunctionModel:
    return FunctionModel(lambda req: answer, name="fixed")


def test_select_schema_end_to_end_with_hallucination() -> None:
    q = "What is the type and weight of the pet owned by students majoring in art?"
    model = _model("pet.pet_type\npet.weight\nstudent.major\nhas_pet.stu_id\n")
    picked = select_schema(q, SCHEMA, model, HashingEmbedder(), budget=8)
    assert len(picked) == 8
    for gold in ["pets.pet.pet_type", "pets.pet.weight", "pets.student.major"]:
        assert gold in picked
    assert sum(p.startswith("pets.") for p in picked) >= 6


def test_hallucination_adds_recall_over_question_alone() -> None:
    # the question never says "capacity" or "stadium"; the hallucinated schema does
    q = "How many people can the venue of the 2014 show hold?"
    emb = HashingEmbedder()
    sel = SchemaSelector(SCHEMA, emb)
    plain = sel.select(q, None, budget=3)
    helped = sel.select(q, _model("stadium.capacity\nconcert.year\n"), budget=3)
    assert "music.stadium.capacity" in helped
    assert "music.stadium.capacity" not in plain


def test_empty_or_zero_budget() -> None:
    assert select_schema("q", SCHEMA, None, HashingEmbedder(), budget=0) == []
    with pytest.raises(BlendSQLError):
        select_schema("q", [], None, HashingEmbedder())


# --- gold columns from SQL -------------------------------------------------

SPIDER_LIKE = {
    "singer": ["Singer_ID", "Name", "Age", "Country"],
    "concert": ["concert_ID", "concert_Name", "Year", "Stadium_ID"],
    "singer_in_concert": ["concert_ID", "Singer_ID"],
    "stadium": ["Stadium_ID", "Name", "Capacity"],
}


def test_columns_resolve_aliases_and_joins() -> None:
    sql = ("SELECT T2.name FROM singer_in_concert AS T1 JOIN singer AS T2 "
           "ON T1.singer_id = T2.singer_id JOIN concert AS T3 ON T1.concert_id = T3.concert_id "
           "WHERE T3.year = 2014")
    assert columns_in_sql(sql, SPIDER_LIKE) == {
        ("singer", "name"), ("singer_in_concert", "singer_id"), ("singer", "singer_id"),
        ("singer_in_concert", "concert_id"), ("concert", "concert_id"), ("concert", "year"),
    }


def test_columns_unqualified_subquery_and_double_quoted_strings() -> None:
    sql = ('SELECT name FROM stadium WHERE stadium_id NOT IN '
           '(SELECT stadium_id FROM concert WHERE concert_name = "Auditions")')
    assert columns_in_sql(sql, SPIDER_LIKE) == {
        ("stadium", "name"), ("stadium", "stadium_id"), ("concert", "stadium_id"),
        ("concert", "concert_name"),
    }


def test_star_count_reads_nothing_select_star_reads_all() -> None:
    assert columns_in_sql("SELECT count(*) FROM singer", SPIDER_LIKE) == set()
    assert columns_in_sql("SELECT * FROM stadium", SPIDER_LIKE) == {
        ("stadium", "stadium_id"), ("stadium", "name"), ("stadium", "capacity")}


def test_columns_case_insensitive_and_set_operations() -> None:
    sql = "SELECT Name FROM SINGER EXCEPT SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.Stadium_ID = T2.stadium_id"
    assert columns_in_sql(sql, SPIDER_LIKE) == {
        ("singer", "name"), ("stadium", "name"), ("concert", "stadium_id"),
        ("stadium", "stadium_id")}


def test_unreadable_sql_raises_blendsql_error() -> None:
    with pytest.raises(BlendSQLError):
        columns_in_sql("SELECT FROM WHERE (", SPIDER_LIKE)


# --- collective selection (default method) ---------------------------------

def test_group_relevance_sums_top_scores_per_group() -> None:
    from blendsql.nl.schema_select import group_relevance

    scores = np.array([0.9, 0.1, 0.5, 0.4, 0.3])
    groups = np.array([0, 0, 1, 1, 1])
    rel = group_relevance(scores, groups, top=2)
    # group 0: (0.9 + 0.1) / 2; group 1: best two (0.5 + 0.4) / 2, the third ignored
    assert np.allclose(rel, [0.5, 0.5, 0.45, 0.45, 0.45])
    # one-element groups are divided by top, not by their size: no single-hit win
    assert np.allclose(group_relevance(np.array([0.8]), np.array([0]), top=2), [0.4])


def test_element_scores_use_best_probe_and_group_coherence() -> None:
    from blendsql.nl.schema_select import element_scores

    graph = SchemaGraph.build(["a.t.x", "a.t.y", "b.u.x", "b.u.z"])
    q = np.array([0.5, 0.5, 0.5, 0.1])
    # a probe (hallucinated element) that matches a.t.y only
    probe = np.array([0.0, 0.9, 0.0, 0.0])
    flat = element_scores(q[None, :], graph, db_weight=0, table_weight=0)
    assert np.allclose(flat, q)  # no probes, no groups: the question's cosine
    with_probe = element_scores(np.vstack([q, probe]), graph, db_weight=0, table_weight=0)
    assert int(np.argmax(with_probe)) == 1
    # equal question scores for a.t.x and b.u.x: the coherent database (a) wins
    grouped = element_scores(np.vstack([q, probe]), graph)
    assert grouped[0] > grouped[2]


def test_collective_select_pulls_in_join_key_of_chosen_tables() -> None:
    from blendsql.nl.schema_select import collective_select

    elems = ["m.stadium.name", "m.stadium.stadium_id", "m.concert.stadium_id",
             "m.concert.year", "m.other.stadium_id", "x.stadium.stadium_id", "m.concert.theme"]
    graph = SchemaGraph.build(elems)
    # the other database's stadium_id scores above every candidate but the two heads
    scores = np.array([0.9, 0.3, 0.30, 0.8, 0.30, 0.32, 0.31])
    without = [elems[i] for i in collective_select(scores, graph, 3, link_bonus=0.0)]
    assert without == ["m.stadium.name", "m.concert.year", "x.stadium.stadium_id"]
    picked = [elems[i] for i in collective_select(scores, graph, 3, link_bonus=0.03)]
    # once stadium and concert are chosen, the keys joining them (0.30 + 0.03) outrank
    # the other database's same-named key (0.32), which gets no bonus
    assert picked[:2] == ["m.stadium.name", "m.concert.year"]
    assert picked[2] in {"m.stadium.stadium_id", "m.concert.stadium_id", "m.other.stadium_id"}
    assert len(set(collective_select(scores, graph, 7))) == 7
    assert collective_select(scores, graph, 0) == []


def test_selector_methods_and_unknown_method() -> None:
    emb = HashingEmbedder()
    q = "What is the type and weight of the pet owned by students majoring in art?"
    model = _model("pet.pet_type\npet.weight\nstudent.major\n")
    for method in ("collective", "greedy"):
        sel = SchemaSelector(SCHEMA, emb, method=method)
        picked = sel.select(q, model, budget=6)
        assert len(picked) == len(set(picked)) == 6
        assert "pets.pet.pet_type" in picked
    with pytest.raises(BlendSQLError, match="unknown schema selection method"):
        SchemaSelector(SCHEMA, emb, method="magic")


def test_hallucination_request_key_names_the_prompt() -> None:
    from blendsql.nl.schema_select import hallucination_request

    a = hallucination_request("How many pets?")
    assert a.key() == hallucination_request("How many pets?").key()
    assert a.key() != hallucination_request("How many cats?").key()
    other_shots = (("Oldest cat?", ("pets.age",)),)
    assert a.key() != hallucination_request("How many pets?", examples=other_shots).key()
