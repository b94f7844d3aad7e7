"""MkDocs hook: the reference markers of the docs pages, filled from the code.

``<!-- blendsql:cli -->`` becomes the CLI reference (from ``blendsql.cli.build_parser``),
``<!-- blendsql:options blendsql.ingredients.LLMMap -->`` that ingredient's options table
(``blendsql._reference``).
"""

from __future__ import annotations

from typing import Any

from blendsql._reference import render


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    return render(markdown)
