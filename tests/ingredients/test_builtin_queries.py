"""The built-ins inside full queries (engine + ingredient + FunctionModel), checked
against the plain-SQL query they should be equivalent to."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.models.constraints import Bool, Choice

PLAYERS = pd.DataFrame({
    "name": ["Ann", "Bob", "Cid", "Dee", "Eve"],
    "position": ["sp", "1b", "rp", "sp", None],
    "city": ["Atlanta", "Boston", "Atlanta", "Denver", "Boston"],
})
TEAMS = pd.DataFrame({"team_city": ["atlanta ", "Boston", "Denver, CO"], "team": ["A", "B", "D"]})
PLACES = pd.DataFrame({
    "place": ["Cafe", "Bar", "Diner"],
    "reviews": [json.dumps(["Great for kids, play corner.", "Tasty."]),
                json.dumps(["Loud music, adults only."]), json.dumps([])],
})
DB = {"w": PLAYERS, "t": TEAMS, "r": PLACES}


def value_of(prompt: str) -> str:
    return prompt.rsplit("Value: ", 1)[1].split("\n", 1)[0]


def session(rec):
    return BlendSQL(DB, model=rec.model, cache=False)


def test_llmmap_where_true_matches_plain_sql(recorder):
    rec = recorder(lambda r: "true" if value_of(r.prompt) in {"sp", "rp"} else "false")
    got = session(rec).execute(
        "SELECT name FROM w WHERE {{LLMMap('Is this a pitcher?', 'w::position')}} = TRUE "
        "ORDER BY name").df
    want = session(rec).execute(
        "SELECT name FROM w WHERE position IN ('sp', 'rp') ORDER BY name").df
    assert got["name"].tolist() == want["name"].tolist() == ["Ann", "Cid", "Dee"]
    assert {r.constraint for r in rec.requests} == {Bool()}  # inferred from '= TRUE'
    assert sorted(value_of(p) for p in rec.prompts) == ["1b", "rp", "sp"]  # distinct, no NULL


def test_llmmap_options_from_column(recorder):
    rec = recorder(lambda r: "Atlanta" if value_of(r.prompt) == "Ann" else "Boston")
    out = session(rec).execute(
        "SELECT name, {{LLMMap('Home city?', 'w::name', options='w::city')}} AS c FROM w "
        "ORDER BY name").df
    assert out["c"].tolist() == ["Atlanta", "Boston", "Boston", "Boston", "Boston"]
    assert set(rec.requests[0].constraint.options) == {"Atlanta", "Boston", "Denver"}


def test_llmqa_options_in_comparison(recorder):
    rec = recorder(lambda r: "Denver" if "Dee | sp | Denver" in r.prompt else "Boston")
    out = session(rec).execute(
        "SELECT name FROM w WHERE city = {{LLMQA('Where does Dee play?', (SELECT * FROM w), "
        "options='w::city')}}").df
    assert out["name"].tolist() == ["Dee"]
    assert isinstance(rec.requests[0].constraint, Choice)


def test_llmjoin_exact_first_then_model(recorder):
    rec = recorder(lambda r: "Denver, CO" if value_of(r.prompt) == "Denver" else "none")
    out = session(rec).execute(
        "SELECT w.name, t.team FROM w JOIN t ON {{LLMJoin(w.city, t.team_city)}} "
        "ORDER BY w.name").df
    assert list(zip(out["name"], out["team"], strict=True)) == [
        ("Ann", "A"), ("Bob", "B"), ("Cid", "A"), ("Dee", "D"), ("Eve", "B")]
    assert [value_of(p) for p in rec.prompts] == ["Denver"]  # Atlanta/Boston matched exactly


def test_answer_over_reviews_in_where(recorder):
    rec = recorder(lambda r: "Yes" if "play corner" in r.prompt else "No")
    out = session(rec).execute(
        "SELECT place FROM r WHERE {{ANSWER(reviews, 'Is it good for kids?')}} = 'Yes'").df
    assert out["place"].tolist() == ["Cafe"]
    assert len(rec.requests) == 2  # the empty review list is NULL without a call
    assert rec.requests[0].constraint == Choice(("Yes", "No"))  # compared with 'Yes'


def test_summary_in_select(recorder):
    rec = recorder(lambda r: f"{r.prompt.count(chr(10) + '- ')} reviews")
    out = session(rec).execute("SELECT place, {{SUMMARY(reviews)}} AS s FROM r ORDER BY place").df
    assert out.set_index("place")["s"].to_dict()["Cafe"] == "2 reviews"
    assert pd.isna(out.set_index("place")["s"].to_dict()["Diner"])


def validate_by_context(req) -> str:
    """True iff the statement's last word appears in the serialised context."""
    context, statement = req.prompt.split("Statement: ", 1)
    place = statement.split("\n", 1)[0].split()[-1]
    return "true" if place in context else "false"


@pytest.mark.parametrize(("place", "rows"), [("Denver", 5), ("Paris", 0)])
def test_llmvalidate_gate(recorder, place, rows):
    rec = recorder(validate_by_context)
    q = (f"SELECT name FROM w WHERE {{{{LLMValidate('Someone plays in {place}', "
         "(SELECT city FROM w))}} ORDER BY name")
    assert len(session(rec).execute(q).df) == rows
    assert len(rec.requests) == 1


@pytest.mark.parametrize("bad", ["ANSWER(reviews)", "SUMMARY(reviews, 'x')"])
def test_suql_arity_errors_surface(recorder, bad):
    from blendsql.errors import BlendSQLError

    with pytest.raises(BlendSQLError):
        session(recorder(lambda r: "x")).execute(f"SELECT {{{{{bad}}}}} FROM r")


def test_configured_instance_in_query(recorder):
    from blendsql.ingredients import LLMMap

    rec = recorder(lambda r: "yes" if value_of(r.prompt) in {"sp", "rp"} else "no")
    is_pitcher = LLMMap(name="IsPitcher", question="Is this position a pitcher?",
                        few_shot=[("first base", False)], return_type="bool")
    bsql = BlendSQL(DB, model=rec.model, ingredients=[is_pitcher], cache=False)
    out = bsql.execute("SELECT name FROM w WHERE {{IsPitcher(w.position)}} ORDER BY name").df
    assert out["name"].tolist() == ["Ann", "Cid", "Dee"]
    assert all("Is this position a pitcher?" in p and "Value: first base\nAnswer: false" in p
               for p in rec.prompts)
