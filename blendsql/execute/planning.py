"""Applying the tree rules of ``blendsql.plan.rules`` for a run (shared with ``plan()``).

Why its own module: the walk (``execute.walk``) calls :func:`plan_tree` first,
so the plan's steps are decided on the tree the engine computes on; the rules reach the
database only through :class:`RuleEnv` (a rule's ``RuleContext``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from blendsql.errors import BlendSQLError
from blendsql.execute.optimise import enum_classifier, vocabulary_of
from blendsql.execute.session import decision_step
from blendsql.grammar.nodes import IngredientCall
from blendsql.plan.aliases import projection_names
from blendsql.plan.calls import visible_ctes
from blendsql.plan.context import RunContext
from blendsql.plan.enum_match import Classifier
from blendsql.plan.memo import RegistryKey, TreeMemo
from blendsql.plan.rules import PlanState, apply_stage, has_macros


@dataclass
class Prepared(TreeMemo):
    """A macro-free tree after name checks and alias qualification (memoised)."""

    key: RegistryKey
    tree: exp.Expression


class RuleEnv:
    """What the planning rules may ask of a run (:class:`blendsql.plan.rules.RuleContext`)."""

    def __init__(self, run: RunContext, parse_expr: Callable[[str], exp.Expression]) -> None:
        self.run = run
        self.registry = run.registry
        self.options = run.options
        self.parse_expr = parse_expr
        self.rule_name = ""  # the tree rule being applied (apply_stage sets it)

    def literal(self, node: exp.Expression) -> Any:
        """A literal argument's value (string ingredients receive values, not text)."""
        return self.run.evaluate(node, IngredientCall(this=exp.to_identifier("arg")))

    def source_columns(self, scope: exp.Select, src: exp.Expression) -> set[str] | None:
        """Column names of a FROM source, so an alias never hides a real column."""
        return source_columns(self.run, scope, src)

    def vocabulary(self, table: str, column: str) -> list[Any] | None:
        """A small column's values, for enum matching (one traced probe)."""
        return vocabulary_of(self.run, table, column)

    def enum_classifier(self) -> Classifier:
        """The classifier the ``enum_match`` setting asks for."""
        return enum_classifier(self.run)

    def decided(self, summary: str, outcome: str = "", **details: Any) -> None:
        """The applied rule's decision (``rule_name``'s) as a trace step of the run."""
        self.run.trace.append(decision_step(self.rule_name, summary, outcome, details))


def prepare(run: RunContext, given: exp.Expression, parse_expr: Callable[[str], exp.Expression],
            memo: bool = False) -> exp.Expression:
    """The ``prepare`` rules (:data:`blendsql.plan.rules.RULES`) applied to ``given``.

    With ``memo`` (a session-cached parse), memoised on ``given`` when it
    holds no alias / string call: then nothing was evaluated, and the result
    depends only on the tree and the registry (these rules cannot be switched off).
    """
    key = run.registry.identity  # = plan.memo.registry_key
    done = given.meta.get("bsql_prepared") if memo else None
    if isinstance(done, Prepared) and done.key == key:
        return done.tree
    tree = apply_stage("prepare", PlanState(given), RuleEnv(run, parse_expr)).tree
    if memo and not has_macros(given, run.registry):
        given.meta["bsql_prepared"] = Prepared(key, tree)
    return tree


def plan_tree(run: RunContext, given: exp.Expression, parse_expr: Callable[[str], exp.Expression],
              memo: bool = False) -> PlanState:
    """Every tree rule, in list order: ``prepare`` (memoised), then ``rewrite``.

    The walk's first move (``execute.walk.plan_query``): the plan's steps are decided
    on this tree.
    """
    tree = prepare(run, given, parse_expr, memo)
    return apply_stage("rewrite", PlanState(tree, memo=memo), RuleEnv(run, parse_expr))


def source_columns(run: RunContext, scope: exp.Select, src: exp.Expression) -> set[str] | None:
    """Lower-case column names of a FROM source (None when they cannot be known).

    A CTE or derived table is read from its SELECT list (or its column
    list); a base table is asked of the database once per run
    (``SELECT * ... LIMIT 0`` reads no row).
    """
    alias = src.args.get("alias")
    if isinstance(alias, exp.TableAlias) and alias.columns:
        return {c.name.lower() for c in alias.columns}
    if isinstance(src, exp.Subquery):
        return projection_names(src.this)
    if not isinstance(src, exp.Table) or not isinstance(src.this, exp.Identifier):
        return None
    cte = next((c for c in reversed(visible_ctes(scope))
                if c.alias_or_name.lower() == src.name.lower()), None)
    if cte is not None and not src.db:
        cols = cte.args.get("alias")
        if isinstance(cols, exp.TableAlias) and cols.columns:
            return {c.name.lower() for c in cols.columns}
        return projection_names(cte.this)
    cache = run.state.source_columns
    table = exp.Table(this=src.this.copy(), db=src.args["db"].copy() if src.db else None)
    text = table.sql(dialect="sqlite")
    if text not in cache:
        try:
            cols = run.sql(f"SELECT * FROM {text} LIMIT 0", f"column names of {text}",
                           kind="plan")[0]
            cache[text] = {str(c).lower() for c in cols}
        except BlendSQLError:
            cache[text] = None
    return cache[text]
