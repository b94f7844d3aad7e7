"""The planning rules, in the order they apply: one list, each rule named and switchable.

Why a list: the order of the rewrites is data, not the engine's control
flow, so one rule can be read, tested or switched off without reading the
whole loop. As sqlglot's optimizer lists its rules, :data:`RULES` holds them here
in order; the engine applies the tree rules by iterating it
(:func:`apply_stage`) and asks :func:`rule_on` before each per-call
decision. Every rule has a golden fixture (``tests/plan_rules/fixtures/
<name>.txt``: queries -> plan text with the rule on and off).

Three stages:

- ``prepare`` (required for the query's meaning, cannot be switched off):
  pure tree -> tree functions; memoised per cached parse by the engine.
- ``rewrite``: tree -> tree rewrites after preparation, some switchable.
- ``call``: decisions that need runtime information (candidate counts, a
  sample of the rows, a LIMIT scan's progress, the outputs). ``fn`` is the
  rule's pure decision function; the executor calls it at the point it
  applies and writes what it decided, and why, as a ``plan`` trace step
  whose ``details["rule"]`` names the rule.

Switches: ``BlendSQL(db, rules_off={"preaggregate"})`` (or per ``execute``)
turns rules off by name; the older boolean options (``lazy=False``,
``preaggregate=False``, ``late_maps=False``, ``cost_order=False``,
``enum_match=...``) are the same switches under the rule's own name. An
unknown rule name raises :class:`blendsql.errors.OptionError` with a
did-you-mean hint; a required rule cannot be switched off.

Every optional rule only saves work: with it off a query returns the same
rows (``tests/plan_rules/test_rules_rows.py``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol

from sqlglot import exp

from blendsql.errors import IngredientError, OptionError
from blendsql.grammar.nodes import IngredientCall
from blendsql.ingredients.base import (
    AliasIngredient,
    IngredientRegistry,
    JoinIngredient,
    MapIngredient,
    StringIngredient,
)
from blendsql.plan import aliases, calls, expand, lazy, order, preagg, project, static_filter
from blendsql.plan.calls import find_calls
from blendsql.plan.enum_match import Classifier, match_enums

RULES_OFF = "rules_off"  # the option holding the names of rules switched off


@dataclass
class PlanState:
    """What the tree rules pass along: the tree and what rules decided about it.

    ``memo``: the tree is a session-cached parse nobody changes, so rules may
    memoise on it. ``late``: the late-map rule's plan (columns named,
    projection-only maps deferred to the final rows) once it ran.
    """

    tree: exp.Expression
    memo: bool = False
    late: project.LatePlan | None = None
    deferred: bool = False  # the late-map rule took calls out of the tree


class RuleContext(Protocol):
    """What a tree rule may ask of the session running it (never the model or data rows)."""

    @property
    def registry(self) -> IngredientRegistry:
        """The session's ingredients."""

    @property
    def options(self) -> Mapping[str, Any]:
        """The run's options (rule switches among them)."""

    def parse_expr(self, text: str) -> exp.Expression:
        """Parse one BlendSQL expression (an alias ingredient's expansion)."""

    def literal(self, node: exp.Expression) -> Any:
        """Python value of a literal argument (a string ingredient's input)."""

    def source_columns(self, scope: exp.Select, src: exp.Expression) -> set[str] | None:
        """Lower-case column names of a FROM source, or None when unknown."""

    def vocabulary(self, table: str, column: str) -> list[Any] | None:
        """Distinct values of a small column (enum matching), or None."""

    def enum_classifier(self) -> Classifier:
        """How enum matching picks a column value for a literal."""

    rule_name: str  # the rule being applied (set by apply_stage)

    def decided(self, summary: str, outcome: str = "", **details: Any) -> None:
        """Record the applied rule's decision (or its ``outcome``) as a trace step."""


@dataclass(frozen=True)
class Switch:
    """The boolean (or setting) option named after a rule that also turns it on / off."""

    types: tuple[type, ...]
    doc: str
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Rule:
    """One planning rule: its name, function, why it exists, its stage and its switch.

    ``fn``: for a tree rule ``PlanState, RuleContext -> PlanState``; for a
    ``call`` rule the function the executor calls at its ``hook`` (see
    :data:`CALL_HOOKS`). ``doc``: what the rule does and why it exists (the
    first paragraph and the "Why" paragraph of ``fn``'s docstring).
    ``switch``: an option of the rule's own name that also turns it on / off
    (None: only ``rules_off``); ``default``: whether it runs when nobody
    says; ``required``: the query's meaning depends on it (never off).
    """

    name: str
    fn: Callable[..., Any]
    doc: str
    stage: str
    switch: Switch | None = None
    default: bool = True
    required: bool = False
    hook: Hook | None = None


