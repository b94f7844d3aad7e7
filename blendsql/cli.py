"""``blendsql`` command line: a thin layer over the Python API.

    blendsql run example "SELECT name FROM w WHERE {{LLMMap('Is this a pitcher?', w.position)}}"
    blendsql run my.db @query.sql --base-url http://localhost:8080/v1 --model-name qwen --trace
    blendsql schema example
    blendsql explain example "SELECT name FROM w WHERE {{LLMMap('Is this a pitcher?', w.position)}}"

Errors a user can fix (``BlendSQLError``) print as a message and a hint, exit
code 2, no traceback. The model flags come from the registered model providers
(:mod:`blendsql.models.providers`): ``--model`` (a GGUF file) or ``--base-url``
(an OpenAI-compatible server), else ``BLENDSQL_MODEL`` / ``BLENDSQL_BASE_URL``,
else the embedded default (loaded only if needed); ``--provider NAME`` and
``--model-option NAME=VALUE`` reach any provider, a plugin's included.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sqlite3
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from blendsql import __version__
from blendsql.errors import BlendSQLError, ExecutionError, IngredientError, ModelOptionError
from blendsql.models.base import Model
from blendsql.models.providers import (
    DEFAULT_PROVIDER,
    Provider,
    ProviderOption,
    get_provider,
    providers,
)
from blendsql.option_types import from_text

EXIT_USER_ERROR = 2
EXAMPLE = "example"
PROVIDER_ENV = "BLENDSQL_PROVIDER"


# ---------------------------------------------------------------- arguments


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (separate so tests and docs can inspect it)."""
    ap = argparse.ArgumentParser(
        prog="blendsql",
        description="SQLite SQL with language-model ingredients.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="execute a BlendSQL query and print the result")
    run.add_argument("db", help="SQLite file, a CSV file (one table named after it), or 'example' "
                     "for the bundled HybridQA demo database")
    run.add_argument("query", help="query text, '@file.sql' to read a file, or '-' for stdin")
    run.add_argument("--params", metavar="JSON",
                     help="query parameters: a JSON list for '?' or an object for ':name'")
    run.add_argument("--ingredient", action="append", default=[], metavar="MODULE:NAME",
                     help="register a custom ingredient class, from an importable module "
                     "or a .py file (repeatable)")
    run.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                     help="an execution option, e.g. lazy=false, timeout=30, max_query_chars=None "
                     "(repeatable; names and types as in blendsql.options)")
    run.add_argument("--trace", action="store_true", help="print the execution trace")
    run.add_argument("--no-cache", action="store_true", help="bypass the persistent model cache")
    run.add_argument("--format", choices=("table", "csv", "json"), default="table",
                     help="result format (csv/json print the summary on stderr)")
    run.add_argument("--max-rows", type=int, default=100, metavar="N",
                     help="rows shown in table format (default 100; 0 = all)")
    prog = run.add_mutually_exclusive_group()
    prog.add_argument("--progress", dest="progress", action="store_true", default=None,
                      help="show a progress bar on stderr (default: when stdout is a terminal)")
    prog.add_argument("--no-progress", dest="progress", action="store_false")
    add_model_arguments(run)

    explain = sub.add_parser("explain", help="show a query's plan and estimated cost "
                             "(values, model calls, prompt tokens) without calling a model; "
                             "--analyze runs it and adds the actual figures")
    explain.add_argument("db", help="SQLite file, CSV file, or 'example'")
    explain.add_argument("query", help="query text, '@file.sql' to read a file, or '-' for stdin")
    explain.add_argument("--params", metavar="JSON",
                         help="query parameters: a JSON list for '?' or an object for ':name'")
    explain.add_argument("--ingredient", action="append", default=[], metavar="MODULE:NAME",
                         help="register a custom ingredient class (repeatable)")
    explain.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                         help="an option, as for run (repeatable)")
    explain.add_argument("--analyze", action="store_true",
                         help="run the plan (calling the model) and show each step's "
                         "estimate beside its actual values, calls, tokens, rows and time, "
                         "as PostgreSQL's EXPLAIN ANALYZE")
    add_model_arguments(explain)

    schema = sub.add_parser("schema", help="list the tables and columns of a database")
    schema.add_argument("db", help="SQLite / DuckDB file, Parquet / CSV file, postgresql:// URL, "
                                   "or 'example'")
    schema.add_argument("--all", action="store_true",
                        help="also show metadata tables (_columns, _tables)")
    _add_chat_parser(sub)
    _add_serve_parser(sub)
    sub.add_parser("models", help="list the model providers, their options and the model "
                   "names --model accepts")
    return ap


