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
from blendsql.plan import aliases, expand, lazy, order, preagg, project, static_filter
from blendsql.plan.calls import find_calls, twins
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

    def decided(self, rule: str, summary: str, **details: Any) -> None:
        """Record a rule's decision as a trace step."""


@dataclass(frozen=True)
class Rule:
    """One planning rule: its name, function, why it exists, its stage and its switch.

    ``fn``: for a tree rule ``PlanState, RuleContext -> PlanState``; for a
    ``call`` rule the pure decision function the executor calls. ``doc``:
    what the rule does and why it exists. ``switch``: the boolean option
    that also turns it on / off (None: only ``rules_off``); ``default``:
    whether it runs when nobody says; ``required``: the query's meaning
    depends on it (never off).
    """

    name: str
    fn: Callable[..., Any]
    doc: str
    stage: str
    switch: str | None = None
    default: bool = True
    required: bool = False


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
        ctx.decided("enum_match", f"enum match: {r.table}.{r.column} = {r.literal!r} -> "
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
# ``fn`` is the pure decision function the executor calls; ``doc`` says why the rule exists.

COST_ORDER = (
    "Among ready ingredient predicates of one scope, the cheapest runs first. Why: under AND "
    "each later predicate sees only the rows earlier ones passed, so the cheap filter "
    "(distinct values x prompt tokens, measured on the relaxed candidate rows) shrinks the "
    "expensive one's input.")
SHARE_IDENTICAL = (
    "Identical calls (same ingredient, arguments, resolved columns) share one evaluation. "
    "Why: they must agree, and a value computed for one use is never sent to the model "
    "again for another; one output constraint is combined from all their uses.")
PREAGGREGATE = (
    "A map that is a GROUP BY key runs on the group keys of one partial-aggregate scan. "
    "Why: grouping first means the map sees each key once and SQLite scans once; skipped "
    "at run time when a sample of the rows is nearly all distinct (the partial table "
    "would be as large as the input).")
LAZY = (
    "Under LIMIT a filter is evaluated in batches, stopping once enough rows qualify. "
    "Why: LIMIT 5 over 10,000 candidates needs the model for a handful of values, not all "
    "of them; batch sizes and the stop are decided from the rows seen so far and traced.")
STATIC_FILTER = (
    "A filter's simple atom is decided in Python and only the passing values are stored. "
    "Why: storing every (value, output) pair and letting SQLite test the atom costs a "
    "temp-table row per value; for outputs whose comparison Python reproduces exactly, "
    "the set of passing values is the same lookup.")


def _why(fn: Callable[..., Any]) -> str:
    """A tree rule's doc: its function's docstring, first line and the "Why" paragraph."""
    paragraphs = [" ".join(p.split()) for p in (fn.__doc__ or "").strip().split("\n\n")]
    why = next((p for p in paragraphs if p.startswith("Why")), "")
    return " ".join(p for p in (paragraphs[0], why) if p)


def _tree(name: str, fn: Callable[[PlanState, RuleContext], PlanState], stage: str,
          **kw: Any) -> Rule:
    return Rule(name, fn, _why(fn), stage, **kw)


RULES: tuple[Rule, ...] = (
    _tree("check_names", check_names, "prepare", required=True),
    _tree("expand_macros", expand_macros, "prepare", required=True),
    _tree("refuse_row_calls_in_dml", refuse_row_calls_in_dml, "prepare", required=True),
    _tree("qualify_by_alias", qualify_by_alias, "prepare", required=True),
    _tree("resolve_aliases", resolve_aliases, "prepare", required=True),
    _tree("enum_match", enum_match, "rewrite", switch="enum_match", default=False),
    _tree("name_columns", name_columns, "rewrite", required=True),
    _tree("late_maps", late_maps, "rewrite", switch="late_maps"),
    Rule("cost_order", order.estimate, COST_ORDER, "call", switch="cost_order"),
    Rule("share_identical", twins, SHARE_IDENTICAL, "call"),
    Rule("preaggregate", preagg.plan_preagg, PREAGGREGATE, "call", switch="preaggregate"),
    Rule("lazy", lazy.lazy_plan, LAZY, "call", switch="lazy"),
    Rule("static_filter", static_filter.passing_values, STATIC_FILTER, "call"),
)

#: every rule by name
BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
#: the rules a user may switch off
OPTIONAL: tuple[str, ...] = tuple(r.name for r in RULES if not r.required)


def rule_on(options: Mapping[str, Any], name: str) -> bool:
    """Whether rule ``name`` runs under ``options`` (``rules_off`` and its own switch)."""
    rule = BY_NAME[name]
    if rule.required:
        return True
    off = options.get(RULES_OFF)
    if off and name in off:
        return False
    if rule.switch is not None:
        return bool(options.get(rule.switch, rule.default))
    return rule.default


def apply_stage(stage: str, state: PlanState, ctx: RuleContext) -> PlanState:
    """Apply the tree rules of one stage, in list order, skipping those switched off."""
    for rule in RULES:
        if rule.stage == stage and rule_on(ctx.options, rule.name):
            state = rule.fn(state, ctx)
    return state


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
