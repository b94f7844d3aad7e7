"""Execution-guided choice among candidate programs (``Parser(candidates=k)``), with a
scripted model whose program depends on the material its prompt shows."""

from __future__ import annotations

import sqlite3

import pytest

from blendsql import BlendSQL
from blendsql.errors import OptionError
from blendsql.ingredients.base import IngredientRegistry
from blendsql.ingredients.builtin import BUILTINS
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.ask import ask
from blendsql.nl.choice import ProgramCandidate, choose, rows_key
from blendsql.nl.parser import Example, Parser

EXAMPLES = [
    Example("Which player went to Rice?", "SELECT player FROM w WHERE school = 'Rice'"),
    Example("Which pitcher was picked first?",
            "SELECT player FROM w WHERE position = 'Pitcher' ORDER BY pick LIMIT 1"),
    Example("How many catchers are there?", "SELECT COUNT(*) FROM w WHERE position = 'Catcher'"),
]
QUESTION = "Which player was picked first?"
RIGHT = "SELECT player FROM w ORDER BY pick LIMIT 1"  # Buster Posey
RIGHT_OTHER_WORDS = "SELECT w.player FROM w WHERE w.pick = (SELECT MIN(pick) FROM w)"
WRONG = "SELECT player FROM w WHERE position = 'Pitcher' ORDER BY pick LIMIT 1"  # Joe Smith
EMPTY = "SELECT player FROM w WHERE school = 'Stanford'"


@pytest.fixture()
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:", check_same_thread=False)
    c.executescript("""
        CREATE TABLE w (player TEXT, position TEXT, school TEXT, pick INTEGER);
        INSERT INTO w VALUES ('Buster Posey', 'Catcher', 'Florida State', 5),
                             ('Joe Smith', 'Pitcher', 'Georgia', 12),
                             ('Al Jones', 'Pitcher', 'Rice', 30);
    """)
    return c


def material(req: Request) -> str:
    """Which material a program prompt shows: the example it holds, 'none', and
    whether it was sampled."""
    shown = [ex.question for ex in EXAMPLES if f"-- Question: {ex.question}" in req.prompt]
    return ("sampled " if req.temperature > 0 else "") + (shown[0] if shown else "none")


def scripted(answers: dict[str, str], default: str) -> tuple[FunctionModel, list[Request]]:
    seen: list[Request] = []

    def fn(req: Request) -> str:
        seen.append(req)
        return answers.get(material(req), default)

    return FunctionModel(fn), seen


def registry() -> IngredientRegistry:
    return IngredientRegistry(BUILTINS)


def parser(model: FunctionModel, k: int) -> Parser:
    return Parser(model, examples=EXAMPLES, n_examples=1, candidates=k, check_values=False)


def test_the_largest_group_of_equal_results_wins_over_the_greedy_program(
        conn: sqlite3.Connection) -> None:
    # the nearest example (the pitcher one) leads the model astray; two other readings agree
    model, seen = scripted({"Which pitcher was picked first?": WRONG,
                            "Which player went to Rice?": RIGHT,
                            "How many catchers are there?": RIGHT_OTHER_WORDS}, WRONG)
    result = parser(model, 3).parse(QUESTION, conn, registry())
    assert result.program in (RIGHT, RIGHT_OTHER_WORDS)
    assert [c.votes for c in result.candidates] == [1, 2, 2]
    assert [c.chosen for c in result.candidates] == [False, True, False]
    assert result.candidates[0].source == "nearest examples"
    assert len(seen) == 3  # one program each
    assert len({r.prompt for r in seen}) == 3  # three different prompts


def test_a_tie_goes_to_the_greedy_program_with_the_nearest_examples(
        conn: sqlite3.Connection) -> None:
    model, _ = scripted({"Which pitcher was picked first?": WRONG,
                         "Which player went to Rice?": RIGHT}, EMPTY)
    result = parser(model, 2).parse(QUESTION, conn, registry())
    assert result.program == WRONG
    assert [c.votes for c in result.candidates] == [1, 1]


