"""The Spark SQL backend (PySpark, classic sessions): a ``SparkSession`` or a dict of
Spark DataFrames.

``BlendSQL(spark)`` runs over the session's catalog tables (current namespace)
and temporary views; ``BlendSQL({"t": spark_df, ...})`` registers each
DataFrame as a temporary view of its session under the given name (refused
when that name is taken) and drops only those views at :meth:`close`. The
session is the user's: blendsql never stops it, never changes its
configuration, and restores the thread's job-group properties after each
statement.

Read-only by statement: a user statement is parsed by Spark's own parser and
must be a query (``SELECT`` / ``WITH`` / ``VALUES`` / set operations), a
``SHOW`` / ``DESCRIBE`` or an ``EXPLAIN`` of a query; INSERT, DDL, ``SET`` /
``USE`` / ``CACHE`` and every other command are refused (with
``allow_writes=True``: table writes only; temporary views and session
commands stay refused). Every function a query calls, every table it reads and
every operator of its plan is judged on that plan by an allow-list
(:mod:`blendsql.db.allowlist`): ``reflect()`` / ``java_method()`` (they call any
Java method), a file read as a table (``text.`/etc/hostname```), ``TRANSFORM ..
USING`` (runs a program) are refused by name. Parameters are bound by Spark (``spark.sql(text, args)``),
never written into the text.

The engine's rows are session-scoped temporary views under unguessable names,
made with ``spark.createDataFrame(rows, <explicit schema>)`` (a column of
NULLs only is Spark's NULL type, which compares with every type, like
SQLite's NULL) and dropped after each query, also after a failure or a time
out. Time limit: each statement runs in its own job group
(``setJobGroup(.., interruptOnCancel=True)`` in the statement's thread); the
watchdog cancels the group (``cancelJobGroup``, repeated until the statement
returns: a statement may start one job after another) and the statement
fails with ``QueryTimeoutError``. Spark has no full-text search: ``MATCH``
is refused with an error that says so.

Translation (``db/transpile.py``, dialect ``spark``): the engine's lookups
``(SELECT v FROM temp.t WHERE k = x)`` become map reads of an uncorrelated
subquery (Spark refuses a correlated one in ORDER BY, GROUP BY and JOIN ..
ON); SELECT aliases named in WHERE are inlined (``column_names``); LIKE
ignores ASCII case, as SQLite's. A read that hits Spark's race between such a
subquery and a shuffle reading its value ("Subquery .. has not finished",
adaptive execution) is run again, at most twice.
"""

from __future__ import annotations

import decimal
import itertools
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from blendsql.db.allowlist import (
    SPARK_FILE_FORMATS,
    SPARK_PLAN_NODES,
    SPARK_TABLE_FUNCTIONS,
    SPARK_UNRESOLVED_NODES,
    Verdict,
    refusal,
    spark_verdict,
)
from blendsql.db.backend import (
    INGREDIENT_VALUE_HINT,
    Capabilities,
    require,
    short,
    source_module,
)
from blendsql.db.guarded import GuardedBackend, as_type, engine_value, floats
from blendsql.db.statements import EXECUTOR_CHECK, EXECUTOR_JOB, leading_keyword
from blendsql.db.temp_rows import encodes_utf8
from blendsql.db.transpile import FullText, Transpiler
from blendsql.errors import BlendSQLError, ExecutionError

if TYPE_CHECKING:
    from blendsql.db.spark_calls import SparkExecutors
    from blendsql.db.spark_workers import WorkerCheck

#: seconds the executors' check may take (a first job starts the Python workers)
PROBE_TIMEOUT = 120.0