# -- prepare: required rewrites -------------------------------------------------------


def check_names(state: PlanState, ctx: RuleContext) -> PlanState:
    """Every call names a registered ingredient, before anything is evaluated.

    Why first: the parser accepts any name in braces; an unknown one must
    fail with the registered names as a hint, not later as a SQL error.
    """
    registry = ctx.registry
    for c in find_calls(state.tree):
        if registry.get(c.key_name) is None:
            names = ", ".join(sorted(registry.names())) or "(none registered)"
            raise IngredientError(f"unknown ingredient {c.name!r}",
                                  hint=f"registered ingredients: {names}")
    return state


def has_macros(tree: exp.Expression, registry: IngredientRegistry) -> bool:
    """True when ``tree`` holds an alias or string ingredient call."""
    return any(isinstance(registry.get(c.key_name), (AliasIngredient, StringIngredient))
               for c in find_calls(tree))


def expand_macros(state: PlanState, ctx: RuleContext) -> PlanState:
    """Alias / string ingredient calls become the expression their text parses to.

    Why: they stand for SQL (a saved sub-query, a generated condition); the
    text is parsed into the tree, never pasted into SQL, and what it names
    is checked like the user's own calls.
    """
    if not has_macros(state.tree, ctx.registry):
        return state
    tree = expand.expand_macros(state.tree, ctx.registry, ctx.parse_expr, ctx.literal)
    return check_names(replace(state, tree=tree), ctx)


def refuse_row_calls_in_dml(state: PlanState, ctx: RuleContext) -> PlanState:
    """A map / join call directly in an UPDATE or DELETE is refused with a hint.

    Why: such a call is evaluated over the rows of a SELECT scope; the
    statement's own table has none, so the candidate query failed with
    SQLite's "no such column" about text the user never wrote. The same
    intent works as a subquery, which is what the hint says.
    """
    for call in find_calls(state.tree):
        if isinstance(ctx.registry.get(call.key_name), (MapIngredient, JoinIngredient)):
            _refuse_in_dml(call)
    return state


def _refuse_in_dml(call: IngredientCall) -> None:
    p = call.parent
    while p is not None and not isinstance(p, (exp.Select, exp.Update, exp.Delete)):
        p = p.parent
    if isinstance(p, (exp.Update, exp.Delete)):
        kind = "UPDATE" if isinstance(p, exp.Update) else "DELETE"
        raise IngredientError(
            f"{call.name} is evaluated per row, which blendsql supports in SELECT "
            f"queries, not directly in {kind}",
            hint=f"select the rows in a subquery: {kind} ... WHERE rowid IN (SELECT rowid "
            f"FROM <table> WHERE {{{{{call.name}(...)}}}})")


def qualify_by_alias(state: PlanState, ctx: RuleContext) -> PlanState:
    """Columns of a single-source scope are qualified by its alias.

    Why: a candidate query is the call's scope with other parts rewritten;
    qualified names keep meaning the same source when that query is built.
    """
    return replace(state, tree=expand.qualify_by_alias(state.tree))


def resolve_aliases(state: PlanState, ctx: RuleContext) -> PlanState:
    """A SELECT alias read in WHERE / a call's arguments becomes the aliased expression.

    Why: SQLite lets ``WHERE f`` read ``SELECT {{M(x)}} AS f``; each
    candidate query must run on its own, without the SELECT list that
    defines ``f`` (a real FROM column of that name wins, as in SQLite).
    """
    return replace(state, tree=aliases.resolve_aliases(state.tree, ctx.source_columns))


# -- rewrite: after preparation -------------------------------------------------------