def _add_chat_parser(sub: Any) -> None:
    """``blendsql chat DB``: a conversation in the terminal (reads stdin, so it can be piped)."""
    chat = sub.add_parser("chat", help="ask questions in plain language, one per line "
                          "(:explain, :correct FEEDBACK, :quit)")
    chat.add_argument("db", help="SQLite file, CSV file, or 'example'")
    chat.add_argument("--no-acts", action="store_true",
                      help="skip the model's dialogue-act choice: every turn that is not an obvious "
                      "greeting / thanks / goodbye is a question")
    chat.add_argument("--no-cache", action="store_true", help="bypass the persistent model cache")
    add_model_arguments(chat)


def _add_serve_parser(sub: Any) -> None:
    """``blendsql serve DB``: the local, read-only web page (needs the ``web`` extra)."""
    serve = sub.add_parser("serve", help="a local web page: query box, result table, trace, "
                           "plain-language questions (read-only)")
    serve.add_argument("db", help="SQLite file, CSV file, or 'example'")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: only this machine; "
                       "::1 for IPv6)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help="time limit of one query (default 60; questions get 5x)")
    serve.add_argument("--ingredient", action="append", default=[], metavar="MODULE:NAME",
                       help="register a custom ingredient class (repeatable)")
    serve.add_argument("--no-cache", action="store_true", help="bypass the persistent model cache")
    serve.add_argument("--no-acts", action="store_true",
                       help="conversation: skip the model's dialogue-act choice")
    add_model_arguments(serve)


def add_model_arguments(command: argparse.ArgumentParser) -> None:
    """The model flags of ``command``, built from the registered providers' options.

    ``--provider`` and ``--model-option`` reach every provider; each option that
    declares a ``flag`` becomes one (shared when providers declare the same flag).
    A plugin's flag that collides with one of the command's own is left out with a
    warning: its option stays reachable through ``--model-option``.
    """
    registry = providers()
    group = command.add_argument_group(
        "model (default: the embedded SmolLM2, loaded only if needed)")
    group.add_argument("--provider", metavar="NAME",
                       help=f"model provider: {', '.join(registry)} (default: chosen by the "
                       f"flags below) [env {PROVIDER_ENV}]")
    group.add_argument("--model-option", action="append", default=[], metavar="NAME=VALUE",
                       help="an option of the provider, e.g. n_ctx=4096 (repeatable)")
    for flag, (option, help_text) in model_flags(registry).items():
        try:
            group.add_argument(f"--{flag}", dest=option.dest, metavar=option.metavar,
                               help=help_text)
        except argparse.ArgumentError:
            warnings.warn(f"model flag --{flag} is taken by the {command.prog} command; "
                          f"use --model-option {option.name}=VALUE", RuntimeWarning,
                          stacklevel=2)


def model_flags(registry: dict[str, Provider]) -> dict[str, tuple[ProviderOption, str]]:
    """Each model flag with the option it sets and its help (env and stand-ins included)."""
    flags: dict[str, tuple[ProviderOption, str]] = {}
    for provider in registry.values():
        for option in provider.options:
            if option.flag and option.flag not in flags:
                flags[option.flag] = (option, _flag_help(provider, option, registry))
    return flags


