"""Which functions a user statement may call: one allow-list per backend.

Why allow-lists: a read-only session must not let a query read a file of
the machine (DuckDB's ``read_text``, PostgreSQL's ``pg_read_file``, Spark's
``text.`/etc/hostname```), call Java (Spark's ``reflect``), load code
(SQLite's ``load_extension``), hand SQLite a raw pointer
(``fts3_tokenizer``: the next read of the FTS table crashes the process)
or change the server or the session (``set_config``, ``pg_terminate_backend``,
advisory locks). Each backend's catalogue lists hundreds of functions and
each release adds more, so a list of the known-bad ones is never finished;
what a query may call is therefore an *allow*-list: the backend's ordinary
scalar, aggregate and window functions, full-text search, and the engine's
own functions. A function no rule allows — one added by a later release
included — is refused by name with :class:`UnsafeQueryError`.

How names are read: never from the query's text. SQLite reports each
function to the authorizer by its real name while it prepares the
statement; DuckDB serialises its own parse tree (``json_serialize_sql``);
Spark's own parser gives the unresolved plan; PostgreSQL's statements are
read by sqlglot's parser (its function nodes and table references). So
quoting, case, comments and whitespace do not hide a call, and a string
literal that spells a function name is data.

What is here: the data of each backend's rules (names, families, catalogue
categories) and the pure functions that apply them to a catalogue; each
backend module reads its catalogue once per connection (cached) and checks
its statements (``blendsql/db/database.py``, ``duck.py``, ``postgres.py``,
``spark.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from blendsql.db.backend import short
from blendsql.errors import UnsafeQueryError

#: the hint of every refusal
HINT = ("a blendsql session allows the backend's ordinary functions (text, "
        "number, date, JSON, aggregate and window functions), full-text search and "
        "the engine's own functions; calls that read files, run code, or change the "
        "server or the session are refused. Run it on your own connection, outside "
        "blendsql")


def refusal(backend: str, what: str, sql: str) -> UnsafeQueryError:
    """The error for a call (or table) the allow-list of ``backend`` refuses; ``what``:
    "calls f() (why)", "reads ..." """
    return UnsafeQueryError(
        f"refused to run a statement that {what}, which a blendsql session on {backend} "
        f"does not allow:\n  {short(sql)}", hint=HINT)


@dataclass(frozen=True)
class Verdict:
    """Why one name is allowed or refused (for the catalogue sweep and for errors)."""

    name: str
    allowed: bool
    why: str


# ------------------------------------------------------------------------------ SQLite

#: SQLite's ordinary functions (core, date, math, aggregate, window, JSON, FTS3/4/5
#: auxiliary functions and MATCH): the only library functions a user statement may call
SQLITE_ORDINARY = frozenset({
    # core scalar
    "abs", "changes", "char", "coalesce", "concat", "concat_ws", "format", "glob", "hex",
    "ifnull", "iif", "if", "instr", "last_insert_rowid", "length", "like", "likelihood",
    "likely", "lower", "ltrim", "max", "min", "nullif", "octet_length", "printf", "quote",
    "random", "randomblob", "replace", "round", "rtrim", "sign", "soundex",
    "sqlite_compileoption_get", "sqlite_compileoption_used", "sqlite_offset",
    "sqlite_source_id", "sqlite_version", "substr", "substring", "total_changes", "trim",
    "typeof", "unhex", "unicode", "unlikely", "upper", "zeroblob", "subtype",
    # date and time
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
    "current_date", "current_time", "current_timestamp",
    # math
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "ceiling", "cos",
    "cosh", "degrees", "exp", "floor", "ln", "log", "log10", "log2", "mod", "pi", "pow",
    "power", "radians", "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
    # aggregate
    "avg", "count", "group_concat", "string_agg", "sum", "total", "median", "percentile",
    "percentile_cont", "percentile_disc",
    # window
    "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value",
    # JSON operators (the json_* / jsonb_* functions: SQLITE_ORDINARY_PREFIXES)
    "->", "->>",
    # full-text search: MATCH and the auxiliary functions of FTS3/4 and FTS5
    "match", "bm25", "highlight", "snippet", "offsets", "matchinfo", "fts5_source_id",
    # the REGEXP operator calls regexp() when an application registered one
    "regexp",
})
#: families of ordinary SQLite functions, by prefix
SQLITE_ORDINARY_PREFIXES = ("json",)
#: the engine's own functions (collectors, bound lookups): ``__bsql_`` names
ENGINE_PREFIX = "__bsql_"
#: functions of SQLite's library (and its usual loadable extensions) that are not
#: ordinary, named so that a connection whose catalogue cannot be read still refuses
#: them: pointer primitives (``fts3_tokenizer``, ``fts5``), extension loading, FTS
#: index writes (``optimize``), r-tree debugging (``rtreenode``...), the error log,
#: the shell's file functions (``readfile``, ``writefile``, ``edit``, ``fsdir``)
SQLITE_KNOWN_LIBRARY = frozenset({
    "fts3_tokenizer", "fts5", "load_extension", "optimize", "rtreenode", "rtreedepth",
    "rtreecheck", "sqlite_log", "readfile", "writefile", "edit", "fsdir", "lsdir",
    "lsmode", "sqlite_dbpage", "sqlite_dbdata", "sqlite_dbptr", "zipfile", "sqlar_compress",
    "sqlar_uncompress", "fts3_exprtest", "fts3_exprtest_rebalance", "sqlite_rename_column",
    "sqlite_rename_table", "sqlite_rename_test", "sqlite_drop_column", "sqlite_rename_quotefix",
    "unistr",
})


def sqlite_ordinary(name: str) -> bool:
    """True for one of SQLite's ordinary functions (see :data:`SQLITE_ORDINARY`)."""
    return name in SQLITE_ORDINARY or name.startswith(SQLITE_ORDINARY_PREFIXES)


