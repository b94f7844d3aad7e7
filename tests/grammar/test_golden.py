"""Golden fixtures: round trips of roundtrip.sql, errors of bad_queries.txt."""

from __future__ import annotations

import pytest

from blendsql.errors import ParseError
from blendsql.grammar import parse, to_blendsql

from .fixtures import bad_queries, meta_signature, roundtrip_queries

ROUNDTRIP = roundtrip_queries()
BAD = bad_queries()


def test_fixture_files_are_substantial():
    assert len(ROUNDTRIP) >= 60
    assert len(BAD) >= 30


@pytest.mark.parametrize("query", ROUNDTRIP, ids=[f"q{i}" for i in range(len(ROUNDTRIP))])
def test_roundtrip(query, registry):
    tree = parse(query, registry)
    rendered = to_blendsql(tree)
    again = parse(rendered, registry)
    assert again == tree, f"AST changed after rendering:\n{rendered}"
    assert meta_signature(again) == meta_signature(tree)
    assert to_blendsql(again) == rendered, "rendering is not stable"
    pretty = to_blendsql(tree, pretty=True)
    assert parse(pretty, registry) == tree


@pytest.mark.parametrize("case", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_query(case, registry):
    query, fragment, line, column = case
    with pytest.raises(ParseError) as info:
        parse(query, registry)
    err = info.value
    assert fragment.lower() in str(err).lower()
    assert (err.line, err.column) == (line, column), str(err)
    assert err.hint, "every parse error carries a hint"
    lines = query.splitlines() or [""]
    assert err.source_line == lines[line - 1]
    assert err.caret == " " * (column - 1) + "^"
