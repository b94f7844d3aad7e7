import pandas as pd
import pytest

from blendsql.eval import denotation_match, exact_match, f1, normalize_text, to_number


@pytest.mark.parametrize(
    "raw, expected",
    [("The Beatles!", "beatles"), ("  Café  du   Monde ", "cafe du monde"), ("A-ha", "ha")],
)
def test_normalize_text(raw, expected):
    assert normalize_text(raw) == expected


@pytest.mark.parametrize(
    "raw, expected",
    [("1,234", 1234.0), ("$5", 5.0), ("12%", 12.0), ("three", 3.0), (7, 7.0), ("abc", None), ("", None)],
)
def test_to_number(raw, expected):
    assert to_number(raw) == expected


def test_exact_match_and_f1():
    assert exact_match("the University of Georgia", "University of Georgia")
    assert not exact_match("Georgia", "University of Georgia")
    assert f1("University of Georgia", "Georgia") == pytest.approx(0.5)
    assert f1("", "x") == 0.0 and f1("", "") == 1.0


@pytest.mark.parametrize(
    "pred, gold, ok",
    [
        ("1,000", "1000", True),
        (1000.0, "1000", True),
        ("in 1998", "1998", True),
        ("1998 and 1999", "1998", False),
        (["b", "a"], ["a", "b"], True),
        (["a"], ["a", "b"], False),
        (pd.DataFrame({"x": ["Paris"]}), "paris", True),
        (None, "x", False),
        ("", "", True),
        ("Atlanta, Georgia", "Atlanta", False),
    ],
)
def test_denotation_match(pred, gold, ok):
    assert denotation_match(pred, gold) is ok
