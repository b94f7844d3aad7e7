"""The known session / execute options, typed and validated in one place.

Why: a mistyped option (``BlendSQL(db, lazzy=False)``) must fail, not
quietly run the query with the default behaviour. Every option the engine
reads (``run.options.get(name, default)``) is declared here with its type
and a one-line meaning; ``BlendSQL(...)`` keyword options and
``execute(query, **options)`` are both checked against this table, and an
unknown name or a wrongly typed value raises :class:`blendsql.errors.OptionError`
with a did-you-mean hint.

Decisions:

- :class:`Options` is a ``dict`` subclass that validates on every write, so
  existing readers (``run.options.get("lazy", True)``) keep working and hold
  only the options a user actually set; the engine keeps its own defaults.
- ``OptionError`` subclasses :class:`blendsql.errors.BlendSQLError` and
  ``TypeError`` (what Python raises for an unknown keyword argument), not
  ``ExecutionError``: nothing has run when it is raised.
- ``None`` is accepted wherever the default is ``None`` (``timeout=None``
  means no limit) and for ``max_query_chars`` (no size limit).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from blendsql.budget import Budget
from blendsql.db.backend import DEFAULT_TIMEOUT
from blendsql.db.executors import MODES as EXECUTOR_MODES
from blendsql.errors import OptionError
from blendsql.grammar.parser import DEFAULT_MAX_QUERY_CHARS
from blendsql.plan.rules import RULES, check_rules_off


@dataclass(frozen=True)
class OptionSpec:
    """One known option: its accepted types, default and meaning."""

    name: str
    types: tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[str, ...] = ()  # allowed values when given as a string (case-insensitive)
    check: Callable[[Any], str | None] | None = None  # returns a problem, or None
    nullable: bool = False  # None is accepted (off / no limit)

    def describe_type(self) -> str:
        """The accepted types in words, e.g. ``bool or str``."""
        names = [t.__name__ for t in self.types]
        if self.nullable:
            names.append("None")
        return " or ".join(dict.fromkeys(names))


def _positive(value: Any) -> str | None:
    """Limits must be positive, finite numbers (``None`` means no limit where allowed)."""
    if value is None or (value > 0 and math.isfinite(value)):
        return None
    return "must be a positive, finite number"


def _rule_names(value: Any) -> str | None:
    """Every name in ``rules_off`` is an optional rule (unknown ones raise with a hint)."""
    if value is None:
        return None
    return check_rules_off(value)


def _spec(name: str, types: tuple[type, ...], default: Any, doc: str, **kw: Any) -> OptionSpec:
    kw.setdefault("nullable", default is None)
    return OptionSpec(name, types, default, doc, **kw)


_NUMBER = (int, float)
_SPECS: list[OptionSpec] = [
    _spec("prefilter", (bool, str), None,
          "rank values by relevance before a LIMIT scan: True or 'dense', 'bm25', 'hybrid'"),
    _spec("prefilter_embedder", (str,), "default",
          "embedder used by prefilter: 'default' (MiniLM when installed) or 'hashing'",
          choices=("default", "hashing")),
    _spec("prefilter_cache", (bool, str, os.PathLike), None,
          "persist prefilter embeddings: True (default file), a path, or False"),
    # a rule's switch: an option of the rule's own name (blendsql.plan.rules.RULES)
    *(_spec(r.name, r.switch.types, r.default if r.switch.types == (bool,) else None,
            r.switch.doc, choices=r.switch.choices) for r in RULES if r.switch is not None),
    _spec("enum_threshold", _NUMBER, 0.5,
          "minimum similarity for enum_match's embedding rewrite"),
    # the statement default is the backends' own (one place: blendsql.db.backend); the
    # model default mirrors blendsql.models.base.DEFAULT_TIMEOUT (a test keeps them equal)
    _spec("timeout", _NUMBER, DEFAULT_TIMEOUT,
          "time limit in seconds for each SQL statement and, when set, for the whole query: "
          "past it no model request starts and those in flight are abandoned (not set: 300 s "
          "per statement, no limit on the query; None: no limit)", check=_positive,
          nullable=True),
    _spec("model_timeout", _NUMBER, 120.0,
          "time limit in seconds for each model request", check=_positive),
    _spec("ingredient_timeout", _NUMBER, None,
          "time limit in seconds for one run of an ingredient that needs no model (None: "
          "300 s; a model ingredient's requests each have model_timeout)",
          check=_positive, nullable=True),
    _spec("budget", (Budget,), None,
          "most a query may spend on the model: Budget(model_calls=, prompt_tokens=, "
          "dollars=); checked against the plan's estimate and before every request batch"),
    _spec("rules_off", (set, frozenset, list, tuple), None,
          "planning rules switched off by name (blendsql.plan.rules.RULES), e.g. "
          "{'preaggregate', 'lazy'}", check=_rule_names),
    _spec("executors", (str,), "auto",
          "on Spark, where ingredient calls run: 'auto' (a model server client's batches of "
          "256+ requests on the executors), 'on' (every batch and deterministic map), 'off' "
          "(all on the driver)", choices=EXECUTOR_MODES),
    _spec("max_query_chars", (int,), DEFAULT_MAX_QUERY_CHARS,
          "longest query text accepted in characters; longer ones are refused before "
          "parsing (None: no limit)", check=_positive, nullable=True),
]

#: every known option by name
KNOWN: dict[str, OptionSpec] = {s.name: s for s in _SPECS}


#: the calls' own keyword arguments, offered as suggestions for a misspelt option
#: (``BlendSQL(db, allow_write=True)`` means ``allow_writes``, not an unknown option)
CALL_KEYWORDS: dict[str, tuple[str, ...]] = {
    "BlendSQL()": ("model", "ingredients", "allow_writes", "cache", "progress"),
    "execute()": ("params",),
    "plan()": ("params",),
}


def suggest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a misspelt ``name`` (difflib), or None."""
    found = difflib.get_close_matches(name.lower(), sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def check_option(name: str, value: Any, where: str = "BlendSQL()") -> Any:
    """Validate one option; return its value (strings of a choice keep their case).

    ``where`` names the call in the message (``BlendSQL()`` or ``execute()``).
    """
    if not isinstance(name, str):  # pragma: no cover - Python keyword names are str
        raise OptionError(f"option names are strings, got {name!r}", option=str(name))
    spec = KNOWN.get(name)
    if spec is None:
        own = CALL_KEYWORDS.get(where, ())
        near = suggest(name, [*KNOWN, *own])  # a misspelt keyword of the call itself too
        hint = (f"did you mean {near!r}?" if near in KNOWN
                else f"did you mean {near!r} (a keyword of {where})?" if near
                else "known options: " + ", ".join(sorted(KNOWN)))
        raise OptionError(f"unknown option {name!r} for {where}", hint=hint, option=name)
    if value is None and spec.nullable:
        return value
    if not _has_type(value, spec.types):
        raise OptionError(
            f"option {name}= must be {spec.describe_type()}, not {type(value).__name__}"
            f" ({value!r})", hint=f"{name}: {spec.doc}", option=name)
    if spec.choices and isinstance(value, str) and value.lower() not in spec.choices:
        raise OptionError(
            f"option {name}={value!r} is not one of {', '.join(map(repr, spec.choices))}",
            hint=f"{name}: {spec.doc}", option=name)
    problem = spec.check(value) if spec.check else None
    if problem:
        raise OptionError(f"option {name}={value!r} {problem}", hint=f"{name}: {spec.doc}",
                          option=name)
    return value


def _has_type(value: Any, types: tuple[type, ...]) -> bool:
    """``isinstance`` where ``bool`` is not a number (``timeout=True`` is a mistake)."""
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def validate(options: Mapping[str, Any], where: str = "BlendSQL()") -> dict[str, Any]:
    """All options checked (first problem raised); a plain dict of them."""
    return {name: check_option(name, value, where) for name, value in options.items()}


class Options(dict[str, Any]):
    """A dict of options that validates every write.

    Holds only the options a user set, so ``opts.get("lazy", True)`` keeps the
    reader's default. ``Options(**kw)`` / ``Options(mapping)`` validate too.
    """

    where = "BlendSQL()"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.update(*args, **kwargs)

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, check_option(name, value, self.where))

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Validate, then store each item (a mapping or pairs, then keywords)."""
        for name, value in dict(*args, **kwargs).items():
            self[name] = value

    def setdefault(self, name: str, value: Any = None) -> Any:
        """As ``dict.setdefault``, validating a newly stored value."""
        if name not in self:
            self[name] = value
        return self[name]

    def merged(self, overrides: Mapping[str, Any], where: str = "execute()") -> dict[str, Any]:
        """These options with per-query ``overrides`` (validated) on top."""
        if not overrides:
            return dict(self)
        return {**self, **validate(overrides, where)}

    def effective(self) -> dict[str, Any]:
        """Every known option with its value here or its default (for display)."""
        return {name: self.get(name, spec.default) for name, spec in KNOWN.items()}


def parse_option_text(name: str, text: str) -> Any:
    """An option from command-line text (``lazy=false``, ``timeout=2.5``), validated.

    Why: the CLI's ``--option NAME=VALUE`` passes strings; they are converted
    by the option's declared type, so the CLI needs no list of its own.
    """
    spec = KNOWN.get(name)
    if spec is None:
        return check_option(name, text, "--option")  # raises with a did-you-mean hint
    low = text.strip().lower()
    value: Any = text
    if low in ("none", "null") and spec.nullable:
        value = None
    elif bool in spec.types and low in ("true", "yes", "on", "1", "false", "no", "off", "0"):
        value = low in ("true", "yes", "on", "1")
    elif int in spec.types or float in spec.types:
        value = _number(name, text, float in spec.types)
    elif Budget in spec.types:
        value = _budget(text)
    elif frozenset in spec.types:  # a set of names: comma-separated
        value = frozenset(filter(None, (p.strip() for p in text.split(","))))
    return check_option(name, value, "--option")


def _budget(text: str) -> Budget:
    """``model_calls:10,prompt_tokens:5000,dollars:0.5`` (any of them) as a Budget."""
    limits: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition(":")
        key = key.strip()
        if not sep or key not in ("model_calls", "prompt_tokens", "dollars"):
            raise OptionError(f"bad budget part {part!r}", option="budget",
                              hint="write budget=model_calls:10,prompt_tokens:5000,dollars:0.5")
        limits[key] = _number("budget", raw.strip(), key == "dollars")
    try:
        return Budget(**limits)
    except ValueError as e:
        raise OptionError(str(e), option="budget", hint=KNOWN["budget"].doc) from None


def _number(name: str, text: str, allow_float: bool) -> int | float:
    """``text`` as an int (or float when allowed), else an OptionError."""
    try:
        return int(text)
    except ValueError:
        if allow_float:
            try:
                return float(text)
            except ValueError:
                pass
    kind = "a number" if allow_float else "an integer"
    raise OptionError(f"option {name}= needs {kind}, got {text!r}", option=name,
                      hint=f"{name}: {KNOWN[name].doc}")
