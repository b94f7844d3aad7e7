"""The IPython magic: ``%load_ext blendsql``, then a ``%%blendsql DB`` cell runs its query.

    %%blendsql example -o pitchers
    SELECT name FROM w WHERE school = {school}
      AND {{LLMMap('Is this a pitcher?', w.position)}} = TRUE

``DB`` is the name of a notebook variable holding a :class:`~blendsql.BlendSQL` session
(or anything ``BlendSQL(...)`` opens: a connection, a DataFrame, a dict of them), else a
path, a URL, or ``example``. ``{name}`` outside string literals and quoted names is the
notebook variable ``name``, bound as the query parameter ``:name``: its value never
becomes SQL text. ``{{ ... }}`` stays an ingredient call. The cell shows the Smoothie;
``-o NAME`` also keeps it in the variable ``NAME``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

from blendsql.blend import BlendSQL
from blendsql.errors import BlendSQLError

_NAME = re.compile(r"\{([A-Za-z_]\w*)\}")
#: the name of the bundled demo database
EXAMPLE = "example"


def bind_variables(query: str, namespace: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``query`` with each ``{name}`` outside quotes replaced by the parameter ``:name``,
    and the parameters' values taken from ``namespace``.

    ``{{`` / ``}}`` (ingredient calls) and text inside ``'...'`` literals or ``"..."`` /
    backquoted names are left alone; a name missing from ``namespace`` is a UsageError.
    """
    out: list[str] = []
    params: dict[str, Any] = {}
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"`":  # a literal or a quoted name: copied as it is ('' escapes a quote)
            j = i + 1
            while j < n:
                if query[j] == ch:
                    if j + 1 < n and query[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append(query[i:j + 1])
            i = j + 1
            continue
        if query.startswith("{{", i) or query.startswith("}}", i):
            out.append(query[i:i + 2])
            i += 2
            continue
        m = _NAME.match(query, i) if ch == "{" else None
        if m:
            name = m.group(1)
            if name not in namespace:
                raise UsageError(f"{{{name}}}: no variable {name!r} in the notebook")
            params[name] = namespace[name]
            out.append(f":{name}")
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out), params


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="%%blendsql", add_help=False, exit_on_error=False)
    ap.add_argument("db", help="a notebook variable (a BlendSQL session, a connection, "
                    "DataFrames), a database path or URL, or 'example'")
    ap.add_argument("-o", "--output", metavar="NAME", help="keep the Smoothie in variable NAME")
    ap.add_argument("--model", metavar="PATH", help="a GGUF path or Hub name for a new session")
    ap.add_argument("--no-cache", action="store_true", help="bypass the persistent answer cache")
    return ap


@magics_class
class BlendSQLMagics(Magics):
    """``%%blendsql``: run the cell's BlendSQL query and show the Smoothie."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self._sessions: dict[tuple[str, str | None, bool], BlendSQL] = {}

    @property
    def namespace(self) -> dict[str, Any]:
        """The notebook's variables."""
        assert self.shell is not None, "the magic is registered with a shell"
        user_ns: dict[str, Any] = self.shell.user_ns
        return user_ns

    def session(self, db: str, model: str | None, cache: bool) -> BlendSQL:
        """The session for ``db``: a notebook variable's, else one opened (once) here."""
        value = self.namespace.get(db) if db.isidentifier() else None
        if isinstance(value, BlendSQL):
            return value
        if value is not None:
            return BlendSQL(value, model=model, cache=cache)
        key = (db, model, cache)
        if key not in self._sessions:
            source: Any = db
            if db == EXAMPLE:
                from blendsql.db import example_db_path

                source = example_db_path()
            self._sessions[key] = BlendSQL(source, model=model, cache=cache)
        return self._sessions[key]

    @cell_magic
    def blendsql(self, line: str, cell: str) -> Any:
        """Run the cell's query: ``%%blendsql DB [-o NAME] [--model PATH] [--no-cache]``."""
        try:
            args = _parser().parse_args(shlex.split(line))
        except (argparse.ArgumentError, SystemExit) as e:
            raise UsageError(f"%%blendsql DB [-o NAME] [--model PATH] [--no-cache]: {e}") from e
        query, params = bind_variables(cell, self.namespace)
        try:
            smoothie = self.session(args.db, args.model, not args.no_cache).execute(
                query, params=params or None)
        except BlendSQLError as e:
            print(f"error: {e}", file=sys.stderr)
            return None
        if args.output:
            self.namespace[args.output] = smoothie
        return smoothie


def load(shell: Any) -> None:
    """Register the magic with ``shell`` (``%load_ext blendsql``)."""
    shell.register_magics(BlendSQLMagics)
