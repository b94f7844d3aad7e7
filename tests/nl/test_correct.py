"""Correction from feedback (SPLASH): prompt contents, constraint, validation + retry, diff."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.models.constraints import Text
from blendsql.nl import Conversation, Parser
from blendsql.nl.correct import correct_query, correction_prompt, sql_diff
from blendsql.nl.parser import Example

PETS = Path(__file__).resolve().parents[1] / "data" / "spider" / "pets_1" / "pets_1.sqlite"
EXAMPLES = [Example("Who was picked 5th?", "SELECT w.player FROM w WHERE w.pick = 5",
                    "CREATE TABLE w (player TEXT, pick INTEGER);")]
QUESTION = "How many pets are owned by students?"
WRONG = "SELECT COUNT(*) FROM Pets"
RIGHT = "SELECT COUNT(*) FROM Has_Pet JOIN Student ON Has_Pet.StuID = Student.StuID WHERE Student.Age > 19"
FEEDBACK = "count the rows of has_pet for students older than 19 instead"


class Script:
    def __init__(self, corrections: list[str]) -> None:
        self.corrections = list(corrections)
        self.requests: list[Request] = []

    def __call__(self, req: Request) -> str:
        self.requests.append(req)
        p = req.prompt.rstrip()
        if p.endswith("BlendSQL:"):
            return WRONG
        if p.endswith("Corrected query:"):
            return self.corrections.pop(0)
        return "inform_sql"


def conv_with(script: Script) -> Conversation:
    model = FunctionModel(script)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    return Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1), classify_acts=False)


def test_feedback_gives_a_corrected_query_that_runs_and_differs():
    s = Script([RIGHT])
    conv = conv_with(s)
    first = conv.ask(QUESTION)
    assert first.program == WRONG and first.answer == 3
    turn = conv.correct(FEEDBACK)
    assert turn.act == "correct"
    assert turn.program == RIGHT and turn.previous_program == WRONG
    assert turn.program != first.program
    expected = conv.bsql.execute(RIGHT).df.iloc[0, 0]  # through the engine, on any backend
    assert turn.answer == expected and turn.answer != first.answer
    assert turn.diff is not None and "+ JOIN Student" in turn.diff.replace("Has_Pet ", "")
    assert "- Pets" in turn.diff
    assert "3 row(s)" not in turn.response and "1 row(s) before, 1 now" in turn.response
    assert f"The answer is {expected}." in turn.response


def test_correction_prompt_holds_question_query_explanation_and_feedback():
    s = Script([RIGHT])
    conv = conv_with(s)
    conv.ask(QUESTION)
    conv.correct(FEEDBACK)
    req = s.requests[-1]
    for part in (f"Question: {QUESTION}", f"Query: {WRONG}", "1. Start from the table Pets.",
                 "2. Return the number of rows.", f"Feedback: {FEEDBACK}", "CREATE TABLE"):
        assert part in req.prompt
    assert isinstance(req.constraint, Text)  # the parser's decoding: free text by default


def test_invalid_correction_is_retried_once_with_the_error():
    s = Script(["SELECT Pets.no_such_column FROM Pets", RIGHT])
    conv = conv_with(s)
    conv.ask(QUESTION)
    turn = conv.correct(FEEDBACK)
    assert turn.program == RIGHT
    assert "A previous correction was: SELECT Pets.no_such_column" in s.requests[-1].prompt


def test_two_invalid_corrections_keep_the_previous_query():
    s = Script(["SELECT Pets.nope FROM Pets", "SELECT Pets.nope2 FROM Pets"])
    conv = conv_with(s)
    conv.ask(QUESTION)
    turn = conv.correct(FEEDBACK)
    assert turn.program is None and turn.error
    assert "previous query stands" in turn.response
    assert conv.last_query_turn().program == WRONG


def test_correction_without_a_previous_query_asks_for_one():
    s = Script([])
    turn = conv_with(s).correct("use another table")
    assert turn.program is None and "no earlier query" in turn.response
    assert s.requests == []


def test_follow_up_after_correction_uses_the_corrected_program_as_history():
    s = Script([RIGHT])
    conv = conv_with(s)
    conv.ask(QUESTION)
    conv.correct(FEEDBACK)
    history = conv.parser_history()
    assert history[-1].program == RIGHT and history[-1].utterance == QUESTION


def test_correct_query_direct_and_prompt_order():
    s = Script([RIGHT])
    conn = sqlite3.connect(PETS)
    bsql = BlendSQL(conn, model=FunctionModel(s), cache=False)
    out = correct_query(Parser(FunctionModel(s)), conn, bsql.registry, QUESTION, WRONG, FEEDBACK)
    assert out.program == RIGHT and len(out.attempts) == 1 and out.prompt_tokens > 0
    text = correction_prompt("S", "Q", "P", ["1. a"], "F")
    assert text.index("Question: Q") < text.index("Query: P") < text.index("1. a") < text.index("Feedback: F")
    assert text.endswith("Corrected query:")


def test_correction_prompt_opens_with_the_parser_prompt_through_the_schema():
    """A correction follows a question on the same database: its prompt must start with the
    parser prompt's guide and schema, so the model's cached prefix covers them (speed)."""
    import os

    from blendsql.nl.serialize import serialize_schema

    for registry_empty in (True, False):
        s = Script([RIGHT])
        conv = conv_with(s)
        if registry_empty:
            from blendsql.ingredients.base import IngredientRegistry

            conv.bsql.registry = IngredientRegistry()
        conv.ask(QUESTION)
        conv.correct(FEEDBACK)
        parse_prompt = next(r.prompt for r in s.requests if r.prompt.rstrip().endswith("BlendSQL:"))
        fix_prompt = s.requests[-1].prompt
        assert fix_prompt.rstrip().endswith("Corrected query:")
        shared = os.path.commonprefix([parse_prompt, fix_prompt])
        schema = serialize_schema(conv.bsql.db.conn, n_rows=conv.parser.n_rows)
        assert schema in shared and shared.index(schema) + len(schema) >= len(shared) - 2
        # the item itself comes after the worked corrections, never before the schema
        assert fix_prompt.index(schema) < fix_prompt.index(f"Feedback: {FEEDBACK}")


def test_sql_diff():
    assert sql_diff("SELECT a FROM t", "SELECT a FROM t") == "no change"
    assert sql_diff("SELECT Count ( * ) FROM t", "SELECT COUNT(*) FROM t") == "no change"
    assert sql_diff("SELECT a FROM t WHERE x = 'A'", "SELECT a FROM t WHERE x = 'a'") == "- 'A'; + 'a'"
    assert sql_diff("SELECT COUNT(*) FROM Breeds", "SELECT COUNT(*) FROM Treatments") == "- Breeds; + Treatments"
    assert sql_diff("SELECT a FROM t", "SELECT a FROM t WHERE x = 'a b'") == "+ WHERE x = 'a b'"


# ---------------------------------------------------------------- worked corrections retrieved


def test_the_shipped_pool_is_splash_dev_only_and_runs():
    from blendsql.nl.correct import load_correction_examples

    pool = load_correction_examples()
    assert len(pool) >= 100
    assert all(e.question and e.program and e.feedback and e.corrected for e in pool)
    assert all(e.program != e.corrected for e in pool)


def test_the_nearest_corrections_by_feedback_come_last():
    from blendsql.nl.correct import CorrectionExample, CorrectionIndex

    swap = CorrectionExample("List names and ages.", "SELECT age, name FROM p",
                             "swap the order of name and age", "SELECT name, age FROM p")
    instead = CorrectionExample("Average weight?", "SELECT AVG(height) FROM p",
                                "use weight instead of height", "SELECT AVG(weight) FROM p")
    other = CorrectionExample("How many cities?", "SELECT COUNT(*) FROM c",
                              "count only distinct cities", "SELECT COUNT(DISTINCT name) FROM c")
    index = CorrectionIndex([swap, instead, other])
    picked = index.select("What is the average salary?", "use salary instead of bonus", 2)
    assert picked[-1] == instead and len(picked) == 2
    assert index.select("q", "swap the columns", 1) == [swap]
    assert index.select("q", "anything", 0) == [] and CorrectionIndex([]).select("q", "f", 3) == []


def test_retrieved_corrections_are_in_the_prompt_with_our_explanation():
    from blendsql.nl.correct import CorrectionExample

    pool = [CorrectionExample("Show all pet types.", "SELECT PetType FROM Pets",
                              "only show distinct pet types", "SELECT DISTINCT PetType FROM Pets"),
            CorrectionExample("Oldest student?", "SELECT MIN(Age) FROM Student",
                              "use the maximum age instead of the minimum", "SELECT MAX(Age) FROM Student")]
    s = Script([RIGHT])
    conn = sqlite3.connect(PETS)
    correct_query(Parser(FunctionModel(s), examples=EXAMPLES), conn, BlendSQL(conn).registry,
                  QUESTION, WRONG, "use the maximum instead", examples=pool, n_examples=1)
    prompt = s.requests[0].prompt
    assert "Corrected query: SELECT MAX(Age) FROM Student" in prompt
    assert "DISTINCT PetType" not in prompt  # only the nearest one
    assert "room_count" not in prompt  # the fixed example is replaced
    assert prompt.index("CREATE TABLE") < prompt.index("Oldest student?") < prompt.index(QUESTION)


def test_no_retrieval_keeps_the_fixed_example():
    s = Script([RIGHT])
    conn = sqlite3.connect(PETS)
    correct_query(Parser(FunctionModel(s), examples=EXAMPLES), conn, BlendSQL(conn).registry,
                  QUESTION, WRONG, FEEDBACK, n_examples=0)
    assert "room_count" in s.requests[0].prompt


def test_conversation_validates_correction_examples():
    import pytest

    from blendsql.errors import OptionError

    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False))
    for bad in (-1, "3", True, 1.5, None):
        with pytest.raises(OptionError, match="correction_examples"):
            Conversation(bsql, correction_examples=bad)
        with pytest.raises(OptionError, match="history_turns"):
            Conversation(bsql, history_turns=bad)
    for bad in (1, "yes", None):
        with pytest.raises(OptionError, match="classify_acts"):
            Conversation(bsql, classify_acts=bad)


# -- candidates: written three ways, run, one chosen ------------------------------------

def _cand(source: str, key: tuple[str, ...] | None, *, error: str | None = None, unchanged: bool = False):
    from blendsql.nl.conversation import Candidate

    return Candidate(source, None if key is None and error is None else f"SELECT '{source}'",
                     error=error, key=key, unchanged=unchanged)


def test_choose_correction_avoids_the_rejected_result_and_follows_agreement():
    from blendsql.nl.conversation import choose_correction

    rejected = ("(3,)",)
    a, b = ("(1,)",), ("(2,)",)
    # a repeat of the rejected result loses to any other valid result, even when first
    assert choose_correction([_cand("guided", rejected), _cand("edit", a)], rejected).source == "edit"
    # two sources agreeing beat one, whatever the order
    chosen = choose_correction([_cand("guided", a), _cand("fresh", b), _cand("edit", b)], rejected)
    assert chosen.source == "fresh"
    # a tie goes to the first source
    assert choose_correction([_cand("guided", a), _cand("edit", b)], rejected).source == "guided"
    # failures and the rejected query written again are never chosen
    assert choose_correction([_cand("guided", None, error="no such column"),
                              _cand("fresh", a, unchanged=True), _cand("edit", b)], rejected).source == "edit"
    assert choose_correction([_cand("guided", None, error="x"), _cand("fresh", a, unchanged=True)], rejected) is None
    # only repeats left: the first of them (the user may have asked for the same rows, put another way)
    assert choose_correction([_cand("guided", rejected), _cand("edit", rejected)], rejected).source == "guided"


THREE = ("guided", "fresh", "edit")


class Routes:
    """Answers each route to a correction differently: guided parse, fresh parse, edit."""

    def __init__(self, guided: str, fresh: str, edit: str) -> None:
        self.guided, self.fresh, self.edit = guided, fresh, edit
        self.kinds: list[str] = []

    def __call__(self, req: Request) -> str:
        p = req.prompt.rstrip()
        if p.endswith("Corrected query:"):
            self.kinds.append("edit")
            return self.edit
        if "The user says it is wrong" in p:
            self.kinds.append("guided")
            return self.guided
        self.kinds.append("fresh")
        return self.fresh


def _seeded(routes: Routes, wrong: str = WRONG, **kw) -> Conversation:
    """A conversation whose last query (``wrong``) was given (not written by its parser)."""
    from blendsql.nl.conversation import Turn

    model = FunctionModel(routes)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    conv = Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1, max_retries=0),
                        classify_acts=False, **kw)
    seed = Turn(QUESTION, "inform_sql", "", program=wrong, question=QUESTION)
    seed.smoothie = bsql.execute(wrong)
    conv.history.append(seed)
    return conv


def _asked(routes: Routes) -> Conversation:
    """A conversation whose last query its own parser wrote (the routes' fresh query)."""
    model = FunctionModel(routes)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    conv = Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1, max_retries=0),
                        classify_acts=False)
    conv.ask(QUESTION)
    return conv


