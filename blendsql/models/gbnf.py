"""Compile output constraints to GBNF, llama.cpp's grammar language.

llama.cpp masks every token that would leave the grammar, so a constraint
compiled here is satisfied by construction. The compiled language is always a
*subset* of what ``constraint.parse`` accepts (never a superset): when a
Python regex shorthand such as ``\\w`` is Unicode-aware, the positive form
compiles to its ASCII part and the negated form excludes the full Unicode set.

Entry points: ``to_gbnf(constraint)`` (None for unconstrained text),
``max_output_bytes(constraint)`` (a length bound, used to size ``max_tokens``
so a bounded answer is never cut off) and ``regex_to_gbnf(pattern)``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blendsql.errors import ModelError
from blendsql.models.constraints import (
    Bool,
    Choice,
    Constraint,
    Date,
    Float,
    Grammar,
    Int,
    JsonSchema,
    ListOf,
    Regex,
    Text,
)

MAX_CP = sys.maxunicode  # 0x10FFFF
Ranges = list[tuple[int, int]]  # sorted, disjoint, inclusive code point ranges

REGEX_HINT = (
    "supported regex syntax: literals, '.', classes [a-z] / [^...], escapes \\d \\w \\s "
    "\\D \\W \\S \\n \\t \\xhh \\uhhhh, groups (...) (?:...) (?P<n>...), alternation |, "
    "quantifiers ? * + {m} {m,} {m,n} (lazy forms too), ^ at the start and $ at the end"
)

# ---------------------------------------------------------------- escaping


def _esc_cp(cp: int, *, in_class: bool) -> str:
    """One code point as GBNF text: printable ASCII raw, everything else as a hex escape.

    Hex escapes sidestep every quoting rule of the grammar parser (which knows
    only a handful of backslash escapes).
    """
    ch = chr(cp)
    special = '"\\' + ("[]^-" if in_class else "")
    if 0x20 <= cp < 0x7F and ch not in special:
        return ch
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def gbnf_literal(text: str) -> str:
    """``text`` as a quoted GBNF string literal (any characters, safely escaped)."""
    return '"' + "".join(_esc_cp(ord(c), in_class=False) for c in text) + '"'


def _class(ranges: Ranges) -> str:
    """A positive GBNF character class for ``ranges``."""
    parts = []
    for a, b in ranges:
        if a == b:
            parts.append(_esc_cp(a, in_class=True))
        else:
            parts.append(_esc_cp(a, in_class=True) + "-" + _esc_cp(b, in_class=True))
    return "[" + "".join(parts) + "]"


# ---------------------------------------------------------------- range sets


def _norm(ranges: Ranges) -> Ranges:
    """Sort and merge overlapping / adjacent ranges."""
    out: Ranges = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for a, b in _norm(ranges):
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return out


def _subtract(ranges: Ranges, remove: Ranges) -> Ranges:
    """Set difference, via complement: A \\ B = not(not A or B)."""
    return _complement(_complement(ranges) + remove)


def _contains(ranges: Ranges, cp: int) -> bool:
    return any(a <= cp <= b for a, b in ranges)


def _ranges_of(pred: Callable[[str], bool]) -> Ranges:
    """All code points whose character satisfies ``pred`` (used for exact Unicode sets)."""
    out: Ranges = []
    start = -1
    for cp in range(MAX_CP + 2):
        hit = cp <= MAX_CP and pred(chr(cp))
        if hit and start < 0:
            start = cp
        elif not hit and start >= 0:
            out.append((start, cp - 1))
            start = -1
    return out


@functools.cache
def _unicode_set(kind: str) -> tuple[tuple[int, int], ...]:
    """Exactly what Python's ``re`` matches for \\d, \\s or \\w on str patterns (computed once)."""
    import re

    pat = re.compile("\\" + kind)
    return tuple(_ranges_of(lambda c: pat.fullmatch(c) is not None))


_ASCII_SET: dict[str, Ranges] = {
    "d": [(0x30, 0x39)],
    "s": [(0x09, 0x0D), (0x20, 0x20)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
}


def _shorthand(letter: str) -> tuple[Ranges, Callable[[], Ranges]]:
    """(lower, upper) bounds of a shorthand class: lower ⊆ Python's set ⊆ upper.

    Positive classes use the lower bound, negated classes exclude the upper
    bound, so the grammar never admits text Python's ``re`` would reject. The
    upper bound is a thunk: the exact Unicode sets take ~0.5 s to compute and
    only negated classes need them.
    """
    kind = letter.lower()
    if letter == kind:
        return _ASCII_SET[kind], lambda: list(_unicode_set(kind))
    return _complement(list(_unicode_set(kind))), lambda: _complement(_ASCII_SET[kind])


# ---------------------------------------------------------------- regex AST


@dataclass
class _Chars:
    """A set of characters (one character of input)."""

    ranges: Ranges


@dataclass
class _Seq:
    items: list[Any]


@dataclass
class _Alt:
    options: list[Any]


@dataclass
class _Repeat:
    node: Any
    lo: int
    hi: int | None


_SIMPLE_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07, "0": 0x00}


