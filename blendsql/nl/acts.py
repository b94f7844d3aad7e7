"""Dialogue acts of a user turn (CoSQL §3's user act set).

An act decides what the conversation does with a turn: write a query
(``inform_sql``, ``infer_sql``), ask back (``ambiguous``), or just reply
(the rest). Obvious social turns ("hi", "thanks", "bye") and bare yes/no
answers are recognised by deterministic patterns first, because a model
call for them is slow and a small model gets them wrong surprisingly often.
Everything else is one constrained ``Choice`` of the model over the act
names, with a short few-shot prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from blendsql.models.base import Model, Request
from blendsql.models.constraints import Choice

ACTS: tuple[str, ...] = (
    "inform_sql", "infer_sql", "ambiguous", "affirm", "negate", "not_related",
    "cannot_understand", "cannot_answer", "greeting", "goodbye", "thank_you",
)
SQL_ACTS = frozenset({"inform_sql", "infer_sql"})

# Whole-utterance patterns (after lower-casing and stripping punctuation).
# Anchored on both ends so "hi, how many singers are there" is NOT a greeting.
_SHORTCUTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("greeting", re.compile(r"(hi|hello|hey|hiya|good (morning|afternoon|evening))( there)?")),
    ("thank_you", re.compile(r"((great|ok|okay|perfect) )?(thanks|thank you|thx|ty|cheers|many thanks)"
                            r"( (a lot|so much|very much|again))?")),
    ("goodbye", re.compile(r"(bye|goodbye|good bye|see you|see ya|that'?s all|quit|exit)( for now| bye)?")),
    ("affirm", re.compile(r"(yes|yeah|yep|yup|sure|correct|right|ok|okay|exactly)")),
    ("negate", re.compile(r"(no|nope|nah|not really|wrong|incorrect)")),
)

FEW_SHOT = """\
Classify the user's turn in a conversation with a database assistant. Acts:
inform_sql: a clear question the database can answer
infer_sql: a follow-up question that refers to an earlier question
ambiguous: a question where it is unclear which column or meaning is wanted
not_related: a request that has nothing to do with the database
cannot_answer: about the database's topic, but the data does not hold it
cannot_understand: unintelligible text
affirm / negate: yes / no
greeting / goodbye / thank_you: social turns

Tables: singer(name, country, age); concert(concert_name, year)
Turn: How many singers are from France?
Act: inform_sql
Turn: What about those older than 30?
Act: infer_sql
Turn: Show me the best ones.
Act: ambiguous
Turn: What is the weather in Paris today?
Act: not_related
Turn: What is the phone number of each singer?
Act: cannot_answer
"""


def normalise(utterance: str) -> str:
    """Lower-case, strip punctuation and surrounding space (for the patterns)."""
    text = re.sub(r"[^\w\s']", " ", utterance.lower())
    return re.sub(r"\s+", " ", text).strip()


def shortcut_act(utterance: str) -> str | None:
    """The act when the whole turn is an obvious social / yes-no phrase, else None."""
    text = normalise(utterance)
    if not text:
        return "cannot_understand"
    for act, pattern in _SHORTCUTS:
        if pattern.fullmatch(text):
            return act
    return None


def act_prompt(utterance: str, tables: str, history: Sequence[str] = ()) -> str:
    """Few-shot prompt for the act choice (fixed part first: a cacheable prefix)."""
    parts = [FEW_SHOT, f"Tables: {tables}"]
    parts += [f"Earlier turn: {h}" for h in history[-2:]]
    parts += [f"Turn: {utterance}", "Act:"]
    return "\n".join(parts)


def classify_act(model: Model, utterance: str, tables: str, history: Sequence[str] = ()) -> str:
    """The dialogue act of ``utterance``: a shortcut, else the model's constrained choice.

    Unparseable model output counts as ``inform_sql``: trying to answer is the
    more useful failure than refusing.
    """
    fast = shortcut_act(utterance)
    if fast is not None:
        return fast
    req = Request(prompt=act_prompt(utterance, tables, history), constraint=Choice(ACTS), max_tokens=8)
    resp = model.generate([req])[0]
    value = resp.value if resp.value in ACTS else None
    if value is None:
        try:
            value = Choice(ACTS).parse(resp.text)
        except ValueError:
            value = "inform_sql"
    return str(value)
