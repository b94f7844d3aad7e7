"""One error hierarchy for everything a user can see.

Every failure that reaches a user is a ``BlendSQLError``; internal
``KeyError`` / ``IndexError`` / ``TypeError`` are caught at the boundary and
re-raised as one of these with a hint.
"""

from __future__ import annotations

import bisect
from typing import Any


class BlendSQLError(Exception):
    """Root of all blendsql errors.

    ``trace`` is set by ``BlendSQL.execute`` when a query fails: the steps that
    ran before the failure, ending with an ``error`` step naming the ingredient
    that failed (e.g. a model that timed out), so a failed run is explainable too.
    """

    trace: list[Any] | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        return self.message if not self.hint else f"{self.message}\nHint: {self.hint}"


class ParseError(BlendSQLError):
    """The query text is not valid BlendSQL.

    Carries the 1-based ``line`` and ``column`` of the problem, the offending
    source line and a caret under the column. ``code`` says what kind of
    problem it is, for programs: ``"syntax"`` (the default), ``"empty"``
    (nothing but blanks / comments), ``"statements"`` (more than one
    statement), ``"too_large"`` (longer than ``max_query_chars``),
    ``"too_deep"`` (nesting beyond what can be parsed), ``"column_ref"``
    (a malformed ``'table::column'``), ``"type"`` (not a string),
    ``"unknown_keyword"`` (a keyword argument the ingredient does not read).
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        position: int | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
        code: str = "syntax",
    ) -> None:
        self.code = code
        if position is not None:  # an empty text too: it is line 1, column 1
            line, column = line_col(text, position)
        self.line = line
        self.column = column
        self.source_line = ""
        if text and line is not None:
            lines = text.splitlines() or [""]
            self.source_line = lines[min(line, len(lines)) - 1]
        super().__init__(message, hint=hint)

    @property
    def caret(self) -> str:
        if self.column is None:
            return ""
        return " " * (self.column - 1) + "^"

    def _render(self) -> str:
        where = f" (line {self.line}, column {self.column})" if self.line is not None else ""
        parts = [f"{self.message}{where}"]
        if self.source_line:
            line, caret = _window(self.source_line, self.caret)
            parts += ["  " + line, "  " + caret]
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n".join(parts)


class QueryTypeError(ParseError, TypeError):
    """The query is not text (``None``, bytes, a number, a list...).

    A :class:`ParseError` (code ``"type"``) and a ``TypeError``, so both
    ``except`` clauses a caller may already have catch it.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code="type")


class OptionError(BlendSQLError, TypeError):
    """An unknown option name, or an option value of the wrong type or range.

    Raised by ``BlendSQL(...)`` and ``execute(..., **options)`` before anything
    runs (see :mod:`blendsql.options`), and as :class:`IngredientOptionError` /
    :class:`ModelOptionError` for an ingredient's or a model provider's options;
    ``option`` is the offending name. Also a ``TypeError``, as Python's own
    error for an unknown keyword argument is.
    """

    def __init__(self, message: str, *, hint: str | None = None, option: str = "") -> None:
        self.option = option
        super().__init__(message, hint=hint)


class IngredientError(BlendSQLError):
    """An ingredient was misused (bad arguments) or failed while running."""


class IngredientOptionError(IngredientError, OptionError):
    """An ingredient option that the ingredient does not declare, or of the wrong type.

    Raised where the option is given: a constructor keyword (``LLMMap(tempreature=3)``),
    a class attribute of a subclass (``class M(LLMMap): tempreature = 3``) or a query
    keyword's value; a query keyword's *name* is checked when the query is parsed
    (a :class:`ParseError`, code ``"unknown_keyword"``). ``option`` is the name.
    """


class IngredientTimeoutError(IngredientError, TimeoutError):
    """An ingredient's ``run`` went past the ``ingredient_timeout`` option.

    Also a ``TimeoutError``, so code that already catches that keeps working.
    """


