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
            ) from None
        return list(result)


def _mark(tag: str, expr: pp.ParserElement) -> pp.ParserElement:
    def action(s: str, loc: int, toks: pp.ParseResults) -> _Mark:
        return _Mark(tag, loc, str(toks[0]))

    return expr.copy().set_parse_action(action)


def _text(kind: str, expr: pp.ParserElement) -> pp.ParserElement:
    def action(s: str, loc: int, toks: pp.ParseResults) -> Text:
        return Text(loc, str(toks[0]), kind)

    return expr.set_parse_action(action)


def _fail(kind: str, what: str, hint: str) -> pp.ParserElement:
    """A regex alternative that matches an unterminated lexeme and raises."""

    def action(s: str, loc: int, toks: pp.ParseResults) -> Any:
        raise ParseError(f"unterminated {what}", text=s, position=loc, hint=hint)

    patterns = {
        "string": r"'(?:[^']|'')*\Z",
        "dq": r'"(?:[^"]|"")*\Z',
        "bt": r"`(?:[^`]|``)*\Z",
        "br": r"\[[^\]]*\Z",
        "comment": r"/\*[\s\S]*\Z",
    }
    return pp.Regex(patterns[kind]).set_parse_action(action)


def _lexemes() -> dict[str, pp.ParserElement]:
    """SQLite lexemes that may hide braces: strings, quoted identifiers, comments."""
    return {
        "string": pp.Regex(r"'(?:[^']|'')*'"),  # SQLite: '' escapes, no backslash escapes
        "dq": pp.Regex(r'"(?:[^"]|"")*"'),
        "bt": pp.Regex(r"`(?:[^`]|``)*`"),
        "br": pp.Regex(r"\[[^\]]*\]"),
        "line_comment": pp.Regex(r"--[^\n]*"),
        "block_comment": pp.Regex(r"/\*[\s\S]*?\*/"),
    }


def _unterminated() -> pp.ParserElement:
    return (
        _fail("string", "string literal", "close it with ' (write '' for a quote inside it)")
        | _fail("dq", 'quoted identifier "...', 'close it with " (write "" for a quote inside it)')
        | _fail("bt", "quoted identifier `...", "close it with `")
        | _fail("br", "quoted identifier [...", "close it with ]")
        | _fail("comment", "comment /* ...", "close it with */")
    )


def _build(names: frozenset[str]) -> Scanner:
    """Build the PEG grammar; ``names`` are the lower-cased registered names."""
    lex = _lexemes()
    string = _text("string", lex["string"])
    ident = _text("ident", lex["dq"] | lex["bt"] | lex["br"])
    comment = _text("comment", lex["line_comment"] | lex["block_comment"])
    bad = _unterminated()
    param = pp.Regex(r"\?(?![0-9])").set_parse_action(lambda s, loc, t: Param(loc))

    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    shift_open: pp.ParserElement
    if alternation:
        shift_open = pp.Regex(rf"<<(?=\s*(?:{alternation})\s*\()", flags=re.IGNORECASE)
    else:
        shift_open = pp.NoMatch()
    block = pp.Forward()
    ws = pp.Regex(r"\s+")

    # --- inside a block's argument list -------------------------------------
    paren_group = pp.Forward()
    arg_other = pp.Regex(r"[^'\"`\[\-/{}<?(),]+")
    arg_single = pp.Regex(r"-(?!-)|/(?!\*)|<|\{(?!\{)")
    inner_lexeme = (
        lex["string"] | lex["dq"] | lex["bt"] | lex["br"]
        | lex["line_comment"] | lex["block_comment"] | bad
    )
    arg_token = inner_lexeme | param | block | paren_group | arg_other | arg_single
    paren_group <<= (
        _mark("lparen", pp.Literal("("))
        + pp.ZeroOrMore(arg_token | pp.Literal(","))
        + pp.Opt(_mark("rparen", pp.Literal(")")))
    ).set_parse_action(_check_group)
    keyword = pp.Regex(rf"({_NAME_RE})\s*=(?!=)")
    keyword.set_parse_action(lambda s, loc, t: _Mark("kw", loc, str(t[0])))
    arg = pp.Located(pp.Opt(ws) + pp.Opt(keyword) + pp.ZeroOrMore(arg_token))
    arg.set_parse_action(_make_arg)
    arglist = arg + pp.ZeroOrMore(pp.Suppress(",") + arg)

    # --- the block itself (lenient; _make_block reports what is missing) ----
    opener = _mark("open", pp.Literal("{{") | shift_open)
    name = _mark("name", pp.Regex(_NAME_RE))
    closer = _mark("close", pp.Regex(r"\}\}|>>"))
    block <<= pp.Located(
        opener + pp.Opt(ws) + pp.Opt(name) + pp.Opt(ws)
        + pp.Opt(_mark("lparen", pp.Literal("(")) + arglist + pp.Opt(_mark("rparen", pp.Literal(")"))))
        + pp.Opt(ws) + pp.Opt(closer)
    ).set_parse_action(_make_block_factory(names))

    # --- top level ----------------------------------------------------------
    stray = pp.Literal("}}").set_parse_action(_stray_close)
    semi = pp.Literal(";").set_parse_action(lambda s, loc, t: Semi(loc))
    other = _text("other", pp.Regex(r"[^'\"`\[\-/{}<?;]+") | pp.Regex(r"[\s\S]"))
    token = string | ident | comment | bad | param | block | stray | semi | other
    top = pp.ZeroOrMore(token) + pp.StringEnd()
    top.streamline()
    return Scanner(names, top)


