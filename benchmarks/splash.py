"""SPLASH: does correcting a wrong query with the user's feedback beat parsing the question again?

Each SPLASH item holds a question, a parser's wrong query, the user's
natural-language feedback on it, and gold SQL; test.json (the default split)
is written on Spider dev questions and databases. The wrong query becomes the
previous turn of a ``blendsql.nl.Conversation`` and
``conversation.correct(feedback)`` runs with candidate sources ``fresh,edit``
(``--correction-sources``), each candidate written, run and recorded. From the
recorded candidates, on the same items of one run:

  edit      the correction that uses the feedback: the wrong query, OUR
            ``explain()`` of it (not the release's explanation) and the
            feedback, rewritten by the model (``correction_sources=("edit",)``)
  fresh     the question parsed again alone, no feedback, no wrong query:
            the same Parser and few-shot pool (the baseline)
  combined  the default policy ``DEFAULT_CORRECTION_SOURCES`` (fresh, then
            edit: the answer most candidates agree on, never the rejected
            result again), replayed from the candidates (``policy_table``)

Two metrics, each with a 95% Wilson interval (``protocol.accuracy``):

  execution   the query's result rows equal gold's as multisets (numbers
              rounded to 4 places) on the same Spider SQLite file; gold and
              the wrong query have their tokenised operators joined back
  exact_set   Spider-style component exact-set match (``exact_set_match``:
              values ignored, aliases resolved; see its docstring)

and paired comparisons (``protocol.paired``: bootstrap interval of the
difference, McNemar's exact p): edit vs fresh on all items; edit vs fresh on
the items fresh gets wrong (the claim under test: correction with feedback
beats re-parsing on the items re-parsing gets wrong); combined vs fresh. Every
score is given on all items and without the items whose "wrong" query already
returns gold's rows (``wrong_already_right``: SPLASH labels by exact match, so
a few "wrong" queries execute right; a correction must then change a right
answer), which are listed apart.

Protocol (``benchmarks/protocol.py``): the report set is ``--n`` items dealt
round-robin over the split's databases with ``--seed`` (``protocol.spread``),
run in that order in batches grouped by database (``--batch``: a run stopped
early still covers every database, and the model reuses the schema part of
the prompt). ``--shard k/K`` runs every K-th of them; ``--combine`` merges the
shards' rows into one summary (no model; exact-set matches added to rows
recorded without them). The chosen item ids and items per database are in
the summary, under a ``protocol.run_record`` header.
Pools, per item (``protocol.leak_free``, one shared ``protocol.ResultOracle``):
the shipped Spider pool (fresh parse) and the SPLASH dev correction pool
(edit) without any example on the item's database, or whose question, SQL
(normalised: case, spaces, aliases; for a correction example both its wrong
and its corrected query) or result on the item's database equals the item's.
``leak_checks`` rebuilds every report item's prompts without a model;
``--leak-check`` prints what ``protocol.prompt_leaks`` finds in them.

    export BLENDSQL_EVAL_MODEL=$(python -m benchmarks.envs build eval-model)  # or any copy's path
    python benchmarks/splash.py --n 150 --shard 1/2 --out benchmarks/results/splash_1.jsonl &
    python benchmarks/splash.py --n 150 --shard 2/2 --out benchmarks/results/splash_2.jsonl
    python benchmarks/splash.py --combine benchmarks/results/splash_1.jsonl benchmarks/results/splash_2.jsonl
    python benchmarks/splash.py --leak-check          # no model: leaks in the report prompts

(``--model`` defaults to ``$BLENDSQL_EVAL_MODEL``.) ``--split dev`` reads
dev.json, which is for tuning only. Data: SPLASH (Elgohary et al. 2020, CC
BY-SA 4.0, via parkervg/DestT5) on Spider's SQLite files (Yu et al. 2018,
CC BY-SA 4.0; rebuilt from cloudera/spiderman).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# this checkout's own package first (a pinned worktree must not run the editable install's code)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlglot  # noqa: E402
from conversation import (  # noqa: E402 - sibling script, imported by path
    QUERY_SECONDS,
    RESULTS,
    db_path,
    fix_gold,
    frame_rows,
    gold_rows,
    make_model,
    plain_sql_only,
    read_done,
    with_deadline,
)
from sqlglot import exp  # noqa: E402

from benchmarks import protocol  # noqa: E402
from blendsql import BlendSQL  # noqa: E402
from blendsql.errors import BlendSQLError  # noqa: E402
from blendsql.models.base import Model  # noqa: E402
from blendsql.nl import Conversation, Parser  # noqa: E402
from blendsql.nl.conversation import (  # noqa: E402
    CORRECTION_SOURCES,
    DEFAULT_CORRECTION_SOURCES,
    Candidate,
    Turn,
    choose_correction,
    result_key,
    sort_clause,
)
from blendsql.nl.correct import (  # noqa: E402
    DEFAULT_EXAMPLE_TEXT,
    CorrectionExample,
    CorrectionIndex,
    correction_prompt,
    explanation_lines,
    load_correction_examples,
)
from blendsql.nl.parser import PLAIN_GUIDE, Example, load_examples  # noqa: E402
from blendsql.nl.serialize import list_tables, serialize_schema  # noqa: E402

DATA = protocol.data_dir()
POOL = Path(__file__).resolve().parents[1] / "blendsql" / "nl" / "examples" / "splash.json"
SYSTEMS = ("edit", "fresh", "combined")
METRICS = ("execution", "exact_set")
#: the database of ``correct.DEFAULT_EXAMPLE_TEXT`` (a SPLASH dev item, on a Spider train database),
#: shown only when no pool example is chosen
DEFAULT_EXAMPLE_DB = "apartment_rentals"


# ---------------------------------------------------------------- the report set


def load_items(data: Path, split: str) -> list[tuple[int, dict[str, Any]]]:
    """Every item of ``splash/<split>.json`` with its index in the file."""
    return list(enumerate(json.loads((data / "splash" / f"{split}.json").read_text())))


def report_set(data: Path, split: str, n: int | None, seed: int = 0) -> list[tuple[int, dict[str, Any]]]:
    """``n`` items of the split dealt round-robin over its databases (``protocol.spread``)."""
    return protocol.spread(load_items(data, split), lambda t: t[1]["db_id"], n, seed)


def in_database_order(items: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The same items, grouped by database (databases in order of first appearance).

    Consecutive items on one database share the prompt's opening (guide and
    schema) in the model's KV cache; the set of items is unchanged."""
    first: dict[str, int] = {}
    for pos, (_, item) in enumerate(items):
        first.setdefault(item["db_id"], pos)
    return sorted(items, key=lambda pair: first[pair[1]["db_id"]])


