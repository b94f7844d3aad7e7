"""The fallback's compact prompt: whole rows most related to the question, within a budget."""

from __future__ import annotations

import sqlite3

import pandas as pd

from blendsql import BlendSQL
from blendsql.models.base import FunctionModel, Request
from blendsql.nl.ask import FALLBACK_PROMPT, end_to_end_prompt, ranked_csv
from blendsql.nl.parser import Parser


def _table(n: int = 60) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE w (name TEXT, club TEXT, goals INTEGER)")
    rows = [(f"Player {i}", f"Club {i % 7}", i) for i in range(n)]
    rows[50] = ("Zlatan Ibrahimovic", "Malmo FF", 99)
    conn.executemany("INSERT INTO w VALUES (?, ?, ?)", rows)
    return conn


def test_a_relevant_row_past_the_cut_is_kept_and_the_cut_is_said():
    conn = _table()
    question = "How many goals did Zlatan Ibrahimovic score?"
    by_position = end_to_end_prompt(conn, question, table_chars=400)
    ranked = end_to_end_prompt(conn, question, table_chars=400, rank_rows=True)
    assert "Malmo FF" not in by_position  # the paper's cut never reaches row 50
    assert "Zlatan Ibrahimovic,Malmo FF,99" in ranked
    assert "rows shown: those most related to the question" in ranked


def test_rows_are_whole_in_table_order_and_within_budget():
    df = pd.DataFrame({"name": [f"n{i}" for i in range(40)] + ["alpha beta"], "v": list(range(41))})
    text = ranked_csv(df, "alpha beta n3", 120)
    lines = text.splitlines()
    assert lines[0] == "name,v" and len("\n".join(lines[:-1])) <= 120
    body = lines[1:-1]
    assert "alpha beta,40" in body and "n3,3" in body
    assert [int(r.rsplit(",", 1)[1]) for r in body] == sorted(int(r.rsplit(",", 1)[1]) for r in body)


def test_a_small_table_is_shown_whole_without_a_note():
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert ranked_csv(df, "anything", 1000) == "a,b\n1,x\n2,y"


def test_cells_with_line_breaks_stay_whole_rows():
    df = pd.DataFrame({"a": ["one\ntwo", "three"], "b": [1, 2]})
    text = ranked_csv(df, "three", 1000)
    assert '"one\ntwo",1' in text and "three,2" in text


def test_ask_falls_back_with_the_compact_prompt():
    conn = _table()
    prompts: list[str] = []

    def gen(req: Request) -> str:
        prompts.append(req.prompt)
        return "99" if req.prompt.startswith("Table w:") else "not sql at all"

    model = FunctionModel(gen, name="fake")
    answer = BlendSQL(conn, model=model).ask("How many goals did Zlatan Ibrahimovic score?",
                                             parser=Parser(model, max_retries=0))
    assert answer.fallback_used and answer.answer == "99"
    fallback = [p for p in prompts if p.startswith("Table w:")]
    assert len(fallback) == 1 and "Malmo FF" in fallback[0]
    assert fallback[0] == end_to_end_prompt(conn, "How many goals did Zlatan Ibrahimovic score?",
                                            **FALLBACK_PROMPT)


def test_a_passage_keeps_its_first_sentence_and_the_one_that_answers():
    from blendsql.nl.ask import ranked_sentences

    text = ("Toronto Blue Jays | The Blue Jays are a baseball team based in Toronto. "
            + "They play in the American League East division every season. " * 6
            + "The team was owned by the Labatt Brewing Company until 1995.")
    question = "Which beer company owned the team?"
    assert "Labatt" not in text[:400]  # a cut by position loses it
    kept = ranked_sentences(text, question, 400)
    assert len(kept) <= 400 and kept.startswith("Toronto Blue Jays | The Blue Jays are")
    assert "owned by the Labatt Brewing Company" in kept
    assert ranked_sentences("Short text.", question, 400) == "Short text."
    assert ranked_sentences("x" * 900, question, 400) == "x" * 400  # no sentences: cut


def test_the_fallback_prompt_ranks_passage_sentences():
    conn = _table()
    conn.execute("CREATE VIRTUAL TABLE documents USING fts5(title, content)")
    conn.execute("INSERT INTO documents VALUES ('Malmo FF', ?)",
                 ("Malmo FF is a football club. " + "It plays in Sweden in the top league. " * 15
                  + "Its stadium is the Eleda Stadion.",))
    prompt = end_to_end_prompt(conn, "What is the stadium of Malmo FF?", **FALLBACK_PROMPT)
    assert "Eleda Stadion" in prompt
    assert "Eleda Stadion" not in end_to_end_prompt(conn, "What is the stadium of Malmo FF?",
                                                    passage_chars=400)


def test_when_no_whole_row_fits_the_best_row_is_shown_cut():
    df = pd.DataFrame({"year": [1990, 2001], "text": ["x " * 400, "the final was won by Ajax " * 20]})
    text = ranked_csv(df, "Who won the final?", 200)
    lines = text.splitlines()
    assert lines[0] == "year,text" and lines[1].startswith("2001,the final was won by Ajax")
    assert "1 of 2 rows shown, cut" in lines[-1]
    assert len("\n".join(lines[:2])) <= 200
