"""DateRange: a string ingredient that writes a date predicate for you.

``SELECT * FROM games WHERE {{DateRange('games.date', '1998')}}``
expands to ``"games"."date" BETWEEN '1998-01-01' AND '1998-12-31'``.

Periods: a year ``'1998'``, a month ``'1998-07'``, a day, or two dates
(``DateRange('t.d', '1998-01-15', '1998-03-01')``). The column is given as
text (``'games.date'``): string ingredients receive evaluated arguments, and
``'t::c'`` / ``t.c`` would arrive as the column's values. The column and the
dates are validated, so the returned text is always one harmless predicate.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from typing import Any

from blendsql.errors import IngredientError
from blendsql.ingredients import StringIngredient

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_COLUMN = re.compile(rf"({_IDENT})(?:(?:::|\.)({_IDENT}))?")


def quote_column(ref: str) -> str:
    """'t.c', 't::c' or 'c' as a quoted SQL column reference; anything else is refused."""
    m = _COLUMN.fullmatch(ref.strip())
    if m is None:
        raise IngredientError(f"{ref!r} is not a column reference",
                              hint="write 'table.column' or 'column'")
    parts = [p for p in m.groups() if p]
    return ".".join(f'"{p}"' for p in parts)


def period_bounds(period: str) -> tuple[str, str]:
    """First and last ISO day of a year, month or day."""
    p = period.strip()
    try:
        if re.fullmatch(r"\d{4}", p):
            return f"{p}-01-01", f"{p}-12-31"
        if re.fullmatch(r"\d{4}-\d{2}", p):
            year, month = int(p[:4]), int(p[5:])
            last = calendar.monthrange(year, month)[1]
            return f"{p}-01", f"{p}-{last:02d}"
        day = dt.date.fromisoformat(p).isoformat()
        return day, day
    except ValueError as e:
        raise IngredientError(f"{period!r} is not a year, month or date",
                              hint="write '1998', '1998-07' or '1998-07-04'") from e


class DateRange(StringIngredient):
    """``column BETWEEN start AND end`` for a period (or two periods)."""

    def run(self, *args: Any, **kwargs: Any) -> str:
        if len(args) not in (2, 3):
            raise IngredientError(
                f"{self.name} takes a column and one or two periods, got {len(args)} arguments",
                hint=f"write {{{{{self.name}('t.date', '1998')}}}}")
        if not isinstance(args[0], str):
            raise IngredientError(
                f"{self.name} needs the column name as text, got {type(args[0]).__name__}",
                hint="quote it without '::', e.g. 'games.date' ('t::c' and t.c pass the "
                "column's values, not its name)")
        column = quote_column(args[0])
        start, end = period_bounds(str(args[1]))
        if len(args) == 3:
            end = period_bounds(str(args[2]))[1]
        if start > end:
            raise IngredientError(f"{self.name}: {start} is after {end}",
                                  hint="give the earlier period first")
        return f"{column} BETWEEN '{start}' AND '{end}'"