def test_correction_writes_three_candidates_and_answers_with_the_agreed_one():
    routes = Routes(guided=RIGHT, fresh="SELECT COUNT(*) FROM Student", edit=RIGHT)
    conv = _seeded(routes, correction_sources=THREE)
    turn = conv.correct(FEEDBACK, retries=0)
    assert routes.kinds == ["guided", "fresh", "edit"]
    assert [c.source for c in turn.candidates] == ["guided", "fresh", "edit"]
    assert turn.program == RIGHT and turn.source == "correction:guided"
    assert [c.chosen for c in turn.candidates] == [True, False, False]
    assert all(c.rows == 1 and c.error is None for c in turn.candidates)


def test_the_fresh_route_is_skipped_when_the_parser_wrote_the_rejected_query():
    routes = Routes(guided=RIGHT, fresh=WRONG, edit=RIGHT)
    model = FunctionModel(routes)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    conv = Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1, max_retries=0),
                        classify_acts=False, correction_sources=THREE)
    first = conv.ask(QUESTION)
    assert first.program == WRONG and first.source == "parser"
    routes.kinds.clear()
    turn = conv.correct(FEEDBACK, retries=0)
    assert routes.kinds == ["guided", "edit"] and turn.program == RIGHT


def test_a_correction_that_repeats_the_rejected_result_gives_way():
    same_rows = "SELECT COUNT(*) FROM Pets WHERE 1 = 1"  # another query, the rejected result
    routes = Routes(guided=same_rows, fresh="SELECT Pets.nope FROM Pets", edit=RIGHT)
    turn = _seeded(routes, correction_sources=THREE).correct(FEEDBACK, retries=0)
    assert turn.program == RIGHT and turn.source == "correction:edit"
    guided = turn.candidates[0]
    assert guided.repeats_rejected and not guided.chosen
    assert turn.candidates[1].error and "nope" in turn.candidates[1].error


