"""Entry-point groups, shared by the registries that read them (backends, model providers).

Both registries list blendsql's own entry points in ``pyproject.toml`` and let other
packages add theirs to the same group. Two things are the same for both and live here:
telling blendsql's own points from a plugin's (with the built-in table as a fallback when
the installed metadata lacks the group, as a source tree never installed does), and
loading a point so that one broken plugin is skipped with a warning instead of breaking
every query.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from collections.abc import Callable, Mapping
from typing import Any

#: the distribution whose entry points are the built-ins
BUILTIN_DIST = "blendsql"


def dist_name(point: importlib.metadata.EntryPoint) -> str | None:
    """The lower-cased name of the distribution that declares ``point`` (None: unknown)."""
    dist = getattr(point, "dist", None)
    return None if dist is None else str(dist.metadata["Name"]).lower()


def group_points(group: str, builtins: Mapping[str, str]
                 ) -> tuple[list[importlib.metadata.EntryPoint], list[importlib.metadata.EntryPoint]]:
    """(blendsql's own points of ``group`` in ``builtins``' order, other packages' points).

    ``builtins``: the own points as ``pyproject.toml`` declares them (name -> "module:attr"),
    used when the installed metadata has none.
    """
    points = list(importlib.metadata.entry_points(group=group))
    own = [p for p in points if dist_name(p) == BUILTIN_DIST]
    if not own:  # metadata without the group (a source tree never installed)
        own = [importlib.metadata.EntryPoint(name, value, group) for name, value in builtins.items()]
    order = list(builtins)
    own.sort(key=lambda p: order.index(p.name) if p.name in order else len(order))
    return own, [p for p in points if dist_name(p) != BUILTIN_DIST]


def load_point(point: importlib.metadata.EntryPoint, what: str, fits: Callable[[Any], bool],
               expected: str) -> Any | None:
    """``point`` loaded, or None with a RuntimeWarning when its import fails or the object
    is not what the group holds (``fits``; ``expected`` says what in the warning)."""
    try:
        obj = point.load()
    except Exception as e:  # noqa: BLE001 - any failure of a plugin's import
        warnings.warn(f"{what} plugin {point.name!r} ({point.value}) could not be loaded: "
                      f"{type(e).__name__}: {e}", RuntimeWarning, stacklevel=3)
        return None
    if not fits(obj):
        warnings.warn(f"{what} plugin {point.name!r} ({point.value}) is not {expected}",
                      RuntimeWarning, stacklevel=3)
        return None
    return obj