def enum_match(state: PlanState, ctx: RuleContext) -> PlanState:
    """A literal absent from a small-vocabulary column becomes its nearest value (opt-in).

    Why: ``WHERE country = 'USA'`` finds nothing when the column says
    ``'United States'``; an approximation (SUQL section 5.2), so off by
    default and every rewrite is a trace step.
    """
    out, rewrites = match_enums(state.tree, ctx.vocabulary, ctx.enum_classifier())
    for r in rewrites:
        ctx.decided(f"enum match: {r.table}.{r.column} = {r.literal!r} -> "
                    f"{r.replacement!r} ({r.how}, score {r.score:.2f})",
                    enum_match=True, table=r.table, column=r.column, literal=r.literal,
                    replacement=r.replacement, score=r.score, how=r.how)
    return replace(state, tree=out, memo=False) if rewrites else state


def name_columns(state: PlanState, ctx: RuleContext) -> PlanState:
    """Each unaliased result column holding a call is named by the call's text.

    Why: otherwise the column is named after whatever replaced the call (a
    lookup with a run id in its name), differently on every run.
    """
    plan = project.late_plan(state.tree, ctx.registry, state.memo)
    return replace(state, tree=plan.named, late=plan)


def late_maps(state: PlanState, ctx: RuleContext) -> PlanState:
    """A map that is only a result column runs on the final rows' values, after SQL.

    Why: the final query projects the value instead; one statement, and the
    ingredient sees exactly the result's values after every filter and
    LIMIT, never more than a candidate query would give it.
    """
    plan = state.late or project.late_plan(state.tree, ctx.registry, state.memo)
    if not plan.deferred:
        return state
    return replace(state, tree=plan.projected, late=plan, deferred=True)


# -- call: decisions the executor makes with runtime information -------------------------

class Hook(Enum):
    """Where call rules apply, each with the signature of its rules' ``fn`` (``run``:
    :class:`blendsql.plan.context.RunContext`); the enabled rules of a hook are tried in
    list order and the first answer that is not None is taken:

    - ``ORDER`` (planning): ``fn(run) -> CallOrder | None``: how the next ready call is
      chosen;
    - ``SHARE``: ``fn(run, call, key) -> str | None``: the key identical calls share
      (none: each call is evaluated on its own);
    - ``STRATEGY`` (planning): ``fn(run, tree, call) -> MapDecision | None``: how
      a map call gathers its values (lazily under LIMIT, pre-aggregated), decided once
      when the plan is made; the executor applies the decision its step carries;
    - ``STORE`` (running): ``fn(run, tree, call, atom, value, values, stored) -> tree |
      None``: the computed outputs put in the tree another way than as a (value,
      output) table (a decision on the outputs, so taken when they exist).
    """

    ORDER = "order"
    SHARE = "share"
    STRATEGY = "strategy"
    STORE = "store"


#: every hook, in the order a call meets them
CALL_HOOKS: tuple[Hook, ...] = tuple(Hook)


def _why(fn: Callable[..., Any]) -> str:
    """A tree rule's doc: its function's docstring, first line and the "Why" paragraph."""
    paragraphs = [" ".join(p.split()) for p in (fn.__doc__ or "").strip().split("\n\n")]
    why = next((p for p in paragraphs if p.startswith("Why")), "")
    return " ".join(p for p in (paragraphs[0], why) if p)


def _tree(name: str, fn: Callable[[PlanState, RuleContext], PlanState], stage: str,
          **kw: Any) -> Rule:
    return Rule(name, fn, _why(fn), stage, **kw)


def call_rule(name: str, fn: Callable[..., Any], hook: Hook, **kw: Any) -> Rule:
    """A ``call`` rule applied at ``hook``."""
    if not isinstance(hook, Hook):
        raise TypeError(f"a call rule's hook is a Hook, not {hook!r}; hooks: "
                        f"{', '.join(h.name for h in Hook)}")
    return Rule(name, fn, _why(fn), "call", hook=hook, **kw)


_ON_OFF = (bool,)


