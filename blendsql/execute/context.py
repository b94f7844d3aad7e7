"""What the rule helpers and the planner may use of a run: a Protocol, nothing concrete.

Why: ``execute.lazy``, ``execute.preagg``, ``execute.project``,
``execute.optimise`` and ``execute.explain`` are imported by the engine, so
importing its ``Run`` back (for typing, or inside a function) would be an
import cycle. They depend on this Protocol instead; :class:`blendsql.execute.engine.Run`
satisfies it (``tests/engine/test_import_graph.py`` keeps ``execute`` and
``plan`` free of cycles).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlglot import exp

from blendsql.db.backend import Backend
from blendsql.execute.metering import MeteredModel
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry, MapIngredient
from blendsql.smoothie import Meta, TraceStep

#: what ``map_runner`` returns: (value node, question, engine kwargs, run_values)
MapRunner = tuple[exp.Expression, Any, dict[str, Any], Callable[[list[Any]], list[Any]]]


class RunContext(Protocol):
    """The session, evaluator and step-runner operations a helper may call."""

    db: Backend
    registry: IngredientRegistry
    model: MeteredModel
    options: dict[str, Any]
    params: dict[str, Any]
    meta: Meta
    trace: list[TraceStep]
    temp_tables: list[str]
    memo: dict[str, Any]

    def sql(self, tree: exp.Expression | str, summary: str, *, kind: str = "sql",
            params: Mapping[str, Any] | None = None) -> tuple[list[str], list[tuple]]:
        """Run one traced statement."""

    def labelled(self, kind: str, summary: str) -> AbstractContextManager[None]:
        """Label the statements run inside (trace kind and summary)."""

    def bindings(self, text: str) -> dict[str, Any]:
        """The named parameters a statement uses."""

    def param_origin(self, name: str) -> str:
        """Who made a bound parameter's value (for error messages)."""

    def candidate_values(self, cand: exp.Expression, summary: str) -> list[Any]:
        """Distinct non-NULL values of a candidate query."""

    def temp_table(self, kind: str, rows: list[tuple[Any, Any]], key: bool = True,
                   index: bool = True) -> str:
        """A session temp table of (k, v) rows, dropped at cleanup."""

    def map_lookup_node(self, pairs: list[tuple[Any, Any]], value: exp.Expression,
                        ) -> exp.Expression:
        """A per-row lookup of a map's outputs."""

    def call_text(self, call: IngredientCall) -> str:
        """BlendSQL text of a call."""

    def call_key(self, call: IngredientCall) -> str:
        """The key identical calls share."""

    def decided(self, rule: str, summary: str, **details: Any) -> None:
        """Record a planning rule's decision in the trace."""

    def evaluate(self, node: exp.Expression, call: IngredientCall) -> Any:
        """Python value of a call's argument."""

    def readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        """The candidate query a call would run now."""

    def compute(self, tree: exp.Expression, call: IngredientCall) -> exp.Expression:
        """Compute one ready call; the tree with its lookup."""

    def map_runner(self, ing: MapIngredient, call: IngredientCall) -> MapRunner:
        """Bind a map call's arguments; its runner."""