def _flag_help(provider: Provider, option: ProviderOption,
               registry: dict[str, Provider]) -> str:
    text = f"{option.help} ({provider.name})"
    if option.env:
        text += f" [env {', '.join(option.env)}]"
    for other in registry.values():
        for o in other.options:
            if o.fallback_flag == option.flag and o.flag:
                text += f"; also {other.name}'s {o.label or o.name} when --{o.flag} is absent"
    return text


# ---------------------------------------------------------------- resolution


def resolve_db(db: str) -> Path:
    """``example`` -> the bundled database; otherwise an existing SQLite file."""
    if db == EXAMPLE and not Path(db).exists():
        from blendsql.db.loaders import example_db_path

        return example_db_path()
    path = Path(db).expanduser()
    if not path.is_file():
        raise ExecutionError(
            f"database file not found: {db}",
            hint="give the path of a SQLite file, or 'example' for the bundled demo database",
        )
    return path


def open_source(db: str) -> Path | sqlite3.Connection | str:
    """The database to run on: a SQLite path, or a CSV / TSV file loaded in memory.

    A CSV becomes one table named after the file (``players.csv`` -> ``players``)
    with sanitised column names and inferred types, like the HybridQA loader.
    A ``postgresql://`` URL is passed on as it is; a ``.duckdb`` / ``.parquet``
    path opens DuckDB (see ``blendsql.db.backend.open_database``).
    """
    if db.split("://", 1)[0] in ("postgresql", "postgres"):
        return db
    path = resolve_db(db)
    if path.suffix.lower() not in (".csv", ".tsv"):
        return path
    import pandas as pd

    from blendsql.db.loaders import from_frames, sanitize_names

    try:
        df = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",", dtype=str,
                         keep_default_na=False, na_values=[""])  # only empty cells are NULL
    except (ValueError, OSError) as e:
        raise ExecutionError(f"cannot read {path}: {e}", hint="is it a CSV file with a header row?") from e
    table = sanitize_names([path.stem])[0]
    return from_frames({table: df}, None, ":memory:")


def read_query(query: str, stdin: TextIO | None = None) -> str:
    """The query text: literal, ``@file`` or ``-`` (stdin)."""
    if query == "-":
        return (stdin or sys.stdin).read()
    if query.startswith("@"):
        path = Path(query[1:]).expanduser()
        if not path.is_file():
            raise ExecutionError(f"query file not found: {path}",
                                 hint="'@' reads the query from a file; quote a literal '@'")
        return path.read_text(encoding="utf-8")
    return query


def parse_params(text: str | None) -> list[Any] | dict[str, Any] | None:
    """``--params`` JSON: a list binds ``?`` in order, an object binds ``:name``."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ExecutionError(f"--params is not valid JSON: {e.msg}",
                             hint='e.g. --params \'["Pitcher", 3]\' or \'{"pos": "Pitcher"}\'') from e
    if not isinstance(value, (list, dict)):
        raise ExecutionError("--params must be a JSON list or object",
                             hint='e.g. --params \'["Pitcher"]\' for one ? placeholder')
    return value


def resolve_model(args: argparse.Namespace, env: dict[str, str] | None = None) -> Model | None:
    """The model the flags and environment ask for, or None for the engine's default.

    The provider is ``--provider`` (or ``BLENDSQL_PROVIDER``), else the provider with
    the highest priority whose selecting flags are given (an endpoint's ``--base-url``
    wins over a GGUF ``--model``); ``--model-option`` alone configures the default
    provider. Flags win over environment variables.
    """
    env = dict(os.environ if env is None else env)
    provider = choose_provider(args, env)
    extra = getattr(args, "model_option", None) or []
    if provider is None:
        if not extra:
            return None
        provider = get_provider(DEFAULT_PROVIDER)
    values = {**provider_values(provider, args, env), **model_options(provider, extra)}
    return provider.create(**values)


def choose_provider(args: argparse.Namespace, env: Mapping[str, str]) -> Provider | None:
    """``--provider`` / ``BLENDSQL_PROVIDER``, else the selected provider of highest priority."""
    named = getattr(args, "provider", None) or env.get(PROVIDER_ENV)
    if named:
        return get_provider(named)
    chosen = [p for p in providers().values()
              if any(_given(p.option(name), args, env) is not None for name in p.selected_by)]
    return max(chosen, key=lambda p: p.priority, default=None)


def _given(option: ProviderOption | None, args: argparse.Namespace,
           env: Mapping[str, str]) -> str | None:
    """An option's text: its flag, else its environment variables, else its stand-in flag."""
    if option is None:
        return None
    value = getattr(args, option.dest, None) if option.dest else None
    for var in option.env:
        value = value or env.get(var) or None
    if value is None and option.fallback_flag:
        value = getattr(args, option.fallback_flag.replace("-", "_"), None)
    return value


