"""Reference pages generated from the code: the CLI from its argument parser, an
ingredient's options from its declarations.

The documentation site (``mkdocs.yml``, hook ``scripts/mkdocs_hooks.py``) replaces the
markers ``<!-- blendsql:cli -->``, ``<!-- blendsql:session-options -->`` and
``<!-- blendsql:options MODULE.CLASS -->`` with these, so the reference can never drift from what the code accepts.
"""

from __future__ import annotations

import argparse
import importlib
import re
from typing import Any

from blendsql.option_types import describe_types

CLI_MARKER = "<!-- blendsql:cli -->"
SESSION_OPTIONS_MARKER = "<!-- blendsql:session-options -->"
OPTIONS_MARKER = re.compile(r"<!--\s*blendsql:options\s+([\w.]+)\s*-->")
#: strings longer than this show as "(class attribute)" rather than in full
_SHORT = 40


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    return f"`{value}`" if "`" not in value else f"`` {value} ``"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def _argument_row(action: argparse.Action) -> str | None:
    if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
        return None
    if action.option_strings:
        flags = ", ".join(action.option_strings)
        if action.nargs != 0:
            flags += f" {action.metavar or action.dest.upper()}"
    else:
        flags = str(action.metavar or action.dest)
    default = action.default
    shown = "" if default in (None, False, [], argparse.SUPPRESS) or action.nargs == 0 \
        else _code(repr(default) if not isinstance(default, str) else default)
    help_text = (action.help or "") % {"default": default} if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        help_text += f" (one of: {', '.join(map(str, action.choices))})"
    return f"| {_code(flags)} | {_cell(help_text)} | {shown} |"


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Markdown for every command of ``blendsql`` (default: :func:`blendsql.cli.build_parser`):
    its usage, what it does, and a table of its arguments with their defaults."""
    if parser is None:
        from blendsql.cli import build_parser

        parser = build_parser()
    out: list[str] = []
    for name, sub in _subparsers(parser).items():
        out += [f"## `{parser.prog} {name}`", "", _help_of(parser, name).rstrip(".") + ".", "",
                "```text", sub.format_usage().strip(), "```", ""]
        for group in sub._action_groups:
            rows = [r for r in (_argument_row(a) for a in group._group_actions) if r]
            if not rows:
                continue
            title = group.title or "arguments"
            out += [f"**{title}**", "", "| argument | what it does | default |",
                    "|---|---|---|", *rows, ""]
    return "\n".join(out).rstrip() + "\n"


def _import(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def option_default(cls: type, name: str, declared: Any) -> str:
    """The default of option ``name`` of ``cls`` as the reference shows it."""
    for attr in (name, f"default_{name}"):
        value = getattr(cls, attr, None)
        if value is not None and not callable(value):
            if isinstance(value, str) and (len(value) > _SHORT or "\n" in value):
                return f"(class attribute `{attr}`)"
            return _code(repr(value))
    return _code(repr(declared)) if declared is not None else "—"


def _where(option: Any) -> str:
    places = [label for flag, label in ((option.query, "query"), (option.init, "constructor"),
                                        (option.attribute, "class attribute")) if flag]
    return ", ".join(places)


def options_table(cls: type | str) -> str:
    """Markdown table of every option an ingredient class declares: name, types, where it
    may be given (a query keyword, a constructor keyword, a class attribute), default."""
    klass: Any = _import(cls) if isinstance(cls, str) else cls
    declared = klass.declared_options()
    if not declared:
        return f"`{klass.__name__}` declares no options: it accepts any keyword.\n"
    rows = ["| option | type | given as | default | what it does |", "|---|---|---|---|---|"]
    for name, option in declared.items():
        rows.append(f"| `{name}` | {_cell(describe_types(option.types))} | {_where(option)} | "
                    f"{option_default(klass, name, option.default)} | {_cell(option.doc)} |")
    return "\n".join(rows) + "\n"


def session_options_table() -> str:
    """Markdown table of every option ``BlendSQL(...)`` and ``execute(...)`` accept
    (:data:`blendsql.options.KNOWN`): name, types, default, meaning."""
    from blendsql.options import KNOWN

    rows = ["| option | type | default | what it does |", "|---|---|---|---|"]
    for name, spec in KNOWN.items():
        default = "—" if spec.default is None else _code(repr(spec.default))
        choices = f" (one of: {', '.join(spec.choices)})" if spec.choices else ""
        rows.append(f"| `{name}` | {_cell(spec.describe_type())} | {default} | "
                    f"{_cell(spec.doc + choices)} |")
    return "\n".join(rows) + "\n"


def render(markdown: str) -> str:
    """``markdown`` with every reference marker replaced by its generated text."""
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SESSION_OPTIONS_MARKER in markdown:
        markdown = markdown.replace(SESSION_OPTIONS_MARKER, session_options_table())
    return OPTIONS_MARKER.sub(lambda m: options_table(m.group(1)), markdown)
