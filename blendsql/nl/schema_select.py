"""Large-schema retrieval (CRUSH4SQL, Kothyari et al. 2023).

When a schema has thousands of columns, no prompt can hold it. CRUSH4SQL picks
a small subset in four steps:

1. **Hallucinate** (``hallucinate``): a language model, shown a few examples,
   writes the minimal schema it imagines the question needs, as
   ``table.column`` lines. The names are invented, but they say *what kind* of
   columns to look for, which the bare question does not.
2. **Probe** (``probe_texts``, ``SchemaSelector.similarities``): each
   hallucinated element, prefixed by the question (so that "name" means the
   name of *this* question's entity), and the question itself, are embedded
   and compared by cosine with every real element ``table.column``.
3. **Score** (``element_scores``): an element scores its cosine with the
   question plus its best cosine with any hallucinated probe (the model named
   something like it), then gains the relevance of its database and of its
   table (``group_relevance``: the mean of the group's best few scores), so
   the one database and the few tables a question is about outrank look-alike
   columns scattered over a union of many schemas.
4. **Collective selection** (``collective_select``): a budget-``B`` set is
   picked greedily by score; once a table is chosen, the key-like columns of
   *other* tables in the same namespace that share a key name with it gain a
   small bonus (connectivity), because a question over two tables needs the
   join columns that its words rarely mention. An element is key-like if
   named ``id``, ``*_id``, ``*code`` or ``*key``; a bare ``id`` of table
   ``stadium`` also answers to ``stadium_id``.

The paper's entropy-weighted coverage objective is kept as
``SchemaSelector(method="greedy")``:

    F(S) = sum_i w_i * max_{e in S} s_ie^+            (coverage of the probes)
         + mu * sum_{e in S} r_e                      (relevance, r_e = sum_i w_i s_ie^+)
         + lam * #{e in S joined to an earlier pick}  (connectivity)

with ``w_i = 1 - H(softmax(s_i / T)) / log n`` (``entropy_weights``: a peaked
probe counts more than a flat one) and ``greedy_select``. With the
evaluation model's hallucinations it measured below plain cosine at budget 20
on spider_UNION (tuning and report questions alike), while the collective
selection measured above cosine at budgets 10 and 20 on both spider_UNION and
bird_UNION (``benchmarks/results/schema_retrieval_qwen.json``; on Spider at
budget 20 only by a margin inside the noise of 100 questions).

``select_schema`` runs all four steps; ``SchemaSelector`` keeps the dense
index of one schema so many questions can reuse it. ``columns_in_sql`` turns a
gold SQL query into the ``table.column`` elements it reads, for evaluation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from blendsql.errors import BlendSQLError, ModelError
from blendsql.models.base import Model, Request
from blendsql.retrieval.embeddings import Embedder, default_embedder, words
from blendsql.retrieval.index import DenseIndex, top_k

# Few-shot examples for step 1: questions from the Spider dev ids reserved for
# development (6, 23, 61, 117), with hand-written minimal schemas in the
# style a model should imitate (plausible names, not necessarily the real ones).
FEW_SHOT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("For each stadium, how many concerts play there?",
     ("stadium.name", "stadium.stadium_id", "concert.stadium_id")),
    ("Find the major and age of students who do not have a cat pet.",
     ("student.major", "student.age", "student.student_id", "has_pet.student_id",
      "pets.pet_type")),
    ("What is the average miles per gallon(mpg) of the cars with 4 cylinders?",
     ("cars.mpg", "cars.cylinders")),
    ("Show the name and the release year of the song by the youngest singer.",
     ("singer.song_name", "singer.song_release_year", "singer.age")),
)

_KEY = re.compile(r"(^|[^a-z])(id|code|key)$|^(id|key|code)$|[a-z](id|_id|_code|_key)$")
_LINE_PREFIX = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_TABLE_FORM = re.compile(r"^\s*([^()]+?)\s*\((.*)\)\s*$")


INSTRUCTION = ("Write the minimal database schema needed to answer the question: "
               "one table.column per line, nothing else.")


def build_prompt(question: str, examples: Sequence[tuple[str, Sequence[str]]] = FEW_SHOT) -> str:
    """Few-shot prompt as one text (for completion-style backends and traces)."""
    parts = [INSTRUCTION + "\n"]
    for q, elems in examples:
        parts.append(f"Question: {q}\nSchema:\n" + "\n".join(elems) + "\n")
    parts.append(f"Question: {question}\nSchema:\n")
    return "\n".join(parts)


def build_messages(question: str, examples: Sequence[tuple[str, Sequence[str]]] = FEW_SHOT
                   ) -> tuple[tuple[str, str], ...]:
    """The same few shots as chat turns, which instruction-tuned models follow best."""
    turns: list[tuple[str, str]] = [("system", INSTRUCTION)]
    for q, elems in examples:
        turns += [("user", f"Question: {q}"), ("assistant", "\n".join(elems))]
    turns.append(("user", f"Question: {question}"))
    return tuple(turns)


def parse_hallucination(text: str, limit: int = 12) -> list[str]:
    """Schema elements from model text, tolerant of the forms small models write.

    Accepts ``table.column`` lines, ``table(col1, col2)`` lines (the CRUSH4SQL
    paper's format), bullets and numbering; stops at the next ``Question:``;
    drops duplicates and keeps at most ``limit``.
    """
    out: list[str] = []
    for raw in text.splitlines():
        line = _LINE_PREFIX.sub("", raw).strip().strip(",;")
        if not line:
            continue
        if line.lower().startswith(("question", "schema")):
            if out:
                break
            continue
        m = _TABLE_FORM.match(line)
        if m:
            table = m.group(1).strip()
            cols = [c.strip() for c in m.group(2).split(",") if c.strip()]
            items = [f"{table}.{c}" for c in cols] or [table]
        else:
            items = [line]
        for it in items:
            if len(it) > 80 or not any(ch.isalnum() for ch in it):
                continue
            if it.lower() not in (o.lower() for o in out):
                out.append(it)
    return out[:limit]


def hallucination_request(question: str, max_tokens: int = 80,
                          examples: Sequence[tuple[str, Sequence[str]]] = FEW_SHOT) -> Request:
    """The step-1 request; its ``key()`` names the prompt, so callers can cache answers."""
    return Request(prompt=build_prompt(question, examples),
                   messages=build_messages(question, examples), max_tokens=max_tokens,
                   temperature=0.0, stop=("\n\n", "Question:"))


def hallucinate_text(question: str, model: Model, max_tokens: int = 80,
                     examples: Sequence[tuple[str, Sequence[str]]] = FEW_SHOT) -> str:
    """The model's raw step-1 text (``hallucinate`` parses it)."""
    req = hallucination_request(question, max_tokens, examples)
    try:
        resp = model.generate([req])[0]
    except BlendSQLError:
        raise
    except Exception as e:  # a backend failure reaches users as a ModelError
        raise ModelError(f"schema hallucination failed: {e}",
                         hint="check the model, or call select_schema with model=None "
                              "to probe with the question only") from e
    return resp.text


def hallucinate(question: str, model: Model, max_tokens: int = 80,
                examples: Sequence[tuple[str, Sequence[str]]] = FEW_SHOT) -> list[str]:
    """Step 1: the model's imagined minimal schema for ``question`` (may be empty)."""
    return parse_hallucination(hallucinate_text(question, model, max_tokens, examples))


def humanise(element: str) -> str:
    """``db.table_name.colName`` -> ``db . table name . col name`` for embedding."""
    parts = [" ".join(words(p)) or p.strip() for p in element.split(".")]
    return " . ".join(p for p in parts if p)


def probe_texts(question: str, hallucinated: Sequence[str],
                prefix_question: bool = True) -> list[str]:
    """Step 2 queries: the question, then each hallucinated element (question-prefixed)."""
    probes = [question]
    for h in hallucinated:
        probes.append(f"{question} {humanise(h)}" if prefix_question else humanise(h))
    return probes


def entropy_weights(sims: np.ndarray, temperature: float = 0.05) -> np.ndarray:
    """Step 3: one weight per probe (row of ``sims``), larger for peaked rows.

    ``p_i = softmax(s_i / temperature)`` over the elements; the normalised
    entropy ``h_i = H(p_i) / log n`` is 0 for a probe pointing at exactly one
    element and 1 for a uniform one, so ``w_i = 1 - h_i``. Weights are
    rescaled to sum to 1 (uniform if every probe is flat).
    """
    sims = np.atleast_2d(np.asarray(sims, dtype=np.float64))
    p_count, n = sims.shape
    if p_count == 0:
        return np.zeros(0)
    if n <= 1:
        return np.full(p_count, 1.0 / p_count)
    z = sims / temperature
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    h = -(p * np.log(np.clip(p, 1e-300, None))).sum(axis=1) / np.log(n)
    w = np.clip(1.0 - h, 0.0, None)
    total = w.sum()
    return w / total if total > 1e-12 else np.full(p_count, 1.0 / p_count)


def is_key_like(column: str) -> bool:
    """Names that usually carry joins: ``id``, ``people_id``, ``StuID``, ``country_code``."""
    c = column.strip().lower().replace(" ", "_")
    return bool(_KEY.search(c))


def split_element(element: str) -> tuple[str, str]:
    """``a.b.c`` -> (``a.b``, ``c``): the table is everything before the last dot."""
    if "." not in element:
        return "", element
    table, column = element.rsplit(".", 1)
    return table, column


@dataclass
class SchemaGraph:
    """Which elements share a table and which could join, as integer arrays."""

    table_ids: np.ndarray  # element -> table number
    namespace_ids: np.ndarray  # element -> namespace (e.g. database) number
    key_like: np.ndarray  # element -> bool
    column_norm: list[str] = field(default_factory=list)  # normalised column names
    table_norm: list[str] = field(default_factory=list)  # last part of the table name

    @classmethod
    def build(cls, elements: Sequence[str], tables: Sequence[str] | None = None) -> SchemaGraph:
        if tables is None:
            pairs = [split_element(e) for e in elements]
        else:
            if len(tables) != len(elements):
                raise BlendSQLError("tables and elements differ in length",
                                    hint="pass one table name per element")
            pairs = [(t, e[len(t) + 1:] if e.startswith(t + ".") else split_element(e)[1])
                     for t, e in zip(tables, elements, strict=True)]
        table_num: dict[str, int] = {}
        ns_num: dict[str, int] = {}
        t_ids, n_ids, keys, cols, tnames = [], [], [], [], []
        for table, column in pairs:
            t_ids.append(table_num.setdefault(table.lower(), len(table_num)))
            ns = table.rsplit(".", 1)[0].lower() if "." in table else ""
            n_ids.append(ns_num.setdefault(ns, len(ns_num)))
            keys.append(is_key_like(column))
            cols.append("_".join(words(column)) or column.lower())
            tnames.append("_".join(words(table.rsplit(".", 1)[-1])))
        return cls(np.array(t_ids, dtype=np.int64), np.array(n_ids, dtype=np.int64),
                   np.array(keys, dtype=bool), cols, tnames)

    def key_names(self, i: int) -> set[str]:
        """Names under which element ``i`` (if key-like) may be referenced from
        another table: its own name, and ``<table>_id`` for a bare ``id``."""
        if not self.key_like[i]:
            return set()
        col = self.column_norm[i]
        names = {col}
        if col == "id" and self.table_norm[i]:
            names |= {f"{self.table_norm[i]}_id", f"{self.table_norm[i]}id"}
        return names


def greedy_select(sims: np.ndarray, weights: np.ndarray, graph: SchemaGraph, budget: int,
                  candidates: np.ndarray | None = None, lam: float = 0.05,
                  mu: float = 0.3) -> list[int]:
    """Step 4: greedily maximise coverage + relevance + connectivity (module docstring).

    ``sims`` is probes x elements; ``candidates`` (element positions) limits
    the search for speed. Returns at most ``budget`` element positions in the
    order they were picked. Each step adds the candidate with the largest
    marginal gain ``sum_i w_i (s_ie - best_i)^+ + mu r_e + lam [e joined to S]``.
    """
    n = sims.shape[1]
    cand = np.arange(n) if candidates is None else np.unique(np.asarray(candidates, dtype=np.int64))
    if budget <= 0 or cand.size == 0:
        return []
    s = np.clip(sims[:, cand], 0.0, None)
    w = np.asarray(weights, dtype=np.float64)[:, None]
    rel = (w * s).sum(axis=0)
    best = np.zeros(s.shape[0])
    cand_tables = graph.table_ids[cand]
    cand_ns = graph.namespace_ids[cand]
    cand_keys = graph.key_like[cand]
    cand_names = [graph.key_names(int(i)) for i in cand]
    chosen_mask = np.zeros(cand.size, dtype=bool)
    joined = np.zeros(cand.size, dtype=bool)
    picked: list[int] = []
    for _ in range(min(budget, cand.size)):
        gain = (w * np.clip(s - best[:, None], 0.0, None)).sum(axis=0) + mu * rel + lam * joined
        gain[chosen_mask] = -np.inf
        j = int(np.argmax(gain))
        chosen_mask[j] = True
        picked.append(int(cand[j]))
        best = np.maximum(best, s[:, j])
        joined |= cand_tables == cand_tables[j]
        # key-like columns of the same namespace sharing a key name with the new
        # pick's table become joinable (e.g. concert.stadium_id <-> stadium.stadium_id)
        table_keys: set[str] = set()
        for k in np.flatnonzero(cand_tables == cand_tables[j]):
            table_keys |= cand_names[k]
        if table_keys:
            same_ns = cand_ns == cand_ns[j]
            for k in np.flatnonzero(same_ns & cand_keys & ~joined):
                if cand_names[k] & table_keys:
                    joined[k] = True
    return picked


def group_relevance(scores: np.ndarray, groups: np.ndarray, top: int) -> np.ndarray:
    """Per element, the summed ``top`` best scores of its group, divided by ``top``.

    A group (a table, or a database in a union schema) whose best few
    elements all look relevant is more likely the one the question is about
    than a group with one lucky match; dividing by ``top`` rather than the
    group size keeps one-column groups from winning on a single hit.
    """
    scores = np.asarray(scores, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.int64)
    if scores.size == 0 or top <= 0:
        return np.zeros_like(scores)
    order = np.lexsort((-scores, groups))  # by group, best first inside each group
    g = groups[order]
    first = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    starts = np.repeat(first, np.diff(np.r_[first, g.size]))
    keep = (np.arange(g.size) - starts) < top
    sums = np.bincount(g[keep], weights=scores[order][keep], minlength=int(groups.max()) + 1)
    return sums[groups] / top


def element_scores(sims: np.ndarray, graph: SchemaGraph, probe_weight: float = 1.0,
                   db_weight: float = 0.5, table_weight: float = 0.5, db_top: int = 3,
                   table_top: int = 2) -> np.ndarray:
    """Relevance of every element to the question and its hallucinated schema.

    ``sims`` row 0 is the bare question, further rows the hallucinated
    elements. An element scores its question similarity plus
    ``probe_weight`` times its best match to any hallucinated element (the
    model named something like it), then gains ``db_weight`` / ``table_weight``
    times the relevance of its database / table (``group_relevance``), so
    that elements of the one database and the few tables the question is
    about outrank look-alikes scattered over a union schema. Normalised by
    the total weight so scores stay on the cosine scale.
    """
    sims = np.atleast_2d(np.asarray(sims, dtype=np.float64))
    score = sims[0].copy()
    if sims.shape[0] > 1 and probe_weight:
        score += probe_weight * sims[1:].max(axis=0)
    if db_weight:
        score += db_weight * group_relevance(score, graph.namespace_ids, db_top)
    if table_weight:
        score += table_weight * group_relevance(score, graph.table_ids, table_top)
    total = 1.0 + (probe_weight if sims.shape[0] > 1 else 0.0) + db_weight + table_weight
    return score / total


def collective_select(scores: np.ndarray, graph: SchemaGraph, budget: int,
                      link_bonus: float = 0.03, pool: int = 200) -> list[int]:
    """Pick ``budget`` elements greedily by score, favouring the keys that join picks.

    After each pick from a new table, key-like columns of *other* tables in
    the same namespace that share a key name with it (``concert.stadium_id``
    once ``stadium`` is chosen) gain ``link_bonus``: a question over two
    tables needs the join columns, which its words rarely mention. The
    search runs over the ``pool`` best elements plus the key columns of the
    tables among the top 50.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if budget <= 0 or scores.size == 0:
        return []
    top = top_k(scores, pool)
    head_tables = np.unique(graph.table_ids[top[:50]])
    keys = np.flatnonzero(np.isin(graph.table_ids, head_tables) & graph.key_like)
    cand = np.unique(np.concatenate([top, keys]))
    s = scores[cand]
    c_tab = graph.table_ids[cand]
    c_ns = graph.namespace_ids[cand]
    c_key = graph.key_like[cand]
    names = [graph.key_names(int(i)) for i in cand]
    bonus = np.zeros(cand.size)
    chosen = np.zeros(cand.size, dtype=bool)
    tables_seen: set[int] = set()
    picked: list[int] = []
    for _ in range(min(budget, cand.size)):
        gain = s + bonus
        gain[chosen] = -np.inf
        j = int(np.argmax(gain))
        chosen[j] = True
        picked.append(int(cand[j]))
        t = int(c_tab[j])
        if t in tables_seen or not link_bonus:
            continue
        tables_seen.add(t)
        table_keys: set[str] = set()
        for k in np.flatnonzero(c_tab == t):
            table_keys |= names[k]
        for k in np.flatnonzero((c_ns == c_ns[j]) & c_key & (c_tab != t) & ~chosen):
            if names[k] & table_keys:
                bonus[k] = max(bonus[k], link_bonus)
    return picked


class SchemaSelector:
    """CRUSH4SQL over one schema: builds the dense index once, answers many questions.

    ``elements`` are ``table.column`` strings (the table may itself contain
    dots, e.g. ``db.table.column``; pass ``tables`` when column names contain
    dots). ``cache_dir`` memoises the element embeddings on disk.

    ``method="collective"`` (default) ranks by ``element_scores`` and picks
    with ``collective_select``; ``method="greedy"`` is the entropy-weighted
    coverage objective of ``greedy_select``. With the evaluation model's
    hallucinations, collective measured above both plain cosine and greedy at
    budgets 10 and 20 on the Spider and BIRD union schemas
    (``benchmarks/schema_retrieval.py``); greedy was below cosine at budget 20
    on Spider.
    """

    def __init__(self, elements: Sequence[str], embedder: Embedder | None = None,
                 tables: Sequence[str] | None = None, cache_dir: str | Path | None = None,
                 cache: bool = False, temperature: float = 0.05, lam: float = 0.05,
                 mu: float = 0.3, pool: int = 100, prefix_question: bool = True,
                 method: str = "collective", probe_weight: float = 1.0,
                 db_weight: float = 0.5, table_weight: float = 0.5,
                 link_bonus: float = 0.03) -> None:
        if not elements:
            raise BlendSQLError("cannot select from an empty schema",
                                hint="pass at least one table.column element")
        if method not in ("collective", "greedy"):
            raise BlendSQLError(f"unknown schema selection method {method!r}",
                                hint="use method='collective' or method='greedy'")
        self.elements = list(elements)
        self.embedder = embedder if embedder is not None else default_embedder()
        self.graph = SchemaGraph.build(self.elements, tables)
        self.index = DenseIndex([humanise(e) for e in self.elements], self.embedder,
                                cache_dir=cache_dir, cache=cache)
        self.temperature = temperature
        self.lam = lam
        self.mu = mu
        self.pool = pool
        self.prefix_question = prefix_question
        self.method = method
        self.probe_weight = probe_weight
        self.db_weight = db_weight
        self.table_weight = table_weight
        self.link_bonus = link_bonus

    def similarities(self, question: str, hallucinated: Sequence[str]) -> np.ndarray:
        """Probes x elements cosine similarities (row 0 is the bare question)."""
        return self.index.similarities(probe_texts(question, hallucinated, self.prefix_question))

    def candidates(self, sims: np.ndarray, budget: int) -> np.ndarray:
        """Top ``max(pool, 2B)`` elements per probe, plus the other columns of their tables.

        Restricting the greedy search keeps it fast on 20k-column schemas
        without losing anything it could plausibly pick: an element outside
        every probe's top list has low coverage gain and low relevance.
        """
        k = max(self.pool, 2 * budget)
        top = np.unique(np.concatenate([top_k(row, k) for row in sims]))
        head = np.unique(np.concatenate([top_k(row, 5) for row in sims]))
        tables = np.unique(self.graph.table_ids[head])
        same = np.flatnonzero(np.isin(self.graph.table_ids, tables))
        return np.unique(np.concatenate([top, same]))

    def select_with_probes(self, question: str, hallucinated: Sequence[str],
                           budget: int) -> list[str]:
        """Steps 2-4 for given hallucinated elements (empty: the question alone)."""
        return self.select_from_similarities(self.similarities(question, hallucinated), budget)

    def select_from_similarities(self, sims: np.ndarray, budget: int,
                                 method: str | None = None) -> list[str]:
        """Steps 3-4 on precomputed probe similarities (lets callers reuse one embedding)."""
        if (method or self.method) == "greedy":
            weights = entropy_weights(sims, self.temperature)
            picked = greedy_select(sims, weights, self.graph, budget,
                                   self.candidates(sims, budget), self.lam, self.mu)
        else:
            scores = element_scores(sims, self.graph, self.probe_weight, self.db_weight,
                                    self.table_weight)
            picked = collective_select(scores, self.graph, budget, self.link_bonus,
                                       max(2 * self.pool, 2 * budget))
        return [self.elements[i] for i in picked]

    def select(self, question: str, model: Model | None, budget: int = 20) -> list[str]:
        """All four steps; ``model=None`` skips hallucination."""
        hallucinated = hallucinate(question, model) if model is not None else []
        return self.select_with_probes(question, hallucinated, budget)


def select_schema(question: str, elements: Sequence[str], model: Model | None,
                  embedder: Embedder | None = None, budget: int = 20,
                  tables: Sequence[str] | None = None) -> list[str]:
    """The ``budget`` schema elements most useful for ``question`` (CRUSH4SQL).

    Builds a ``SchemaSelector`` for ``elements``; to answer many questions on
    one schema build the selector once instead.
    """
    if budget <= 0:
        return []
    return SchemaSelector(elements, embedder, tables).select(question, model, budget)


def _lower_identifiers(tree: object) -> object:
    from sqlglot import exp

    def fn(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Identifier):
            return exp.Identifier(this=str(node.this).lower(), quoted=node.args.get("quoted"))
        return node

    assert isinstance(tree, exp.Expression)
    return tree.transform(fn)


def columns_in_sql(sql: str, schema: Mapping[str, Iterable[str]],
                   dialect: str = "mysql") -> set[tuple[str, str]]:
    """The (table, column) pairs a SQL query reads, with aliases resolved.

    ``schema`` maps table -> columns (case-insensitive); it lets unqualified
    columns find their table and ``SELECT *`` expand to every column of the
    table, while ``COUNT(*)`` reads none. Parsed as MySQL by default because
    Spider's gold SQL writes strings in double quotes. Names come back
    lower-cased.
    """
    from sqlglot import errors as sqlglot_errors
    from sqlglot import exp, parse_one
    from sqlglot.optimizer.qualify import qualify
    from sqlglot.optimizer.scope import traverse_scope

    lower_schema: dict[str, object] = {
        t.lower(): {c.lower(): "text" for c in cols} for t, cols in schema.items()}
    try:
        tree = _lower_identifiers(parse_one(sql, read=dialect))
        assert isinstance(tree, exp.Expression)
        tree = qualify(tree, schema=lower_schema, dialect=dialect,
                       validate_qualify_columns=False, identify=False)
    except (sqlglot_errors.SqlglotError, ValueError) as e:
        raise BlendSQLError(f"cannot read columns of SQL: {e}", hint=sql) from e
    out: set[tuple[str, str]] = set()
    for scope in traverse_scope(tree):
        tables = [s for s in scope.sources.values() if isinstance(s, exp.Table)]
        for col in scope.columns:
            src = scope.sources.get(col.table)
            if src is None and not col.table and len(tables) == 1:
                src = tables[0]
            if isinstance(src, exp.Table) and col.name:
                out.add((src.name.lower(), col.name.lower()))
    return out