def provider_values(provider: Provider, args: argparse.Namespace,
                    env: Mapping[str, str]) -> dict[str, Any]:
    """The provider's options given by flags or environment, typed."""
    values: dict[str, Any] = {}
    for option in provider.options:
        text = _given(option, args, env)
        if text is not None:
            values[option.name] = _typed(option, text, f"--{option.flag or option.name}")
    return values


def model_options(provider: Provider, specs: Sequence[str]) -> dict[str, Any]:
    """``--model-option NAME=VALUE`` flags, typed by the provider's declared options."""
    values: dict[str, Any] = {}
    for spec in specs:
        name, sep, text = (part.strip() for part in spec.partition("="))
        if not sep or not name:
            raise ModelOptionError(f"bad --model-option {spec!r}", option=name,
                                   hint="write --model-option NAME=VALUE, e.g. n_ctx=4096")
        option = provider.option(name)
        if option is None and not provider.passthrough:
            values[name] = text  # refused with a did-you-mean by Provider.check
        elif option is None:
            values[name] = from_text(text, (object,))
        else:
            values[name] = _typed(option, text, f"--model-option {name}")
    return values


def _typed(option: ProviderOption, text: str, where: str) -> Any:
    try:
        return from_text(text, option.types)
    except ValueError as e:
        raise ModelOptionError(f"{where}: {e}", option=option.name,
                               hint=f"{option.name}: {option.help}") from e


def load_ingredient(spec: str) -> Any:
    """``pkg.module:Name`` or ``path/file.py:Name`` -> the ingredient class or instance."""
    from blendsql.ingredients.base import Ingredient

    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise IngredientError(f"bad --ingredient {spec!r}",
                              hint="use MODULE:NAME, e.g. mypkg.ingredients:StartsWith or my.py:StartsWith")
    try:
        if module_part.endswith(".py"):
            file = Path(module_part).expanduser()
            mod_spec = importlib.util.spec_from_file_location(f"_blendsql_cli_{file.stem}", file)
            if mod_spec is None or mod_spec.loader is None or not file.is_file():
                raise FileNotFoundError(str(file))
            module = importlib.util.module_from_spec(mod_spec)
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_part)
    except (ImportError, FileNotFoundError, SyntaxError) as e:
        raise IngredientError(f"cannot load {module_part!r}: {e}",
                              hint="check the module name / file path and that it imports") from e
    obj = getattr(module, attr, None)
    ok = isinstance(obj, Ingredient) or (isinstance(obj, type) and issubclass(obj, Ingredient))
    if not ok:
        raise IngredientError(f"{spec!r} is not an ingredient",
                              hint="name a subclass of MapIngredient / QAIngredient / JoinIngredient ...")
    return obj


# ---------------------------------------------------------------- progress