def sqlite_verdict(name: str, library: frozenset[str]) -> Verdict:
    """May a user statement call the SQLite function ``name`` (lower case)?

    ``library``: every function of the SQLite library in use (its
    ``pragma_function_list`` on a fresh connection, plus
    :data:`SQLITE_KNOWN_LIBRARY`). Allowed: the ordinary ones, the engine's
    (``__bsql_`` names) and the application's own — a function outside the
    library was registered by the program that owns the connection
    (``create_function``), as the engine registers its lookups. Refused:
    every other library function, today's and a later release's.
    """
    if sqlite_ordinary(name):
        return Verdict(name, True, "ordinary")
    if name.startswith(ENGINE_PREFIX):
        return Verdict(name, True, "engine")
    if name in library or name in SQLITE_KNOWN_LIBRARY:
        return Verdict(name, False, "not an ordinary SQLite function")
    return Verdict(name, True, "registered by the application")


# ------------------------------------------------------------------------------ DuckDB

#: DuckDB table functions a query may read from: generators and the catalogue
DUCKDB_TABLE_FUNCTIONS = frozenset({
    "range", "generate_series", "unnest", "repeat", "repeat_row", "json_each", "json_tree",
    "regexp_split_to_table", "pg_timezone_names", "icu_calendar_names",
    "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_schemas",
    "duckdb_sequences", "duckdb_tables", "duckdb_types", "duckdb_views",
    "pragma_table_info", "pragma_show", "pragma_version", "pragma_collations",
})
#: DuckDB's file readers: allowed only on a file the session itself opened
DUCKDB_FILE_READERS = frozenset({
    "read_csv", "read_csv_auto", "read_parquet", "parquet_scan", "read_json",
    "read_json_auto", "read_ndjson", "read_ndjson_auto", "read_json_objects",
    "read_json_objects_auto", "read_ndjson_objects",
})
#: function kinds (``duckdb_functions().function_type``) a query may call as a value
DUCKDB_VALUE_KINDS = frozenset({"scalar", "aggregate", "macro"})
#: built-in value functions that are no ordinary function: the process's environment,
#: the configuration and variables, the log, running serialised SQL, catalogue internals
DUCKDB_NOT_ORDINARY = frozenset({
    "getenv", "current_setting", "getvariable", "write_log", "json_execute_serialized_sql",
    "json_serialize_plan", "stats", "current_query", "current_connection_id",
    "current_transaction_id", "current_query_id", "txid_current", "nextval", "currval",
    "setseed", "parse_duckdb_log_message", "finalize", "combine", "alias",
})
#: built-in functions marked with side effects that are ordinary all the same
DUCKDB_HARMLESS_SIDE_EFFECTS = frozenset({
    "random", "uuid", "gen_random_uuid", "uuidv4", "uuidv7", "error",
})
#: with ``allow_writes=True`` a statement may also advance a sequence
SEQUENCE_FUNCTIONS = frozenset({"nextval", "currval", "setval", "setseed"})


