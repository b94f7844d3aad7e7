"""Values as text: what ingredients and retrieval read a cell as.

A leaf below both ``blendsql.ingredients`` and ``blendsql.retrieval``: a NULL-like
value, a scalar written for a prompt, a SUQL text cell as its list of documents.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd


def is_missing(v: Any) -> bool:
    """NULL-like (None / NaN / NaT), without choking on lists."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    try:
        return bool(v is pd.NaT or (pd.api.types.is_scalar(v) and pd.isna(v)))
    except (TypeError, ValueError):
        return False


def render_scalar(v: Any) -> str:
    """A value as prompt text: whole floats without '.0' noise, bytes decoded."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def text_items(value: Any) -> list[str]:
    """A SUQL text value as a list of documents.

    SUQL columns hold either one text or a JSON array of texts (e.g. all
    reviews of a restaurant); both are accepted, as is an actual Python list.
    """
    if is_missing(value):
        return []
    if isinstance(value, (list, tuple)):
        return [render_scalar(v) for v in value if not is_missing(v) and render_scalar(v).strip()]
    text = render_scalar(value).strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            return [
                p if isinstance(p, str) else json.dumps(p, ensure_ascii=False)
                for p in parsed
                if p is not None and (not isinstance(p, str) or p.strip())
            ]
    return [text] if text else []