# ---------------------------------------------------------------- leak-free pools


@dataclass(frozen=True)
class ShownCorrection:
    """One query a worked correction shows, as ``protocol.leak_reason`` checks it:
    its database, its question and ``program`` (the corrected query, or the wrong one)."""

    db: str
    question: str
    program: str
    role: str = "corrected"  # or "wrong"


def pool_databases() -> list[str]:
    """The database of each pool example, in pool order (``db`` in splash.json)."""
    return [str(r.get("db", "")) for r in json.loads(POOL.read_text())["examples"]]


def correction_pool() -> list[tuple[CorrectionExample, str]]:
    """The shipped SPLASH dev correction pool, each example with its database."""
    return list(zip(load_correction_examples(), pool_databases(), strict=True))


def shown_queries(example: CorrectionExample, db: str) -> tuple[ShownCorrection, ShownCorrection]:
    """Both queries a worked correction puts in the prompt: the corrected one (its gold)
    and the wrong one."""
    return (ShownCorrection(db, example.question, example.corrected, "corrected"),
            ShownCorrection(db, example.question, example.program, "wrong"))


def item_target(item: dict[str, Any], data: Path) -> protocol.Target:
    """What the item must not see: its database, question and gold SQL (and result)."""
    return protocol.Target(item["db_id"], (item["question"],), (fix_gold(item["gold_parse"]),),
                           db_path(data, item["db_id"]))


def leak_free_corrections(pool: Sequence[tuple[CorrectionExample, str]], target: protocol.Target,
                          oracle: protocol.ResultOracle | None) -> list[tuple[CorrectionExample, str]]:
    """The (example, database) pairs of ``pool`` neither of whose queries leaks ``target``."""
    views = [(k, v) for k, (ex, db) in enumerate(pool) for v in shown_queries(ex, db)]
    kept = protocol.leak_free([v for _, v in views], target, oracle)
    ok_ids = {id(v) for v in kept}
    survived: dict[int, int] = {}
    for k, v in views:
        if id(v) in ok_ids:
            survived[k] = survived.get(k, 0) + 1
    return [pair for k, pair in enumerate(pool) if survived.get(k) == 2]


def item_pools(item: dict[str, Any], data: Path, spider_pool: Sequence[Example],
               corrections: Sequence[tuple[CorrectionExample, str]],
               oracle: protocol.ResultOracle | None
               ) -> tuple[list[Example], list[tuple[CorrectionExample, str]]]:
    """The item's Spider pool (fresh parse) and correction pool (edit: examples with their
    databases), both leak-free."""
    target = item_target(item, data)
    return protocol.leak_free(list(spider_pool), target, oracle), leak_free_corrections(corrections, target, oracle)


# ---------------------------------------------------------------- exact-set match

_VALUE = "value"
_PREDICATES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.Glob,
               exp.In, exp.Between, exp.Is)


