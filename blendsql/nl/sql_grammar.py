"""A GBNF grammar of the BlendSQL dialect restricted to one database.

Small open models write invalid SQL often (13-21% of programs in the BlendSQL
paper). Decoding under this grammar makes every generated program parse, and
restricts identifiers to real tables and ``table.column`` pairs, and
ingredient names to the registered ones. It covers the query shapes a parser
needs (SELECT / FROM / JOIN / WHERE / GROUP BY / HAVING / ORDER BY / LIMIT,
IN-subqueries, aggregates, ingredient calls) rather than all of SQLite.
"""

from __future__ import annotations

from collections.abc import Iterable

from blendsql.nl.serialize import TableInfo


def _lit(text: str) -> str:
    """A GBNF string literal for ``text``."""
    esc = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{esc}"'


def _ident(name: str) -> str:
    """SQL identifier, quoted when it is not a plain word."""
    plain = name.replace("_", "a").isalnum() and not name[0].isdigit()
    return name if plain else '"' + name.replace('"', '""') + '"'


def _alts(items: Iterable[str]) -> str:
    return " | ".join(_lit(i) for i in items)


def build_grammar(tables: list[TableInfo], ingredients: Iterable[str] = ("LLMMap", "LLMQA")) -> str:
    """GBNF text whose language is a subset of BlendSQL over ``tables``."""
    plain = [t for t in tables if not t.is_documents and t.columns]
    if not plain:
        plain = [t for t in tables if t.columns]
    docs = [t for t in tables if t.is_documents]
    names = {i.lower() for i in ingredients}
    colrefs = [f"{_ident(t.name)}.{_ident(c)}" for t in plain + docs for c in t.columns]
    quoted = [f"'{t.name}::{c}'" for t in plain for c in t.columns]
    rules = {
        "root": "query",
        "query": '"SELECT " distinct? selitem (", " selitem)* " FROM " source join* where? group? order? limit?',
        "distinct": '"DISTINCT "',
        "selitem": '"*" | expr (" AS " alias)?',
        "alias": "[a-z_] [a-z0-9_]{0,15}",
        "source": _alts(_ident(t.name) for t in plain) + (" | " + _alts(_ident(d.name) for d in docs) if docs else ""),
        "join": '" JOIN " source " ON " colref " = " colref',
        "where": '" WHERE " cond',
        "group": '" GROUP BY " colref (", " colref)* (" HAVING " cond)?',
        "order": '" ORDER BY " expr (" ASC" | " DESC")?',
        "limit": '" LIMIT " [1-9] [0-9]{0,2}',
        "cond": 'pred ((" AND " | " OR ") pred){0,3}',
        "pred": 'expr cmp expr | expr " IN (" query ")" | "NOT " pred | "(" cond ")" | expr " IS NULL" | expr " IS NOT NULL"',
        "cmp": '" = " | " != " | " > " | " < " | " >= " | " <= " | " LIKE "',
        "expr": "colref | number | string | bool | agg | ingredient",
        "agg": '("COUNT" | "SUM" | "AVG" | "MIN" | "MAX") "(" ("*" | "DISTINCT " colref | colref) ")"',
        "colref": _alts(colrefs),
        "number": '"-"? [0-9]{1,9} ("." [0-9]{1,4})?',
        "string": "\"'\" [^'\\n]{0,60} \"'\"",
        "bool": '"TRUE" | "FALSE"',
        "question": "\"'\" [^'\\n{}]{1,100} \"'\"",
        "quotedcol": _alts(quoted),
    }
    calls = []
    if "llmmap" in names:
        calls.append('"{{LLMMap(" question ", " quotedcol ")}}"')
    if "llmqa" in names:
        ctx = '" (SELECT * FROM " source join? (" WHERE " cond)? ")"'
        if docs:
            doc = _alts(_ident(d.name) for d in docs)
            ctx = (
                f'" (SELECT * FROM " ({doc}) " WHERE " ({doc}) " MATCH " string " ORDER BY rank LIMIT " [1-5] ")"'
                f' | {ctx}'
            )
        calls.append('"{{LLMQA(" question ("," ctxsub)? (", options=" quotedcol)? ")}}"')
        rules["ctxsub"] = ctx
    rules["ingredient"] = " | ".join(calls) if calls else '"NULL"'
    return "\n".join(f"{k} ::= {v}" for k, v in rules.items()) + "\n"


