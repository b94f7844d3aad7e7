"""``Recorded``: answers recorded from a real model, replayed offline (notebooks, tests)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from blendsql import BlendSQL
from blendsql.errors import ModelError
from blendsql.models import FunctionModel, Recorded

QUERY = "SELECT x FROM w WHERE {{LLMMap('is it odd?', w.x)}} = TRUE ORDER BY x"


def session(model) -> BlendSQL:
    return BlendSQL({"w": pd.DataFrame({"x": ["1", "2", "3", "4"]})}, model=model, cache=False)




def test_record_then_replay_gives_the_same_rows_without_the_model(tmp_path):
    path = tmp_path / "answers.json"
    calls: list[str] = []
    recorded = session(Recorded(path, model=FunctionModel(
        lambda r: str(r.key().count("1") + r.key().count("3") > 0).lower(), name="rule")))
    live = recorded.execute(QUERY)
    assert path.exists() and len(Recorded(path)) == 4
    replayed = session(Recorded(path)).execute(QUERY)
    assert replayed.df.equals(live.df)
    assert replayed.meta.model_calls == live.meta.model_calls == 4
    assert replayed.meta.prompt_tokens == live.meta.prompt_tokens
    assert not calls


def test_a_request_that_was_never_recorded_is_an_error_not_a_guess(tmp_path):
    path = tmp_path / "answers.json"
    session(Recorded(path, model=FunctionModel(lambda r: "true", name="yes"))).execute(QUERY)
    other = QUERY.replace("is it odd?", "is it even?")
    with pytest.raises(ModelError, match="never recorded") as e:
        session(Recorded(path)).execute(other)
    assert "record again" in e.value.hint


def test_recording_again_only_asks_for_the_new_requests(tmp_path):
    path = tmp_path / "answers.json"
    asked: list[str] = []
    model = FunctionModel(lambda r: asked.append(r.key()) or "true", name="yes")
    session(Recorded(path, model=model)).execute(QUERY)
    assert len(asked) == 4
    session(Recorded(path, model=model)).execute(QUERY.replace("ORDER BY x", "ORDER BY x DESC"))
    assert len(asked) == 4  # the same four requests: replayed from the file
    session(Recorded(path, model=model)).execute(QUERY.replace("odd", "prime"))
    assert len(asked) == 8


def test_failed_answers_are_not_recorded(tmp_path):
    path = tmp_path / "answers.json"
    rec = Recorded(path, model=FunctionModel(lambda r: "maybe", name="unsure"))
    session(rec).execute(QUERY)  # unparseable for a bool map: the engine reports, no row
    assert json.loads(path.read_text())["answers"] == {}


@pytest.mark.parametrize("content", ["not json", "[]", '{"format": "other", "answers": {}}'])
def test_a_file_that_is_not_a_recording_is_refused_clearly(tmp_path, content):
    path = tmp_path / "answers.json"
    path.write_text(content)
    with pytest.raises(ModelError, match="recorded answers|recorded-answers"):
        Recorded(path)


def test_replay_without_a_file_says_how_to_record(tmp_path):
    with pytest.raises(ModelError, match="no recorded answers") as e:
        Recorded(tmp_path / "missing.json")
    assert "Recorded(path, model=" in e.value.hint


def test_the_file_is_readable_and_stable(tmp_path):
    path = tmp_path / "answers.json"
    session(Recorded(path, model=FunctionModel(lambda r: "true", name="yes"))).execute(QUERY)
    first = path.read_text()
    data = json.loads(first)
    assert data["format"] == "blendsql-recorded-answers/1" and data["model"] == "yes"
    entry = next(iter(data["answers"].values()))
    assert entry["text"] == "true" and entry["value"] is True and "prompt_end" in entry
    session(Recorded(path, model=FunctionModel(lambda r: "true", name="yes"))).execute(QUERY)
    assert path.read_text() == first


def test_requests_sized_by_the_models_token_counts_replay(tmp_path):
    """An answer drawn from options gets max_tokens from the model's own token count of
    the options: a replay must count as the recording model did (it did not, at first)."""

    class Wordy(FunctionModel):
        def count_tokens(self, text: str) -> int:
            return 3 * len(text)  # far from the default len // 4

    bsql_df = {"w": pd.DataFrame({"x": ["1", "2", "3", "4"]}),
               "s": pd.DataFrame({"school": ["Fresno State", "Long Beach State"]})}
    query = "SELECT {{LLMQA('Which school?', (SELECT x FROM w), options='s::school')}} AS a"
    path = tmp_path / "answers.json"
    recording = Wordy(lambda r: "Long Beach State", name="wordy")
    live = BlendSQL(bsql_df, model=Recorded(path, model=recording), cache=False).execute(query)
    replayed = BlendSQL(bsql_df, model=Recorded(path), cache=False).execute(query)
    assert replayed.df.equals(live.df) and live.df["a"][0] == "Long Beach State"
    assert json.loads(path.read_text())["token_counts"]  # what the replay counted by
