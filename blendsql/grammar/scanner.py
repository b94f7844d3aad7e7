"""PEG scanner (pyparsing) that finds ingredient blocks in BlendSQL text.

The scanner does not understand SQL. It only knows SQLite's *lexical* rules
well enough to never look inside string literals, quoted identifiers and
comments, and the shape of an ingredient block::

    {{Name(arg, ..., key=value)}}      <<Name(arg, ...)>>

``<<`` opens a block only when a *registered* name and ``(`` follow it
(otherwise it is SQLite's left-shift operator), so the grammar depends on the
registry's name set and is cached per name set.

The result is a flat list of top-level tokens (:class:`Block`, :class:`Param`,
:class:`Semi`, :class:`Text`); blocks carry their arguments as source spans
plus the nested blocks / ``?`` parameters inside them. The SQL itself is left
to sqlglot.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pyparsing as pp

from blendsql.errors import ParseError

_NAME_RE = r"[A-Za-z_][A-Za-z0-9_]*"
_BUILD_LOCK = threading.Lock()


@dataclass
class Param:
    """A ``?`` positional parameter at ``pos``."""

    pos: int


@dataclass
class Semi:
    """A top-level ``;`` statement separator at ``pos``."""

    pos: int


@dataclass
class Text:
    """Any other top-level lexeme (kept so the splicer can look behind a block)."""

    pos: int
    text: str
    kind: str  # "other" | "comment" | "string" | "ident"


@dataclass
class Arg:
    """One argument of a block: source span of its value, optional keyword."""

    start: int
    end: int
    keyword: str | None
    keyword_pos: int
    value_start: int
    items: list[Block | Param] = field(default_factory=list)


@dataclass
class Block:
    """An ingredient block ``{{Name(...)}}`` / ``<<Name(...)>>`` in the source."""

    start: int
    end: int
    brace: str
    name: str
    name_pos: int
    args: list[Arg] = field(default_factory=list)


@dataclass
class _Mark:
    """Internal marker of a fixed lexeme (``(``, ``)``, ``}}``...) with its position."""

    tag: str
    pos: int
    text: str = ""


@dataclass
class Scanner:
    """A compiled grammar for one ingredient name set."""

    names: frozenset[str]
    top: pp.ParserElement

    def scan(self, text: str) -> list[Block | Param | Semi | Text]:
        """Tokenise ``text``; raise :class:`ParseError` on lexical/structural errors."""
        try:
            result = self.top.parse_string(text, parse_all=True)
        except pp.ParseBaseException as err:  # the grammar always matches; defensive
            raise ParseError(
                "could not scan the query", text=text, position=err.loc,
                hint="check quotes, comments and ingredient braces near here",
            ) from None
        except RecursionError:
            raise ParseError(
                "query nests too deeply to parse", text=text, position=0,
                hint="reduce the nesting of parentheses / ingredient calls",
                code="too_deep",
            ) from None
        return list(result)


def _mark(tag: str, expr: pp.ParserElement) -> pp.ParserElement:
    def action(s: str, loc: int, toks: pp.ParseResults) -> _Mark:
        return _Mark(tag, loc, str(toks[0]))

    return expr.copy().set_parse_action(action)


# Lexeme patterns, tried in order inside one combined regex (one pyparsing
# element per lexeme keeps scanning fast). SQLite strings escape a quote by
# doubling it and know no backslash escapes.
_LEXEMES: list[tuple[str, str]] = [
    ("string", r"'(?:[^']|'')*'"),
    ("dq", r'"(?:[^"]|"")*"'),
    ("bt", r"`(?:[^`]|``)*`"),
    ("br", r"\[[^\]]*\]"),
    ("line_comment", r"--[^\n]*"),
    ("block_comment", r"/\*[\s\S]*?\*/"),
    ("bad_string", r"'(?:[^']|'')*\Z"),
    ("bad_dq", r'"(?:[^"]|"")*\Z'),
    ("bad_bt", r"`(?:[^`]|``)*\Z"),
    ("bad_br", r"\[[^\]]*\Z"),
    ("bad_comment", r"/\*[\s\S]*\Z"),
    ("bad_param", r"\?[0-9]+"),
    ("param", r"\?"),
]

_UNTERMINATED: dict[str, tuple[str, str]] = {
    "bad_string": ("unterminated string literal", "close it with ' (write '' for a quote inside it)"),
    "bad_dq": ('unterminated quoted identifier "...', 'close it with " (write "" for a quote inside it)'),
    "bad_bt": ("unterminated quoted identifier `...", "close it with `"),
    "bad_br": ("unterminated quoted identifier [...", "close it with ]"),
    "bad_comment": ("unterminated comment /* ...", "close it with */"),
    "bad_param": (
        "numbered parameters ?NNN are not supported",
        "use plain ? (numbered in text order) or named :name parameters",
    ),
}
_KINDS = {
    "string": "string", "dq": "ident", "bt": "ident", "br": "ident",
    "line_comment": "comment", "block_comment": "comment", "other": "other", "semi": "other",
}


def _lexer(other: str, extra: list[tuple[str, str]]) -> pp.ParserElement:
    """One regex element for all lexemes; its action builds Text/Param/Semi or raises."""
    groups = [("other", other), *_LEXEMES, *extra]
    compiled = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in groups))
    # pyparsing copies every named group into its results; an unnamed twin
    # keeps the element cheap, and the action asks the named one which matched.
    plain = re.compile("|".join(f"(?:{rx})" for _, rx in groups))

    def action(s: str, loc: int, toks: pp.ParseResults) -> Any:
        m = compiled.match(s, loc)
        kind = m.lastgroup if m else None
        if kind is None:  # pragma: no cover - the element matched, so m exists
            return []
        if kind in _UNTERMINATED:
            message, hint = _UNTERMINATED[kind]
            raise ParseError(message, text=s, position=loc, hint=hint)
        if kind == "param":
            return Param(loc)
        if kind == "semi":
            return Semi(loc)
        if kind == "stray":
            _stray_close(s, loc, toks)
        return Text(loc, str(toks[0]), _KINDS.get(kind, "other"))

    return pp.Regex(plain).set_parse_action(action)


# lexemes that never end a run of plain text: everything but ?, ;, }} and the errors
_RUN_SAFE = ("string", "dq", "bt", "br", "line_comment", "block_comment")


def _run_lexer(other: str, singles: str) -> pp.ParserElement:
    """One element for a whole run of plain lexemes (text, strings, comments...).

    Why: matching each lexeme as its own pyparsing token cost most of the
    parse time of large queries (a long IN list is two tokens per value).
    The run is matched by one C-level regex and split into the same
    :class:`Text` tokens the one-lexeme element produces; it stops before
    anything else (``?``, ``;``, ``}}``, blocks, unterminated quotes), which
    the other elements then handle as before.
    """
    groups = [("other", other), *((n, rx) for n, rx in _LEXEMES if n in _RUN_SAFE),
              ("other1", singles)]
    split = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in groups))
    run = "(?:" + "|".join(f"(?:{rx})" for _, rx in groups) + ")+"

    def action(s: str, loc: int, toks: pp.ParseResults) -> list[Text]:
        end = loc + len(toks[0])
        out: list[Text] = []
        pos = loc
        while pos < end:
            m = split.match(s, pos, end)
            if m is None or m.end() == pos:  # pragma: no cover - the run matched these
                raise ParseError("could not scan the query", text=s, position=pos,
                                 hint="please report this query")
            out.append(Text(pos, m.group(), _KINDS.get(m.lastgroup or "", "other")))
            pos = m.end()
        return out

    return pp.Regex(run).set_parse_action(action)


def _bare_head(bare: frozenset[str]) -> str:
    """Regex of a bare call's head (``ANSWER`` before ``(``), or "" without bare names.

    Why: with bare calls (SUQL's ``ANSWER(reviews, 'q')``) a run of SQL text
    must stop right before a bare name followed by ``(``. A name after ``.``
    (``t.answer(``) or inside another identifier is never a bare call.
    """
    if not bare:
        return ""
    alt = "|".join(re.escape(n) for n in sorted({b.lower() for b in bare}, key=len, reverse=True))
    return rf"(?<![\w.$])(?i:{alt})(?![\w$])(?=\s*\()"


def _text_run(chars: str, head: str) -> str:
    """A run of ``chars`` that never starts a bare call (one C-level regex match)."""
    return rf"(?:(?!{head}){chars})+" if head else rf"{chars}+"


def _build(names: frozenset[str], bare: frozenset[str] = frozenset()) -> Scanner:
    """Build the PEG grammar; ``names`` are the registered names (any case).

    ``bare``: names also recognised without braces (``bare_call = True``).
    """
    lowered = sorted({n.lower() for n in names}, key=len, reverse=True)
    alternation = "|".join(re.escape(n) for n in lowered)
    block = pp.Forward()
    bare_head = _bare_head(bare)

    # --- inside a block's argument list -------------------------------------
    # '}' never appears in SQL outside strings, so an argument stops there and
    # a missing ')' is reported at the closing '}}'.
    paren_group = pp.Forward()
    # a lone '<' is an operator unless it opens a registered <<Name( call
    lone_lt = rf"<(?!<\s*(?i:{alternation})\s*\()" if alternation else "<"
    singles = rf"-(?!-)|/(?!\*)|\{{(?!\{{)|{lone_lt}"
    arg_lex = _lexer(_text_run(r"[^'\"`\[\-/{}<?(),]", bare_head), [("other1", singles)])
    arg_token = arg_lex | paren_group | block
    paren_group <<= (
        _mark("lparen", pp.Literal("("))
        + pp.ZeroOrMore(arg_token | pp.Literal(","))
        + pp.Opt(_mark("rparen", pp.Literal(")")))
    ).set_parse_action(_check_group)
    # leading blanks and an optional `name=` in one element
    # (comments may precede the keyword: one argument per line, each commented)
    lead = pp.Regex(rf"{_BLANKS}{_NAME_RE}\s*=(?!=)|\s+").set_parse_action(_lead)
    arg = pp.Located(pp.Opt(lead) + pp.ZeroOrMore(arg_token))
    arg.set_parse_action(_make_arg)
    arglist = arg + pp.ZeroOrMore(pp.Suppress(",") + arg)

    # --- the block itself (lenient; _make_block reports what is missing) ----
    opener = rf"(?P<open>\{{\{{|<<(?=\s*(?i:{alternation})\s*\())" if alternation else r"(?P<open>\{\{)"
    head_call = pp.Regex(rf"{opener}\s*(?P<name>{_NAME_RE})\s*(?P<lparen>\()")
    head_bad = pp.Regex(rf"{opener}\s*(?P<name>{_NAME_RE})?")
    tail = pp.Regex(r"(?P<rparen>\))\s*(?P<close>\}\}|>>)?")
    close_only = pp.Regex(r"\s*(?P<close>\}\}|>>)")  # ')' forgotten
    for element in (head_call, head_bad, tail, close_only):
        element.set_parse_action(_group_marks(element.re))
    braced = (head_call + arglist + pp.Opt(tail | close_only)) | head_bad
    if bare_head:
        bare_call = pp.Regex(rf"(?P<name>{bare_head})\s*(?P<lparen>\()")
        bare_tail = pp.Regex(r"(?P<rparen>\))")
        for element in (bare_call, bare_tail):
            element.set_parse_action(_group_marks(element.re))
        braced = (bare_call + arglist + pp.Opt(bare_tail)) | braced
    block <<= pp.Located(braced).set_parse_action(_make_block_factory(names))

    # --- top level ----------------------------------------------------------
    top_other = _text_run(r"[^'\"`\[\-/{}<?;]", bare_head)
    top_lex = _lexer(
        top_other, [("semi", ";"), ("stray", r"\}\}"), ("other1", singles + r"|\}")],
    )
    top_run = _run_lexer(top_other, singles + r"|\}(?!\})")
    token = (block | top_run | top_lex) if bare_head else (top_run | top_lex | block)
    top = pp.ZeroOrMore(token) + pp.StringEnd()
    top.streamline()
    return Scanner(names, top)


_BLANKS = r"(?:\s|--[^\n]*|/\*[\s\S]*?\*/)*"
_KEYWORD_RE = re.compile(rf"({_NAME_RE})\s*=$")


def _lead(s: str, loc: int, toks: pp.ParseResults) -> list[Any]:
    """Blanks / comments before an argument, with its ``name=`` keyword when there is one."""
    text = str(toks[0])
    m = _KEYWORD_RE.search(text)
    if m is None:
        return []
    return [_Mark("kw", loc + m.start(1), text[m.start(1):])]


def _group_marks(compiled: re.Pattern[str]) -> Any:
    """Parse action: one mark per named group that matched (open, name, '(', ')', close)."""
    tags = [t for t in ("open", "name", "lparen", "rparen", "close") if t in compiled.groupindex]

    def action(s: str, loc: int, toks: pp.ParseResults) -> list[_Mark]:
        m = compiled.match(s, loc)
        if m is None:  # pragma: no cover - the element just matched here
            return []
        return [_Mark(t, m.start(t), m.group(t)) for t in tags if m.group(t) is not None]

    return action


def _check_group(s: str, loc: int, toks: pp.ParseResults) -> list[Any]:
    """A parenthesised group inside arguments must be closed before the block ends."""
    if not (isinstance(toks[-1], _Mark) and toks[-1].tag == "rparen" and len(toks) > 1):
        raise ParseError(
            "unbalanced '(' inside an ingredient call", text=s, position=loc,
            hint="every '(' inside {{...}} needs a matching ')' before the closing '}}'",
        )
    _refuse_adjacent_strings(s, list(toks))
    return [_Mark("group", loc), *(t for t in toks if isinstance(t, (Block, Param)))]


def _located(toks: pp.ParseResults) -> tuple[int, list[Any], int]:
    """Unpack ``pp.Located`` results: (start, tokens, end)."""
    if not isinstance(toks[0], int):
        toks = toks[0]
    return int(toks[0]), list(toks[1]), int(toks[2])


def _make_arg(s: str, loc: int, toks: pp.ParseResults) -> Arg:
    start, inner, end = _located(toks)
    keyword: str | None = None
    keyword_pos = -1
    value_start = start
    items: list[Block | Param] = []
    _refuse_adjacent_strings(s, inner)
    for t in inner:
        if isinstance(t, _Mark) and t.tag == "kw":
            keyword = t.text.split("=")[0].strip()
            keyword_pos = t.pos
            value_start = t.pos + len(t.text)
        elif isinstance(t, (Block, Param)):
            items.append(t)
    return Arg(start, end, keyword, keyword_pos, value_start, items)


def _refuse_adjacent_strings(s: str, toks: list[Any]) -> None:
    """``'a' 'b'``: sqlglot reads a concatenation, SQLite an alias; inside a call
    it is almost always a missing comma, so it is refused."""
    previous = False
    for t in toks:
        if _blank(t) or isinstance(t, str) and not t.strip():
            continue
        is_string = isinstance(t, Text) and t.kind == "string"
        if is_string and previous:
            raise ParseError(
                "two string literals in a row inside an ingredient call", text=s,
                position=t.pos, hint="separate arguments with ',' or join strings with ||",
            )
        previous = is_string


def _blank(t: object) -> bool:
    """Whitespace and comments do not separate lexemes."""
    return isinstance(t, Text) and (t.kind == "comment" or not t.text.strip())


def _stray_close(s: str, loc: int, toks: pp.ParseResults) -> Any:
    raise ParseError(
        "'}}' without a matching '{{'", text=s, position=loc,
        hint="ingredient calls are written {{Name(args)}}; remove the stray '}}'",
    )


def nearest_name(name: str, names: frozenset[str] | list[str]) -> str | None:
    """The registered name closest to ``name`` (rapidfuzz ratio, case-insensitive)."""
    from rapidfuzz import fuzz, process

    if not names:
        return None
    best = process.extractOne(
        name, sorted(names), scorer=fuzz.ratio, processor=str.lower, score_cutoff=50
    )
    return str(best[0]) if best else None


def _make_block_factory(names: frozenset[str]) -> Any:
    """Parse action building a :class:`Block`, reporting the first missing piece."""
    lowered = {n.lower() for n in names}

    def action(s: str, loc: int, toks: pp.ParseResults) -> Block:
        start, inner, end = _located(toks)
        marks = {t.tag: t for t in inner if isinstance(t, _Mark)}
        opener = marks.get("open")
        if opener is None:  # a bare call NAME(...) (only for bare_call names)
            return _bare_block(s, start, end, inner, marks)
        brace = "<<" if opener.text.startswith("<") else "{{"
        close = "}}" if brace == "{{" else ">>"
        name = marks.get("name")
        if name is None:
            raise ParseError(
                f"expected an ingredient name after '{brace}'", text=s, position=opener.pos + 2,
                hint="write {{Name(args)}}, e.g. {{LLMMap('question', t.col)}}",
            )
        if name.text.lower() not in lowered:
            near = nearest_name(name.text, names)
            known = ", ".join(sorted(names, key=str.lower))
            hint = f"did you mean {near!r}?" if near else "no similar name is registered"
            if not names:
                hint = "no ingredients are registered"
            if "lparen" not in marks:
                raise ParseError(
                    f"'{brace}' must start an ingredient call Name(...)", text=s,
                    position=opener.pos, hint=f"registered ingredients: {known or 'none'}",
                )
            raise ParseError(
                f"unknown ingredient {name.text!r}", text=s, position=name.pos,
                hint=f"{hint} (registered: {known})" if known else hint,
            )
        if "lparen" not in marks:
            raise ParseError(
                f"expected '(' after ingredient name {name.text!r}", text=s,
                position=name.pos + len(name.text),
                hint=f"write {brace}{name.text}(args){close}",
            )
        if "rparen" not in marks:
            raise ParseError(
                f"missing ')' to close the arguments of {name.text}", text=s,
                position=marks["close"].pos if "close" in marks else len(s[:end].rstrip()),
                hint=f"end the call with '){close}'; check for an unclosed '(' or quote",
            )
        if "close" not in marks:
            raise ParseError(
                f"missing '{close}' after {name.text}(...)", text=s,
                position=marks["rparen"].pos + 1,
                hint=f"a call opened with '{brace}' ends with '){close}'",
            )
        if marks["close"].text != close:
            raise ParseError(
                f"'{brace}' closed by '{marks['close'].text}'", text=s,
                position=marks["close"].pos,
                hint=f"a call opened with '{brace}' ends with '{close}'",
            )
        return Block(start, end, brace, name.text, name.pos, _call_args(s, inner))

    return action


def _bare_block(s: str, start: int, end: int, inner: list[Any],
                marks: dict[str, _Mark]) -> Block:
    """A bare ``NAME(args)`` block (brace ``""``); only ``)`` can be missing."""
    name = marks["name"]
    if "rparen" not in marks:
        raise ParseError(
            f"missing ')' to close the arguments of {name.text}", text=s,
            position=len(s[:end].rstrip()),
            hint="end the call with ')'; check for an unclosed '(' or quote",
        )
    return Block(start, end, "", name.text, name.pos, _call_args(s, inner))


_BLANK_RE = re.compile(r"(?:\s+|--[^\n]*|/\*[\s\S]*?\*/)*")


def _blank_arg(s: str, arg: Arg) -> bool:
    """An argument with nothing but whitespace / comments in it."""
    m = _BLANK_RE.match(s, arg.start, arg.end)
    return not arg.items and m is not None and m.end() == arg.end


def _call_args(s: str, inner: list[Any]) -> list[Arg]:
    """The call's arguments: ``f()`` has none, and one trailing comma is allowed.

    Why the trailing comma: queries are often written (and generated) one
    argument per line, ``options=(1, 2, 3),`` then ``)``; Python accepts that.
    Only a single trailing comma after a real argument is dropped, so ``f(,)``
    and ``f(a,,)`` still report an empty argument.
    """
    args = [t for t in inner if isinstance(t, Arg)]
    if len(args) == 1 and _blank_arg(s, args[0]):
        return []
    if len(args) >= 2 and _blank_arg(s, args[-1]) and not _blank_arg(s, args[-2]):
        return args[:-1]
    return args


@lru_cache(maxsize=64)
def _cached(names: frozenset[str], bare: frozenset[str] = frozenset()) -> Scanner:
    with _BUILD_LOCK:
        old = pp.ParserElement.DEFAULT_WHITE_CHARS
        pp.ParserElement.set_default_whitespace_chars("")
        try:
            return _build(names, bare)
        finally:
            pp.ParserElement.set_default_whitespace_chars(old)


@lru_cache(maxsize=1)
def sqlite_functions() -> frozenset[str]:
    """Names of SQLite's built-in functions (lower case), from ``PRAGMA function_list``.

    Why: a bare ingredient call must never shadow a SQL function.
    """
    import sqlite3

    con = sqlite3.connect(":memory:")
    try:
        rows = con.execute("PRAGMA function_list").fetchall()
    except sqlite3.DatabaseError:  # very old SQLite: fall back to the core names
        rows = [(n,) for n in ("abs", "coalesce", "count", "length", "lower", "max", "min",
                                "replace", "round", "substr", "sum", "trim", "upper")]
    finally:
        con.close()
    return frozenset(str(r[0]).lower() for r in rows)


def scanner_for(names: list[str] | frozenset[str],
                bare: list[str] | frozenset[str] = ()) -> Scanner:  # type: ignore[assignment]
    """The compiled scanner for a registry's names (cached per name set).

    ``bare``: names that may also be written without braces; SQLite
    built-in function names are dropped from it.
    """
    allowed = frozenset(b for b in bare if b.lower() not in sqlite_functions())
    return _cached(frozenset(names), allowed)