def test_one_candidate_is_todays_parser(conn: sqlite3.Connection) -> None:
    model, seen = scripted({"Which pitcher was picked first?": WRONG}, RIGHT)
    result = parser(model, 1).parse(QUESTION, conn, registry())
    assert result.program == WRONG
    assert result.candidates == []
    assert len(seen) == 1


def test_a_result_with_rows_beats_a_larger_group_of_empty_ones(conn: sqlite3.Connection) -> None:
    # an empty result is what a wrong value gives; the parser retries it once, so each
    # empty candidate costs two calls, and it stays a (soft) candidate
    model, _ = scripted({"How many catchers are there?": RIGHT}, EMPTY)
    result = parser(model, 3).parse(QUESTION, conn, registry())
    assert result.program == RIGHT
    votes = {c.source: (c.rows, c.votes) for c in result.candidates}
    assert votes["examples 3-3"] == (1, 1)
    assert [v for v in votes.values() if v[0] == 0] == [(0, 2), (0, 2)]


def test_an_invalid_candidate_is_kept_out_of_the_vote(conn: sqlite3.Connection) -> None:
    model, _ = scripted({"Which player went to Rice?": "SELECT nonsense FROM nowhere",
                         "How many catchers are there?": "SELECT nonsense FROM nowhere"}, RIGHT)
    result = parser(model, 3).parse(QUESTION, conn, registry())
    assert result.program == RIGHT
    invalid = result.candidates[1:]
    assert all(c.program is None and c.error == "no valid program" and c.votes == 0
               for c in invalid)
    assert result.candidates[0].votes == 1


def test_the_pool_running_out_gives_other_prompts_sampled(conn: sqlite3.Connection) -> None:
    model, seen = scripted({}, RIGHT)
    result = parser(model, 6).parse(QUESTION, conn, registry())
    sources = [c.source for c in result.candidates]
    assert sources == ["nearest examples", "examples 2-2", "examples 3-3", "no examples",
                       "sampled, nearest examples", "sampled, examples 2-2"]
    assert len({(r.prompt, r.temperature) for r in seen}) == 6
    assert [r.temperature > 0 for r in seen] == [False] * 4 + [True] * 2
    assert result.candidates[0].votes == 6 and result.candidates[0].chosen


def test_ask_shows_the_candidates_and_votes_in_its_trace(conn: sqlite3.Connection) -> None:
    model, _ = scripted({"Which pitcher was picked first?": WRONG}, RIGHT)
    bsql = BlendSQL(conn, model=model)
    answer = ask(bsql, QUESTION, parser=parser(model, 3), fallback=False)
    assert answer.answer == "Buster Posey"
    assert [c.votes for c in answer.candidates] == [1, 2, 2]
    (step,) = [s for s in answer.trace if s.details.get("stage") == "choice"]
    assert "2 agree" in step.summary
    assert [c["chosen"] for c in step.details["candidates"]] == [False, True, False]


def test_candidates_must_be_a_positive_count() -> None:
    model, _ = scripted({}, RIGHT)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(OptionError):
            Parser(model, candidates=bad)  # type: ignore[arg-type]


def test_rows_key_ignores_order_and_whole_floats() -> None:
    assert rows_key([("a", 1), ("b", 2.0)]) == rows_key([("b", 2), ("a", 1)])
    assert rows_key([("a", 1)]) != rows_key([("a", 1), ("a", 1)])  # a multiset


def test_programs_with_ingredients_vote_only_with_the_same_program() -> None:
    def cand(program: str, key: str | None, rows: int | None) -> ProgramCandidate:
        return ProgramCandidate("x", program, key=key, rows=rows)

    cands = [cand("A", "program:1", None), cand("B", "rows:1", 3), cand("C", "rows:1", 3)]
    chosen = choose(cands)
    assert chosen is cands[1] and [c.votes for c in cands] == [1, 2, 2]




def test_no_examples_asked_means_no_variant_shows_any(conn: sqlite3.Connection) -> None:
    model, seen = scripted({}, RIGHT)
    p = Parser(model, examples=EXAMPLES, n_examples=0, candidates=3, check_values=False)
    result = p.parse(QUESTION, conn, registry())
    assert [c.source for c in result.candidates] == ["nearest examples", "sampled, nearest examples"]
    assert all(material(r).endswith("none") for r in seen)