def test_correction_sources_are_validated_and_followed():
    import pytest

    from blendsql.errors import OptionError

    routes = Routes(guided=RIGHT, fresh=RIGHT, edit=RIGHT)
    turn = _seeded(routes, correction_sources=("edit",)).correct(FEEDBACK, retries=0)
    assert routes.kinds == ["edit"] and turn.source == "correction:edit"
    for bad in [(), ("edit", "edit"), ("rewrite",), "edit"]:
        with pytest.raises(OptionError):
            _seeded(routes, correction_sources=bad)


def test_by_default_the_fresh_parse_comes_first_and_the_edit_when_it_repeats_the_rejected_result():
    routes = Routes(guided=RIGHT, fresh="SELECT COUNT(*) FROM Student", edit=RIGHT)
    turn = _seeded(routes).correct(FEEDBACK, retries=0)
    assert routes.kinds == ["fresh", "edit"] and turn.source == "correction:fresh"  # a tie: the first
    routes = Routes(guided=RIGHT, fresh="SELECT COUNT(*) FROM Pets WHERE PetID > 0", edit=RIGHT)
    turn = _seeded(routes).correct(FEEDBACK, retries=0)
    assert turn.candidates[0].repeats_rejected and turn.source == "correction:edit"
    assert turn.program == RIGHT