def duckdb_verdict(name: str, kind: str, internal: bool, side_effects: bool,
                   schema: str) -> Verdict:
    """May a query call this ``duckdb_functions()`` row as a value (scalar / aggregate /
    window / macro)? Built-in ones of DuckDB's own schemas without side effects, but
    :data:`DUCKDB_NOT_ORDINARY`; FTS's ``match_bm25`` macros (``fts_main_<table>``);
    functions the application created (not internal). Table functions are decided by
    :data:`DUCKDB_TABLE_FUNCTIONS` (see :func:`duckdb_table_verdict`)."""
    if kind not in DUCKDB_VALUE_KINDS:
        return Verdict(name, False, f"a {kind} function")
    if schema.startswith("fts_main_"):
        return Verdict(name, name in ("match_bm25", "tokenize", "stem"), "full-text search")
    if not internal:
        return Verdict(name, True, "created by the application")
    if name in DUCKDB_NOT_ORDINARY:
        return Verdict(name, False, "not an ordinary DuckDB function")
    if side_effects and name not in DUCKDB_HARMLESS_SIDE_EFFECTS:
        return Verdict(name, False, "has side effects")
    if schema not in ("main", "pg_catalog"):
        return Verdict(name, False, f"in schema {schema}")
    return Verdict(name, True, "ordinary")


# ------------------------------------------------------------------------------ PostgreSQL

#: volatile PostgreSQL functions that are ordinary all the same (``pg_sleep*``: the
#: session's time limit stops a statement that sleeps past it)
PG_ORDINARY_VOLATILE = frozenset({
    "random", "random_normal", "clock_timestamp", "timeofday", "gen_random_uuid",
    "uuid_generate_v4", "pg_sleep", "pg_sleep_for", "pg_sleep_until",
})
#: non-volatile catalogue functions that are not ordinary: settings and the transaction's
#: identity (``txid_current`` assigns one), the server's files and addresses
PG_NOT_ORDINARY = frozenset({
    "current_setting", "set_config", "txid_current", "txid_current_if_assigned",
    "pg_current_xact_id", "pg_current_xact_id_if_assigned", "txid_current_snapshot",
    "pg_current_snapshot", "pg_export_snapshot", "pg_current_wal_lsn",
    "pg_current_wal_insert_lsn", "pg_current_wal_flush_lsn", "inet_server_addr",
    "inet_server_port", "pg_conf_load_time", "pg_postmaster_start_time",
    "pg_backend_pid", "pg_blocking_pids", "pg_safe_snapshot_blocking_pids",
    "pg_jit_available", "pg_notification_queue_usage", "pg_listening_channels",
    "pg_trigger_depth", "pg_get_backend_memory_contexts", "pg_log_backend_memory_contexts",
    "nextval", "currval", "lastval", "setval",
})
#: families of catalogue functions that are not ordinary whatever their volatility: the
#: server's files, large objects, statistics of other sessions, locks, remote links
PG_NOT_ORDINARY_PREFIXES = ("pg_read_", "pg_ls_", "pg_stat_", "pg_file", "lo_", "dblink",
                            "pg_advisory", "pg_try_advisory", "pg_logical_", "pg_replication_",
                            "pg_create_", "pg_drop_", "pg_wal_", "pg_promote", "pg_reload",
                            "pg_rotate", "pg_terminate", "pg_cancel")
#: PostgreSQL's catalogue schemas: functions there are the server's own
PG_SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})


