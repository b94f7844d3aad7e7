"""Loaders: HybridQA records and DataFrames become typed tables + FTS5 documents."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from blendsql.db.loaders import (
    column_map,
    convert_cell,
    example_db_path,
    from_frames,
    hybridqa_to_sqlite,
    infer_type,
    link_title,
    load_hybridqa,
    sanitize_names,
)
from blendsql.errors import BlendSQLError, ExecutionError

DATA = Path(__file__).resolve().parent.parent / "data" / "hybridqa"
NFL = "List_of_National_Football_League_rushing_yards_leaders_0"
BASEBALL = "1991_College_Baseball_All-America_Team_0"
MASONIC = "List_of_Masonic_buildings_in_the_United_States_48"


def _record(table_id: str) -> dict:
    for line in (DATA / "tables.jsonl").open(encoding="utf-8"):
        rec = json.loads(line)
        if rec["table_id"] == table_id:
            return rec
    raise AssertionError(f"fixture lacks {table_id}")


def _types(conn: sqlite3.Connection, table: str) -> dict[str, str]:
    return {r[1]: r[2] for r in conn.execute(f'PRAGMA table_info("{table}")')}


def test_sanitize_names_lowercases_replaces_and_dedupes() -> None:
    assert sanitize_names(["Team ( s ) by season", "Yards", "City , State"]) == [
        "team_s_by_season",
        "yards",
        "city_state",
    ]
    assert sanitize_names(["Runners-up", "Runners-up", "runners up"]) == [
        "runners_up",
        "runners_up_2",
        "runners_up_3",
    ]
    assert sanitize_names(["", "#", "2014 Census", None]) == ["col0", "col1", "c2014_census", "col3"]


def test_infer_type_needs_every_present_cell_to_parse() -> None:
    assert infer_type(["1", "22", "4,409", ""]) == "INTEGER"
    assert infer_type(["4.2", "5", "-"]) == "REAL"
    assert infer_type(["4.2", "five"]) == "TEXT"
    assert infer_type(["1,2", "3"]) == "TEXT"  # not a thousands separator
    assert infer_type(["", "-"]) == "TEXT"
    assert convert_cell("18,355", "INTEGER") == 18355
    assert convert_cell("-", "INTEGER") is None
    assert convert_cell(" -", "TEXT") == " -"


def test_link_title_decodes_wiki_paths() -> None:
    assert link_title("/wiki/Bobby_Jones_(right-handed_pitcher)") == "Bobby Jones (right-handed pitcher)"
    assert link_title("/wiki/Delaware_Fightin%27_Blue_Hens") == "Delaware Fightin' Blue Hens"


def test_hybridqa_table_is_typed_and_keeps_headers() -> None:
    rec = _record(NFL)
    conn = hybridqa_to_sqlite(rec, ":memory:")
    types = _types(conn, "w")
    assert types == {
        "rank": "INTEGER",
        "player": "TEXT",
        "team_s_by_season": "TEXT",
        "carries": "INTEGER",
        "yards": "INTEGER",
        "average": "REAL",
    }
    n = conn.execute("SELECT COUNT(*) FROM w").fetchone()[0]
    assert n == len(rec["rows"])
    # typed values compare as numbers: '4,409' is stored as 4409
    top = conn.execute("SELECT player, yards FROM w ORDER BY yards DESC LIMIT 1").fetchone()
    assert top == ("Emmitt Smith", 18355)
    over = conn.execute("SELECT COUNT(*) FROM w WHERE average >= 4.5").fetchone()[0]
    expected = sum(1 for r in rec["rows"] if float(r[5]) >= 4.5)
    assert over == expected
    assert column_map(conn, "w")["team_s_by_season"] == "Team ( s ) by season"
    source = json.loads(conn.execute("SELECT source FROM _tables WHERE table_name='w'").fetchone()[0])
    assert source["table_id"] == NFL


def test_hybridqa_documents_are_searchable_with_bm25() -> None:
    rec = _record(BASEBALL)
    conn = hybridqa_to_sqlite(rec, ":memory:")
    n_docs = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    assert n_docs == len(rec["passages"])
    titles = {r[0] for r in conn.execute("SELECT title FROM documents")}
    assert "Bobby Jones (right-handed pitcher)" in titles
    rows = conn.execute(
        "SELECT title, bm25(documents) FROM documents WHERE documents MATCH 'Rainbow Warriors' "
        "ORDER BY rank LIMIT 3"
    ).fetchall()
    assert rows[0][0] == "Hawaii Rainbow Warriors"
    scores = [r[1] for r in rows]
    assert scores == sorted(scores)  # bm25: lower is better, rank orders ascending


def test_missing_header_cells_and_empty_header() -> None:
    rec = _record(MASONIC)
    conn = hybridqa_to_sqlite(rec, ":memory:")
    names = list(_types(conn, "w"))
    assert names == ["col0", "building", "dates", "location_fo", "city_state", "description"]
    assert _types(conn, "w")["col0"] == "REAL"  # the data has a row numbered 10.5
    assert conn.execute("SELECT building FROM w WHERE col0 > 10 AND col0 < 11").fetchone()[0]
    assert column_map(conn, "w")["col0"] == ""


def test_hybridqa_to_file_and_short_rows(tmp_path: Path) -> None:
    rec = {
        "table_id": "t",
        "header": ["A", "B"],
        "rows": [["1"], ["2", "x", "extra"]],
        "passages": {},
    }
    path = tmp_path / "t.db"
    hybridqa_to_sqlite(rec, path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT a, b FROM w ORDER BY a").fetchall() == [(1, None), (2, "x")]
    assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 0


def test_hybridqa_without_header_is_a_blendsql_error() -> None:
    with pytest.raises(BlendSQLError) as err:
        hybridqa_to_sqlite({"table_id": "x", "header": [], "rows": []})
    assert err.value.hint


def test_load_hybridqa_filters_and_streams() -> None:
    all_ids = [r["table_id"] for r in load_hybridqa(DATA)]
    assert len(all_ids) == 4 and NFL in all_ids
    picked = list(load_hybridqa(DATA, [BASEBALL, "no_such_table"]))
    assert [r["table_id"] for r in picked] == [BASEBALL]
    # the file itself and the parent folder work too
    assert [r["table_id"] for r in load_hybridqa(DATA / "tables.jsonl", [NFL])] == [NFL]
    assert [r["table_id"] for r in load_hybridqa(DATA.parent, [NFL])] == [NFL]
    with pytest.raises(ExecutionError):
        next(load_hybridqa(DATA / "nowhere"))


def test_from_frames_types_and_documents(tmp_path: Path) -> None:
    players = pd.DataFrame(
        {
            "Player Name": ["Ann", "Bo", "Cy"],
            "Goals": [3, 5, None],  # float with NaN in pandas -> INTEGER
            "Avg": [0.5, 1.25, 2.0],
            "Caps": ["1,200", "35", ""],  # numeric text -> INTEGER
            "Club": ["Reds", None, "Blues"],
            "Active": [True, False, True],
        }
    )
    docs = [
        {"title": "Reds", "content": "The Reds play in red shirts in Liverpool."},
        {"title": "Blues", "content": "The Blues are a London club."},
    ]
    conn = from_frames({"players": players}, docs, tmp_path / "f.db")
    assert _types(conn, "players") == {
        "player_name": "TEXT",
        "goals": "INTEGER",
        "avg": "REAL",
        "caps": "INTEGER",
        "club": "TEXT",
        "active": "INTEGER",
    }
    rows = conn.execute("SELECT player_name, goals, caps, club, active FROM players").fetchall()
    assert rows == [("Ann", 3, 1200, "Reds", 1), ("Bo", 5, 35, None, 0), ("Cy", None, None, "Blues", 1)]
    hit = conn.execute("SELECT title FROM documents WHERE documents MATCH 'london'").fetchall()
    assert hit == [("Blues",)]
    assert column_map(conn, "players")["player_name"] == "Player Name"


def test_from_frames_documents_as_dataframe_and_rejects_non_frames() -> None:
    docs = pd.DataFrame({"title": ["a", "b"], "content": ["alpha beta", "gamma"]})
    conn = from_frames({"t": pd.DataFrame({"x": [1]})}, docs)
    assert conn.execute("SELECT title FROM documents WHERE documents MATCH 'gamma'").fetchall() == [
        ("b",)
    ]
    with pytest.raises(ExecutionError):
        from_frames({"t": [1, 2]})  # type: ignore[dict-item]


def test_example_db_contents() -> None:
    path = example_db_path()
    assert path.is_file() and path.stat().st_size < 1_000_000
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert list(_types(conn, "w")) == ["position", "name", "school", "abca", "ba", "cb"]
    n = conn.execute("SELECT COUNT(*) FROM w").fetchone()[0]
    assert 15 <= n <= 40
    pitchers = conn.execute("SELECT COUNT(*) FROM w WHERE position = 'Pitcher'").fetchone()[0]
    assert 0 < pitchers < n
    top = conn.execute(
        "SELECT title FROM documents WHERE documents MATCH 'pitcher' ORDER BY rank LIMIT 1"
    ).fetchone()
    assert top is not None and "itcher" in top[0]
    # every player's linked passage is present
    names = {r[0] for r in conn.execute("SELECT title FROM documents")}
    assert "Brent Gates" in names
    programs = [r[0] for r in conn.execute("SELECT program FROM programs")]
    assert "Fresno State Bulldogs baseball" in programs
    source = json.loads(conn.execute("SELECT source FROM _tables WHERE table_name='w'").fetchone()[0])
    assert source["table_id"] == BASEBALL


def test_public_names_in_blendsql_db() -> None:
    import blendsql.db as db

    assert db.example_db_path() == example_db_path()
    assert db.from_frames is from_frames and db.hybridqa_to_sqlite is hybridqa_to_sqlite