#: job-group properties of a thread, saved before and restored after each statement
_GROUP_KEYS = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")
#: seconds between two cancellations of a timed-out statement's job group
_RECANCEL = 0.2
#: commands that only read the catalog (``SHOW TABLES``, ``DESCRIBE TABLE t`` ...)
_READ_COMMANDS = ("Show", "Describe")
#: what ``allow_writes=True`` lets a user statement do: write tables (never views,
#: temporary ones included, nor SET / USE / CACHE / ADD JAR ...)
_WRITE_PLANS = frozenset({
    "InsertIntoStatement", "CreateTable", "CreateTableAsSelect", "ReplaceTable",
    "ReplaceTableAsSelect", "DropTable", "DeleteFromTable", "UpdateTable", "MergeIntoTable",
    "TruncateTable", "AddColumns", "DropColumns", "RenameColumn", "AlterColumns", "RenameTable",
})
_EXPLAIN = re.compile(r"\s*EXPLAIN(\s+(EXTENDED|CODEGEN|COST|FORMATTED))?\s+", re.IGNORECASE)
_INT64 = (-(2**63), 2**63 - 1)
#: Spark's race between a scalar subquery and a shuffle that reads its value (adaptive
#: execution; seen with the engine's map lookups as join keys): the statement is a read,
#: run again
_SUBQUERY_RACE = re.compile(r"Subquery subquery#\d+.{0,40} has not finished")
_RACE_RETRIES = 2
_NO_FTS = ("full-text search (MATCH) is not available on Spark: Spark SQL has no full-text "
           "search (no MATCH operator, no text index)")


def backtick(name: str) -> str:
    """A Spark SQL identifier (backticks; Spark reads double quotes as a string)."""
    return "`" + name.replace("`", "``") + "`"


def is_spark_dataframe(value: Any) -> bool:
    """A PySpark DataFrame (classic or Connect), told without importing pyspark."""
    return (type(value).__module__.split(".")[0] == "pyspark"
            and type(value).__name__ == "DataFrame")


class SparkFullText(FullText):
    """Spark has no full-text search: ``t MATCH q`` is refused, saying so."""

    def unavailable(self, table: str) -> str | None:
        return _NO_FTS


class _Canceller:
    """``interrupt()`` for the watchdog: cancel the statement's job group, and keep
    cancelling it until the statement returns (``done``).

    Why again and again: ``cancelJobGroup`` cancels the jobs running now; a
    statement may start another after it (a sort's sampling job, then the
    sort; a broadcast, then the join), which a single cancel would miss.
    """

    def __init__(self, sc: Any, group: str) -> None:
        self.sc = sc
        self.group = group
        self.done = threading.Event()

    def interrupt(self) -> None:
        threading.Thread(target=self._cancel, name="blendsql-spark-cancel",
                         daemon=True).start()

    def _cancel(self) -> None:
        while not self.done.is_set():
            try:
                self.sc.cancelJobGroup(self.group)
            except Exception:  # noqa: BLE001 - the context stopped: nothing runs
                return
            self.done.wait(_RECANCEL)


class _TempRows:
    """The one engine "statement" that is not SQL: a temporary view made from rows.

    It travels as the bound parameters of :meth:`SparkBackend._driver_run`, so its
    creation takes the traced, time-limited path like every statement.
    """

    def __init__(self, name: str, rows: list[tuple[Any, ...]], schema: Any) -> None:
        self.name = name
        self.rows = rows
        self.schema = schema

    def create(self, spark: Any) -> None:
        spark.createDataFrame(self.rows, self.schema).createTempView(self.name)


class _ExecutorJob:
    """An engine "statement" that runs Python on the executors; its rows are what the
    workers returned (``columns``). Like :class:`_TempRows` it travels as the bound
    parameters of the traced, time-limited path (a job group cancelled past the limit).
    """

    columns: tuple[str, ...] = ()

    def run(self, spark: Any) -> list[tuple[Any, ...]]:
        raise NotImplementedError


class _ExecutorProbe(_ExecutorJob):
    """One tiny job, one task per slot: what each executor's Python can import
    (:mod:`blendsql.db.spark_workers`); past the job, :func:`judge` raises the reason
    they cannot run blendsql's calls, so the trace records it as this step's error."""

    columns = ("worker",)

    def __init__(self, tasks: int) -> None:
        self.tasks = tasks

    def run(self, spark: Any) -> list[tuple[Any, ...]]:
        from blendsql.db.spark_workers import judge, probe_function

        found = spark.sparkContext.parallelize(range(self.tasks), self.tasks) \
            .map(probe_function()).collect()
        judge(found, spark.sparkContext.master)
        return [(json.dumps(f),) for f in found]


