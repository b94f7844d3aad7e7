"""The typed state one run keeps between its steps (what the walk, the step runners and the
call rules remember).

Why types, not a dict of string keys: each field says who fills it and what it
holds, a misspelt name is an error where it is written, and a cache that must be
emptied when the working tree changes is one object (:class:`TreeTexts`), replaced
when it changes, instead of being compared with a version counter by each reader.
Pure data: ``plan/`` reads and writes it, ``execute/`` creates one per run
(``execute.run.Run.state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from blendsql.plan.cost import CostEstimate
from blendsql.plan.infer import Hint
from blendsql.plan.relax import AtomTexts, ClauseTexts


@dataclass
class CostState:
    """Each ready call's cost, estimated once per run (``plan.order``, ``execute.optimise``)."""

    estimates: dict[int, CostEstimate | None] = field(default_factory=dict)  # by call id
    values: dict[int, float] = field(default_factory=dict)  # costs known, by call id
    seen: dict[int, float] = field(default_factory=dict)  # compared for the next choice
    #: a counting statement's (values, average length, first call) by candidate SQL
    counts: dict[str, tuple[int, float, str]] = field(default_factory=dict)


@dataclass
class TreeTexts:
    """Texts and candidates built from one state of the working tree: replaced by a new
    one when the tree changes (a call computed, a marker put in its place)."""

    clause_texts: ClauseTexts = field(default_factory=dict)
    readiness: dict[int, exp.Expression | None] = field(default_factory=dict)  # by call id


@dataclass
class TreeState:
    """What is known of the working tree.

    ``now``: texts and candidates of the tree as it is (:class:`TreeTexts`, replaced
    whenever it changes); ``atom_texts``: plain atoms' SQL, kept until a marker is taken
    out; ``empty_scopes``: a scope whose candidate had no row, by ``id`` of the scope,
    for the whole run (candidates only get stronger).
    """

    now: TreeTexts = field(default_factory=TreeTexts)
    atom_texts: AtomTexts = field(default_factory=dict)
    empty_scopes: dict[int, tuple[exp.Expression, str]] = field(default_factory=dict)


@dataclass
class SharedCall:
    """What identical calls of one query share: the combined hint and the outputs.

    ``outputs`` maps :func:`value_key` of each computed value to its output
    (a QA call's answer under the key ``None``).
    """

    hint: Hint
    uses: int
    outputs: dict[Any, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """Everything one run remembers between steps, by the job that needs it."""

    costs: CostState = field(default_factory=CostState)
    tree: TreeState = field(default_factory=TreeState)
    rule_name: str = ""  # the call rule being applied (its decisions are traced by its name)
    #: how many more passing values ``plan.static_filter`` may bind (None: not set yet)
    bound_values_left: int | None = None
    #: lower-case column names of a base table by its SQL text (None: unknown)
    source_columns: dict[str, set[str] | None] = field(default_factory=dict)
    #: tables (db, name) whose values cannot be collected as one JSON text
    json_unsized: set[tuple[str, str]] = field(default_factory=set)
