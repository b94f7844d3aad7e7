"""What kind of statement a SQL text is, from its first keyword.

Why text and not the authorizer for transaction control: Python's sqlite3
module issues its own ``BEGIN`` (before INSERT / UPDATE / DELETE when
``isolation_level`` is not None), which the authorizer cannot tell apart
from a user's ``BEGIN``. Transaction control can only be a whole statement
in SQLite's grammar (no trigger, view or CTE can hold one), so its first
keyword decides. The authorizer still refuses transaction actions as a
second line of defence.
"""

from __future__ import annotations

import re

#: how the trace names a batch of calls answered on Spark's executors (one job; it is
#: not SQL: see blendsql.db.spark_calls)
EXECUTOR_JOB = "ANSWER "
#: the one job that checks the executors' Python before the first batch is shipped
EXECUTOR_CHECK = EXECUTOR_JOB + "a check of the executors' Python"
TRANSACTION_KEYWORDS = frozenset({"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE"})
#: a statement whose first six characters (upper-cased) start with one of these has a
#: leading keyword that is never refused (``SELECT``, ``WITH``): no need to scan it
PLAIN_READ_STARTS = ("SELECT", "WITH ")
_SPACE_OR_COMMENT = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.S)
_WORD = re.compile(r"[A-Za-z_]+")


def leading_keyword(sql: str) -> str:
    """The first word of ``sql`` after whitespace and comments, upper-cased ('' if none)."""
    start = _SPACE_OR_COMMENT.match(sql)
    pos = start.end() if start else 0
    word = _WORD.match(sql, pos)
    return word.group(0).upper() if word else ""