class ProgressBar:
    """A one-line text bar on a stream, redrawn in place; the CLI side of ``progress=``.

    The engine calls ``bar(ingredient_name, done, total)`` as values finish.
    Redraws are throttled so a fast ingredient does not flood the terminal.
    """

    def __init__(self, stream: TextIO, width: int = 24, min_interval: float = 0.1) -> None:
        self.stream = stream
        self.width = width
        self.min_interval = min_interval
        self._last: float | None = None  # None: nothing drawn yet
        self._open = False

    def __call__(self, ingredient: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total > 0 and done >= total
        if not finished and self._last is not None and now - self._last < self.min_interval:
            return
        self._last = now
        frac = min(1.0, done / total) if total > 0 else 0.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{ingredient} [{bar}] {done}/{total}")
        self._open = True
        if finished:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """End the line (so later output starts on a fresh one)."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


# ---------------------------------------------------------------- commands


def render(smoothie: Any, fmt: str, max_rows: int) -> str:
    """The result rows as text in the requested format."""
    df = smoothie.df
    if fmt == "csv":
        return str(df.to_csv(index=False)).rstrip("\n")
    if fmt == "json":
        return str(df.to_json(orient="records", force_ascii=False))
    if not len(df.columns):
        return "(no columns)"
    if df.empty:
        return "(no rows)\n" + "  ".join(str(c) for c in df.columns)
    return str(df.to_string(index=False, max_rows=max_rows or None))


def _make_engine(db: Path | sqlite3.Connection | str, model: Any, ingredients: Sequence[Any], cache: bool,
                 progress: Any) -> Any:
    """``BlendSQL(...)``; ``progress=`` is passed only if the engine accepts it."""
    from blendsql import BlendSQL

    kwargs: dict[str, Any] = {"model": model, "ingredients": tuple(ingredients), "cache": cache}
    if progress is not None and "progress" in inspect.signature(BlendSQL).parameters:
        kwargs["progress"] = progress
    return BlendSQL(str(db) if isinstance(db, Path) else db, **kwargs)


def parse_options(specs: Sequence[str]) -> dict[str, Any]:
    """``--option NAME=VALUE`` flags -> validated execute options (typed by blendsql.options)."""
    from blendsql.errors import OptionError
    from blendsql.options import parse_option_text

    options: dict[str, Any] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise OptionError(f"bad --option {spec!r}", option=name.strip(),
                              hint="write --option NAME=VALUE, e.g. --option lazy=false")
        options[name.strip()] = parse_option_text(name.strip(), value.strip())
    return options


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO, *, model: Any = None,
            ingredients: Sequence[Any] = ()) -> int:
    """``blendsql run``: execute, print rows + summary (+ trace)."""
    db = open_source(args.db)
    query = read_query(args.query)
    params = parse_params(args.params)
    if model is None:
        model = resolve_model(args)
    extra = [load_ingredient(s) for s in args.ingredient]
    options = parse_options(getattr(args, "option", []))
    show_progress = args.progress if args.progress is not None else out.isatty()
    bar = ProgressBar(err) if show_progress else None
    engine = _make_engine(db, model, [*ingredients, *extra], not args.no_cache, bar)
    try:
        smoothie = engine.execute(query, params=params, **options)
    finally:
        if bar is not None:
            bar.close()
    print(render(smoothie, args.format, args.max_rows), file=out)
    summary_stream = out if args.format == "table" else err
    print(smoothie.summary(), file=summary_stream)
    if args.trace:
        print("Trace:", file=summary_stream)
        for i, step in enumerate(smoothie.trace, 1):
            print(f"  {i}. {step.line()}", file=summary_stream)
    return 0


def cmd_explain(args: argparse.Namespace, out: TextIO, *, model: Any = None,
                ingredients: Sequence[Any] = ()) -> int:
    """``blendsql explain``: print ``BlendSQL.plan(query)`` (no model is loaded or called);
    with ``--analyze``, run that plan and print it with each step's actual figures."""
    db = open_source(args.db)
    if args.analyze and model is None:
        model = resolve_model(args)
    engine = _make_engine(db, model, [*ingredients, *(load_ingredient(s) for s in args.ingredient)],
                          False, None)
    try:
        plan = engine.plan(read_query(args.query), params=parse_params(args.params),
                           **parse_options(args.option))
        if args.analyze:
            engine.run(plan)
    finally:
        engine.close()
    print(plan, file=out)
    return 0


def _shadow_tables(names: Sequence[str], fts: Sequence[str]) -> set[str]:
    """FTS5's internal tables (``documents_data`` ...), hidden from the schema listing."""
    suffixes = ("_data", "_idx", "_content", "_docsize", "_config")
    return {f"{t}{s}" for t in fts for s in suffixes} & set(names)


def _original_headers(db: Any) -> dict[str, dict[str, str]]:
    """table -> SQL column name -> original header text, from a loader's ``_columns`` table."""
    from blendsql.db.backend import quote
    from blendsql.db.loaders import META_COLUMNS

    try:
        _, rows = db.execute(f"SELECT table_name, name, original FROM {quote(META_COLUMNS)} "
                             "ORDER BY table_name, position")
    except BlendSQLError:  # not the loader's layout: no original headers to show
        return {}
    out: dict[str, dict[str, str]] = {}
    for table, name, original in rows:
        out.setdefault(str(table), {})[str(name)] = original
    return out


def describe_schema(db: Any, show_meta: bool = False) -> str:
    """Tables, their row counts and columns (with types and original headers).

    ``db``: a ``Backend`` or anything ``blendsql.db.backend.open_database``
    takes (a SQLite path or connection, a DuckDB file, Parquet / CSV, a
    PostgreSQL URL); read through the backend's traced, read-only path. A
    backend opened here is closed again; one passed in (or a handed-in
    connection) stays open.
    """
    from blendsql.db.backend import Backend, open_database
    from blendsql.db.loaders import META_COLUMNS, META_TABLES

    backend = open_database(db)
    try:
        with backend.session():
            try:
                names = backend.tables()
            except ExecutionError as e:  # the first read: the file is not this kind of database
                where = db if isinstance(db, (str, Path)) and "://" not in str(db) else (
                    f"the {backend.name} database")  # a URL may hold a password: not shown
                raise ExecutionError(f"cannot read {where}: {e.message.splitlines()[0]}",
                                     hint=f"is it a {backend.name} database?") from e
            fts = set(backend.fts_tables())
            hidden = _shadow_tables(names, sorted(fts))
            if not show_meta:
                hidden |= {META_COLUMNS, META_TABLES}
            originals = _original_headers(backend) if META_COLUMNS in names else {}
            lines: list[str] = []
            for name in names:
                if name in hidden:
                    continue
                kind = "FTS5 documents, " if name in fts else ""
                lines.append(f"{name} ({kind}{backend.row_count(name)} rows)")
                headers = originals.get(name, {})
                for col_name, col_type in backend.table_columns(name):
                    original = headers.get(col_name)
                    note = (f"  -- {original!r}"
                            if original is not None and original != col_name else "")
                    lines.append(f"  {col_name} {col_type}".rstrip() + note)
    finally:
        if not isinstance(db, Backend):
            backend.close()
    return "\n".join(lines) if lines else "(no tables)"


def cmd_schema(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``blendsql schema``: list tables and columns, opened read-only (any backend ``run`` takes)."""
    db = open_source(args.db)
    try:
        print(describe_schema(str(db) if isinstance(db, Path) else db, args.all), file=out)
    finally:
        if isinstance(db, sqlite3.Connection):  # a CSV loaded in memory by open_source
            db.close()
    return 0


def cmd_chat(args: argparse.Namespace, out: TextIO, err: TextIO, *, model: Any = None,
             inp: TextIO | None = None) -> int:
    """``blendsql chat``: a read-eval-print loop over ``Conversation`` (stdin may be a pipe)."""
    from blendsql.nl.conversation import CHAT_HELP, Conversation, chat

    db = open_source(args.db)
    if model is None:
        model = resolve_model(args)
    engine = _make_engine(db, model, [], not args.no_cache, None)
    inp = inp or sys.stdin
    interactive = inp.isatty()
    if interactive:
        print(CHAT_HELP, file=out)
    conv = Conversation(engine, classify_acts=not args.no_acts)
    try:
        chat(conv, inp, out, prompt="you: " if interactive else "", echo=False)
    finally:
        engine.close()
    return 0


def cmd_serve(args: argparse.Namespace, out: TextIO, err: TextIO, *, model: Any = None,
              ingredients: Sequence[Any] = ()) -> int:
    """``blendsql serve``: run the web page until interrupted (uvicorn, read-only session)."""
    try:
        from blendsql.web import DEFAULT_QUERY_TIMEOUT, serve
        from blendsql.web.guard import url_for
    except ImportError as e:
        raise ExecutionError(f"blendsql serve needs the web extra ({e.name} is missing)",
                             hint="pip install 'blendsql[web]'") from e
    db = open_source(args.db)
    if model is None:
        model = resolve_model(args)
    extra = [load_ingredient(s) for s in args.ingredient]
    engine = _make_engine(db, model, [*ingredients, *extra], not args.no_cache, None)
    limit = args.timeout if args.timeout is not None else DEFAULT_QUERY_TIMEOUT
    host = args.host.strip().strip("[]")  # ``--host [::1]`` is ``--host ::1``
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: listening on {host}: other machines can reach this page",
              file=err)
    print(f"blendsql: serving {args.db} (read-only) at {url_for(host, args.port)} "
          "(Ctrl-C stops)", file=out)
    try:
        serve(engine, host, args.port, title=Path(str(args.db)).name,
              query_timeout=limit, ask_timeout=5 * limit, chat_acts=not args.no_acts)
    finally:
        engine.close()
    return 0


def report_error(e: BlendSQLError, err: TextIO) -> None:
    """``error: message`` (with caret lines for parse errors) and the hint, no traceback."""
    print(f"error: {e}", file=err)


def cmd_models(out: TextIO) -> int:
    """``blendsql models``: every registered provider with its options, then the model
    names ``--model`` accepts besides a GGUF path."""
    from blendsql.models.hub import PREFIX, describe_known

    print("Providers (--provider NAME; options as --model-option NAME=VALUE or their flag):",
          file=out)
    for name, provider in providers().items():
        default = " (default)" if name == DEFAULT_PROVIDER else ""
        print(f"\n  {name}{default}: {provider.help}", file=out)
        for option in provider.options:
            flag = f"--{option.flag}" if option.flag else f"--model-option {option.name}=..."
            env = f" [env {', '.join(option.env)}]" if option.env else ""
            print(f"    {option.name:<16} {flag:<34} {option.help}{env}", file=out)
    print(f"\nModel names (--model NAME; any Hub GGUF as {PREFIX}ORG/REPO/FILE.gguf, "
          "downloaded once into the Hugging Face cache):", file=out)
    for name, spec in describe_known():
        print(f"  {name:<20} {spec}", file=out)
    return 0


def main(argv: Sequence[str] | None = None, *, model: Any = None,
         ingredients: Sequence[Any] = (), stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Entry point. ``model`` / ``ingredients`` let Python callers (and tests) inject objects."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args, out, err, model=model, ingredients=ingredients)
        if args.command == "explain":
            return cmd_explain(args, out, model=model, ingredients=ingredients)
        if args.command == "serve":
            return cmd_serve(args, out, err, model=model, ingredients=ingredients)
        if args.command == "chat":
            return cmd_chat(args, out, err, model=model)
        if args.command == "models":
            return cmd_models(out)
        return cmd_schema(args, out, err)
    except BlendSQLError as e:
        report_error(e, err)
        return EXIT_USER_ERROR
    except sqlite3.Error as e:
        print(f"error: database error: {e}", file=err)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
