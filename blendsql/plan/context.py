"""What a call rule may use of a run: a Protocol, nothing concrete.

Why: the call rules (``plan.preagg``, ``plan.lazy``, ``plan.order``,
``plan.static_filter``, ``plan.calls.share_identical``) stand before the engine
(``execute/``) that applies them, so they cannot import its ``Run``; they
depend on this Protocol instead, which :class:`blendsql.execute.engine.Run`
satisfies (``tests/test_import_graph.py`` keeps the layers in order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlglot import exp

from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import IngredientRegistry, MapIngredient
from blendsql.plan.state import RunState
from blendsql.smoothie import Meta, TraceStep

#: what ``map_runner`` returns: (value node, question, engine kwargs, run_values)
MapRunner = tuple[exp.Expression, Any, dict[str, Any], Callable[[list[Any]], list[Any]]]


class RunStatistics(Protocol):
    """The measurements a rule decides on, taken by the executor
    (:class:`blendsql.execute.statistics.Statistics`): ``plan/`` receives them as data
    and runs no statement itself."""

    def source_columns(self, query: exp.Select) -> frozenset[str] | None:
        """Lower-case column names a ``SELECT * ... LIMIT 0`` returns (None: unknown)."""

    def declares_collation(self, tree: exp.Expression) -> bool:
        """Whether a table the tree names declares a COLLATE (True when unsure)."""

    def distinct_sample(self, query: exp.Select, summary: str) -> tuple[int, int] | None:
        """(rows, distinct values) a counting query returns (None: it cannot run)."""

    def null_passes(self, test: exp.Expression, name: str) -> bool:
        """Whether a NULL test (``SELECT <condition with NULL>``) holds."""


class RunContext(Protocol):
    """The session, evaluator and step-runner operations a helper may call.

    ``db`` and ``model`` are the run's backend and metered model, for the executor's
    helpers (``execute/``); ``plan/`` reads neither (and imports neither package).
    """

    db: Any
    registry: IngredientRegistry
    options: dict[str, Any]
    params: dict[str, Any]  # the run's bound parameters (names start __bsql_<kind><run_id>)
    run_id: str  # unguessable, unique per run
    bound_limit: int  # how many parameters one statement may bind (the backend's limit)
    meta: Meta
    trace: list[TraceStep]
    temp_tables: list[str]
    state: RunState  # what the run remembers between steps (typed, see plan.state)

    def sql(self, tree: exp.Expression | str, summary: str, *, kind: str = "sql",
            params: Mapping[str, Any] | None = None, copy: bool = True,
            ) -> tuple[list[str], list[tuple]]:
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

    @property
    def model(self) -> Any:
        """The run's metered model (``execute.metering.MeteredModel``)."""

    @property
    def statistics(self) -> RunStatistics:
        """The measurements the rules decide on."""

    @property
    def hooks(self) -> Mapping[Any, tuple[Any, ...]]:
        """The call rules switched on for this run, by hook (``plan.rules.rules_for``)."""

    def applying(self, rule: Any) -> AbstractContextManager[None]:
        """Mark ``rule`` (a :class:`blendsql.plan.rules.Rule`) as being applied."""

    def decided(self, summary: str, outcome: str = "", **details: Any) -> None:
        """Record the applied rule's decision (``details["rule"]``: its name, and
        ``_<outcome>`` when given) in the trace."""

    def ordering_cost(self) -> Callable[[IngredientCall], float] | None:
        """The cost the next ready call is chosen by (None: inner scopes first only)."""

    def call_cost(self, call: IngredientCall) -> float:
        """A ready call's estimated cost (distinct values x prompt tokens)."""

    def evaluate(self, node: exp.Expression, call: IngredientCall) -> Any:
        """Python value of a call's argument."""

    def readiness_candidate(self, call: IngredientCall) -> exp.Expression | None:
        """The candidate query a call would run now."""

    def map_runner(self, ing: MapIngredient, call: IngredientCall) -> MapRunner:
        """Bind a map call's arguments; its runner."""