class _RegexParser:
    """Recursive-descent parser for the supported regex subset (why: we need the AST
    to emit GBNF and to compute a length bound; ``re``'s own parser is private)."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def fail(self, what: str) -> ModelError:
        return ModelError(
            f"cannot compile regex /{self.p}/ to a grammar: {what} at position {self.i}",
            hint=REGEX_HINT,
        )

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def parse(self) -> Any:
        if self.p.startswith("^"):
            self.i = 1
        node = self.alternation()
        if self.i < len(self.p):
            raise self.fail(f"unexpected {self.p[self.i]!r}")
        return node

    def alternation(self) -> Any:
        options = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else _Alt(options)

    def sequence(self) -> _Seq:
        items: list[Any] = []
        while self.i < len(self.p) and self.peek() not in "|)":
            if self.peek() == "$":
                self.i += 1
                if self.i != len(self.p):
                    raise self.fail("'$' is only supported at the end")
                break
            items.append(self.quantified(self.atom()))
        return _Seq(items)

    def atom(self) -> Any:
        c = self.peek()
        self.i += 1
        if c == "(":
            return self.group()
        if c == "[":
            return self.char_class()
        if c == ".":
            return _Chars(_complement([(0x0A, 0x0A)]))
        if c == "\\":
            lo, _hi = self.escape(in_class=False)
            return _Chars(lo)
        if c in "*+?":
            raise self.fail("nothing to repeat")
        if c == "{" and self.quantifier_at(self.i - 1) is not None:
            raise self.fail("nothing to repeat")
        if c == "^":
            raise self.fail("'^' is only supported at the start")
        return _Chars([(ord(c), ord(c))])

    def group(self) -> Any:
        if self.p.startswith("?:", self.i):
            self.i += 2
        elif self.p.startswith("?P<", self.i) or (
            self.p.startswith("?<", self.i) and self.p[self.i + 2 : self.i + 3] not in ("=", "!")
        ):
            end = self.p.find(">", self.i)
            if end < 0:
                raise self.fail("unterminated group name")
            self.i = end + 1
        elif self.peek() == "?":
            raise self.fail("lookarounds, flags and other (?...) groups are not supported")
        node = self.alternation()
        if self.peek() != ")":
            raise self.fail("missing ')'")
        self.i += 1
        return node

    def quantifier_at(self, j: int) -> tuple[int, int | None, int] | None:
        """Parse ``{m}``, ``{m,}``, ``{,n}``, ``{m,n}`` at ``j``: (lo, hi, end) or None (literal)."""
        end = self.p.find("}", j)
        if end < 0:
            return None
        body = self.p[j + 1 : end]
        lo_s, comma, hi_s = body.partition(",")
        if not (lo_s.isdigit() or (comma and lo_s == "")) or not (hi_s == "" or hi_s.isdigit()):
            return None
        if not comma:
            return int(lo_s), int(lo_s), end + 1
        return int(lo_s or 0), (int(hi_s) if hi_s else None), end + 1

    def quantified(self, node: Any) -> Any:
        while True:
            c = self.peek()
            if c in ("*", "+", "?") and c:
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and (q := self.quantifier_at(self.i)) is not None:
                lo, hi, self.i = q
                if hi is not None and hi < lo:
                    raise self.fail("bad repeat bounds")
            else:
                return node
            if self.peek() == "?":  # lazy: same language under fullmatch
                self.i += 1
            elif self.peek() == "+":
                raise self.fail("possessive quantifiers are not supported")
            if isinstance(node, _Repeat):
                raise self.fail("multiple repeat")
            node = _Repeat(node, lo, hi)

    def escape(self, *, in_class: bool) -> tuple[Ranges, Callable[[], Ranges]]:
        """After a backslash: the lower character set and a thunk for the upper one."""
        c = self.peek()
        if not c:
            raise self.fail("trailing backslash")
        self.i += 1
        if c in "dDwWsS":
            return _shorthand(c)
        if c in _SIMPLE_ESCAPES and (c != "0" or not self.peek().isdigit()):
            cp = _SIMPLE_ESCAPES[c]
        elif c == "b" and in_class:
            cp = 0x08
        elif c in "xuU":
            n = {"x": 2, "u": 4, "U": 8}[c]
            digits = self.p[self.i : self.i + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.fail(f"bad \\{c} escape")
            self.i += n
            cp = int(digits, 16)
        elif c.isalnum():
            raise self.fail(f"unsupported escape \\{c}")
        else:
            cp = ord(c)
        return [(cp, cp)], lambda: [(cp, cp)]

    def class_char(self) -> tuple[Ranges, Callable[[], Ranges], int | None]:
        """One class member: (lower, upper thunk, single code point or None)."""
        c = self.peek()
        if not c:
            raise self.fail("unterminated character class")
        self.i += 1
        if c == "\\":
            start = self.i
            lo, hi = self.escape(in_class=True)
            is_set = self.p[start] in "dDwWsS"
            return lo, hi, None if is_set else lo[0][0]
        if c == "[" and self.peek() in ":=.":
            raise self.fail("POSIX classes are not supported")
        return [(ord(c), ord(c))], lambda: [(ord(c), ord(c))], ord(c)

    def char_class(self) -> _Chars:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        lo: Ranges = []
        his: list[Callable[[], Ranges]] = []
        first = True
        while first or self.peek() != "]":
            if self.i >= len(self.p):
                raise self.fail("unterminated character class")
            first = False
            a_lo, a_hi, a = self.class_char()
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", "") and a is not None:
                self.i += 1
                _b_lo, _b_hi, b = self.class_char()
                if b is None or b < a:
                    raise self.fail("bad character range")
                a_lo = [(a, b)]
                a_hi = functools.partial(list, a_lo)
            lo += a_lo
            his.append(a_hi)
        self.i += 1
        ranges = _complement([r for h in his for r in h()]) if negate else _norm(lo)
        return _Chars(ranges)


def parse_regex(pattern: str) -> Any:
    """Parse ``pattern`` into the small AST used here (raises ModelError if unsupported)."""
    return _RegexParser(pattern).parse()


# ---------------------------------------------------------------- AST → GBNF

_JSON_UNSAFE: Ranges = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]


def _emit(node: Any, json_mode: bool) -> str:
    """GBNF expression for a regex AST node.

    In ``json_mode`` the text is produced as the inside of a JSON string: quote and
    backslash come out escaped, control characters are left out (a subset).
    """
    if isinstance(node, _Chars):
        return _emit_chars(node.ranges, json_mode)
    if isinstance(node, _Alt):
        return "(" + " | ".join(_emit(o, json_mode) for o in node.options) + ")"
    if isinstance(node, _Repeat):
        inner = _emit(node.node, json_mode)
        lo, hi = node.lo, node.hi
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((lo, hi))
        if suffix is None:
            suffix = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
        return f"({inner}){suffix}"
    parts: list[str] = []
    run: list[str] = []  # consecutive single characters become one literal
    for item in node.items:
        if isinstance(item, _Chars) and len(item.ranges) == 1 and item.ranges[0][0] == item.ranges[0][1]:
            run.append(chr(item.ranges[0][0]))
            continue
        if run:
            parts.append(_literal("".join(run), json_mode))
            run = []
        parts.append(_emit(item, json_mode))
    if run:
        parts.append(_literal("".join(run), json_mode))
    if not parts:
        return '""'
    return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"


def _literal(text: str, json_mode: bool) -> str:
    return gbnf_literal(json.dumps(text, ensure_ascii=False)[1:-1] if json_mode else text)


def _emit_chars(ranges: Ranges, json_mode: bool) -> str:
    if not json_mode:
        if not ranges:
            raise ModelError("regex has a character class that matches nothing", hint=REGEX_HINT)
        return _class(ranges)
    alts = []
    safe = _subtract(ranges, _JSON_UNSAFE)
    if safe:
        alts.append(_class(safe))
    if _contains(ranges, 0x22):
        alts.append(gbnf_literal('\\"'))
    if _contains(ranges, 0x5C):
        alts.append(gbnf_literal("\\\\"))
    if not alts:
        raise ModelError("regex has a character class with no JSON-safe characters", hint=REGEX_HINT)
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def regex_to_gbnf(pattern: str) -> str:
    """A full grammar whose language is (a subset of) the strings fully matching ``pattern``."""
    return f"root ::= {_emit(parse_regex(pattern), False)}\n"


def _regex_max_chars(node: Any) -> int | None:
    """Longest match in UTF-8 bytes, or None when unbounded."""
    if isinstance(node, _Chars):
        return len(chr(node.ranges[-1][1]).encode("utf-8", "surrogatepass")) if node.ranges else 0
    if isinstance(node, _Repeat):
        inner = _regex_max_chars(node.node)
        if node.hi == 0 or inner == 0:
            return 0
        if node.hi is None or inner is None:
            return None
        return inner * node.hi
    parts = [_regex_max_chars(n) for n in (node.options if isinstance(node, _Alt) else node.items)]
    if any(p is None for p in parts):
        return None
    ints = [p for p in parts if p is not None]
    if isinstance(node, _Alt):
        return max(ints, default=0)
    return sum(ints)


# ---------------------------------------------------------------- constraints → GBNF

_DAY28 = '("0" [1-9] | "1" [0-9] | "2" [0-8])'
_DAY30 = f'({_DAY28} | "29" | "30")'
_DAY31 = f'({_DAY30} | "31")'
# year 0001-9999 (Python's date has no year 0), Feb 29 only in leap years
_YEAR = '([0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000")'
_LEAP2 = '("0" [48] | [2468] [048] | [13579] [26])'
_LEAP = f"([0-9] [0-9] {_LEAP2} | {_LEAP2} \"00\")"
_MONTH_DAY = (
    f'(("01" | "03" | "05" | "07" | "08" | "10" | "12") "-" {_DAY31}'
    f' | ("04" | "06" | "09" | "11") "-" {_DAY30} | "02-" {_DAY28})'
)
DATE_EXPR = f'({_YEAR} "-" {_MONTH_DAY} | {_LEAP} "-02-29")'
INT_EXPR = '("-"? ("0" | [1-9] [0-9]{0,17}))'
FLOAT_EXPR = '("-"? ("0" | [1-9] [0-9]{0,14}) ("." [0-9]{1,6})?)'
BOOL_EXPR = '("true" | "false")'
JSON_CHAR = '([^"\\\\\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}))'


def _expr(c: Constraint, json_mode: bool) -> str:
    """GBNF expression for one constraint; in ``json_mode`` as a JSON value (list items)."""
    if isinstance(c, Choice):
        if not c.options:
            raise ModelError("a choice constraint needs at least one option",
                             hint="pass options=... with one or more values")
        texts = [json.dumps(o, ensure_ascii=False) if json_mode else o for o in c.options]
        return choice_expr(texts)
    if isinstance(c, Bool):
        return BOOL_EXPR
    if isinstance(c, Int):
        return INT_EXPR
    if isinstance(c, Float):
        return FLOAT_EXPR
    if isinstance(c, Date):
        return f'("\\"" {DATE_EXPR} "\\"")' if json_mode else DATE_EXPR
    if isinstance(c, Regex):
        body = _emit(parse_regex(c.pattern), json_mode)
        return f'("\\"" {body} "\\"")' if json_mode else body
    if isinstance(c, ListOf):
        return _list_expr(c)
    if isinstance(c, Text):
        if not json_mode:
            raise ModelError("free text has no grammar")  # callers check first
        reps = "*" if c.max_chars is None else f"{{0,{c.max_chars}}}"
        return f'("\\"" {JSON_CHAR}{reps} "\\"")'
    raise ModelError(f"no grammar for constraint {type(c).__name__}",
                     hint="use one of Text, Choice, Bool, Int, Float, Date, Regex, JsonSchema, ListOf")


def choice_expr(options: list[str]) -> str:
    """Alternation of literals, factored into a prefix tree.

    Why: llama.cpp keeps one parse stack per live alternative and checks every
    candidate token against each, so 500 flat options cost 500x per token;
    sharing prefixes leaves one stack per distinct next character.
    """
    trie: dict[str, Any] = {}
    for text in sorted(set(options)):
        node = trie
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}  # end-of-option marker
    return _trie_expr(trie)


def _trie_expr(node: dict[str, Any]) -> str:
    alts = []
    for ch in sorted(node):
        if ch == "":
            alts.append('""')
            continue
        run, child = ch, node[ch]
        while len(child) == 1 and "" not in child:  # path compression: a chain of single children
            (nxt, child), = child.items()
            run += nxt
        rest = "" if list(child) == [""] else " " + _trie_expr(child)
        alts.append(gbnf_literal(run) + rest)
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _list_expr(c: ListOf) -> str:
    """``[item, item, ...]`` with the length bounds, one optional space after commas."""
    item = _expr(c.item, True)
    lo, hi = c.min_len, c.max_len
    if hi is not None and (hi < lo or hi < 0):
        raise ModelError(f"list bounds min_len={lo} > max_len={hi}", hint="fix the list length bounds")
    if hi == 0:
        return '"[]"'
    more_hi = "" if hi is None else str(hi - 1)
    more_lo = max(lo - 1, 0)
    rest = f'("," " "? {item}){{{more_lo},{more_hi}}}'
    body = f"{item} {rest}"
    return f'("[" {body} "]")' if lo >= 1 else f'("[" ({body})? "]")'


def _contains_schema(c: Constraint) -> bool:
    return isinstance(c, JsonSchema) or (isinstance(c, ListOf) and _contains_schema(c.item))


def _as_schema(c: Constraint) -> dict[str, Any]:
    """A JsonSchema, or a list of them, as one JSON schema (so llama_cpp's converter does it)."""
    if isinstance(c, JsonSchema):
        return c.schema
    if isinstance(c, ListOf) and _contains_schema(c.item):
        s: dict[str, Any] = {"type": "array", "items": _as_schema(c.item), "minItems": c.min_len}
        if c.max_len is not None:
            s["maxItems"] = c.max_len
        return s
    raise ModelError(f"cannot express {type(c).__name__} inside a JSON schema list")


def _schema_grammar(schema: dict[str, Any]) -> str:
    try:
        from llama_cpp.llama_grammar import json_schema_to_gbnf
    except ImportError as e:  # pragma: no cover - llama_cpp is a core dependency
        raise ModelError("llama-cpp-python is needed for JSON schema grammars",
                         hint="pip install llama-cpp-python") from e
    try:
        grammar = json_schema_to_gbnf(json.dumps(schema))
    except Exception as e:  # the converter raises bare exceptions on bad schemas
        raise ModelError(f"cannot compile JSON schema to a grammar: {e}",
                         hint="check the schema; $ref to remote URLs is not supported") from e
    # the converter lets raw control characters into strings, which json.loads rejects
    return grammar.replace('char ::= [^"\\\\]', 'char ::= [^"\\\\\\x00-\\x1F]')


@functools.lru_cache(maxsize=512)
def to_gbnf(constraint: Constraint) -> str | None:
    """The GBNF grammar for ``constraint``, or None when it needs none (free text).

    Memoised: constraints are frozen dataclasses, and the same constraint is
    used for every value of a map call.
    """
    if type(constraint) in (Text, Constraint):
        return None
    if isinstance(constraint, Grammar):
        return constraint.gbnf
    if _contains_schema(constraint):
        return _schema_grammar(_as_schema(constraint))
    return f"root ::= {_expr(constraint, False)}\n"


@functools.lru_cache(maxsize=512)
def max_output_bytes(constraint: Constraint) -> int | None:
    """Upper bound on the UTF-8 length of any text the grammar admits (None: unbounded).

    Each token carries at least one byte, so this bounds the tokens needed.
    """
    return _max_bytes(constraint, False)


def _max_bytes(c: Constraint, json_mode: bool) -> int | None:
    quotes = 2 if json_mode else 0
    if isinstance(c, Choice):
        texts = [json.dumps(o, ensure_ascii=False) if json_mode else o for o in c.options]
        return max((len(t.encode()) for t in texts), default=0)
    if isinstance(c, Bool):
        return 5
    if isinstance(c, Int):
        return 19
    if isinstance(c, Float):
        return 23
    if isinstance(c, Date):
        return 10 + quotes
    if isinstance(c, Regex):
        n = _regex_max_chars(parse_regex(c.pattern))
        return None if n is None else n * (2 if json_mode else 1) + quotes
    if isinstance(c, ListOf):
        item = _max_bytes(c.item, True)
        if item is None or c.max_len is None:
            return None
        return 2 + c.max_len * (item + 2)
    if isinstance(c, Text) and json_mode and c.max_chars is not None:
        return 6 * c.max_chars + quotes
    return None


def validate(grammar: str, vocab: Any) -> bool:
    """True if llama.cpp's own grammar parser accepts ``grammar`` for this vocabulary.

    llama-cpp-python does not check grammars before use, and an invalid one
    yields a NULL sampler (a crash), so the backend validates each grammar once.
    ``vocab`` is ``load_llama(path, vocab_only=True).llm._model.vocab`` (a vocab-only load
    is enough).
    """
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True