def table_columns(path: Path) -> dict[str, list[str]]:
    """Table -> column names of a SQLite file (for resolving unqualified columns)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")]
        return {t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    finally:
        conn.close()


def exact_set_match(pred: str | None, gold: str, schema: Mapping[str, Iterable[str]] | None = None) -> bool:
    """Spider-style exact-set match: ``pred`` and ``gold`` have equal components.

    Both are parsed with sqlglot (SQLite; SPLASH's tokenised ``> =`` joined back);
    a query that does not parse matches nothing. Each SELECT is reduced to:

    - ``select``: the multiset of its output expressions (column aliases dropped),
      and whether it is DISTINCT;
    - ``from``: the set of tables read (FROM and every JOIN, by name; a subquery
      in FROM by its own components). JOIN conditions and join kinds are not
      compared (as in Spider's evaluation);
    - ``where`` / ``having``: the sets of their top-level AND conjuncts (an OR
      stays one conjunct);
    - ``group``: the set of GROUP BY expressions;
    - ``order``: the ORDER BY expressions in order, each with its direction
      (ASC unless DESC);
    - ``limit``: whether there is a LIMIT (its number is a value);
    - a set operation (UNION [ALL], INTERSECT, EXCEPT): the operator and both
      sides' components, with the compound's ORDER BY and LIMIT.

    Inside an expression: every literal (number, string, and a string written in
    double quotes where a value stands: the right side of a comparison, LIKE, IN,
    BETWEEN, or any quoted name that is no column of ``schema``) is one
    placeholder, so values are ignored; table aliases are replaced by table names
    (``T1.name`` -> ``singer.name``); an unqualified column is qualified with the
    one table in scope that has it (``schema``: table -> columns) or, without a
    schema, when the scope reads one table; an ORDER BY / HAVING name that is a
    SELECT alias is the aliased expression; a nested query is its components;
    names and keywords compare case-insensitively, spacing ignored. Not
    normalised: commutativity (``a = b`` vs ``b = a``), ``IN`` vs a join, or any
    other rewriting of the same query.
    """
    if not pred:
        return False
    g = sql_components(gold, schema)
    p = sql_components(pred, schema)
    return g is not None and p is not None and p == g


def sql_components(sql: str, schema: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any] | None:
    """The components ``exact_set_match`` compares (None when ``sql`` is no query sqlglot parses)."""
    try:
        tree = sqlglot.parse_one(protocol.fix_tokenised(sql), read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return None
    if not isinstance(tree, exp.Query):
        return None
    cols = {t.lower(): {c.lower() for c in cs} for t, cs in schema.items()} if schema else None
    try:
        return _components(tree, cols, {})
    except (sqlglot.errors.SqlglotError, ValueError, TypeError, AttributeError):
        return None


def _components(node: Any, schema: dict[str, set[str]] | None,
                outer: dict[str, str]) -> dict[str, Any]:
    while isinstance(node, (exp.Subquery, exp.Paren)) and isinstance(node.this, exp.Expression):
        node = node.this
    if isinstance(node, exp.SetOperation):
        scope = _Scope([], outer, schema)
        return {"set": type(node).__name__.lower(), "distinct": bool(node.args.get("distinct")),
                "left": _components(node.this, schema, outer),
                "right": _components(node.expression, schema, outer),
                "order": _order(node, scope, {}), "limit": node.args.get("limit") is not None}
    if not isinstance(node, exp.Select):
        return {"other": " ".join(node.sql(dialect="sqlite").lower().split())}
    froms = []
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is not None:
        froms.append(from_.this)
    froms += [j.this for j in node.args.get("joins") or []]
    aliases = dict(outer)
    tables: list[str] = []
    from_items: list[str] = []
    for src in froms:
        if isinstance(src, exp.Table):
            name = src.name.lower()
            tables.append(name)
            from_items.append(name)
            aliases[name] = name
            if src.alias:
                aliases[src.alias.lower()] = name
        else:
            sub = _digest(_components(src, schema, aliases))
            from_items.append(f"<query {sub}>")
            if getattr(src, "alias", ""):
                aliases[src.alias.lower()] = f"<query {sub}>"
    scope = _Scope(tables, aliases, schema)
    selected: list[str] = []
    named: dict[str, str] = {}
    for e in node.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        text = scope.canon(inner)
        if isinstance(e, exp.Alias) and e.alias:
            named[e.alias.lower()] = text
        selected.append(text)
    where, group, having = node.args.get("where"), node.args.get("group"), node.args.get("having")
    return {
        "select": tuple(sorted(selected)), "distinct": bool(node.args.get("distinct")),
        "from": tuple(sorted(from_items)),
        "where": _conjuncts(where.this, scope, {}) if where is not None else (),
        "group": tuple(sorted({scope.canon(g, named) for g in group.expressions})) if group is not None else (),
        "having": _conjuncts(having.this, scope, named) if having is not None else (),
        "order": _order(node, scope, named),
        "limit": node.args.get("limit") is not None,
    }


def _conjuncts(cond: Any, scope: _Scope, named: dict[str, str]) -> tuple[str, ...]:
    while isinstance(cond, exp.Paren):
        cond = cond.this
    parts = list(cond.flatten()) if isinstance(cond, exp.And) else [cond]
    return tuple(sorted({scope.canon(p, named) for p in parts}))


def _order(node: Any, scope: _Scope, named: dict[str, str]) -> tuple[tuple[str, str], ...]:
    order = node.args.get("order")
    if order is None:
        return ()
    return tuple((scope.canon(o.this, named), "desc" if o.args.get("desc") else "asc")
                 for o in order.expressions)


def _digest(components: dict[str, Any]) -> str:
    return hashlib.sha256(repr(components).encode()).hexdigest()[:16]


class _Scope:
    """One SELECT's tables and aliases: canonical text of its expressions."""

    def __init__(self, tables: list[str], aliases: dict[str, str], schema: dict[str, set[str]] | None) -> None:
        self.tables, self.aliases, self.schema = tables, aliases, schema

    def _is_value(self, col: exp.Column) -> bool:
        ident = col.this
        if col.table or not isinstance(ident, exp.Identifier) or not ident.args.get("quoted"):
            return False
        if self.schema is not None:
            return not any(ident.name.lower() in cs for cs in self.schema.values())
        parent = col.parent
        return isinstance(parent, _PREDICATES) and col.arg_key != "this"

    def _table_of(self, name: str) -> str:
        if self.schema is not None:
            having = [t for t in self.tables if name in self.schema.get(t, ())]
            if len(having) == 1:
                return having[0]
        if len(set(self.tables)) == 1:
            return self.tables[0]
        return ""

    def canon(self, node: Any, named: dict[str, str] | None = None) -> str:
        if named and isinstance(node, exp.Column) and not node.table and node.name.lower() in named \
                and not (self.schema and any(node.name.lower() in self.schema.get(t, ()) for t in self.tables)):
            return named[node.name.lower()]  # a SELECT alias (unless a column of the scope has the name)

        def fn(n: exp.Expression) -> exp.Expression:
            if isinstance(n, (exp.Select, exp.SetOperation)):
                return exp.var(f"<query {_digest(_components(n, self.schema, self.aliases))}>")
            if isinstance(n, exp.Literal) or (isinstance(n, exp.Neg) and isinstance(n.this, exp.Literal)):
                return exp.var(_VALUE)
            if isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier):
                if self._is_value(n):
                    return exp.var(_VALUE)
                name = n.name.lower()
                table = self.aliases.get(n.table.lower(), n.table.lower()) if n.table else self._table_of(name)
                return exp.column(name, table=table or None)
            return n

        text = node.transform(fn).sql(dialect="sqlite")
        return " ".join(text.lower().split())


# ---------------------------------------------------------------- one item


def seed_turn(bsql: BlendSQL, question: str, program: str) -> Turn:
    """The wrong query as an earlier turn (executed, so the correction can compare sizes)."""
    turn = Turn(question, "inform_sql", "", program=program, question=question)
    try:
        turn.smoothie = bsql.execute(program)
    except BlendSQLError as e:
        turn.error = str(e)
    return turn


def run_item(i: int, item: dict[str, Any], data: Path, model: Model, e2e: bool = True,
             retries: int = 1, spider_pool: Sequence[Example] | None = None,
             n_examples: int = 3, sources: Sequence[str] = DEFAULT_CORRECTION_SOURCES,
             corrections: Sequence[tuple[CorrectionExample, str]] | None = None,
             oracle: protocol.ResultOracle | None = None) -> dict[str, Any]:
    """One item: the correction's candidates (and the fresh parse), recorded with their
    execution and exact-set matches. ``spider_pool`` / ``corrections``: the whole pools
    (default: the shipped ones), filtered here for this item (``item_pools``). ``e2e``:
    when ``sources`` lack "fresh", parse the question alone separately (the baseline)."""
    path = db_path(data, item["db_id"])
    gold = fix_gold(item["gold_parse"])
    wrong = fix_gold(item["predicted_parse_with_values"])
    g_rows, g_err = gold_rows(path, gold)
    w_rows, _ = gold_rows(path, wrong)
    schema = table_columns(path)
    spool, cpool = item_pools(item, data, load_examples("spider") if spider_pool is None else spider_pool,
                              correction_pool() if corrections is None else corrections,
                              oracle if oracle is not None else protocol.ResultOracle())
    bsql = BlendSQL(str(path), model=model, cache=False)
    plain_sql_only(bsql)  # Spider: plain SQL only (a spurious LLMMap would cost a call per row)
    parser = Parser(model, examples=spool, max_retries=retries)
    conv = Conversation(bsql, parser, classify_acts=False, correction_examples=n_examples,
                        correction_pool=[ex for ex, _ in cpool], correction_sources=sources)
    conv.history.append(seed_turn(bsql, item["question"], wrong))
    row: dict[str, Any] = {"i": i, "db": item["db_id"], "question": item["question"], "feedback": item["feedback"],
                           "wrong": wrong, "gold": gold, "gold_error": g_err,
                           "wrong_already_right": g_rows is not None and w_rows == g_rows,
                           "wrong_exact": exact_set_match(wrong, gold, schema),
                           "wrong_key": _digests(conv._key(conv.history[-1])),
                           "spider_pool": len(spool), "correction_pool": len(cpool)}
    # the fresh parse is also the correction's "fresh" candidate (the same parser on the
    # question alone, no history): when the correction writes it, it is not written twice
    fresh_inside = "fresh" in sources
    if e2e and not fresh_inside:
        t0 = time.perf_counter()
        fresh = Conversation(bsql, parser, classify_acts=False)
        with_deadline(bsql.db.conn, QUERY_SECONDS)
        try:
            t = fresh.ask(item["question"])
            pred, perr, pdf = t.program, t.error, t.result
        except Exception as e:  # noqa: BLE001
            pred, perr, pdf = None, f"{type(e).__name__}: {e}", None
        row.update(e2e_pred=pred, e2e_error=perr,
                   e2e_match=bool(g_rows is not None and pdf is not None and perr is None
                                  and frame_rows(pdf) == g_rows),
                   e2e_exact=perr is None and exact_set_match(pred, gold, schema),
                   e2e_seconds=round(time.perf_counter() - t0, 2))
    t0 = time.perf_counter()
    with_deadline(bsql.db.conn, QUERY_SECONDS)
    cands: list[Candidate] = []
    try:
        turn = conv.correct(item["feedback"], retries=retries)
        corrected, err, df, diff, cands = turn.program, turn.error, turn.result, turn.diff, turn.candidates
    except Exception as e:  # noqa: BLE001 - a crash is a failed correction, recorded
        corrected, err, df, diff = None, f"{type(e).__name__}: {e}", None, None
    row.update(corrected=corrected, error=err, diff=diff,
               correction_match=bool(g_rows is not None and df is not None and err is None
                                     and frame_rows(df) == g_rows),
               correction_exact=err is None and exact_set_match(corrected, gold, schema),
               correction_seconds=round(time.perf_counter() - t0, 2),
               candidates=[candidate_row(c, g_rows, gold, schema) for c in cands])
    if fresh_inside:
        mine = next((c for c in row["candidates"] if c["source"] == "fresh"), None)
        if mine is not None:
            row.update(e2e_pred=mine["program"], e2e_error=mine["error"], e2e_match=mine["match"],
                       e2e_exact=mine["exact"], e2e_seconds=mine["seconds"],
                       e2e_from="correction's fresh candidate")
    bsql.close()
    return row


def candidate_row(c: Candidate, g_rows: Any, gold: str | None = None,
                  schema: Mapping[str, Iterable[str]] | None = None) -> dict[str, Any]:
    """One candidate correction as recorded: source, query, outcome, match with gold
    (``match``: execution; ``exact``: exact-set, when ``gold`` is given)."""
    match = bool(g_rows is not None and c.smoothie is not None and c.error is None
                 and frame_rows(c.smoothie.df) == g_rows)
    exact = bool(gold is not None and c.error is None and exact_set_match(c.program, gold, schema))
    return {"source": c.source, "program": c.program, "error": c.error, "rows": c.rows,
            "repeats_rejected": c.repeats_rejected, "unchanged": c.unchanged, "chosen": c.chosen,
            "seconds": c.seconds, "match": match, "exact": exact, **_digests(c.key)}


def _digests(key: tuple[str, ...] | None) -> dict[str, Any]:
    """A result key, shortened: ``result`` (the rows); for a query that sorts, ``order``
    (the rows in order) and ``sort`` (its ORDER BY)."""
    if key is None:
        return {"result": None, "order": None, "sort": None}
    if len(key) < 3:
        return {"result": key[0][:12], "order": None, "sort": None}
    return {"result": key[0][:12], "order": key[1][:12], "sort": key[2]}


def _key(d: dict[str, Any]) -> tuple[str, ...] | None:
    if not d.get("result"):
        return None
    return (d["result"], d["order"], d.get("sort") or "") if d.get("order") else (d["result"],)


# ---------------------------------------------------------------- replaying policies

_REJECTED = ("<the rejected result>",)


def _as_candidate(c: dict[str, Any], rekeyed: bool) -> Candidate:
    """A recorded candidate as ``choose_correction`` sees it. Rows re-keyed by
    :func:`rekey` compare with the rejected query's key; older rows only say
    whether a candidate repeated the rejected result."""
    key = _key(c)
    if not rekeyed and c["repeats_rejected"]:
        key = _REJECTED
    return Candidate(c["source"], c["program"], error=c["error"], key=key, unchanged=c["unchanged"])


def rekey(rows: list[dict[str, Any]], data: Path) -> int:
    """Results of every recorded row's rejected query and candidates, keyed again as
    ``blendsql.nl.conversation`` keys them now (runs their queries again, no model:
    they are plain SQL on the Spider file); returns how many queries ran."""
    ran = 0
    for r in rows:
        bsql = BlendSQL(str(db_path(data, r["db"])), cache=False)
        try:
            r["wrong_key"] = _digests(_key_of(bsql, r["wrong"]))
            ran += 1
            for c in r.get("candidates", []):
                if c["program"] is not None and c["error"] is None:
                    c.update(_digests(_key_of(bsql, c["program"])))
                    ran += 1
                else:
                    c.update(_digests(None))
        finally:
            bsql.close()
    return ran


def _key_of(bsql: BlendSQL, program: str) -> tuple[str, ...] | None:
    with_deadline(bsql.db.conn, QUERY_SECONDS)
    try:
        smoothie = bsql.execute(program)
    except BlendSQLError:
        return None
    return result_key(smoothie, sort_clause(program, bsql))


def replay(row: dict[str, Any], order: Sequence[str]) -> dict[str, Any] | None:
    """The recorded candidate ``Conversation(correction_sources=order)`` would have answered
    with on this item (None: no answer), from the candidates of ``order`` the row holds."""
    by = {c["source"]: c for c in row.get("candidates", [])}
    rekeyed = "wrong_key" in row
    rejected = _key(row["wrong_key"]) if rekeyed else _REJECTED
    chosen = choose_correction([_as_candidate(by[s], rekeyed) for s in order if s in by], rejected)
    return None if chosen is None else by[chosen.source]


def policy_table(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Items right under each choice of candidate sources (in preference order), from the
    recorded candidates: what ``Conversation(correction_sources=...)`` would have answered."""
    from itertools import permutations

    present = {c["source"] for r in rows for c in r.get("candidates", [])}
    sources = [s for s in CORRECTION_SOURCES if s in present]
    out: dict[str, int] = {}
    for k in range(1, len(sources) + 1):
        for order in permutations(sources, k):
            right = 0
            for r in rows:
                chosen = replay(r, order)
                right += bool(chosen is not None and chosen["match"])
            out[",".join(order)] = right
    return out


# ---------------------------------------------------------------- scores


def item_flags(row: dict[str, Any]) -> dict[str, dict[str, bool | None]]:
    """Per metric, whether each system is right on this item (None: the run lacks it).

    ``fresh``: the fresh parse (the correction's fresh candidate, or a separate parse);
    ``edit``: the edit candidate alone; ``combined``: ``DEFAULT_CORRECTION_SOURCES``
    replayed (needs each of its sources recorded). A row recorded without exact-set
    matches (see ``add_exact``) has none."""
    out: dict[str, dict[str, bool | None]] = {}
    for metric, field in (("execution", "match"), ("exact_set", "exact")):
        sources = {c["source"] for c in row.get("candidates", []) if field in c}
        flags: dict[str, bool | None] = {"edit": None, "fresh": None, "combined": None}
        if "edit" in sources:
            chosen = replay(row, ("edit",))
            flags["edit"] = bool(chosen is not None and chosen.get(field))
        e2e = {"match": "e2e_match", "exact": "e2e_exact"}[field]
        if e2e in row:
            flags["fresh"] = bool(row[e2e])
        if set(DEFAULT_CORRECTION_SOURCES) <= sources:
            chosen = replay(row, DEFAULT_CORRECTION_SOURCES)
            flags["combined"] = bool(chosen is not None and chosen.get(field))
        out[metric] = flags
    return out


def _compare(flags: list[dict[str, bool | None]], a: str, b: str,
             only_b_wrong: bool = False) -> dict[str, Any]:
    both = [f for f in flags if f[a] is not None and f[b] is not None and not (only_b_wrong and f[b])]
    out = protocol.paired([bool(f[a]) for f in both], [bool(f[b]) for f in both])
    if only_b_wrong:
        out[a] = protocol.accuracy([bool(f[a]) for f in both])
    return out


def metric_scores(rows: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """Each system's accuracy (Wilson interval) and the paired comparisons, on ``rows``."""
    flags = [item_flags(r)[metric] for r in rows]
    out: dict[str, Any] = {}
    for s in SYSTEMS:
        have = [bool(f[s]) for f in flags if f[s] is not None]
        if have:
            out[s] = protocol.accuracy(have)
    if "edit" in out and "fresh" in out:
        out["edit_vs_fresh"] = _compare(flags, "edit", "fresh")
        out["edit_vs_fresh_where_fresh_wrong"] = _compare(flags, "edit", "fresh", only_b_wrong=True)
    if "combined" in out and "fresh" in out:
        out["combined_vs_fresh"] = _compare(flags, "combined", "fresh")
    return out


def scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Both metrics on all items and without the items whose wrong query already returns
    gold's rows; those items listed apart."""
    kept = [r for r in rows if not r["wrong_already_right"]]
    already = [r for r in rows if r["wrong_already_right"]]
    return {
        "all": {"items": len(rows), **{m: metric_scores(rows, m) for m in METRICS}},
        "without_wrong_already_right": {"items": len(kept), **{m: metric_scores(kept, m) for m in METRICS}},
        "wrong_already_right": {"items": len(already), "ids": sorted(r["i"] for r in already)},
        "wrong_exact_set": sum(bool(r.get("wrong_exact")) for r in rows),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The scores (``scores``), the chosen correction's and candidates' counts, costs."""
    n = len(rows)

    def rate(key: str, sub: list[dict[str, Any]] | None = None) -> float | None:
        sub = rows if sub is None else sub
        return round(sum(bool(r.get(key)) for r in sub) / len(sub), 4) if sub else None

    e2e = [r for r in rows if "e2e_match" in r]
    return {
        "items": n,
        "scores": scores(rows),
        "correction_acc": rate("correction_match"),
        "corrected_query_rate": round(sum(r["corrected"] is not None for r in rows) / n, 4) if n else None,
        "changed_query_rate": round(sum(r["corrected"] is not None and r["diff"] != "no change"
                                        for r in rows) / n, 4) if n else None,
        "wrong_already_right": rate("wrong_already_right"),
        "end_to_end_items": len(e2e),
        "end_to_end_acc": rate("e2e_match", e2e),
        "gold_errors": sum(r["gold_error"] is not None for r in rows),
        "mean_correction_seconds": round(sum(r["correction_seconds"] for r in rows) / n, 2) if n else None,
        "mean_end_to_end_seconds": round(sum(r["e2e_seconds"] for r in e2e) / len(e2e), 2) if e2e else None,
        "candidates": candidate_summary(rows),
        "right_by_sources": policy_table(rows),
    }


def candidate_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per candidate source: items where it ran, how often it matched gold, was chosen, took seconds."""
    out: dict[str, Any] = {}
    for r in rows:
        for c in r.get("candidates", []):
            s = out.setdefault(c["source"], {"items": 0, "match": 0, "exact": 0, "chosen": 0, "seconds": 0.0})
            s["items"] += 1
            s["match"] += bool(c["match"])
            s["exact"] += bool(c.get("exact"))
            s["chosen"] += bool(c["chosen"])
            s["seconds"] += c["seconds"]
    for s in out.values():
        s["seconds"] = round(s["seconds"] / s["items"], 1)
    with_c = [r for r in rows if r.get("candidates")]
    if with_c:
        out["any_candidate_matches"] = sum(any(c["match"] for c in r["candidates"]) for r in with_c)
        out["items_with_candidates"] = len(with_c)
    return out


def summary_of(rows: list[dict[str, Any]], header: dict[str, Any], split: str) -> dict[str, Any]:
    return {
        "benchmark": f"SPLASH {split}" + (" (tuning only)" if split == "dev" else ""),
        **header, "split": split, "n": len(rows),
        "databases": protocol.database_counts(r["db"] for r in rows),
        "ids": sorted(r["i"] for r in rows),
        "systems": "edit: the correction candidate that uses the feedback (correction_sources=('edit',)); "
                   "fresh: the question parsed again alone; combined: DEFAULT_CORRECTION_SOURCES "
                   f"{list(DEFAULT_CORRECTION_SOURCES)} replayed from the recorded candidates",
        "metric": "execution: result multisets equal on the Spider SQLite file (numbers rounded to 4 "
                  "places); exact_set: Spider-style component match (splash.exact_set_match: values "
                  "ignored, aliases resolved); the correction prompt explains the wrong query with "
                  "blendsql.nl.explain, not the release's explanation",
        "data": "SPLASH (Elgohary et al. 2020, CC BY-SA 4.0, via parkervg/DestT5) on Spider SQLite "
                "files (Yu et al. 2018, CC BY-SA 4.0; cloudera/spiderman)",
        **summarize(rows),
    }


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    return read_done(path, "i")


def add_exact(rows: list[dict[str, Any]], data: Path) -> int:
    """Exact-set matches for rows recorded without them (no model: the queries are in the
    rows); returns how many were added."""
    added = 0
    schemas: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        if r["db"] not in schemas:
            schemas[r["db"]] = table_columns(db_path(data, r["db"]))
        schema, gold = schemas[r["db"]], r["gold"]
        todo = [c for c in r.get("candidates", []) if "exact" not in c]
        for c in todo:
            c["exact"] = bool(c["error"] is None and exact_set_match(c["program"], gold, schema))
        added += len(todo)
        for key, prog, err in (("wrong_exact", "wrong", None), ("e2e_exact", "e2e_pred", "e2e_error"),
                               ("correction_exact", "corrected", "error")):
            if key not in r and prog in r:
                r[key] = bool((err is None or r.get(err) is None) and exact_set_match(r[prog], gold, schema))
                added += 1
    return added


def combine(parts: list[Path], out: Path, data: Path | None = None) -> dict[str, Any]:
    """One summary from shards (or from one results file, recomputed without a model);
    with ``data``, exact-set matches are added to rows recorded without them."""
    rows: dict[int, dict[str, Any]] = {}
    headers = []
    for part in parts:
        rows.update(read_rows(part))
        head = part.with_suffix(".json")
        headers.append(json.loads(head.read_text()) if head.exists() else {})
    if data is not None:
        add_exact(list(rows.values()), data)
    keys = ("model", "machine", "seed", "requested_n", "n_examples", "correction_sources", "retries")
    header: dict[str, Any] = {k: headers[0].get(k) for k in keys}
    header["runs"] = [{k: h.get(k) for k in ("command", "commit", "clean_tree", "date", "shard", "n",
                                             "reuse_check")}
                      for h in headers]
    header["command"] = "python benchmarks/splash.py --combine " + " ".join(
        str(p.relative_to(protocol.ROOT)) if p.resolve().is_relative_to(protocol.ROOT) else p.name
        for p in (q.resolve() for q in parts))
    combined = summary_of(list(rows.values()), header, headers[0].get("split", "test"))
    out.write_text(json.dumps(combined, indent=2) + "\n")
    return combined


# ---------------------------------------------------------------- the leak check


def item_prompt_check(i: int, item: dict[str, Any], data: Path, spider_pool: Sequence[Example],
                      corrections: Sequence[tuple[CorrectionExample, str]], model: Model, split: str = "test",
                      n_examples: int = 3, retries: int = 1) -> protocol.PromptCheck:
    """The item's real first prompts with the given (already filtered) pools, no model
    call: the fresh parse's (``Parser.first_prompt``, the empty registry of the run) and
    the edit's correction prompt (its worked examples chosen and rendered as
    ``correct.correct_query`` does). On a schema over the Parser's prompt budget
    (student_transcripts_tracking) the run's model helps choose the tables shown; here
    ``model`` does, so those prompts may show other tables (and examples ranked by them)."""
    path = db_path(data, item["db_id"])
    question, feedback = item["question"], item["feedback"]
    wrong = fix_gold(item["predicted_parse_with_values"])
    bsql = BlendSQL(str(path), model=model, cache=False)
    plain_sql_only(bsql)
    try:
        conn, registry = bsql.db.conn, bsql.registry
        parser = Parser(model, examples=list(spider_pool), max_retries=retries)
        ctx = parser.context(question, conn, registry)
        fresh_prompt = parser.first_prompt(question, conn, registry)
        tables = list_tables(conn)
        schema = serialize_schema(conn, n_rows=parser.n_rows, tables=[t.name for t in tables])
        chosen = CorrectionIndex([ex for ex, _ in corrections]).select(question, feedback, n_examples)
        shots = [e.render(registry) for e in chosen] if chosen else [DEFAULT_EXAMPLE_TEXT]
        edit_prompt = correction_prompt(schema, question, wrong, explanation_lines(wrong, registry),
                                        feedback, None, shots, PLAIN_GUIDE)
    finally:
        bsql.close()
    dbs = {id(ex): db for ex, db in corrections}
    shown: list[Any] = list(ctx.examples)
    for ex in chosen:
        shown += shown_queries(ex, dbs[id(ex)])
    if not chosen:
        lines = {ln.split(": ", 1)[0]: ln.split(": ", 1)[1] for ln in DEFAULT_EXAMPLE_TEXT.splitlines() if ": " in ln}
        shown += [ShownCorrection(DEFAULT_EXAMPLE_DB, lines["Question"], lines["Corrected query"]),
                  ShownCorrection(DEFAULT_EXAMPLE_DB, lines["Question"], lines["Query"], "wrong")]
    # the schema's sample-row headers ("SELECT * FROM t LIMIT 3;") are the database's own text
    # (a gold "SELECT * FROM t" is found inside them, not leaked)
    headers = tuple(f"SELECT * FROM {t.name} LIMIT {parser.n_rows};" for t in tables)
    return protocol.PromptCheck("splash", f"{split} {i}", fresh_prompt + "\n\n" + edit_prompt, shown,
                                item_target(item, data), given=(question, wrong, feedback, *headers))


def leak_checks(data: Path, n: int = 150, seed: int = 0, split: str = "test") -> list[protocol.PromptCheck]:
    """Each report item's real prompts (no model call), the examples shown in them and
    what must not leak: the checks ``tests/benchmarks/test_leaks.py`` runs."""
    from blendsql.models import FunctionModel

    spider_pool = load_examples("spider")
    corrections = correction_pool()
    oracle = protocol.ResultOracle()
    model = FunctionModel(lambda *a, **k: "")
    checks = []
    for i, item in in_database_order(report_set(data, split, n, seed)):
        spool, cpool = item_pools(item, data, spider_pool, corrections, oracle)
        checks.append(item_prompt_check(i, item, data, spool, cpool, model, split))
    return checks


# ---------------------------------------------------------------- the correction pool


def build_pool(data: Path) -> int:
    """The correction pool: SPLASH dev items whose gold query runs and whose wrong one is wrong.

    Only dev.json is read (test is reported). Operators are joined back as in the benchmark.
    """
    items = json.loads((data / "splash" / "dev.json").read_text())
    out, seen = [], set()
    for item in items:
        path = db_path(data, item["db_id"])
        gold, wrong = fix_gold(item["gold_parse"]), fix_gold(item["predicted_parse_with_values"])
        g_rows, g_err = gold_rows(path, gold)
        w_rows, _ = gold_rows(path, wrong)
        key = (item["question"], item["feedback"])
        if g_err is not None or g_rows == w_rows or key in seen:
            continue
        seen.add(key)
        ex = CorrectionExample(item["question"], " ".join(wrong.split()),
                               " ".join(item["feedback"].split()), " ".join(gold.split()))
        out.append({**ex.__dict__, "db": item["db_id"]})
    POOL.write_text(json.dumps({
        "source": "SPLASH dev.json (Elgohary et al. 2020, CC BY-SA 4.0, via parkervg/DestT5): items whose "
                  "gold query runs on the Spider SQLite file and whose predicted query returns other rows; "
                  "built by benchmarks/splash.py --build-pool",
        "examples": out}, indent=1, ensure_ascii=False) + "\n")
    return len(out)


# ---------------------------------------------------------------- run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--n", "--limit", dest="n", type=int, default=150,
                    help="report items, dealt round-robin over the databases (--limit: the same)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shard", help="k/K: run every K-th item of the report set, from the k-th")
    ap.add_argument("--split", choices=["test", "dev"], default="test")
    ap.add_argument("--fresh", action="store_true",
                    help="draw the set from items no committed run touched (the results' git "
                    "history, protocol.touched_ids); every run records the check (reuse_check)")
    ap.add_argument("--batch", type=int, default=40,
                    help="run order: batches of this many dealt items, each grouped by database "
                         "(0: the whole set grouped; a run stopped early then covers fewer databases)")
    ap.add_argument("--no-e2e", action="store_true",
                    help="without 'fresh' among the sources: skip the separate parse-from-scratch "
                         "(no fresh score then)")
    ap.add_argument("--model", help=f"GGUF path (default ${protocol.MODEL_ENV})")
    ap.add_argument("--base-url", help="OpenAI-compatible endpoint instead of a GGUF")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--n-ctx", type=int, default=8192, help="llama.cpp context (Spider schemas are long)")
    ap.add_argument("--threads", type=int, default=1,
                    help="llama.cpp threads (1: on a shared machine more threads spin and slow down)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model request")
    ap.add_argument("--retries", type=int, default=1, help="parser / correction retries on an invalid query")
    ap.add_argument("--out", type=Path, help="JSONL (default results/splash[_dev].jsonl)")
    ap.add_argument("--n-examples", type=int, default=3,
                    help="worked corrections retrieved from the SPLASH dev pool (0: one fixed example)")
    ap.add_argument("--correction-sources", default=",".join(DEFAULT_CORRECTION_SOURCES),
                    help="comma-separated candidate sources of Conversation.correct, in order of "
                         "preference (fresh, edit, guided); edit, fresh and combined are scored from "
                         "the candidates, so keep fresh and edit among them")
    ap.add_argument("--combine", type=Path, nargs="+", metavar="JSONL",
                    help="no model: one summary from shards' rows into --out's .json "
                         "(default results/splash.json)")
    ap.add_argument("--policies", action="store_true",
                    help="no model: from the rows in --out, items right under each choice and order "
                         "of correction sources (results of old rows recomputed from their queries)")
    ap.add_argument("--leak-check", action="store_true",
                    help="no model: build every report item's prompts and print the leaks found")
    ap.add_argument("--build-pool", action="store_true",
                    help=f"write the correction pool from dev.json to {POOL.relative_to(POOL.parents[3])}")
    args = ap.parse_args(argv)
    if args.build_pool:
        print(f"wrote {build_pool(args.data)} examples to {POOL.relative_to(POOL.parents[3])}")
        return 0
    if args.leak_check:
        oracle = protocol.ResultOracle()
        checks = leak_checks(args.data, args.n, args.seed, args.split)
        leaks = [leak for c in checks for leak in protocol.prompt_leaks(c, oracle)]
        print(json.dumps({"checks": len(checks), "leaks": len(leaks), "examples": leaks[:20]}, indent=2))
        return 1 if leaks else 0
    stem = "splash" if args.split == "test" else "splash_dev"
    if args.combine:
        out = (args.out or RESULTS / f"{stem}.jsonl").with_suffix(".json")
        print(json.dumps(combine(args.combine, out, args.data), indent=2))
        return 0
    out = args.out or RESULTS / f"{stem}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.policies:
        rows = [json.loads(line) for line in out.open() if line.strip()]
        ran = rekey(rows, args.data)
        report = {"items": len(rows), "queries_rerun": ran, "afresh": sum(bool(r.get("e2e_match")) for r in rows),
                  "right_by_sources": policy_table(rows),
                  "note": "results keyed as blendsql.nl.conversation.result_key keys them at this commit "
                          "(rows, and their order when a query sorts); afresh = the fresh parse alone",
                  **protocol.commit()}
        out.with_name(out.stem + "_policies.json").write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps(report, indent=2))
        return 0
    sources = tuple(x.strip() for x in args.correction_sources.split(",") if x.strip())
    args.model = protocol.model_arg(args.model)
    if not args.model and not args.base_url:
        ap.error(f"--model (or ${protocol.MODEL_ENV}) or --base-url is required")
    model, model_name = make_model(args)
    done = read_rows(out)
    # what earlier committed runs touched (this file's own rows left out when resuming it)
    touched = protocol.touched_ids("splash", key="i", exclude=[out] if done else [])
    dealt = report_set(args.data, args.split, None if args.fresh else args.n, args.seed)
    if args.fresh:
        dealt = protocol.untouched(dealt, lambda t: t[0], args.n, touched)
    items = protocol.shard_of(dealt, args.shard)
    # dealt order in batches, each grouped by database: a run stopped early still covers every
    # database, and consecutive items reuse the schema part of the prompt
    items = (protocol.grouped_in_batches(items, lambda t: t[1]["db_id"], args.batch) if args.batch > 0
             else in_database_order(items))
    header = {**protocol.run_record("splash.py", argv, args.model if not args.base_url else None,
                                    model_name if args.base_url else None),
              "seed": args.seed, "requested_n": args.n, "shard": args.shard, "batch": args.batch,
              "retries": args.retries,
              "n_examples": args.n_examples, "correction_sources": list(sources),
              "fresh": args.fresh,
              "reuse_check": protocol.reuse_check([i for i, _ in items], touched)}
    started = time.perf_counter()

    def write_summary() -> dict[str, Any]:
        """Rewritten after every item, so a stopped run still leaves a true summary."""
        rows = [done[i] for i, _ in items if i in done]
        summary = {**summary_of(rows, header, args.split),
                   "run_seconds_this_session": round(time.perf_counter() - started, 1)}
        out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    spider_pool = load_examples("spider")
    corrections = correction_pool()
    oracle = protocol.ResultOracle()
    with out.open("a") as fh:
        for k, (i, item) in enumerate(items):
            if i in done:
                continue
            row = run_item(i, item, args.data, model, not args.no_e2e, args.retries, spider_pool,
                           args.n_examples, sources, corrections, oracle)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            done[i] = row
            write_summary()
            flags = item_flags(row)["execution"]
            marks = " ".join(f"{s}={'-' if f is None else 'Y' if f else 'n'}" for s, f in flags.items())
            print(f"[{k + 1}/{len(items)}] {i} {row['db']}: {marks}", file=sys.stderr, flush=True)
    print(json.dumps(write_summary(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