def test_in_a_conversation_the_edit_corrects_the_parsers_own_query():
    """The fresh parse would write the rejected query again: the edit is the correction."""
    routes = Routes(guided=RIGHT, fresh=WRONG, edit=RIGHT)
    conv = _asked(routes)
    routes.kinds.clear()
    turn = conv.correct(FEEDBACK, retries=0)
    assert routes.kinds == ["edit"] and turn.source == "correction:edit" and turn.program == RIGHT


def test_the_chat_transcript_lists_each_candidate():
    import io

    from blendsql.nl.conversation import print_turn

    routes = Routes(guided=RIGHT, fresh="SELECT Pets.nope FROM Pets", edit=RIGHT)
    turn = _seeded(routes).correct(FEEDBACK, retries=0)
    out = io.StringIO()
    print_turn(turn, out)
    lines = out.getvalue().splitlines()
    assert f"  candidate edit: 1 row(s) (chosen): {RIGHT}" in lines
    assert any(line.startswith("  candidate fresh: ") and "nope" in line for line in lines)


def test_fresh_alone_on_the_parsers_own_query_says_why_nothing_was_tried():
    routes = Routes(guided=RIGHT, fresh=RIGHT, edit=RIGHT)
    model = FunctionModel(routes)
    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False), model=model, cache=False)
    conv = Conversation(bsql, Parser(model, examples=EXAMPLES, n_examples=1, max_retries=0),
                        classify_acts=False, correction_sources=("fresh",))
    routes.fresh = WRONG
    conv.ask(QUESTION)
    turn = conv.correct(FEEDBACK, retries=0)
    assert turn.program is None and turn.candidates == []
    assert "no candidate source applies" in (turn.error or "") and WRONG in turn.response


