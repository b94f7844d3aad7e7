"""``parse(text, registry)``: BlendSQL text -> one sqlglot AST with ingredient nodes.

Steps (none of them rewrites SQL meaning with regular expressions):

1. the pyparsing scanner (:mod:`blendsql.grammar.scanner`) finds ingredient
   blocks, ``?`` parameters and statement separators, skipping strings,
   quoted identifiers and comments;
2. each block is *spliced* into the text as a call of a reserved placeholder
   function ``__bsql_ing<k>(arg, ...)`` (its arguments copied verbatim, nested
   blocks spliced recursively), each ``?`` as a reserved named parameter;
   a segment map remembers where every spliced character came from so that
   sqlglot's errors point into the ORIGINAL text;
3. sqlglot parses the spliced text once (SQLite dialect);
4. placeholder functions become :class:`IngredientCall` nodes (keywords,
   quoted ``'t::c'`` column references and one-element tuples restored), the
   paper's ``JOIN {{LLMJoin(left_on=.., right_on=..)}}`` becomes
   ``JOIN t2 ON <call>`` with ``meta["join_form"] = True``.
"""

from __future__ import annotations

import bisect
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import SqlglotError, TokenError

from blendsql.errors import BlendSQLError, LineIndex, ParseError, QueryTypeError
from blendsql.grammar.nodes import IngredientCall
from blendsql.grammar.scanner import Arg, Block, Param, Semi, Text, nearest_name, scanner_for
from blendsql.ingredients.base import IngredientRegistry, accepted_kwargs

#: default for ``max_query_chars``: longer queries are refused before parsing. Parsing
#: is linear but costs ~10-50 us per character (sqlglot + the scanner), so 100,000
#: characters parse in a few seconds at worst; real queries are a few kB.
DEFAULT_MAX_QUERY_CHARS = 100_000

_ING = "__bsql_ing"
_JOIN_TABLE = "__bsql_jointable"
_QPARAM = "__bsqlq"
_ING_RE = re.compile(rf"{_ING}(\d+)$", re.IGNORECASE)
_JT_RE = re.compile(rf"{_JOIN_TABLE}(\d+)$", re.IGNORECASE)
_Q_RE = re.compile(rf"{_QPARAM}(\d+)$", re.IGNORECASE)
# 'table::column' or 'db.table::column' (paper's quoted column reference)
_QUOTED_COL_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)::([^:]+)$")
_LITERALISH = (exp.Literal, exp.Boolean, exp.Null, exp.Neg, exp.Placeholder)
_JOIN_KEYS = ("left_on", "right_on")


