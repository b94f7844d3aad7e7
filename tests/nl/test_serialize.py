import re
import sqlite3

import pytest

from blendsql.nl.serialize import bridge_hints, format_hints, list_tables, serialize_schema


@pytest.fixture()
def conn():
    c = sqlite3.connect(":memory:")
    c.executescript(
        """
        CREATE TABLE w (player TEXT, position TEXT, school TEXT, pick INTEGER);
        INSERT INTO w VALUES ('Buster Posey', 'Catcher', 'Florida State University', 5),
                             ('Joe Smith', 'Pitcher', 'University of Georgia', 12),
                             ('Al Jones', 'Pitcher', 'Rice University', 30),
                             ('Bo Bell', 'Outfielder', 'University of Georgia', 41);
        CREATE VIRTUAL TABLE documents USING fts5(title, content);
        INSERT INTO documents VALUES ('Buster Posey', 'Gerald Dempsey Posey is a catcher ...');
        """
    )
    return c


def test_tables_exclude_fts_shadow_tables(conn):
    names = sorted((t.name, t.is_documents) for t in list_tables(conn))
    assert names == [("documents", True), ("w", False)]


def test_schema_has_create_rows_and_vocab_but_no_passages(conn):
    text = serialize_schema(conn, n_rows=2)
    assert re.search(r'CREATE TABLE "?w"? ', text)
    assert re.search(r'CREATE (VIRTUAL )?TABLE "?documents"?', text)
    assert "Buster Posey | Catcher" in text and "Al Jones" not in text  # only 2 rows
    vocab = next(line for line in text.splitlines() if line.startswith("-- w.position takes"))
    assert sorted(re.findall(r"'(\w+)'", vocab)) == ["Catcher", "Outfielder", "Pitcher"]
    assert "w.player takes" not in text  # unique per row: not a vocabulary
    assert "Dempsey" not in text  # document contents withheld


def test_bridge_hints_find_fuzzy_cell_values(conn):
    hints = bridge_hints(conn, "Which pitchers went to the Univ of Georgia?")
    cols = {(c, v) for _, c, v in hints}
    assert ("w.school", "University of Georgia") in cols or ("w.position", "Pitcher") in cols
    assert ("w.position", "Pitcher") in cols
    assert "may refer to w.position = 'Pitcher'" in format_hints(hints)


def test_bridge_hints_empty_for_unrelated_question(conn):
    assert bridge_hints(conn, "xyzzy qwerty") == []
