"""Computing projection-only map calls on the final rows (see :mod:`blendsql.plan.project`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from blendsql.execute.values import outputs_to_sqlite
from blendsql.grammar.nodes import IngredientCall, to_blendsql
from blendsql.ingredients.base import MapIngredient
from blendsql.plan.calls import map_ingredient, map_value
from blendsql.plan.memo import RegistryKey, TreeMemo, registry_key
from blendsql.plan.project import name_call_columns, project_values, projection_calls
from blendsql.smoothie import TraceStep

if TYPE_CHECKING:
    from blendsql.execute.engine import Run

OPTION = "late_maps"  # BlendSQL(..., late_maps=False) turns the rule off


@dataclass
class LateMap:
    """A map call whose output column is filled in after the final query."""

    index: int
    call: IngredientCall
    run_values: Callable[[list[Any]], list[Any]]


@dataclass
class LatePlan(TreeMemo):
    """The static part of the rule for one tree: memoised on that tree's ``meta``.

    Why: naming columns and choosing the deferred calls depend only on the
    tree and the registry, and a parse-cached tree comes back on every run;
    redoing the copies and renders cost ~1 ms per query. ``sql`` caches the
    final statement's text when no other call is left to compute.
    """

    key: RegistryKey
    named: exp.Expression
    deferred: list[tuple[int, IngredientCall]]
    projected: exp.Expression
    sql: str | None = None


MEMO = "bsql_late_plan"


def plan_late_maps(run: Run, tree: exp.Expression, memo: bool = False,
                   ) -> tuple[exp.Expression, list[LateMap], LatePlan | None]:
    """Name call columns; take the projection-only maps out of ``tree``.

    Their arguments are evaluated now, while the calls are in the tree.
    ``memo``: keep the static plan on ``tree`` (a tree nobody changes).
    """
    key = registry_key(run.registry)
    plan = tree.meta.get(MEMO) if memo else None
    if not isinstance(plan, LatePlan) or plan.key != key:
        plan = _static_plan(run, tree, key)
        if memo:
            tree.meta[MEMO] = plan
    if not run.options.get(OPTION, True) or not plan.deferred:
        return plan.named, [], None
    late = []
    for index, call in plan.deferred:
        ing = run.registry.get(call.key_name)
        assert isinstance(ing, MapIngredient)
        _, _, _, run_values = run.map_runner(ing, call)
        late.append(LateMap(index, call, run_values))
    run.trace.append(TraceStep(
        "plan", f"{len(late)} projection-only map call(s) computed on the final rows",
        details={"calls": [run.call_text(m.call) for m in late]}))
    return plan.projected, late, plan


def _static_plan(run: Run, tree: exp.Expression, key: RegistryKey,
                 ) -> LatePlan:
    named = name_call_columns(tree, to_blendsql)

    def value_of(call: IngredientCall) -> exp.Expression | None:
        return map_value(call, run.registry)

    deferred = projection_calls(named, lambda c: map_ingredient(c, run.registry) is not None,
                                value_of)
    projected = named
    if deferred:
        assert isinstance(named, exp.Select)
        projected = project_values(named, deferred, value_of)  # type: ignore[arg-type]
    return LatePlan(key, named, deferred, projected)


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
