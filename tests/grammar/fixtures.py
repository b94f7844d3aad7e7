"""Loaders for the golden fixture files next to this module."""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from blendsql.grammar import IngredientCall

HERE = Path(__file__).parent


def roundtrip_queries() -> list[str]:
    """Blocks of ``roundtrip.sql`` (separated by lines holding only ``;;``)."""
    text = (HERE / "roundtrip.sql").read_text(encoding="utf-8")
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.strip() == ";;":
            blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    blocks.append("\n".join(current))
    return [b for b in blocks if b.strip()]


def bad_queries() -> list[tuple[str, str, int, int]]:
    """Cases of ``bad_queries.txt``: (query, message fragment, line, column).

    Format: a case is ``-- expect: <fragment> @ <line>:<col>`` followed by the
    query lines; cases are separated by lines holding only ``;;``. Inside
    queries the text is taken verbatim.
    """
    text = (HERE / "bad_queries.txt").read_text(encoding="utf-8")
    cases: list[tuple[str, str, int, int]] = []
    for block in _split(text):
        lines = block.split("\n")
        head = next(i for i, ln in enumerate(lines) if ln.startswith("-- expect:"))
        spec = lines[head][len("-- expect:"):].strip()
        fragment, _, where = spec.rpartition("@")
        line, col = where.strip().split(":")
        query = "\n".join(lines[head + 1:])
        cases.append((query, fragment.strip(), int(line), int(col)))
    return cases


def _split(text: str) -> list[str]:
    blocks, current = [], []
    for line in text.split("\n"):
        if line.strip() == ";;":
            blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    blocks.append("\n".join(current))
    return [b for b in blocks if any(ln.startswith("-- expect:") for ln in b.split("\n"))]


def meta_signature(tree: exp.Expression) -> list[tuple[object, ...]]:
    """The BlendSQL-specific meta that sqlglot equality ignores, in walk order."""
    sig: list[tuple[object, ...]] = []
    for node in tree.walk():
        if isinstance(node, IngredientCall):
            sig.append((
                "call", node.name, node.brace, node.call_id,
                bool(node.meta.get("join_form")), tuple(node.meta.get("join_keys") or ()),
            ))
        elif isinstance(node, exp.Column) and node.meta.get("quoted_form"):
            sig.append(("quoted", node.sql()))
    return sig
