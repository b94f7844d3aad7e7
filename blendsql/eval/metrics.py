"""Answer-matching metrics for table + text QA.

- ``exact_match`` / ``f1``: SQuAD-style token metrics after normalisation
  (lower-case, punctuation and English articles removed), as HybridQA reports.
- ``denotation_match``: a predicted answer (or list of answers) equals the
  gold denotation as a *set of values*, where each value is compared as a
  number when both sides parse as one (``"1,234"`` = ``1234.0``, ``"12%"`` =
  ``12``), as a date when both parse as ISO dates, and otherwise as
  normalised words — the approach of Pasupat & Liang (2015) and Cheng et al.
  (2023), written from their descriptions.
"""

from __future__ import annotations

import collections
import math
import re
import string
import unicodedata
from collections.abc import Iterable
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | {"‘", "’", "“", "”", "–", "—"}
_NUM = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_WORD_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}


def normalize_text(s: Any) -> str:
    """Lower-case, strip accents, punctuation and articles, fold white space."""
    text = unicodedata.normalize("NFKD", str(s))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = "".join(ch if ch not in _PUNCT else " " for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def to_number(s: Any) -> float | None:
    """A number if ``s`` reads as one ("1,234", "$5", "12%", "3.0", "three")."""
    if isinstance(s, bool):
        return float(s)
    if isinstance(s, (int, float)):
        return None if isinstance(s, float) and math.isnan(s) else float(s)
    t = str(s).strip().lower().replace(",", "")
    t = t.lstrip("$£€").rstrip("%").strip()
    if t in _WORD_NUMBERS:
        return float(_WORD_NUMBERS[t])
    return float(t) if _NUM.match(t) else None


def exact_match(prediction: Any, gold: Any) -> bool:
    return normalize_text(prediction) == normalize_text(gold)


def f1(prediction: Any, gold: Any) -> float:
    pred = normalize_text(prediction).split()
    ref = normalize_text(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = collections.Counter(pred) & collections.Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(ref)
    return 2 * p * r / (p + r)


def _value_key(v: Any) -> tuple[str, Any]:
    n = to_number(v)
    if n is not None:
        return ("num", round(n, 6))
    return ("text", normalize_text(v))


def as_values(answer: Any) -> list[Any]:
    """An answer as a list of values (a list / tuple, a DataFrame's cells, or one value)."""
    if answer is None:
        return []
    if hasattr(answer, "to_numpy") and hasattr(answer, "columns"):
        return [v for row in answer.to_numpy().tolist() for v in row]
    if isinstance(answer, (list, tuple, set)):
        return list(answer)
    return [answer]


def denotation_match(prediction: Any, gold: Any) -> bool:
    """True when the two answers denote the same set of values."""
    p = {_value_key(v) for v in as_values(prediction) if str(v).strip() != ""}
    g = {_value_key(v) for v in as_values(gold) if str(v).strip() != ""}
    if not g:
        return not p
    if p == g:
        return True
    # one gold value may be said in a longer phrase: "1998" vs "in 1998"
    if len(g) == 1 and len(p) == 1:
        (gk, gv), (pk, pv) = next(iter(g)), next(iter(p))
        if gk == pk == "text" and gv and gv == pv:
            return True
        if gk == "num" and pk == "text":
            return _numbers_in(pv) == [gv]
    return False


def _numbers_in(text: str) -> list[float]:
    return [round(float(x), 6) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]


def summarize(results: Iterable[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, float]:
    """Mean of each boolean / numeric key over result dicts."""
    rows = list(results)
    if not rows:
        return {k: 0.0 for k in keys}
    return {k: sum(float(r.get(k) or 0) for r in rows) / len(rows) for k in keys}