class _ExecutorCalls(_ExecutorJob):
    """Ingredient calls on the executors: ``items`` (pickled, one row each, in
    ``partitions`` partitions) through ``mapInPandas`` with the shipped worker
    (:mod:`blendsql.db.spark_calls`); its rows are the answers."""

    columns = ("i", "out", "error", "notes")

    def __init__(self, shipped: bytes, items: Sequence[Any], partitions: int) -> None:
        self.shipped = shipped
        self.items = items
        self.partitions = partitions

    def run(self, spark: Any) -> list[tuple[Any, ...]]:
        import pickle

        from pyspark.sql import types as T

        from blendsql.db.spark_calls import OUT_SCHEMA, task

        rows = [(i, pickle.dumps(item)) for i, item in enumerate(self.items)]
        schema = T.StructType([T.StructField("i", T.LongType(), False),
                               T.StructField("item", T.BinaryType(), False)])
        frame = spark.createDataFrame(spark.sparkContext.parallelize(rows, self.partitions),
                                      schema)
        return [tuple(r) for r in frame.mapInPandas(task(self.shipped), OUT_SCHEMA).collect()]


class SparkBackend(GuardedBackend):
    """A Spark session behind the backend interface (see the module docstring)."""

    name = "Spark"
    capabilities = Capabilities(executors=True)
    still_refused = "temporary views, session commands and Java calls"

    @classmethod
    def accepts(cls, source: Any) -> bool:
        """A PySpark ``SparkSession``, or a dict with a Spark DataFrame among its values."""
        if source_module(source) == "pyspark":
            return type(source).__name__ == "SparkSession"
        if isinstance(source, Mapping):
            return any(is_spark_dataframe(v) for v in source.values())
        return False

    def __init__(self, source: Any, *, allow_writes: bool = False) -> None:
        require("pyspark", "pyspark")
        super().__init__(allow_writes=allow_writes, dialect="spark",
                         transpiler=Transpiler("spark", SparkFullText(),
                                               columns=self.column_names,
                                               types=self.column_types))
        self._registered: list[str] = []  # views made from the user's DataFrames (close)
        # lower-case table -> its columns with their Spark types (None: no columns)
        self._all_columns: dict[str, dict[str, str] | None] = {}
        self._canceller: _Canceller | None = None
        self._groups = itertools.count()
        self._command_class: Any = None
        #: verdicts of the function names queries called so far (see :meth:`function_verdict`)
        self._verdicts: dict[str, Verdict] = {}
        if isinstance(source, Mapping):
            frames = dict(source)
            self.spark = _session_of(frames)
        else:
            self.spark = source
        if not hasattr(self.spark, "_jsparkSession"):
            raise ExecutionError(
                "a Spark Connect session cannot be used by blendsql yet",
                hint="use a classic SparkSession (SparkSession.builder...getOrCreate() "
                "without .remote()): blendsql needs its SQL parser and job groups")
        self.conn = self.spark  # the driver's "connection": never closed by blendsql
        self._owns = False
        self._sc = self.spark.sparkContext
        if isinstance(source, Mapping):
            self._register(frames)

    def _translate(self, sql: str, params: Any) -> tuple[str, Any]:
        """As the base class's, the parameters' kinds typing the translation: Spark binds
        a value as a literal of its type (``:n / 4`` divides integers when ``n`` is one)."""
        from blendsql.db.transpile import bind

        text, names = self.transpile(sql, params)
        return text, bind(names, params)

    # -- the user's DataFrames ---------------------------------------------------------

    def _register(self, frames: dict[Any, Any]) -> None:
        """Each DataFrame as a temporary view of its session, under its key."""
        for key in frames:
            name = str(key)
            try:
                taken = self.spark.catalog.tableExists(name)
                if not taken:
                    frames[key].createTempView(name)
            except Exception as e:  # noqa: BLE001 - e.g. a name Spark cannot take
                self._drop_registered()
                raise ExecutionError(f"cannot register DataFrame {name!r} as a Spark "
                                     f"temporary view: {str(e).strip().splitlines()[0]}",
                                     hint="name each DataFrame with a plain identifier "
                                     "(letters, digits, _)") from None
            if taken:
                self._drop_registered()
                raise ExecutionError(
                    f"the Spark session already has a table or view named {name!r}",
                    hint="blendsql registers each DataFrame as a temporary view under its "
                    "key and never replaces one of yours: close the BlendSQL that "
                    "registered it, or pass another name")
            self._registered.append(name)

    def _drop_registered(self) -> None:
        for name in self._registered:
            try:
                self.spark.catalog.dropTempView(name)
            except Exception:  # noqa: BLE001 - the session stopped: nothing to drop
                pass
        self._registered.clear()

    # -- driver hooks ------------------------------------------------------------------

    def _interrupter(self) -> Any:
        group = f"blendsql-{self.token}-{next(self._groups)}"
        self._canceller = _Canceller(self._sc, group)
        return self._canceller

    @contextmanager
    def _job_group(self, canceller: _Canceller | None) -> Iterator[None]:
        """The statement's jobs in the canceller's group; the thread's properties restored."""
        if canceller is None:
            yield
            return
        sc = self._sc
        saved = [sc.getLocalProperty(k) for k in _GROUP_KEYS]
        sc.setJobGroup(canceller.group, f"blendsql {self.token}", interruptOnCancel=True)
        try:
            yield
        finally:
            canceller.done.set()
            for key, value in zip(_GROUP_KEYS, saved, strict=True):
                sc.setLocalProperty(key, value)

    def _driver_run(self, text: str, binds: Any, user: bool,
                    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        canceller, self._canceller = self._canceller, None
        try:
            return self._run_spark(text, binds, user, canceller)
        finally:
            if canceller is not None:
                canceller.done.set()  # also when refused before any job: stop cancelling

    def _run_spark(self, text: str, binds: Any, user: bool, canceller: _Canceller | None,
                   ) -> tuple[list[str], list[tuple[Any, ...]]]:
        if isinstance(binds, _TempRows):
            with self._job_group(canceller):
                binds.create(self.spark)
            return [], []
        if isinstance(binds, _ExecutorJob):
            with self._job_group(canceller):
                return list(binds.columns), binds.run(self.spark)
        explained = _EXPLAIN.match(text)
        if user:
            self._check_statement(text)
        _check_binds(binds)
        with self._job_group(canceller):
            if explained is not None:
                # Spark's EXPLAIN reports a query that does not compile as text in its
                # plan; analysing the query (no job runs) raises the error instead
                self.spark.sql(text[explained.end():], args=binds)
            for attempt in range(_RACE_RETRIES + 1):
                try:
                    df = self.spark.sql(text, args=binds)
                    rows = df.limit(self.max_rows + 1).collect()
                    break
                except Exception as e:  # noqa: BLE001 - only Spark's race is retried
                    if attempt == _RACE_RETRIES or not _SUBQUERY_RACE.search(str(e)):
                        raise
            fields = df.schema.fields
        if len(rows) > self.max_rows:
            from blendsql.errors import TooManyRowsError

            raise TooManyRowsError(
                f"the statement returned more than {self.max_rows:,} rows and was "
                f"stopped:\n  {short(text)}",
                hint="add a LIMIT or a tighter WHERE (or raise db.max_rows)")
        decimals = [i for i, f in enumerate(fields)
                    if type(f.dataType).__name__ == "DecimalType"]
        out = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in rows]
        return [f.name for f in fields], floats(out, decimals)

    def _check_statement(self, text: str) -> None:
        """Refuse what is not a query / SHOW / DESCRIBE / EXPLAIN (see the module docstring),
        judged on the plan Spark's own parser makes of the text."""
        explained = _EXPLAIN.match(text)
        body = text[explained.end():] if explained is not None else text
        try:
            plan = self.spark._jsparkSession.sessionState().sqlParser().parsePlan(body)
        except Exception:  # noqa: BLE001 - a syntax error: Spark reports it when run
            return
        root = str(plan.nodeName())
        if root.startswith(_READ_COMMANDS) and explained is None:
            return
        writes = [n for n in self._nodes(plan) if self._writes(n)]
        if not writes:
            self._check_calls(plan, text)
            return
        if self.allow_writes and explained is None and root in _WRITE_PLANS and all(
                str(n.nodeName()) in _WRITE_PLANS for n in writes):
            return
        raise self.refused(leading_keyword(body) or root, text)

    def function_verdict(self, name: str) -> Verdict:
        """May a query call the function ``name``? Built-in ones by their group
        (``ExpressionInfo.getGroup`` in Spark's registry), others registered in the
        session (a UDF, a catalogue function) are the application's; cached per session."""
        key = name.lower()
        found = self._verdicts.get(key)
        if found is not None:
            return found
        jvm = self.spark._jvm
        registry = jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
        info = registry.lookupFunction(jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
                                       .apply(key))
        if info.isDefined():
            found = spark_verdict(key, str(info.get().getGroup() or "") or None, True)
        else:
            try:
                registered = bool(self.spark.catalog.functionExists(key))
            except Exception:  # noqa: BLE001 - a name Spark cannot look up: unknown
                registered = False
            found = (spark_verdict(key, None, False) if registered
                     else Verdict(key, False, "not a function of this session"))
        self._verdicts[key] = found
        return found

    def _check_calls(self, plan: Any, text: str) -> None:
        """Every operator, function and table of a query's unresolved plan (Spark's own
        parse, read as its JSON) is allowed, or the statement is refused by name."""
        try:
            nodes = json.loads(str(plan.toJSON()))
        except Exception:  # noqa: BLE001 - a plan Spark cannot write out cannot be checked
            raise refusal(self.name, "holds what blendsql cannot read (so cannot check its "
                          "function calls)", text) from None
        for cls, node in _plan_nodes(nodes):
            package, _, simple = cls.rpartition(".")
            if package.endswith("plans.logical") and simple not in SPARK_PLAN_NODES:
                raise refusal(self.name, f"holds a {simple} operator (not a query's)", text)
            if package.endswith("catalyst.analysis") and simple not in SPARK_UNRESOLVED_NODES:
                raise refusal(self.name, f"holds {simple} (a name known only when it runs)",
                              text)
            if simple == "UnresolvedRelation":
                parts = _name_parts(node.get("multipartIdentifier"))
                if len(parts) >= 2 and parts[0].lower() in SPARK_FILE_FORMATS:
                    raise refusal(self.name, f"reads the file {parts[-1]!r} as a table "
                                  f"({parts[0]}.`...`)", text)
            elif simple == "UnresolvedTableValuedFunction":
                parts = _name_parts(node.get("name"))
                name = parts[-1].lower() if parts else ""
                if name not in SPARK_TABLE_FUNCTIONS:
                    raise refusal(self.name, f"calls {name}() (not an allowed table "
                                  "function)", text)
            elif simple in ("UnresolvedFunction", "UnresolvedGenerator"):
                parts = _name_parts(node.get("nameParts") or node.get("name"))
                name = parts[-1].lower() if parts else ""
                verdict = self.function_verdict(name)
                if not verdict.allowed and verdict.why != "not a function of this session":
                    raise refusal(self.name, f"calls {name}() ({verdict.why})", text)

    def _nodes(self, plan: Any) -> Iterator[Any]:
        """The plan's operators (the root first)."""
        stack = [plan]
        while stack:
            node = stack.pop()
            yield node
            children = node.children()
            stack.extend(children.apply(i) for i in range(children.size()))

    def _writes(self, node: Any) -> bool:
        """True for an operator that is not a query's: a command or an INSERT."""
        if self._command_class is None:
            self._command_class = self.spark._jvm.java.lang.Class.forName(
                "org.apache.spark.sql.catalyst.plans.logical.Command", False,
                node.getClass().getClassLoader())
        return bool(self._command_class.isInstance(node)) or str(
            node.nodeName()) == "InsertIntoStatement"

    def _bind_error(self, e: Exception, sql: str, binds: Any,
                    origin: Any) -> ExecutionError | None:
        """A value Spark cannot take (checked in Python before it is sent), by who made it."""
        if not isinstance(e, (TypeError, ValueError, OverflowError)):
            return None
        if isinstance(binds, _TempRows):
            return ExecutionError(f"Spark cannot store an ingredient's output: {e}",
                                  hint=INGREDIENT_VALUE_HINT)
        if not isinstance(e, _Unbindable):
            return None
        who = origin(e.name)
        return ExecutionError(
            f"Spark cannot take {who} ({e.what})",
            hint="pass None, an int within 64 bits, a float, str or bytes"
            if who.startswith("the value you passed") else INGREDIENT_VALUE_HINT)

    def _driver_error(self, e: Exception, sql: str) -> ExecutionError | None:
        from py4j.protocol import Py4JError, Py4JJavaError
        from pyspark.errors import AnalysisException, PySparkException

        if not isinstance(e, (PySparkException, Py4JError)):
            return None
        if isinstance(e, Py4JJavaError):
            msg = str(e.java_exception.toString())
        else:
            msg = str(e).strip()
        msg = msg.split("\n\nJVM stacktrace:", 1)[0].strip()
        lines = msg.splitlines()
        if sql.startswith(EXECUTOR_JOB):  # calls on the executors: their Python failed
            # a Python traceback: its first line and its last ones (the error itself)
            kept = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("at ")]
            msg = "\n".join(kept if len(kept) <= 5 else [kept[0], "...", *kept[-3:]])
            return ExecutionError(
                f"Spark error: {msg}\n  in: {short(sql)}",
                hint="see the Spark executors' logs; the executors need blendsql[spark] (the "
                "driver's version) and your ingredient's or model's packages, or run the calls "
                "on the driver with executors='off'")
        msg = "\n".join(lines[:6]) + ("\n..." if len(lines) > 6 else "")
        missing = isinstance(e, AnalysisException) and any(
            k in msg for k in ("UNRESOLVED_", "NOT_FOUND", "cannot be resolved"))
        return ExecutionError(f"Spark error: {msg}\n  in: {short(sql)}",
                              hint="check the table and column names" if missing
                              else "check the SQL")

    def _store(self, name: str, columns: list[str], types: list[str],
               rows: list[Sequence[Any]], primary_key: str | None) -> None:
        from pyspark.sql import types as T

        fields, data = [], [list(r) for r in rows]
        for i, (column, kind) in enumerate(zip(columns, types, strict=True)):
            values = [as_type(r[i], kind) for r in rows]
            if kind == "NUMERIC":
                spark_type, values = _decimals(values)
            elif kind == "BLOB":
                spark_type = T.BinaryType()
                values = [None if v is None else bytes(v) for v in values]
            elif kind == "TEXT":
                spark_type = T.StringType()
                bad = next((v for v in values if v is not None and not encodes_utf8(v)), None)
                if bad is not None:
                    raise ExecutionError("Spark cannot store an ingredient's output (text "
                                         f"with a lone surrogate: {bad!r})",
                                         hint=INGREDIENT_VALUE_HINT)
            else:
                spark_type = {"BIGINT": T.LongType(), "DOUBLE": T.DoubleType(),
                              "BOOLEAN": T.BooleanType(), "DATE": T.DateType(),
                              "TIMESTAMP": T.TimestampType(),
                              # a column of NULLs only: Spark's NULL type, which compares
                              # with any type (a typed column would clash: text = bigint)
                              "INTEGER": T.NullType()}[kind]
            fields.append(T.StructField(column, spark_type, True))
            for row, v in zip(data, values, strict=True):
                row[i] = v
        op = _TempRows(name, [tuple(r) for r in data], T.StructType(fields))
        self._run(f"CREATE TEMPORARY VIEW {backtick(name)} AS <{len(rows)} row(s) "
                  f"from spark.createDataFrame>", op, engine_value, native=True)
        # the view's types, known without asking Spark (the translation's typing reads them)
        self._all_columns[name.lower()] = {f.name: f.dataType.simpleString()
                                           for f in fields} or None

    # -- calls on the executors (blendsql.db.spark_calls) -------------------------------

    @property
    def executors(self) -> SparkExecutors:
        """This session's executor model (``capabilities.executors``)."""
        from blendsql.db.spark_calls import SparkExecutors

        return SparkExecutors(self)

    def distribute(self, model: Any) -> Any:
        """The session model, its large batches answered on the executors.

        Under a cache or guard the user wrapped the model in (``with_cache(model, path)``):
        the executors answer under it, so its file still serves and keeps the answers
        (a copy of the wrapper; the user's object is left as it is)."""
        from blendsql.db.spark_calls import ExecutorModel
        from blendsql.models.cache import CachedModel
        from blendsql.models.guard import GuardedModel

        if isinstance(model, ExecutorModel):
            return model
        if isinstance(model, GuardedModel):
            return GuardedModel(self.distribute(model.inner))
        if isinstance(model, CachedModel):
            return CachedModel(self.distribute(model.inner), model.path)
        return ExecutorModel(model, self)

    def executor_slots(self) -> int:
        """Tasks the session runs at once (``defaultParallelism``: its executors' cores)."""
        try:
            return max(1, int(self._sc.defaultParallelism))
        except Exception:  # noqa: BLE001 - a stopped context: the job reports it
            return 1

    def check_executors(self) -> WorkerCheck:
        """Whether the executors' Python can run blendsql's calls (blendsql, pandas and
        pyarrow importable, blendsql at the driver's version): one probe job the first
        time per Spark context, then remembered. A failed check is a traced step whose
        error says why; the caller decides what follows (see ``spark_calls``)."""
        from blendsql.db.spark_workers import WorkerCheck, WorkersNotReady, fix_hint, remembered

        found = self.checked_executors()
        if found is not None:
            return found
        tasks = self.executor_slots()
        try:
            with self.session(timeout=PROBE_TIMEOUT), self.engine():
                _cols, rows = self._run(f"{EXECUTOR_CHECK} ON {tasks} executor task(s) <probe>",
                                        _ExecutorProbe(tasks), engine_value, native=True)
            check = WorkerCheck(True, f"{len(rows)} executor task(s) import blendsql "
                                "at the driver's version")
        except WorkersNotReady as e:
            check = WorkerCheck(False, e.message, e.hint or "")
        except BlendSQLError as e:
            check = WorkerCheck(False, "the check of the Spark executors' Python failed: "
                                + e.message.split("\n  in: ", 1)[0],
                                fix_hint(str(self._sc.master), []))
        return remembered(self._context_key(), check)

    def checked_executors(self) -> WorkerCheck | None:
        """The remembered :meth:`check_executors` of this Spark context (None: not yet)."""
        from blendsql.db.spark_workers import remembered

        return remembered(self._context_key())

    def _context_key(self) -> str:
        return f"{id(self._sc)}:{self._sc.applicationId}"

    def run_on_executors(self, shipped: bytes, items: Sequence[Any], what: str,
                         limit: float | None, tasks: int | None = None,
                         ) -> tuple[list[Any], list[str]]:
        """``items`` answered by the pickled worker on the executors: (one output per
        item, in order; the workers' warnings). One traced engine statement under
        ``limit`` seconds, in at most ``tasks`` tasks (None: :meth:`executor_slots`); an
        error a worker raised is raised here as it was."""
        from pyspark import cloudpickle

        partitions = max(1, min(len(items), tasks or self.executor_slots()))
        op = _ExecutorCalls(shipped, items, partitions)
        with self.session(timeout=limit), self.engine():
            _cols, rows = self._run(f"{EXECUTOR_JOB}{len(items)} {what} ON {partitions} "
                                    "executor task(s) <mapInPandas>", op, engine_value,
                                    native=True)
        outs: list[Any] = [None] * len(items)
        seen = [False] * len(items)
        notes: list[str] = []
        for i, out, error, note in rows:
            if error is not None:
                raise cloudpickle.loads(error)
            outs[i], seen[i] = cloudpickle.loads(out), True
            if note is not None:
                notes += cloudpickle.loads(note)
        if not all(seen) or len(rows) != len(items):
            raise ExecutionError(f"the executors answered {len(rows)} of {len(items)} "
                                 f"{what}", hint="see the Spark executors' logs")
        return outs, notes

    def drop_temp_table(self, name: str) -> None:
        """Drop an engine temp view (see :meth:`GuardedBackend.drop_temp_table`)."""
        self._all_columns.pop(name.lower(), None)
        self.transpile.forget(name)
        self._drop_objects([f"DROP VIEW IF EXISTS {backtick(name)}"])

    def _drop_objects(self, statements: Sequence[str]) -> None:
        """As the base class's, the statements being Spark's own SQL (not translated)."""
        for sql in statements:
            try:
                with self._cleanup():
                    self._run(sql, (), engine_value, native=True)
            except BlendSQLError:
                pass

    # -- catalog -------------------------------------------------------------------------

    def tables(self) -> list[str]:
        """Tables of the current namespace and the session's temporary views (not the
        engine's own, nor a view another blendsql session made of its rows)."""
        _, rows = self.run_native("SHOW TABLES")
        names = {str(r[1]) for r in rows}
        return sorted(n for n in names if not n.startswith("__bsql_"))

    def table_columns(self, table: str) -> list[tuple[str, str]]:
        """Columns with their Spark types (``string``, ``bigint``, ``decimal(10,2)``)."""
        _, rows = self.run_native(f"DESCRIBE TABLE {backtick(table)}")
        out = []
        for r in rows:
            col = str(r[0] or "")
            if not col or col.startswith("#"):  # partition / detail sections follow
                break
            out.append((col, str(r[1] or "")))
        return out

    def columns(self, table: str) -> list[str]:
        return [c for c, _ in self.table_columns(table)]

    def column_names(self, table: str) -> set[str] | None:
        """Lower-case column names of a table or view of the session (None: no such one,
        e.g. a CTE), for the SELECT aliases the translation inlines (Spark's WHERE does not
        see them; SQLite's does)."""
        found = self.column_types(table)
        return {c.lower() for c in found} if found is not None else None

    def column_types(self, table: str) -> dict[str, str] | None:
        """Columns of a table or view of the session with their Spark types (None: no such
        one), for SQLite's typing in the translation (blendsql.db.sqlite_compat), cached."""
        key = table.lower()
        if key not in self._all_columns:
            if not self.spark.catalog.tableExists(table):
                return None  # not cached: it may be created later
            self._all_columns[key] = dict(self.table_columns(table)) or None
        return self._all_columns[key]

    def close(self) -> None:
        """Drop the views made from the user's DataFrames; the session stays the user's."""
        if self._closed:
            return
        with self._lock:
            self._drop_registered()
            self._closed = True