def _check_group(s: str, loc: int, toks: pp.ParseResults) -> list[Any]:
    """A parenthesised group inside arguments must be closed before the block ends."""
    if not (isinstance(toks[-1], _Mark) and toks[-1].tag == "rparen" and len(toks) > 1):
        raise ParseError(
            "unbalanced '(' inside an ingredient call", text=s, position=loc,
            hint="every '(' inside {{...}} needs a matching ')' before the closing '}}'",
        )
    return [t for t in toks if isinstance(t, (Block, Param))]


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
    for t in inner:
        if isinstance(t, _Mark) and t.tag == "kw":
            keyword = t.text.split("=")[0].strip()
            keyword_pos = t.pos
            value_start = t.pos + len(t.text)
        elif isinstance(t, (Block, Param)):
            items.append(t)
    return Arg(start, end, keyword, keyword_pos, value_start, items)


def _stray_close(s: str, loc: int, toks: pp.ParseResults) -> Any:
    raise ParseError(
        "'}}' without a matching '{{'", text=s, position=loc,
        hint="ingredient calls are written {{Name(args)}}; remove the stray '}}'",
    )


def _nearest(name: str, names: frozenset[str]) -> str | None:
    from rapidfuzz import fuzz, process

    if not names:
        return None
    best = process.extractOne(name.lower(), sorted(names), scorer=fuzz.ratio)
    return str(best[0]) if best else None


def _make_block_factory(names: frozenset[str]) -> Any:
    """Parse action building a :class:`Block`, reporting the first missing piece."""

    def action(s: str, loc: int, toks: pp.ParseResults) -> Block:
        start, inner, end = _located(toks)
        marks = {t.tag: t for t in inner if isinstance(t, _Mark)}
        opener = marks["open"]
        brace = "<<" if opener.text.startswith("<") else "{{"
        close = "}}" if brace == "{{" else ">>"
        name = marks.get("name")
        if name is None:
            raise ParseError(
                f"expected an ingredient name after '{brace}'", text=s, position=opener.pos + 2,
                hint="write {{Name(args)}}, e.g. {{LLMMap('question', t.col)}}",
            )
        if name.text.lower() not in names:
            near = _nearest(name.text, names)
            hint = f"did you mean {near!r}?" if near else "no ingredients are registered"
            known = ", ".join(sorted(names))
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
                f"missing ')' to close the arguments of {name.text}", text=s, position=end,
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
        args = [t for t in inner if isinstance(t, Arg)]
        if len(args) == 1 and not s[args[0].start:args[0].end].strip():
            args = []
        return Block(start, end, brace, name.text, name.pos, args)

    return action


@lru_cache(maxsize=64)
def _cached(names: frozenset[str]) -> Scanner:
    with _BUILD_LOCK:
        old = pp.ParserElement.DEFAULT_WHITE_CHARS
        pp.ParserElement.set_default_whitespace_chars("")
        try:
            return _build(names)
        finally:
            pp.ParserElement.set_default_whitespace_chars(old)


def scanner_for(names: list[str] | frozenset[str]) -> Scanner:
    """The compiled scanner for a registry's names (cached per lower-cased name set)."""
    return _cached(frozenset(n.lower() for n in names))
