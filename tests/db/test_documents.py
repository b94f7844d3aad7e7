"""FTS5 document tables and the escaped BM25 search helper."""

from __future__ import annotations

import sqlite3

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blendsql.db.documents import build_fts, fts_query, fts_tables, search
from blendsql.errors import ExecutionError

DOCS = [
    {"title": "Sydney", "content": "Sydney is the capital of New South Wales."},
    {"title": "Katoomba", "content": "Katoomba is a town about 120 kilometres west of Sydney."},
    {"title": "Perth", "content": "Perth is on the west coast of Australia."},
    {"title": "Hobart", "content": "Hobart is the capital of Tasmania."},
]


@pytest.fixture()
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    build_fts(c, "documents", DOCS)
    return c


def test_build_fts_from_list_and_frame(conn: sqlite3.Connection) -> None:
    assert fts_tables(conn) == ["documents"]
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 4
    n = build_fts(conn, "notes", pd.DataFrame({"body": ["one two", None]}))
    assert n == 2
    assert conn.execute("SELECT body FROM notes WHERE notes MATCH 'two'").fetchall() == [("one two",)]
    assert fts_tables(conn) == ["documents", "notes"]
    build_fts(conn, "plain", ["just text", "more text"])
    assert [r[1] for r in conn.execute("PRAGMA table_info(plain)")] == ["content"]


def test_search_ranks_by_bm25(conn: sqlite3.Connection) -> None:
    hits = search(conn, "documents", "west of Sydney", k=3)
    assert list(hits.columns) == ["title", "content", "score"]
    assert hits["title"].iloc[0] == "Katoomba"  # matches all three words
    assert list(hits["score"]) == sorted(hits["score"], reverse=True)
    assert len(search(conn, "documents", "capital", k=1)) == 1


def test_search_escapes_fts_syntax(conn: sqlite3.Connection) -> None:
    # raw, each of these is an FTS5 syntax error or a column filter
    for text in ['"unbalanced', "title:Perth OR", "NEAR(", "capital*", "AND", "-west ^coast"]:
        search(conn, "documents", text)
    assert search(conn, "documents", "title:Perth")["title"].iloc[0] == "Perth"
    assert search(conn, "documents", "   !!! ").empty
    assert fts_query('say "hi" now hi') == '"say" OR "hi" OR "now"'
    assert fts_query("a b", operator="AND") == '"a" AND "b"'


def test_search_on_non_fts_table_is_an_error(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE w (x)")
    with pytest.raises(ExecutionError) as err:
        search(conn, "w", "x")
    assert "documents" in (err.value.hint or "")


def test_trigram_tokenizer_matches_substrings() -> None:
    c = sqlite3.connect(":memory:")
    build_fts(c, "names", [{"name": "Kennie Steenstra"}, {"name": "Phil Stidham"}], "trigram")
    assert c.execute("SELECT name FROM names WHERE names MATCH 'steen'").fetchall() == [
        ("Kennie Steenstra",)
    ]
    assert search(c, "names", "stidh")["name"].tolist() == ["Phil Stidham"]


def test_unknown_tokenizer_and_bad_document() -> None:
    c = sqlite3.connect(":memory:")
    with pytest.raises(ExecutionError):
        build_fts(c, "d", DOCS, "stemmer")
    with pytest.raises(ExecutionError):
        build_fts(c, "d", [{"title": "a"}, 3])  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_user_text_is_a_valid_query(text: str) -> None:
    c = sqlite3.connect(":memory:")
    build_fts(c, "documents", DOCS)
    hits = search(c, "documents", text, k=2)
    assert len(hits) <= 2
