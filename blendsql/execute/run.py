"""One ``execute`` call as a composition of small parts, each with one job.

Why composition: the walk, the step runners and the call rules all work with
"the run", but each job (the database and its statements, the rule being
applied, argument evaluation and invocation, identical-call sharing, the call
order, computing a step) has its own state and tests; a part holds only its
own. :class:`Run` builds the parts, shares one typed
:class:`~blendsql.plan.state.RunState` among them, and offers the operations
the rules and helpers call (the :class:`~blendsql.plan.context.RunContext`
protocol) by handing out the part that does each one.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from blendsql.cancel import CancelToken
from blendsql.db.backend import Backend
from blendsql.execute.evaluate import Evaluator, Sharing
from blendsql.execute.metering import MeteredModel
from blendsql.execute.session import Decisions, Session
from blendsql.execute.statistics import Statistics
from blendsql.execute.steps import Ordering, StepRunner
from blendsql.ingredients.base import IngredientRegistry
from blendsql.plan.rules import RunRules, rules_for
from blendsql.plan.state import RunState


class Run:
    """One ``execute`` call: its parts and the operations they offer.

    ``session`` (database, statements, temp objects), ``decisions`` (the rule
    applied and its trace steps), ``evaluator`` (arguments, constraints,
    invocation), ``sharing`` (identical calls), ``ordering`` (the next ready
    call), ``steps`` (computing a call as its plan step says); ``state``: what
    they remember between steps.
    """

    def __init__(self, db: Backend, registry: IngredientRegistry, model: MeteredModel,
                 params: dict[str, Any], options: dict[str, Any] | None = None,
                 rules: RunRules | None = None, cancel: CancelToken | None = None) -> None:
        self.state = RunState()
        self.options = options or {}
        if rules is None:  # ``rules``: rules_for(options), when the caller resolved it
            rules = rules_for(self.options)
        self.hooks = rules.hooks  # the call rules switched on, by hook
        self.rules_off = rules.off  # rules on by default switched off for this run
        # ``cancel``: the query's token (``blendsql.cancel``), when it runs under one
        session = self.session = Session(db, registry, model, params, self.options, self.state,
                                         cancel)
        decisions = self.decisions = Decisions(session.trace, self.state)
        self.evaluator = Evaluator(session)
        self.sharing = Sharing(self, session, decisions)
        self.ordering = Ordering(self, decisions)
        self.steps = StepRunner(self, session, self.evaluator, self.sharing, decisions, self.state)
        # what the session holds for the whole run (never rebound)
        self.db, self.registry, self.model = db, registry, model
        self.params, self.meta, self.trace = session.params, session.meta, session.trace
        self.statements, self.temp_tables = session.statements, session.temp_tables
        self.run_id, self.bound_limit = session.run_id, session.bound_limit
        # the operations, each the bound method of the part that does it
        self.sql = session.sql
        self.labelled = session.labelled
        self.bindings = session.bindings
        self.param_origin = session.param_origin
        self.candidate_values = session.candidate_values
        self.temp_table = session.temp_table
        self.map_lookup_node = session.map_lookup_node
        self.call_text = session.call_text
        self.cleanup = session.cleanup
        self.applying = decisions.applying
        self.decided = decisions.decided
        self.evaluate = self.evaluator.evaluate
        self.call_key = self.sharing.call_key
        self.ordering_cost = self.ordering.ordering_cost
        self.call_cost = self.ordering.call_cost
        self.trace_order = self.ordering.trace_order
        self.readiness_candidate = self.steps.readiness_candidate
        self.map_runner = self.steps.map_runner
        self.compute = self.steps.compute

    @cached_property
    def statistics(self) -> Statistics:
        """The measurements the planning rules decide on (``plan.context.RunStatistics``)."""
        return Statistics(self)

    def note_rules_off(self) -> None:
        """One trace step naming the rules switched off for this run (when any)."""
        self.decisions.note_rules_off(self.rules_off)