def pg_verdict(name: str, schema: str, kind: str, volatility: str, extension: bool,
               set_returning: bool) -> Verdict:
    """May a query call this ``pg_proc`` row? The server's own (``pg_catalog``) plain
    functions, aggregates and window functions that are immutable or stable (so they
    change nothing), or volatile but in :data:`PG_ORDINARY_VOLATILE`, but
    :data:`PG_NOT_ORDINARY`; the user's own functions (a user schema, not an
    extension's: what the database's owner wrote, as a view is). Refused: procedures,
    every other volatile function (files, large objects, settings, signals, locks,
    sleeping, ``dblink``) and any function an extension installed."""
    if kind == "p":
        return Verdict(name, False, "a procedure")
    if extension:
        return Verdict(name, False, "installed by an extension")
    if schema not in PG_SYSTEM_SCHEMAS:
        return Verdict(name, True, "the database's own")
    if name in PG_NOT_ORDINARY or name.startswith(PG_NOT_ORDINARY_PREFIXES):
        return Verdict(name, False, "not an ordinary PostgreSQL function")
    if volatility == "v" and name not in PG_ORDINARY_VOLATILE:
        return Verdict(name, False, "volatile")
    if name.startswith("pg_") and set_returning:
        return Verdict(name, False, "a server catalogue function")
    return Verdict(name, True, "ordinary")


# ------------------------------------------------------------------------------ Spark

#: Spark's groups of built-in functions (``ExpressionInfo.getGroup``) whose members
#: are ordinary; ``misc_funcs`` (Java calls, the session) are allowed by name only
SPARK_GROUPS = frozenset({
    "agg_funcs", "array_funcs", "bitwise_funcs", "collection_funcs", "conditional_funcs",
    "conversion_funcs", "csv_funcs", "datetime_funcs", "generator_funcs", "hash_funcs",
    "json_funcs", "lambda_funcs", "map_funcs", "math_funcs", "predicate_funcs",
    "string_funcs", "struct_funcs", "url_funcs", "window_funcs", "variant_funcs",
    "xml_funcs", "sketch_funcs", "st_funcs", "vector_funcs",
})
#: ordinary members of ``misc_funcs`` and functions Spark lists without a group (the
#: Avro / Protobuf groups are not ordinary: ``from_protobuf`` reads a descriptor file)
SPARK_ORDINARY = frozenset({
    "current_catalog", "current_database", "current_schema", "current_path", "current_user",
    "user", "hmac",
    "session_user", "version", "typeof", "uuid", "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "input_file_block_start",
    "input_file_block_length", "assert_true", "raise_error", "equal_null", "coalesce",
    "nullif", "nvl", "nvl2", "ifnull", "if", "isnull", "isnotnull", "isnan", "nanvl",
    "rand", "randn", "random", "try_aes_decrypt", "aes_encrypt", "aes_decrypt",
    "bitmap_bit_position", "bitmap_bucket_number", "bitmap_count", "bitmap_construct_agg",
    "bitmap_or_agg", "hll_sketch_agg", "hll_union_agg", "hll_sketch_estimate", "hll_union",
    "between", "case", "when", "and", "or", "not", "in", "like", "ilike", "rlike", "regexp",
    "cast", "try_cast", "count", "sum", "avg", "min", "max", "struct", "named_struct",
    "stack", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
    "posexplode_outer", "range", "grouping", "grouping_id", "rank", "dense_rank",
    "row_number", "ntile", "percent_rank", "cume_dist", "lag", "lead", "nth_value",
    "first_value", "last_value", "first", "last", "any_value",
})
#: functions that call any Java method: refused whatever their group
SPARK_JAVA_CALLS = frozenset({"reflect", "java_method", "try_reflect"})
#: the data source formats Spark reads a path as a table of (``text.`/etc/hostname```)
SPARK_FILE_FORMATS = frozenset({
    "text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "xml", "delta",
    "jdbc", "libsvm", "image", "hive", "iceberg", "noop", "console", "file",
})