@dataclass
class _Splice:
    """Spliced text plus a map from spliced offsets back to original offsets."""

    original: str
    parts: list[str] = field(default_factory=list)
    new_starts: list[int] = field(default_factory=list)
    segs: list[tuple[int, int, bool]] = field(default_factory=list)  # (orig_start, len, exact)
    size: int = 0

    def copy(self, start: int, end: int) -> None:
        """Copy ``original[start:end]`` verbatim (positions map one to one)."""
        if end > start:
            self._add(self.original[start:end], start, exact=True)

    def emit(self, text: str, orig_pos: int) -> None:
        """Emit generated text; every character of it maps to ``orig_pos``."""
        self._add(text, orig_pos, exact=False)

    def _add(self, text: str, orig: int, exact: bool) -> None:
        self.parts.append(text)
        self.new_starts.append(self.size)
        self.segs.append((orig, len(text), exact))
        self.size += len(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def to_original(self, pos: int) -> int:
        """Original offset of spliced offset ``pos`` (generated text -> its origin)."""
        if not self.new_starts:
            return 0
        i = max(0, bisect.bisect_right(self.new_starts, pos) - 1)
        orig, length, exact = self.segs[i]
        if exact:
            return orig + min(pos - self.new_starts[i], length)
        return orig


@dataclass
class _Ctx:
    """Per-parse state: original text, block/param numbering, join-form calls."""

    text: str
    registry: IngredientRegistry
    block_ids: dict[int, int] = field(default_factory=dict)  # block.start -> call id
    blocks: dict[int, Block] = field(default_factory=dict)  # call id -> block
    param_ids: dict[int, int] = field(default_factory=dict)  # param.pos -> index
    join_form: set[int] = field(default_factory=set)
    lone_call: Block | None = None  # the query is this one call: it means SELECT <call>


def parse(text: str, registry: IngredientRegistry, *,
          max_chars: int | None = DEFAULT_MAX_QUERY_CHARS) -> exp.Expression:
    """Parse BlendSQL ``text`` into one sqlglot expression with :class:`IngredientCall` nodes.

    Raises :class:`blendsql.errors.ParseError` (never another exception type)
    with the 1-based line/column in ``text``, the source line, a caret and a hint.
    ``max_chars``: longer texts are refused at once (``None``: no limit);
    parsing is linear but costs roughly 10-50 microseconds per character.
    """
    try:
        return _parse(text, registry, max_chars)
    except BlendSQLError:
        raise
    except RecursionError:
        raise ParseError(
            "query nests too deeply to parse", text=text, position=0,
            hint="reduce the nesting of parentheses / ingredient calls / NOT and CASE",
            code="too_deep",
        ) from None
    except Exception as err:  # defensive: never leak an internal exception type
        raise ParseError(
            f"could not parse the query ({type(err).__name__}: {err})", text=text, position=0,
            hint="please report this query; it should have produced a clearer error",
        ) from None


def _parse(text: str, registry: IngredientRegistry, max_chars: int | None) -> exp.Expression:
    check_query_type(text)
    check_query_size(text, max_chars)
    check_nesting(text)
    bare = [i.name for i in registry if getattr(i, "bare_call", False)]
    tokens = scanner_for(registry.names(), bare).scan(text)
    _check_single_statement(text, tokens)
    _check_adjacent_strings(text, tokens)
    ctx = _Ctx(text, registry, lone_call=_lone_call(tokens))
    _number(ctx, tokens)
    splice = _Splice(text)
    _splice_top(ctx, splice, tokens)
    tree = _sqlglot_parse(ctx, splice)
    _remap_positions(ctx, splice, tree)
    _restore_params(ctx, tree)
    _restore_calls(ctx, splice, tree)
    _check_call_kwargs(ctx, tree)
    return tree


def _check_call_kwargs(ctx: _Ctx, tree: exp.Expression) -> None:
    """Every keyword argument is one its ingredient reads (``Ingredient.query_kwargs``).

    Why at parse time: an unknown keyword (``optoins=``) would otherwise be
    ignored, and the query would run with a different meaning than written.
    """
    for call in tree.find_all(IngredientCall):
        ingredient = ctx.registry.get(call.key_name)
        allowed = accepted_kwargs(ingredient) if ingredient is not None else None
        if allowed is None:
            continue
        for key in call.call_kwargs:
            if key in allowed:
                continue
            near = nearest_name(key, sorted(allowed))
            hint = (f"did you mean {near}=? " if near else "") + \
                f"{call.name} accepts {', '.join(f'{k}=' for k in sorted(allowed))}"
            raise ParseError(f"{call.name} has no keyword argument {key!r}", text=ctx.text,
                             position=int(call.meta.get("position", 0)), hint=hint,
                             code="unknown_keyword")


def check_query_type(query: object) -> None:
    """A query is text; anything else is a :class:`QueryTypeError` with a hint."""
    if isinstance(query, str):
        return
    name = type(query).__name__
    if isinstance(query, (bytes, bytearray, memoryview)):
        hint = "decode it first, e.g. query.decode('utf-8')"
    elif query is None:
        hint = "pass the BlendSQL query text as str (got None: is a variable unset?)"
    else:
        hint = "pass the BlendSQL query text as str (or a parsed sqlglot Expression)"
    raise QueryTypeError(f"a query must be a string, not {name}", hint=hint)


#: deepest parenthesis nesting accepted; deeper text is refused before parsing. The
#: scanner and sqlglot recurse ~20 Python frames per level, so about 45 levels fit
#: Python's default recursion limit; 32 leaves room for the caller and the planner.
MAX_NESTING = 32

# what can hide a parenthesis: strings, quoted identifiers, comments (maybe unterminated)
_NEST_RE = re.compile(
    r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?|`(?:[^`]|``)*`?|\[[^\]]*\]?"
    r"|--[^\n]*|/\*[\s\S]*?(?:\*/|\Z)|[()]"
)


def check_nesting(text: str, limit: int = MAX_NESTING) -> None:
    """Refuse parentheses nested deeper than ``limit``, pointing at the first too deep.

    Why: the scanner, sqlglot and the planner recurse once (or more) per
    level, so very deep nesting (10,000 parentheses) would end in a
    RecursionError deep inside a library; this check stops it first with a
    ParseError at the spot. Real queries nest a handful of levels.
    """
    depth = 0
    for m in _NEST_RE.finditer(text):
        tok = m.group()
        if tok == "(":
            depth += 1
            if depth > limit:
                raise ParseError(
                    f"parentheses nest more than {limit} levels deep", text=text,
                    position=m.start(), code="too_deep",
                    hint="flatten the expression (e.g. use IN (...) or a CTE via WITH) "
                    "instead of nesting parentheses / subqueries / calls this deep",
                )
        elif tok == ")":
            depth = max(depth - 1, 0)


def check_query_size(text: str, max_chars: int | None) -> None:
    """Refuse a query longer than ``max_chars`` characters (``None``: no limit).

    Why: a multi-megabyte query is almost always a mistake (a data file
    pasted in, a generated value list); refusing it costs nothing, while
    parsing, planning and running it costs time and memory. The limit is the
    ``max_query_chars`` option (:mod:`blendsql.options`).
    """
    if max_chars is None or len(text) <= max_chars:
        return
    raise ParseError(
        f"query is {len(text):,} characters long, over the limit of {max_chars:,} "
        "(max_query_chars)", text=text, position=max_chars, code="too_large",
        hint="pass max_query_chars=N (or None for no limit) to BlendSQL(...) or execute(...); "
        "long value lists belong in a table or in params",
    )


def _lone_call(tokens: list[Block | Param | Semi | Text]) -> Block | None:
    """The block when the whole query is one ingredient call (blanks, comments and
    a trailing ';' aside). Why: ``{{LLMQA('Who won?')}}`` alone is a natural
    question over no table; it means ``SELECT {{LLMQA('Who won?')}}``."""
    significant = [t for t in tokens if not isinstance(t, Semi) and not _is_blank(t)]
    if len(significant) == 1 and isinstance(significant[0], Block):
        return significant[0]
    return None


def _is_blank(tok: object) -> bool:
    """Whitespace and comments (they separate nothing)."""
    return isinstance(tok, Text) and (tok.kind == "comment" or not tok.text.strip())


def _remap_positions(ctx: _Ctx, sp: _Splice, tree: exp.Expression) -> None:
    """sqlglot records token positions (meta line/col/start/end) in the spliced
    text; move them to the original text so later stages can point at it."""
    lines = LineIndex(ctx.text)
    for node in tree.walk():
        meta = node._meta
        if not meta or "start" not in meta:
            continue
        start = sp.to_original(int(meta["start"]))
        end = sp.to_original(int(meta.get("end", meta["start"])))
        meta["start"], meta["end"] = start, max(start, end)
        meta["line"], meta["col"] = lines.line_col(meta["end"])


# --------------------------------------------------------------------- scanning


def _check_single_statement(text: str, tokens: list[Block | Param | Semi | Text]) -> None:
    """One statement per query: a ``;`` may only be followed by blanks/comments."""
    seen_semi: Semi | None = None
    significant = False
    for tok in tokens:
        if isinstance(tok, Semi):
            if not significant:
                raise ParseError(
                    "empty statement before ';'", text=text, position=tok.pos,
                    hint="remove the ';' (a query is one SQL statement)", code="empty",
                )
            seen_semi = seen_semi or tok
            continue
        if isinstance(tok, Text) and (tok.kind == "comment" or not tok.text.strip()):
            continue
        if seen_semi is not None:
            pos = _skip_blank(text, tok.pos) if not isinstance(tok, Block) else tok.start
            raise ParseError(
                "only one SQL statement per query", text=text, position=pos,
                hint="split the text at ';' and run each statement separately",
                code="statements",
            )
        significant = True
    if not significant:
        raise ParseError(
            "empty query (nothing but blanks or comments)", text=text, position=len(text),
            hint="write a SELECT statement, e.g. SELECT * FROM t WHERE {{LLMMap('q', t.c)}} = TRUE",
            code="empty",
        )


def _check_adjacent_strings(text: str, tokens: list[Block | Param | Semi | Text]) -> None:
    """``'a' 'b'``: SQLite reads an alias, sqlglot a concatenation; refuse the ambiguity."""
    previous: Text | None = None
    for tok in tokens:
        if isinstance(tok, Text) and (tok.kind == "comment" or not tok.text.strip()):
            continue
        if isinstance(tok, Text) and tok.kind == "string" and previous is not None:
            raise ParseError(
                "two string literals in a row", text=text, position=tok.pos,
                hint="join strings with ||, or write an alias as AS \"name\"",
            )
        previous = tok if isinstance(tok, Text) and tok.kind == "string" else None


def _walk(items: list[Block | Param | Semi | Text]) -> list[Block | Param]:
    """All blocks and parameters, nested ones included."""
    out: list[Block | Param] = []
    for it in items:
        if isinstance(it, Param):
            out.append(it)
        elif isinstance(it, Block):
            out.append(it)
            for arg in it.args:
                out.extend(_walk(list(arg.items)))
    return out


def _number(ctx: _Ctx, tokens: list[Block | Param | Semi | Text]) -> None:
    """Call ids and ``?`` numbers in text order (nested ones included)."""
    found = _walk(tokens)
    blocks = sorted((b for b in found if isinstance(b, Block)), key=lambda b: b.start)
    params = sorted(p.pos for p in found if isinstance(p, Param))
    for i, b in enumerate(blocks):
        ctx.block_ids[b.start] = i
        ctx.blocks[i] = b
    for i, pos in enumerate(params):
        ctx.param_ids[pos] = i
    for i, tok in enumerate(tokens):
        if isinstance(tok, Block) and _after_join(tokens, i):
            ctx.join_form.add(ctx.block_ids[tok.start])


def _after_join(tokens: list[Block | Param | Semi | Text], i: int) -> bool:
    """True when the previous significant lexeme is the keyword JOIN."""
    for j in range(i - 1, -1, -1):  # no slice copy: this runs once per block
        tok = tokens[j]
        if isinstance(tok, Text) and (tok.kind == "comment" or not tok.text.strip()):
            continue
        if isinstance(tok, Text) and tok.kind == "other":
            words = tok.text.split()
            return bool(words) and words[-1].upper() == "JOIN"
        return False
    return False


# --------------------------------------------------------------------- splicing


def _splice_top(ctx: _Ctx, sp: _Splice, tokens: list[Block | Param | Semi | Text]) -> None:
    pos = 0
    for tok in tokens:
        if isinstance(tok, Block):
            sp.copy(pos, tok.start)
            if tok is ctx.lone_call:
                sp.emit("SELECT ", tok.start)
            _splice_block(ctx, sp, tok)
            pos = tok.end
        elif isinstance(tok, Param):
            sp.copy(pos, tok.pos)
            sp.emit(f" :{_QPARAM}{ctx.param_ids[tok.pos]} ", tok.pos)
            pos = tok.pos + 1
    sp.copy(pos, len(ctx.text))


def _splice_span(ctx: _Ctx, sp: _Splice, start: int, end: int, items: list[Block | Param]) -> None:
    pos = start
    for it in sorted(items, key=lambda x: x.pos if isinstance(x, Param) else x.start):
        if isinstance(it, Param):
            sp.copy(pos, it.pos)
            sp.emit(f" :{_QPARAM}{ctx.param_ids[it.pos]} ", it.pos)
            pos = it.pos + 1
        else:
            sp.copy(pos, it.start)
            _splice_block(ctx, sp, it)
            pos = it.end
    sp.copy(pos, end)


def _splice_block(ctx: _Ctx, sp: _Splice, b: Block) -> None:
    """Emit ``__bsql_ing<k>(args)`` (or ``<table> ON __bsql_ing<k>(..)`` for the join form)."""
    cid = ctx.block_ids[b.start]
    if cid in ctx.join_form:
        sp.emit(f" {_JOIN_TABLE}{cid} ON", b.start)
    sp.emit(f" {_ING}{cid}(", b.start)
    for i, arg in enumerate(b.args):
        _check_arg_text(ctx, b, arg)
        if i:
            sp.emit(", ", arg.start)
        _splice_span(ctx, sp, arg.value_start, arg.end, arg.items)
    sp.emit(") ", b.end - 1)


def _check_arg_text(ctx: _Ctx, b: Block, arg: Arg) -> None:
    """Empty arguments and keywords without values are reported before sqlglot sees them."""
    if arg.items or _skip_blank(ctx.text, arg.value_start) < arg.end:
        return
    if arg.keyword is not None:
        raise ParseError(
            f"keyword {arg.keyword}= has no value in {b.name}(...)", text=ctx.text,
            position=arg.keyword_pos,
            hint=f"write {arg.keyword}=<value>, e.g. {arg.keyword}='t::col'",
        )
    raise ParseError(
        f"empty argument in {b.name}(...)", text=ctx.text, position=_skip_ws(ctx.text, arg.start),
        hint="remove the extra ',' or put a value there",
    )


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


# ---------------------------------------------------------------------- sqlglot


#: the SQL dialect of the text around ingredient calls: SQLite's unless a session was
#: given ``dialect=`` (``BlendSQL(db, dialect="duckdb")`` sets it while parsing)
READ_DIALECT: ContextVar[str] = ContextVar("blendsql_read_dialect", default="sqlite")


def _sqlglot_parse(ctx: _Ctx, sp: _Splice) -> exp.Expression:
    spliced = sp.text
    try:
        # a comment after the final ';' comes back as an empty Semicolon statement
        trees = [t for t in sqlglot.parse(spliced, read=READ_DIALECT.get())
                 if t is not None and not isinstance(t, exp.Semicolon)]
    except SqlglotParseError as err:
        raise _map_sqlglot_error(ctx, sp, err) from None
    except TokenError as err:
        raise _map_token_error(ctx, sp, err) from None
    except SqlglotError as err:
        raise ParseError(
            f"invalid SQL: {_clean(str(err))}", text=ctx.text, position=0,
            hint="check the SQL syntax (SQLite dialect)",
        ) from None
    if len(trees) != 1:
        raise ParseError(
            "expected exactly one SQL statement", text=ctx.text, position=0,
            hint="a query is one SELECT (or other) statement",
            code="statements" if trees else "empty",
        )
    tree = trees[0]
    if not isinstance(tree, exp.Expression):
        raise ParseError("expected a SQL statement", text=ctx.text, position=0)
    if isinstance(tree, exp.Command):
        _check_command(ctx, tree)
    if isinstance(tree, _BARE):
        # sqlglot reads `x = 1`, `x AS a`, `*` or `(SELECT 1)` as a statement; SQLite
        # does not (only a lone call is accepted as shorthand for SELECT <call>), and
        # handing them on showed SQLite's error about the engine's own parameter names
        raise ParseError(
            "a query must be a statement, not a bare expression", text=ctx.text,
            position=_skip_blank(ctx.text, 0),
            hint="write SELECT <expression> (a query that is only one ingredient call "
            "may omit the SELECT)",
        )
    return tree


#: what sqlglot parses as a whole "statement" but is only an expression (or a
#: parenthesised query, which SQLite does not take as a statement either)
_BARE = (exp.Condition, exp.Alias, exp.Star, exp.Subquery)

_COMMANDS = {
    "EXPLAIN", "VACUUM", "ANALYZE", "REINDEX", "BEGIN", "COMMIT", "END", "ROLLBACK",
    "SAVEPOINT", "RELEASE", "DETACH",
}


def _check_command(ctx: _Ctx, tree: exp.Command) -> None:
    """sqlglot falls back to an unparsed Command for text it cannot read.

    That is accepted only for the few SQLite statements sqlglot keeps as
    commands, and never when ingredients or ``?`` would be hidden inside it.
    """
    word = str(tree.this or "").upper()
    if word in _COMMANDS and not (ctx.blocks or ctx.param_ids):
        return
    hint = "check the SQL syntax near the start of the statement (SQLite dialect)"
    if ctx.blocks or ctx.param_ids:
        hint = "ingredient calls and ? parameters are supported in SELECT-style statements"
    raise ParseError(
        f"could not parse this statement (starts with {str(tree.this)[:30]!r})",
        text=ctx.text, position=_skip_ws(ctx.text, 0), hint=hint,
    )


def _clean(msg: str) -> str:
    """Hide the reserved placeholder names in messages shown to users."""
    msg = re.sub(rf"{_ING}\d+", "<ingredient call>", msg, flags=re.IGNORECASE)
    msg = re.sub(rf"{_JOIN_TABLE}\d+", "<join table>", msg, flags=re.IGNORECASE)
    return re.sub(rf":?{_QPARAM}\d+", "?", msg, flags=re.IGNORECASE)


def _offset(text: str, line: int, col: int) -> int:
    """0-based offset of 1-based (line, col) in ``text``."""
    pos = 0
    for _ in range(max(line, 1) - 1):
        nxt = text.find("\n", pos)
        if nxt < 0:
            break
        pos = nxt + 1
    return min(pos + max(col, 1) - 1, len(text))


def _map_sqlglot_error(ctx: _Ctx, sp: _Splice, err: SqlglotParseError) -> ParseError:
    info = err.errors[0] if err.errors else {}
    desc = _describe(_clean(str(info.get("description") or err)), str(info.get("highlight") or ""))
    line, col = info.get("line"), info.get("col")
    if isinstance(line, int) and isinstance(col, int):
        end = _offset(sp.text, line, col)
        highlight = str(info.get("highlight") or "")
        start = max(0, end - max(len(highlight), 1) + 1)
        position = sp.to_original(start)
    else:
        position = 0
    return ParseError(
        f"invalid SQL: {desc}", text=ctx.text, position=position, hint=_sql_hint(ctx, position),
    )


def _describe(desc: str, highlight: str) -> str:
    """sqlglot's messages in the user's words (operands instead of arg names)."""
    m = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]+\.(\w+)'>", desc)
    if m:
        side = {"this": "left operand", "expression": "right operand"}.get(m.group(1), m.group(1))
        return f"{m.group(2)} is missing its {side}"
    if desc.startswith("Invalid expression / Unexpected token") and highlight.strip():
        return f"unexpected {_clean(highlight.strip())!r}"
    return desc


def _map_token_error(ctx: _Ctx, sp: _Splice, err: TokenError) -> ParseError:
    msg = str(err)
    m = re.search(r"Error tokenizing '(.*)'", msg, flags=re.DOTALL)
    position = 0
    if m:
        where = sp.text.find(m.group(1))
        if where >= 0:
            position = sp.to_original(where + len(m.group(1)) - 1)
    return ParseError(
        "invalid SQL: could not tokenize the query", text=ctx.text, position=position,
        hint="check quotes and special characters near here (SQLite syntax)",
    )


def _sql_hint(ctx: _Ctx, position: int) -> str:
    """A hint for a SQL error; names the ingredient when '<<Name(' was read as a shift."""
    block = next((b for b in ctx.blocks.values() if b.start == position), None)
    if block is not None:
        if block.brace == "<<":
            return (
                f"'<<{block.name}(' always opens an ingredient call; for a shift by a "
                "function result write << (expr)"
            )
        return "an ingredient call stands where SQL allows an expression"
    names = ctx.registry.names()
    for m in re.finditer(r"<<\s*([A-Za-z_]\w*)\s*\(", ctx.text):
        if m.group(1) not in ctx.registry and names:
            near = nearest_name(m.group(1), names)
            suggestion = f"did you mean {near!r}?" if near else f"registered: {', '.join(names)}"
            return (
                f"'<<{m.group(1)}(' is read as a shift operator because {m.group(1)!r} is not "
                f"a registered ingredient; {suggestion}"
            )
    return "check the SQL near here (SQLite syntax; ingredient calls are {{Name(args)}})"


# ----------------------------------------------------------------- restoration


def _restore_params(ctx: _Ctx, tree: exp.Expression) -> None:
    """``?`` -> ``Placeholder(this='p<k>')``; a user ``:p<k>`` may not clash with them."""
    generated = {f"p{i}" for i in range(len(ctx.param_ids))}
    for ph in list(tree.find_all(exp.Placeholder)):
        name = ph.name
        m = _Q_RE.match(name)
        if m:
            _swap(ph, exp.Placeholder(this=f"p{m.group(1)}"))
        elif name in generated:
            raise ParseError(
                f"named parameter :{name} clashes with the name given to a '?' parameter",
                text=ctx.text, position=max(ctx.text.find(":" + name), 0),
                hint="use either '?' parameters or named ':x' parameters not called p0, p1, ...",
            )


def _restore_calls(ctx: _Ctx, sp: _Splice, tree: exp.Expression) -> None:
    """Placeholder functions -> :class:`IngredientCall`, innermost first."""
    found: dict[int, exp.Anonymous] = {}
    for node in tree.find_all(exp.Anonymous):
        m = _ING_RE.match(str(node.this))
        if m:
            found[int(m.group(1))] = node
    missing = set(ctx.blocks) - set(found)
    if missing:
        b = ctx.blocks[min(missing)]
        raise ParseError(
            f"{b.name}(...) cannot stand here", text=ctx.text, position=b.start,
            hint="an ingredient call stands where SQL allows an expression",
        )
    for cid in sorted(found, reverse=True):
        if isinstance(found[cid].parent, exp.Table):
            b = ctx.blocks[cid]
            raise ParseError(
                f"{b.name}(...) cannot be used as a table", text=ctx.text, position=b.start,
                hint="use it in an expression (WHERE, SELECT, ON ...), or "
                "JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}} for a join",
            )
        call = _make_call(ctx, cid, list(found[cid].expressions))
        _swap(found[cid], call)
        if cid in ctx.join_form:
            _fix_join_table(ctx, cid, call, tree)


def _swap(old: exp.Expression, new: exp.Expression) -> None:
    """``old.replace(new)`` in O(1) when ``old`` sits in a list argument.

    Why: sqlglot's ``replace`` re-parents every sibling in the list, so
    replacing each of n calls / parameters in one long SELECT list or IN list
    was O(n^2) (most of the time of a large query).
    """
    parent, key, index = old.parent, old.arg_key, old.index
    siblings = parent.args.get(key) if parent is not None and key else None
    if not (isinstance(siblings, list) and index is not None and index < len(siblings)
            and siblings[index] is old):
        old.replace(new)
        return
    node: Any = parent
    while node is not None and getattr(node, "_hash", None) is not None:
        node._hash = None  # as sqlglot's own set(): cached hashes are stale now
        node = node.parent
    siblings[index] = new
    new.parent, new.arg_key, new.index = parent, key, index
    old.parent = None


def _make_call(ctx: _Ctx, cid: int, values: list[exp.Expression]) -> IngredientCall:
    b = ctx.blocks[cid]
    if len(values) != len(b.args):
        raise ParseError(
            f"could not split the arguments of {b.name}(...)", text=ctx.text, position=b.start,
            hint="separate arguments with ',' and parenthesise subqueries",
        )
    positional: list[exp.Expression] = []
    keywords: dict[str, exp.Expression] = {}
    for arg, value in zip(b.args, values, strict=True):
        value = _normalise_arg(ctx, b, arg, value)
        if arg.keyword is None:
            if keywords:
                raise ParseError(
                    f"positional argument after keyword argument in {b.name}(...)",
                    text=ctx.text, position=_skip_ws(ctx.text, arg.start),
                    hint="put positional arguments first, then key=value arguments",
                )
            positional.append(value)
        elif arg.keyword.lower() in {k.lower() for k in keywords}:
            raise ParseError(
                f"keyword {arg.keyword}= given twice in {b.name}(...)", text=ctx.text,
                position=arg.keyword_pos, hint="give each keyword argument once",
            )
        else:
            keywords[arg.keyword] = value
    meta: dict[str, object] = {"brace": b.brace, "call_id": cid, "position": b.start}
    if cid in ctx.join_form:
        positional, keywords, keys = _join_args(ctx, b, positional, keywords)
        meta.update(join_form=True, join_keys=keys)
    call = IngredientCall(
        this=exp.Identifier(this=b.name, quoted=False),
        expressions=positional,
        kwargs=[exp.PropertyEQ(this=exp.Identifier(this=k), expression=v) for k, v in keywords.items()],
    )
    call.meta.update(meta)
    return call


def _normalise_arg(ctx: _Ctx, b: Block, arg: Arg, value: exp.Expression) -> exp.Expression:
    """Quoted column refs, one-element tuples; reject forms that are not values."""
    if isinstance(value, exp.Literal) and value.is_string:
        col = _quoted_column(value.this)
        if col is not None:
            return col
        _check_column_ref(ctx, arg, value.this)
    if (
        arg.keyword is None
        and isinstance(value, exp.EQ)
        and isinstance(value.this, exp.Column)
        and not value.this.table
        and not value.this.this.quoted
    ):
        # `a == 1` as a positional argument: keep it parenthesised so that its
        # rendering `(a = 1)` is not read back as the keyword argument a=1
        return exp.Paren(this=value)
    if isinstance(value, exp.Paren) and isinstance(value.this, _LITERALISH):
        # Decision: ('a') / ('a',) at the top of an argument is a one-element tuple,
        # so options=('a') stays a list of options.
        return exp.Tuple(expressions=[value.this])
    for alias in value.find_all(exp.Alias):
        if not any(isinstance(a, exp.Query) for a in _ancestors(alias, value)):
            raise ParseError(
                f"an alias (AS) is not allowed in an ingredient argument ({b.name})",
                text=ctx.text, position=_skip_ws(ctx.text, arg.value_start),
                hint="remove the alias, or put it inside a (SELECT ...) subquery",
            )
    bad = {
        exp.Distinct: "DISTINCT is not allowed in an ingredient argument",
        exp.Star: "'*' is not a value",
        exp.Query: "a subquery argument must be in parentheses: (SELECT ...)",
    }
    for typ, message in bad.items():
        if isinstance(value, typ) and not isinstance(value, exp.Subquery):
            raise ParseError(
                f"{message} ({b.name})", text=ctx.text,
                position=_skip_ws(ctx.text, arg.value_start),
                hint="arguments are literals, columns, 't::col', (SELECT ...), tuples or key=value",
            )
    return value


def _ancestors(node: exp.Expression, stop: exp.Expression) -> list[Any]:
    """Ancestors of ``node`` up to and including ``stop``."""
    out: list[Any] = []
    cur = node.parent if node is not stop else None
    while cur is not None:
        out.append(cur)
        if cur is stop:
            break
        cur = cur.parent
    return out


def _check_column_ref(ctx: _Ctx, arg: Arg, s: str) -> None:
    """A string that is shaped like ``'table::column'`` but is not a valid one.

    Why: a malformed reference such as ``'city::'`` would otherwise reach the
    ingredient as literal text, and a typo would silently change the query's
    meaning; it is a ParseError (``code="column_ref"``). A string is a column-reference
    *attempt* when it contains ``::`` and what precedes the first ``::`` is
    empty or one identifier-like word (``'What is 10::20?'`` is not: its head
    has spaces / starts with a digit, so it stays a string).
    """
    if "::" not in s:
        return
    head = s.split("::", 1)[0]
    if head and not re.fullmatch(r"[A-Za-z_][\w.]*", head):
        return
    start = _skip_blank(ctx.text, arg.value_start)
    first = ctx.text.find("::", start, arg.end)  # the literal's own '::' (no '' escapes before)
    rest = s.split("::", 1)[1]
    if not head:
        message, where = f"column reference {s!r} has no table name before '::'", first
    elif "::" in rest:
        message, where = (f"column reference {s!r} has more than one '::'",
                          ctx.text.find("::", first + 2, arg.end))
    elif not rest.strip():
        message, where = f"column reference {s!r} has no column name after '::'", first + 2
    else:
        message, where = (f"column reference {s!r} is not of the form 'table::column'",
                          start)
    example = f"'{head or 'table'}::column'"
    raise ParseError(
        message, text=ctx.text, position=where if where >= 0 else start, code="column_ref",
        hint=f"a string with '::' names a column as 'table::column': write {example} (table "
        "an identifier, column without ':'); to pass the text itself, split it, e.g. 'a:' || ':b'",
    )


def _skip_blank(text: str, pos: int) -> int:
    """Skip whitespace and comments from ``pos``."""
    m = _BLANK_RE.match(text, pos)
    return m.end() if m else pos


_BLANK_RE = re.compile(r"(?:\s+|--[^\n]*|/\*[\s\S]*?\*/)*")


def _quoted_column(s: str) -> exp.Column | None:
    """``'t::c'`` -> ``Column(table=t, this=c)`` with ``meta['quoted_form']``."""
    m = _QUOTED_COL_RE.match(s)
    if not m or not m.group(2).strip():
        return None
    table, column = m.group(1), m.group(2)
    db = None
    if "." in table:
        db, table = table.split(".", 1)
    col = exp.Column(
        this=exp.to_identifier(column),
        table=exp.to_identifier(table),
        db=exp.to_identifier(db) if db else None,
    )
    col.meta["quoted_form"] = True
    return col


def _join_args(
    ctx: _Ctx, b: Block, positional: list[exp.Expression], keywords: dict[str, exp.Expression]
) -> tuple[list[exp.Expression], dict[str, exp.Expression], list[str | None]]:
    """Move ``left_on`` / ``right_on`` to positions 0 and 1; remember how they were written."""
    if ctx.registry.get(b.name) is not None and ctx.registry.get(b.name).kind != "join":  # type: ignore[union-attr]
        raise ParseError(
            f"{b.name} is not a join ingredient, so it cannot follow JOIN", text=ctx.text,
            position=b.start,
            hint="write JOIN t2 ON <condition>, or use a join ingredient such as LLMJoin",
        )
    rest = dict(keywords)
    pos = list(positional)
    sides: list[exp.Expression] = []
    keys: list[str | None] = []
    for key in _JOIN_KEYS:
        match = next((k for k in rest if k.lower() == key), None)
        if match is not None:
            sides.append(rest.pop(match))
            keys.append(match)
        elif pos:
            sides.append(pos.pop(0))
            keys.append(None)
    if len(sides) != 2 or not isinstance(sides[1], exp.Column) or not sides[1].table:
        raise ParseError(
            f"JOIN {b.brace}{b.name}(...) needs left_on= and right_on= column references",
            text=ctx.text, position=b.start,
            hint="e.g. JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}}",
        )
    return sides + pos, rest, keys


def _fix_join_table(ctx: _Ctx, cid: int, call: IngredientCall, tree: exp.Expression) -> None:
    """Replace the reserved join table by the right_on column's table."""
    right = call.expressions[1]
    for table in tree.find_all(exp.Table):
        if _JT_RE.match(table.name or "") and int(_JT_RE.match(table.name).group(1)) == cid:  # type: ignore[union-attr]
            new = exp.Table(this=exp.to_identifier(right.table))
            if right.args.get("db"):
                new.set("db", exp.to_identifier(right.args["db"].name))
            table.replace(new)
            return
    b = ctx.blocks[cid]
    raise ParseError(
        f"could not place JOIN {b.name}(...)", text=ctx.text, position=b.start,
        hint="write JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}} after FROM t1",
    )


_EXPR_PREFIX = "SELECT "


def parse_expression(text: str, registry: IngredientRegistry) -> exp.Expression:
    """Parse one BlendSQL *expression* (e.g. what an alias ingredient returns).

    Errors point into ``text`` itself, not into the statement wrapped around it.
    """
    if not isinstance(text, str):
        raise ParseError(
            f"an expression must be a string, not {type(text).__name__}",
            hint="pass the BlendSQL expression text as str",
        )
    try:
        tree = parse(_EXPR_PREFIX + text, registry)
    except ParseError as err:
        pos = 0
        if err.line is not None and err.column is not None:
            pos = _offset(_EXPR_PREFIX + text, err.line, err.column) - len(_EXPR_PREFIX)
        raise ParseError(err.message, text=text, position=max(pos, 0), hint=err.hint) from None
    if (
        not isinstance(tree, exp.Select)
        or len(tree.expressions) != 1
        or any(tree.args.get(k) for k in ("from_", "from", "where", "joins", "group", "limit"))
        or isinstance(tree.expressions[0], exp.Alias)
    ):
        raise ParseError(
            "expected a single expression", text=text, position=0,
            hint="an expression is e.g. {{LLMMap('q', t.c)}} = TRUE or t.a > 3",
        )
    node = tree.expressions[0]
    node.pop()
    return node