def test_results_that_differ_only_as_int_and_float_agree():
    import pandas as pd

    from blendsql.nl.conversation import result_key
    from blendsql.smoothie import Smoothie

    def sm(values):
        s = Smoothie.__new__(Smoothie)
        s.df = pd.DataFrame({"n": values})
        return s

    assert result_key(sm([3, 1])) == result_key(sm([1.0, 3.0]))
    assert result_key(sm([3.5])) != result_key(sm([3]))


def test_the_order_of_rows_is_part_of_a_result_only_when_the_query_sorts():
    import pandas as pd

    from blendsql.nl.conversation import repeats, result_key
    from blendsql.smoothie import Smoothie

    def sm(values):
        s = Smoothie.__new__(Smoothie)
        s.df = pd.DataFrame({"n": values})
        return s

    by_n = result_key(sm([1, 2]), sort="ORDER BY n")
    by_m = result_key(sm([2, 1]), sort="ORDER BY m")
    ties = result_key(sm([2, 1]), sort="ORDER BY n")  # the same sort, ties in another order
    loose = result_key(sm([2, 1]))
    assert repeats(by_n, result_key(sm([1.0, 2.0]), sort="ORDER BY n"))
    assert not repeats(by_m, by_n)  # the same rows sorted another way: another answer
    assert repeats(ties, by_n)  # ties that SQLite's plan put in another order: the same answer
    assert repeats(loose, by_n)  # the rejected rows with the sort left out: nothing new
    assert not repeats(by_n, loose)  # a sort the rejected query lacked ("sort them by n")
    assert repeats(loose, result_key(sm([1, 2])))
    assert not repeats(by_n, result_key(sm([1, 3]), sort="ORDER BY n"))
    assert not repeats(None, by_n) and not repeats(by_n, None)