#: Spark's table-valued functions a query may read from: generators
SPARK_TABLE_FUNCTIONS = frozenset({
    "range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
    "posexplode_outer", "stack", "json_tuple", "variant_explode", "variant_explode_outer",
})
#: the operators of a query's unparsed plan (Spark's parser, ``plans.logical``): any
#: other one (``ScriptTransformation``: ``TRANSFORM .. USING 'cmd'`` runs a program) is
#: refused
SPARK_PLAN_NODES = frozenset({
    "Project", "Filter", "Aggregate", "Join", "Sort", "GlobalLimit", "LocalLimit", "Limit",
    "Offset", "Tail", "Union", "Intersect", "Except", "Distinct", "Deduplicate",
    "SubqueryAlias", "OneRowRelation", "LocalRelation", "UnresolvedWith", "CTERelationDef",
    "CTERelationRef", "WithWindowDefinition", "Window", "Generate", "UnresolvedHint",
    "Sample", "Pivot", "Unpivot", "LateralJoin", "RepartitionByExpression", "Repartition",
    "RebalancePartitions", "Expand", "Range", "WithCTE",
})
#: the parser's unresolved nodes a query may hold (``catalyst.analysis``): names resolved
#: later are checked here (functions, relations); ``PlanWithUnresolvedIdentifier``
#: (``IDENTIFIER(:param)``, a name known only once bound) is not among them
SPARK_UNRESOLVED_NODES = frozenset({
    "UnresolvedFunction", "UnresolvedAttribute", "UnresolvedAlias", "UnresolvedStar",
    "UnresolvedRelation", "UnresolvedInlineTable", "UnresolvedTableValuedFunction",
    "UnresolvedGenerator", "UnresolvedHaving", "UnresolvedOrdinal", "UnresolvedExtractValue",
    "UnresolvedSubqueryColumnAliases", "UnresolvedTVFAliases", "UnresolvedRegex",
    "UnresolvedSeed", "UnresolvedOuterReference", "UnresolvedNamedLambdaVariable",
    "UnresolvedStarExceptOrReplace", "UnresolvedStarWithColumns", "NamedParameter",
    "PosParameter", "UnresolvedTranspose",
})


def spark_verdict(name: str, group: str | None, builtin: bool) -> Verdict:
    """May a query call the Spark function ``name`` (lower case)? Built-in functions of
    the ordinary :data:`SPARK_GROUPS`, and :data:`SPARK_ORDINARY` by name; never a Java
    call (:data:`SPARK_JAVA_CALLS`); functions the session registered (a temporary or
    catalogue function, not built in) are the application's own."""
    if name in SPARK_JAVA_CALLS:
        return Verdict(name, False, "calls any Java method")
    if not builtin:
        return Verdict(name, True, "registered by the application")
    if name in SPARK_ORDINARY:
        return Verdict(name, True, "ordinary")
    if group in SPARK_GROUPS:
        return Verdict(name, True, group or "")
    return Verdict(name, False, f"not an ordinary Spark function ({group or 'no group'})")


# ------------------------------------------------------------------------------ sqlglot

def sqlglot_calls(tree: exp.Expr, dialect: str) -> Iterator[tuple[str, exp.Func]]:
    """(name as the backend reads it, node) of each function call in a parsed statement.

    An unknown function (``exp.Anonymous``) is named as written; a function sqlglot
    knows is named by the name the dialect writes it with (``exp.Lower`` ->
    ``lower``); a node sqlglot writes as syntax (``CAST``, ``CASE``, ``EXTRACT``, an
    operator) has no name and is skipped, its arguments being calls of their own.
    """
    for node in tree.find_all(exp.Func):
        if isinstance(node, exp.Anonymous):
            yield str(node.name).lower(), node
            continue
        name = _written_name(type(node), dialect)
        if name:
            yield name, node


_WRITTEN: dict[tuple[type[exp.Func], str], str] = {}


def _written_name(cls: type[exp.Func], dialect: str) -> str:
    """The function name ``dialect`` writes a sqlglot function class with ('' for syntax).

    Why sqlglot's own generator: the text the backend runs is the one sqlglot wrote
    (the translation), so the name it writes is the name the backend resolves.
    """
    key = (cls, dialect)
    if key in _WRITTEN:
        return _WRITTEN[key]
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import TokenType

    name = ""
    try:
        node = cls(**{a: exp.column(f"a{i}") for i, a in enumerate(
            k for k, required in cls.arg_types.items() if required)})
        text = node.sql(dialect=dialect)
        tokens = Dialect.get_or_raise(dialect).tokenize(text)
        if (len(tokens) > 1 and tokens[1].token_type == TokenType.L_PAREN
                and tokens[0].token_type in (TokenType.VAR, TokenType.IDENTIFIER)):
            name = tokens[0].text.lower()
    except Exception:  # noqa: BLE001 - a class that cannot be built empty: its args count
        name = ""
    _WRITTEN[key] = name
    return name