RULES: tuple[Rule, ...] = (
    _tree("check_names", check_names, "prepare", required=True),
    _tree("expand_macros", expand_macros, "prepare", required=True),
    _tree("refuse_row_calls_in_dml", refuse_row_calls_in_dml, "prepare", required=True),
    _tree("qualify_by_alias", qualify_by_alias, "prepare", required=True),
    _tree("resolve_aliases", resolve_aliases, "prepare", required=True),
    _tree("enum_match", enum_match, "rewrite", default=False, switch=Switch(
        (bool, str), "rewrite literals that are not column values: True/'embedding', "
        "'hashing' or 'model'", choices=("embedding", "hashing", "model"))),
    _tree("name_columns", name_columns, "rewrite", required=True),
    _tree("late_maps", late_maps, "rewrite", switch=Switch(
        _ON_OFF, "defer SELECT-list maps until the final rows are known")),
    call_rule("cost_order", order.cost_order, Hook.ORDER, switch=Switch(
        _ON_OFF, "order ingredient predicates so that cheap ones run first")),
    call_rule("share_identical", calls.share_identical, Hook.SHARE),
    call_rule("preaggregate", preagg.preaggregate, Hook.STRATEGY, switch=Switch(
        _ON_OFF, "aggregate before calling ingredients when the query allows it")),
    call_rule("lazy", lazy.lazy_strategy, Hook.STRATEGY, switch=Switch(
        _ON_OFF, "evaluate ingredients lazily under LIMIT (stop once enough rows qualify)")),
    call_rule("static_filter", static_filter.store_passing, Hook.STORE),
)

#: every rule by name
BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
#: the rules a user may switch off
OPTIONAL: tuple[str, ...] = tuple(r.name for r in RULES if not r.required)


def rule_on(options: Mapping[str, Any], rule: Rule | str) -> bool:
    """Whether ``rule`` (or the rule of that name) runs under ``options``
    (``rules_off`` and its own switch)."""
    if isinstance(rule, str):
        rule = BY_NAME[rule]
    if rule.required:
        return True
    off = options.get(RULES_OFF)
    if off and rule.name in off:
        return False
    if rule.switch is not None:
        return bool(options.get(rule.name, rule.default))
    return rule.default


def apply_stage(stage: str, state: PlanState, ctx: RuleContext) -> PlanState:
    """Apply the tree rules of one stage, in list order, skipping those switched off."""
    try:
        for rule in RULES:
            if rule.stage == stage and rule_on(ctx.options, rule):
                ctx.rule_name = rule.name  # its decisions are traced under its name
                state = rule.fn(state, ctx)
    finally:
        ctx.rule_name = ""
    return state


def apply_hook(run: Any, hook: Hook, *args: Any) -> Any:
    """Apply the run's call rules of ``hook`` (``run.hooks``) in list order to ``args``;
    the first answer that is not None, or None. Each rule's decisions are traced under
    its name (``run.state.rule_name`` while it runs)."""
    state = run.state
    saved = state.rule_name
    try:
        for rule in run.hooks[hook]:
            state.rule_name = rule.name
            out = rule.fn(run, *args)
            if out is not None:
                return out
        return None
    finally:
        state.rule_name = saved


def rule_of(fn: Callable[..., Any]) -> Rule:
    """The rule whose function is ``fn`` (code that reports for a rule names it so)."""
    return next(r for r in RULES if r.fn is fn)


@dataclass(frozen=True)
class RunRules:
    """What a run reads of the rule list once: the call rules switched on, by hook (in
    list order), and the names of the rules on by default that are switched off."""

    hooks: dict[Hook, tuple[Rule, ...]]
    off: tuple[str, ...]


def rules_for(options: Mapping[str, Any]) -> RunRules:
    """The :class:`RunRules` of a run under ``options``."""
    on = {r.name: rule_on(options, r) for r in RULES}
    hooks = {hook: tuple(r for r in RULES if r.hook == hook and on[r.name])
             for hook in CALL_HOOKS}
    return RunRules(hooks, tuple(r.name for r in RULES
                                 if not r.required and r.default and not on[r.name]))


def check_rules_off(names: Iterable[Any]) -> str | None:
    """Problem with a ``rules_off`` value, or None; raises for unknown names.

    An unknown name raises :class:`OptionError` with the nearest rule name;
    a required rule returns a problem (it cannot be switched off).
    """
    for name in names:
        if not isinstance(name, str) or name not in BY_NAME:
            near = difflib.get_close_matches(str(name).lower(), list(BY_NAME), n=1,
                                             cutoff=0.5)
            hint = (f"did you mean {near[0]!r}?" if near
                    else "rules: " + ", ".join(OPTIONAL))
            raise OptionError(f"unknown rule {name!r} in rules_off", hint=hint,
                              option=RULES_OFF)
        if BY_NAME[name].required:
            return (f"names {name!r}, a rule the query's meaning depends on; only these "
                    f"can be switched off: {', '.join(OPTIONAL)}")
    return None