def test_sort_clause_is_the_outermost_order_by():
    from blendsql.nl.conversation import sort_clause

    bsql = BlendSQL(sqlite3.connect(PETS, check_same_thread=False))
    assert sort_clause("SELECT PetID FROM Pets ORDER BY pet_age DESC", bsql) == "ORDER BY pet_age DESC"
    assert sort_clause("SELECT PetID FROM Pets UNION SELECT StuID FROM Student ORDER BY 1", bsql) == "ORDER BY 1"
    assert sort_clause("WITH p AS (SELECT * FROM Pets) SELECT PetID FROM p ORDER BY PetID", bsql) == "ORDER BY PetID"
    assert sort_clause("WITH p AS (SELECT * FROM Pets ORDER BY PetID) SELECT PetID FROM p", bsql) is None
    assert sort_clause("SELECT * FROM (SELECT PetID FROM Pets ORDER BY PetID LIMIT 2)", bsql) is None
    assert sort_clause("SELECT PetID FROM Pets", bsql) is None
    assert sort_clause("SELEC nothing (", bsql) is None  # does not parse: no sort known


def test_choose_correction_compares_sorted_results_in_order():
    from blendsql.nl.conversation import choose_correction

    rejected = ("rows", "a-b-c", "ORDER BY a")
    resorted, unsorted, other = ("rows", "c-b-a", "ORDER BY c"), ("rows",), ("other",)
    # the rejected rows sorted another way are a new answer (feedback can be about the order)
    assert choose_correction([_cand("fresh", rejected), _cand("edit", resorted)], rejected).source == "edit"
    # the rejected rows with no sort at all are not
    assert choose_correction([_cand("fresh", unsorted), _cand("edit", other)], rejected).source == "edit"
    # a sort the rejected query lacked is new ("sort them by age")
    assert choose_correction([_cand("fresh", resorted), _cand("edit", other)], unsorted).source == "fresh"
    # the vote is on rows: sorted and unsorted candidates with the same rows agree, and the
    # earliest of the group answers
    chosen = choose_correction([_cand("guided", other), _cand("fresh", resorted), _cand("edit", unsorted)],
                               ("x",))
    assert chosen.source == "fresh"
    two_sorts = [_cand("guided", ("rows", "1", "ORDER BY a")), _cand("fresh", ("rows", "2", "ORDER BY b")),
                 _cand("edit", ("rows",))]
    assert choose_correction(two_sorts, ("x",)).source == "guided"


def test_history_turns_zero_shows_the_parser_no_earlier_turn():
    script = Script([RIGHT])
    conv = conv_with(script)
    conv.history_turns = 0
    conv.ask(QUESTION)
    assert conv.parser_history() == []
    conv.history_turns = 1
    assert [t.program for t in conv.parser_history()] == [WRONG]


SORTED_WRONG = "SELECT PetID, pet_age FROM Pets ORDER BY PetID"


def test_a_correction_that_sorts_the_rejected_rows_another_way_is_the_answer():
    """Feedback about the order alone ("by age, youngest first"): the re-sorted rows are new."""
    resorted = "SELECT PetID, pet_age FROM Pets ORDER BY pet_age, PetID"
    routes = Routes(guided=RIGHT, fresh=resorted, edit=SORTED_WRONG + " ASC")
    turn = _seeded(routes, wrong=SORTED_WRONG).correct("sort them by age, youngest first", retries=0)
    fresh = turn.candidates[0]
    assert fresh.source == "fresh" and not fresh.repeats_rejected and fresh.chosen
    assert turn.program == resorted and turn.result["PetID"].tolist() == [2003, 2002, 2001]
    assert turn.candidates[1].repeats_rejected  # ORDER BY PetID ASC: the rejected order again


def test_the_rejected_rows_without_a_sort_still_repeat_the_rejected_result():
    routes = Routes(guided=RIGHT, fresh="SELECT PetID, pet_age FROM Pets", edit=RIGHT)
    turn = _seeded(routes, wrong=SORTED_WRONG).correct(FEEDBACK, retries=0)
    assert turn.candidates[0].repeats_rejected and turn.source == "correction:edit"