def _plan_nodes(tree: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(class name, node) of every node of a plan's JSON (``TreeNode.toJSON``):
    operators, their expressions and the plans of subqueries inside them."""
    if isinstance(tree, list):
        for item in tree:
            yield from _plan_nodes(item)
    elif isinstance(tree, dict):
        cls = tree.get("class")
        if isinstance(cls, str):
            yield cls, tree
        for value in tree.values():
            yield from _plan_nodes(value)


def _name_parts(text: Any) -> list[str]:
    """A multi-part name as ``toJSON`` writes it (``"[text, /etc/hostname]"``)."""
    if isinstance(text, list):
        return [str(t) for t in text]
    if not isinstance(text, str):
        return []
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    return inner.split(", ") if inner else []


class _Unbindable(ValueError):
    """A parameter value Spark cannot take (named for :meth:`SparkBackend._bind_error`)."""

    def __init__(self, name: str, what: str) -> None:
        super().__init__(what)
        self.name = name
        self.what = what


def _check_binds(binds: Any) -> None:
    """Refuse in Python what would fail inside py4j with an unreadable error: integers
    beyond 64 bits, text with a lone surrogate."""
    if not binds:
        return
    items = (binds.items() if isinstance(binds, Mapping)
             else ((f"?{i + 1}", v) for i, v in enumerate(binds)))
    for name, v in items:
        if isinstance(v, int) and not isinstance(v, bool) and not _INT64[0] <= v <= _INT64[1]:
            raise _Unbindable(str(name), f"an integer beyond 64 bits: {v}")
        if isinstance(v, str) and not encodes_utf8(v):
            raise _Unbindable(str(name), f"text with a lone surrogate: {v!r}")


def _decimals(values: list[Any]) -> tuple[Any, list[Any]]:
    """A DECIMAL type holding every value (integers beyond 64 bits, ``Decimal``s)."""
    from pyspark.sql import types as T

    nums = [decimal.Decimal(v) if isinstance(v, int) else v for v in values]
    whole = scale = 0
    for v in nums:
        if v is None:
            continue
        sign, digits, exponent = v.as_tuple()
        if not isinstance(exponent, int):
            raise ExecutionError(f"Spark cannot store an ingredient's output ({v})",
                                 hint=INGREDIENT_VALUE_HINT)
        whole = max(whole, len(digits) + exponent)
        scale = max(scale, -exponent)
    if whole > 38:
        raise ExecutionError("Spark cannot store an ingredient's output (a number of more "
                             "than 38 digits)", hint=INGREDIENT_VALUE_HINT)
    return T.DecimalType(38, min(scale, 38 - whole)), nums


def _session_of(frames: dict[Any, Any]) -> Any:
    """The one Spark session every DataFrame of the dict belongs to."""
    if not frames:
        raise ExecutionError("no DataFrames given", hint="pass {'name': spark_dataframe}")
    sessions = []
    for key, value in frames.items():
        if not is_spark_dataframe(value):
            raise ExecutionError(
                f"table {key!r} is a {type(value).__name__}, not a Spark DataFrame",
                hint="a dict with Spark DataFrames must hold Spark DataFrames only (of one "
                "session); pandas / polars frames go in a dict of their own")
        sessions.append(value.sparkSession)
    if any(s is not sessions[0] for s in sessions):
        raise ExecutionError("the DataFrames belong to different Spark sessions",
                             hint="create them all from one SparkSession")
    return sessions[0]
