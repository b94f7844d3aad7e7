"""One error hierarchy for everything a user can see.

Every failure that reaches a user is a ``BlendSQLError``; internal
``KeyError`` / ``IndexError`` / ``TypeError`` are caught at the boundary and
re-raised as one of these with a hint.
"""

from __future__ import annotations


class BlendSQLError(Exception):
    """Root of all blendsql errors."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        return self.message if not self.hint else f"{self.message}\nHint: {self.hint}"


class ParseError(BlendSQLError):
    """The query text is not valid BlendSQL.

    Carries the 1-based ``line`` and ``column`` of the problem, the offending
    source line and a caret under the column.
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
    ) -> None:
        if position is not None and text:
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
            parts += ["  " + self.source_line, "  " + self.caret]
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n".join(parts)


class IngredientError(BlendSQLError):
    """An ingredient was misused (bad arguments) or failed while running."""


class ModelError(BlendSQLError):
    """A language model could not be loaded, reached or understood."""


class ModelTimeoutError(ModelError, TimeoutError):
    """A model request ran past its time limit (``timeout=`` of the model).

    Also a ``TimeoutError``, so code that already catches that keeps working.
    """


class ExecutionError(BlendSQLError):
    """The database refused a statement, or a plan could not be executed."""


class UnsafeQueryError(ExecutionError):
    """The query would write to the user's database and writes were not allowed."""


def line_col(text: str, position: int) -> tuple[int, int]:
    """1-based (line, column) of a 0-based character offset in ``text``."""
    position = max(0, min(position, len(text)))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return line, column