def test_a_multi_line_rejected_query_stays_inside_the_prompt_comment():
    p = Parser(FunctionModel(lambda r: "x"), examples=[]).prompt(
        "q?", "CREATE TABLE t (a INT);", feedback=("SELECT COUNT(*)\nFROM t\nWHERE a > 1;", "wrong"))
    line = next(x for x in p.splitlines() if x.startswith("-- A query written earlier"))
    assert line.endswith("SELECT COUNT(*) FROM t WHERE a > 1;")
    assert "\nFROM t" not in p


class FailingEdit(Routes):
    """The edit route's model call fails; the other routes answer."""

    def __call__(self, req: Request) -> str:
        if req.prompt.rstrip().endswith("Corrected query:"):
            self.kinds.append("edit")
            raise RuntimeError("the model server went away")
        return super().__call__(req)


def test_a_candidate_whose_writing_fails_is_recorded_and_the_others_still_answer():
    routes = FailingEdit(guided=RIGHT, fresh=RIGHT, edit=RIGHT)
    conv = _seeded(routes, correction_sources=("edit", "fresh"))
    turn = conv.correct(FEEDBACK, retries=0)
    assert routes.kinds == ["edit", "fresh"]
    edit, fresh = turn.candidates
    assert edit.program is None and "the model server went away" in (edit.error or "")
    assert turn.program == RIGHT and turn.source == "correction:fresh"


def test_a_second_correction_never_goes_back_to_a_query_rejected_before():
    """Ask (the parser writes WRONG), correct (the edit answers STUDENTS), correct again:
    the answer is neither of the two rejected queries, whatever the routes write."""
    students = "SELECT COUNT(*) FROM Student"
    routes = Routes(guided=RIGHT, fresh=WRONG, edit=students)
    conv = _asked(routes)
    first = conv.correct(FEEDBACK, retries=0)
    assert first.program == students and first.source == "correction:edit"
    routes.kinds.clear()
    routes.edit = RIGHT
    second = conv.correct("no, count the pets of students older than 19", retries=0)
    assert routes.kinds == ["edit"]  # the parser wrote this question's first query: no fresh parse
    assert second.program == RIGHT


def test_on_a_given_query_a_second_correction_refuses_every_earlier_result():
    students = "SELECT COUNT(*) FROM Student"
    routes = Routes(guided=RIGHT, fresh=students, edit=students)
    conv = _seeded(routes)
    first = conv.correct(FEEDBACK, retries=0)
    assert first.program == students
    routes.fresh = WRONG  # the first, rejected query, written again from the question
    routes.edit = "SELECT COUNT(*) FROM Pets WHERE PetID > 0"  # another query, the first result again
    second = conv.correct("still wrong", retries=0)
    fresh, edit = second.candidates
    assert fresh.unchanged and edit.repeats_rejected
    assert second.program == edit.program  # nothing else ran: a repeat is the last resort
    routes.edit = RIGHT
    third = conv.correct("count the pets of students older than 19", retries=0)
    assert third.program == RIGHT and third.source == "correction:edit"


class Recording(Routes):
    """Routes that keep each route's prompts."""

    def __init__(self, guided: str, fresh: str, edit: str) -> None:
        super().__init__(guided, fresh, edit)
        self.prompts: list[tuple[str, str]] = []

    def __call__(self, req: Request) -> str:
        out = super().__call__(req)
        self.prompts.append((self.kinds[-1], req.prompt))
        return out


def test_the_fresh_parse_is_not_shown_the_queries_already_rejected():
    students = "SELECT COUNT(*) FROM Student"
    routes = Recording(guided=RIGHT, fresh=students, edit=students)
    conv = _seeded(routes)
    conv.correct(FEEDBACK, retries=0)
    routes.prompts.clear()
    routes.fresh, routes.edit = RIGHT, RIGHT
    second = conv.correct("still wrong", retries=0)
    assert second.program == RIGHT
    fresh_prompts = [p for kind, p in routes.prompts if kind == "fresh"]
    assert fresh_prompts and all(students not in p and WRONG not in p for p in fresh_prompts)