# ---------------------------------------------------------------- permissive grammar

_KEYWORDS = (
    "select", "distinct", "all", "from", "where", "group", "by", "having", "order", "asc", "desc",
    "limit", "offset", "join", "inner", "left", "right", "outer", "cross", "natural", "on", "using",
    "as", "and", "or", "not", "in", "is", "null", "like", "glob", "between", "exists", "case",
    "when", "then", "else", "end", "union", "intersect", "except", "with", "cast", "true", "false",
    "collate", "nocase", "escape", "match", "rank", "integer", "real", "text", "numeric", "float",
)
_FUNCTIONS = (
    "count", "sum", "avg", "min", "max", "total", "abs", "round", "length", "lower", "upper",
    "substr", "substring", "trim", "ltrim", "rtrim", "replace", "instr", "coalesce", "ifnull",
    "nullif", "iif", "strftime", "date", "time", "datetime", "julianday", "group_concat", "typeof",
    "printf", "random",
)


def _nocase(word: str) -> str:
    """A GBNF sequence matching ``word`` in any letter case."""
    parts = []
    for ch in word:
        if ch.isalpha():
            parts.append(f"[{ch.lower()}{ch.upper()}]")
        else:
            parts.append(_lit(ch))
    return " ".join(parts)


def build_permissive_grammar(tables: list[TableInfo],
                             ingredients: Iterable[str] = ("LLMMap", "LLMQA")) -> str:
    """GBNF accepting the SQLite a model naturally writes, over ``tables``' names.

    A query is a stream of words and punctuation starting with SELECT or WITH:
    keywords and functions in any case, table and column names of this schema
    (any case, bare, double-quoted or back-quoted, qualified by a table or a
    ``T1``-style alias), any alias after ``AS``, numbers, strings, operators,
    parentheses and ingredient blocks. Structure is left to the model (and to
    validation afterwards); only words that cannot be right are masked: prose
    and names that are not in the schema.
    """
    names = sorted({t.name for t in tables} | {c for t in tables for c in t.columns},
                   key=lambda n: (-len(n), n))
    plain = [n for n in names if n.replace("_", "a").isalnum() and not n[0].isdigit()]
    quoted = [n for n in names if n not in plain]
    name_alts = [f"({_nocase(n)})" for n in plain]
    name_alts += [_lit(f'"{n}"') for n in names] + [_lit(f"`{n}`") for n in names]
    name_alts += [_lit(f"[{n}]") for n in quoted]
    rules = {
        "root": "start (gap word)* tail?",
        "start": f"({_nocase('select')} | {_nocase('with')})",
        "tail": 'ws? ";"',
        "gap": "ws | ws? punct (ws? punct)* ws?",
        "punct": '"(" | ")" | "," | "*" | "=" | "!=" | "<>" | "<" | ">" | "<=" | ">=" | "+" | "-" '
                 '| "/" | "%" | "||"',
        "word": "keyword | name | qualified | alias | number | string | ingredient | asname",
        "keyword": " | ".join(f"({_nocase(k)})" for k in _KEYWORDS + _FUNCTIONS),
        "name": " | ".join(name_alts) if name_alts else '"x"',
        "alias": "[tT] [0-9]",
        "qualified": '(name | alias) "." (name | "*")',
        "asname": f'({_nocase("as")}) ws [A-Za-z_] [A-Za-z0-9_]{{0,20}}',
        "number": "[0-9]{1,12} (\".\" [0-9]{1,8})?",
        "string": "\"'\" ([^'\\n] | \"''\"){0,80} \"'\"",
        "ws": "[ \\t\\n]{1,4}",
    }
    if list(ingredients):
        ing = " | ".join(_lit(i) for i in ingredients)
        rules["ingredient"] = f'"{{{{" ({ing}) "(" [^{{}}\\n]+ ")}}}}"'
    else:
        rules["ingredient"] = '"NULL"'
    return "\n".join(f"{k} ::= {v}" for k, v in rules.items()) + "\n"