class ModelError(BlendSQLError):
    """A language model could not be loaded, reached or understood."""


class ModelOptionError(ModelError, OptionError):
    """An option a model provider does not declare, or of the wrong type.

    Raised by ``Provider.create(...)``, the CLI's model flags and ``--model-option``,
    and ``LlamaCpp(**llama_kwargs)``; ``option`` is the name.
    """


class ModelTimeoutError(ModelError, TimeoutError):
    """A model request ran past its time limit (``timeout=`` of the model).

    Also a ``TimeoutError``, so code that already catches that keeps working.
    """


class BudgetExceededError(BlendSQLError):
    """A query would spend more than its ``Budget`` (model calls, prompt tokens, dollars).

    Raised before the first model call when the plan's estimate is over the
    budget, and before any request batch that would pass a limit: the query
    stops, and no partial result is returned. ``limit`` names the limit
    (``model_calls``, ``prompt_tokens``, ``dollars``), ``allowed`` its value and
    ``amount`` what the query would have reached.
    """

    def __init__(self, message: str, *, hint: str | None = None, limit: str = "",
                 allowed: float = 0.0, amount: float = 0.0) -> None:
        self.limit = limit
        self.allowed = allowed
        self.amount = amount
        super().__init__(message, hint=hint)


class ExecutionError(BlendSQLError):
    """The database refused a statement, or a plan could not be executed."""


class UnsafeQueryError(ExecutionError):
    """The query would write to the user's database and writes were not allowed."""


_WIDTH = 120  # longest source line shown in a message; longer ones are cut around the caret


def _window(line: str, caret: str) -> tuple[str, str]:
    """A long source line cut to ``_WIDTH`` characters around the caret.

    Why: a generated or pasted query can be one line of megabytes; the
    message must stay readable (the full line is still ``source_line``).
    """
    if len(line) <= _WIDTH:
        return line, caret
    col = max(len(caret) - 1, 0)
    start = max(0, min(col - _WIDTH // 2, len(line) - _WIDTH))
    prefix = "..." if start else ""
    suffix = "..." if start + _WIDTH < len(line) else ""
    return prefix + line[start:start + _WIDTH] + suffix, " " * (len(prefix) + col - start) + "^"


class QueryTimeoutError(ExecutionError, TimeoutError):
    """A SQL statement, or the query as a whole, ran past its time limit (the
    ``timeout`` option); the query's model work stopped with it."""


class QueryCancelledError(ExecutionError):
    """The query was cancelled before it finished (its caller went away, e.g. a web page
    closed): its model work stopped, nothing of it is returned."""


class TooManyRowsError(ExecutionError):
    """A statement returned more rows than the session accepts (``Database.max_rows``)."""


class SessionBusyError(ExecutionError, TimeoutError):
    """Another thread used the session for longer than this one was willing to wait."""


class LineIndex:
    """(line, column) lookups for many offsets of one text in O(log n) each.

    Why: the parser moves every AST node's position back to the user's
    text; calling :func:`line_col` per node counted newlines from the start
    each time, which made large queries quadratic (minutes for 1 MB).
    """

    def __init__(self, text: str) -> None:
        self.size = len(text)
        self.starts = [0] + [m + 1 for m in _newlines(text)]

    def line_col(self, position: int) -> tuple[int, int]:
        """1-based (line, column) of a 0-based offset, as :func:`line_col`."""
        position = max(0, min(position, self.size))
        line = bisect.bisect_right(self.starts, position)
        return line, position - self.starts[line - 1] + 1


def _newlines(text: str) -> list[int]:
    """Offsets of every ``\\n`` in ``text`` (str.find runs in C)."""
    out: list[int] = []
    pos = text.find("\n")
    while pos >= 0:
        out.append(pos)
        pos = text.find("\n", pos + 1)
    return out


def line_col(text: str, position: int) -> tuple[int, int]:
    """1-based (line, column) of a 0-based character offset in ``text``."""
    position = max(0, min(position, len(text)))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, column
