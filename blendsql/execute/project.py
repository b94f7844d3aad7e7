"""Computing projection-only map calls on the final rows (see :mod:`blendsql.plan.project`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.context import RunContext
from blendsql.plan.project import LatePlan
from blendsql.plan.rules import late_maps as late_maps_rule
from blendsql.plan.rules import rule_of
from blendsql.plan.values import outputs_to_sqlite
from blendsql.smoothie import TraceStep


@dataclass
class LateMap:
    """A map call whose output column is filled in after the final query."""

    index: int
    call: IngredientCall
    run_values: Callable[[list[Any]], list[Any]]


def bind_late_maps(run: RunContext, plan: LatePlan | None,
                   ) -> tuple[list[LateMap], LatePlan | None]:
    """Bind the maps the ``late_maps`` rule deferred (``plan``, None: none): (late maps,
    their plan).

    Their arguments are evaluated now, while the calls are in the tree
    (``plan.named``); the outputs are filled in after the final query.
    """
    if plan is None:
        return [], None
    late = []
    for index, call in plan.deferred:
        ing = run.registry.get(call.key_name)
        assert isinstance(ing, MapIngredient)
        _, _, _, run_values = run.map_runner(ing, call)
        late.append(LateMap(index, call, run_values))
    run.trace.append(TraceStep(
        "plan", f"{len(late)} projection-only map call(s) computed on the final rows",
        details={"rule": rule_of(late_maps_rule).name, "calls": [run.call_text(m.call) for m in late]}))
    return late, plan


def apply_late_maps(late: list[LateMap], rows: list[tuple[Any, ...]],
                    ) -> list[tuple[Any, ...]]:
    """Replace each late column's values by the map's outputs (one batch per call).

    The ingredient sees the column's distinct non-NULL values in row order;
    a NULL value maps to NULL, as the per-row lookup would give. Outputs
    are stored as SQLite would return them (booleans as 0 / 1).
    """
    if not late or not rows:
        return rows
    columns = list(zip(*rows, strict=True))
    for m in late:
        col = columns[m.index]
        values = [v for v in dict.fromkeys(col) if v is not None]
        outputs = _as_returned(outputs_to_sqlite(m.run_values(values))) if values else []
        table = dict(zip(values, outputs, strict=True))
        columns[m.index] = tuple(map(table.get, col))
    return list(zip(*columns, strict=True))


def _as_returned(outputs: list[Any]) -> list[Any]:
    """Outputs as SQLite hands them back: a stored bool reads as 0 / 1."""
    if bool in set(map(type, outputs)):
        return [int(o) if type(o) is bool else o for o in outputs]
    return outputs
