"""The plain-language layer's one path to the data: a backend, however it was given.

Why: the parser, the conversation and the fallback read schemas, sample
rows, value lists and dry runs. Each read goes through the
:class:`~blendsql.db.backend.Backend` interface, so it runs on SQLite,
DuckDB and PostgreSQL alike, is guarded (read-only) and time-limited like
the engine's statements, and is reported to the backend's tracer. Nothing
here (or anywhere in ``blendsql.nl``) talks to a driver directly.

The layer's functions accept a ``BlendSQL`` session, a backend, or anything
``open_database`` opens (a ``sqlite3`` / DuckDB / psycopg connection, a
path), so code written against the older ``conn`` arguments keeps working.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sqlglot import exp

from blendsql.db.backend import Backend, StatementHook, open_database, quote
from blendsql.errors import BlendSQLError
from blendsql.ingredients.base import IngredientRegistry
from blendsql.models.base import Model
from blendsql.smoothie import Smoothie, TraceStep

#: ``source`` of a plain-language statement in its trace step's ``details``
NL_ORIGIN = "nl"


class Session(Protocol):
    """What the layer needs of a ``BlendSQL`` session: its backend, ingredients,
    options and model, and a way to parse and run a program.

    A protocol, so the layer depends on no engine module: ``blendsql.blend`` reaches
    the layer (``BlendSQL.ask``), never the other way round.
    """

    @property
    def db(self) -> Backend: ...

    @property
    def registry(self) -> IngredientRegistry: ...

    @property
    def options(self) -> Mapping[str, Any]: ...

    @property
    def model(self) -> Model: ...

    def parse(self, query: str) -> exp.Expression: ...

    def execute(self, query: str | exp.Expression,
                params: Sequence[Any] | Mapping[str, Any] | None = None,
                **options: Any) -> Smoothie: ...


def as_backend(source: Any) -> Backend:
    """The backend behind ``source``: a ``BlendSQL``'s own, a backend as is, or one
    opened by :func:`blendsql.db.backend.open_database` (a handed-in connection is
    borrowed: guarded while used and given back as it came)."""
    if isinstance(source, Backend):
        return source
    db = getattr(source, "db", None)
    if isinstance(db, Backend):
        return db
    return open_database(source)


def statement_recorder(steps: list[TraceStep], stage: str) -> StatementHook:
    """A tracer hook that records each statement as a ``sql`` trace step of ``stage``.

    ``details["source"]`` is ``"nl"`` and ``details["stage"]`` says what the
    layer was doing (``parse``, ``fallback``, ``conversation``, ``correct``).
    """

    def hook(sql: str, rows: int | None, seconds: float, engine: bool,
             error: str | None) -> None:
        details: dict[str, Any] = {"source": NL_ORIGIN, "stage": stage}
        if error:
            details["error"] = error
        steps.append(TraceStep("sql", f"plain-language layer ({stage})", sql=sql,
                               rows_out=rows, seconds=seconds, details=details))

    return hook


@contextmanager
def recording(db: Backend, steps: list[TraceStep], stage: str) -> Iterator[None]:
    """Every statement ``db`` runs inside is appended to ``steps`` (see above).

    A query the engine runs inside installs its own tracer for its duration,
    so its statements go to its Smoothie's trace, not here.
    """
    with db.tracing(statement_recorder(steps, stage)):
        yield


def first_line(e: BlendSQLError) -> str:
    """A backend error's message without the driver prefix and the statement text."""
    msg = e.message.split("\n  in: ", 1)[0].strip()
    msg = re.sub(r"^(SQLite|DuckDB|PostgreSQL) error:\s*", "", msg)
    msg = re.sub(r"^[A-Z][A-Za-z ]* Error:\s*", "", msg)  # DuckDB's "Binder Error: "
    return missing_name(msg.splitlines()[0] if msg else msg)


_MISSING = (
    # PostgreSQL
    (re.compile(r'column "?([\w.]+?)"? does not exist'), "column"),
    (re.compile(r'relation "?([\w.]+?)"? does not exist'), "table"),
    # DuckDB
    (re.compile(r'Referenced column "([^"]+)" not found'), "column"),
    (re.compile(r'Table "([^"]+)" does not have a column named "([^"]+)"'), "column"),
    (re.compile(r'Values list "([^"]+)" does not have a column named "([^"]+)"'), "column"),
    (re.compile(r"Table with name ([\w.]+) does not exist"), "table"),
)


def missing_name(message: str) -> str:
    """A missing table / column error in SQLite's words (``no such column: w.x``).

    Why: the retry prompt and the name repair (:mod:`blendsql.nl.repair`) read
    one wording, whatever the backend said.
    """
    for pattern, kind in _MISSING:
        m = pattern.search(message)
        if m:
            name = ".".join(g for g in m.groups() if g)
            return f"no such {kind}: {name}"
    return message


def table_frame(db: Backend, table: str) -> Any:
    """A whole table as a DataFrame (the fallback's prompt shows it)."""
    return db.query_df(f"SELECT * FROM {quote(table)}")


def search_passages(db: Backend, table: str, question: str, k: int) -> Any:
    """The ``k`` passages of document table ``table`` that best match ``question``.

    Written in BlendSQL's SQL (FTS5's ``MATCH`` and ``bm25``), which each backend
    translates to its own full-text search; a ``score`` column (higher is better).
    """
    from blendsql.db.documents import fts_query
    from blendsql.db.frames import rows_to_frame

    columns = db.columns(table)
    match = fts_query(question)
    if not match or k <= 0:
        return rows_to_frame([*columns, "score"], [])
    t = quote(table)
    cols = ", ".join(f"{t}.{quote(c)}" for c in columns)
    # a literal, not a parameter: a backend's translation may use the text several times
    words = "'" + match.replace("'", "''") + "'"
    _, rows = db.execute(f"SELECT {cols}, -bm25({t}) AS score FROM {t} WHERE {t} MATCH {words} "
                         f"ORDER BY bm25({t}) LIMIT {int(k)}")
    return rows_to_frame([*columns, "score"], rows)

