"""blendsql.grammar: BlendSQL text -> one sqlglot AST with ingredient-call nodes.

``parse(text, registry)`` returns the whole query as one sqlglot (SQLite)
expression in which every ``{{Name(args)}}`` / ``<<Name(args)>>`` is an
:class:`IngredientCall`; ``to_blendsql(tree)`` renders it back (stable:
parse -> render -> parse gives an equal AST). ``parse_expression`` parses a
single expression (what alias ingredients return).

Decisions worth knowing (each one is tested in ``tests/grammar``):

- ``<<`` opens a call only when a registered name (any case) and ``(``
  follow; otherwise it is SQLite's shift. A ``<<`` call ends at ``)>>``.
- An argument that starts with ``name=`` (not ``==``) is a keyword argument;
  write a positional comparison in parentheses: ``(a = 1)``.
- A string argument of the form ``'table::column'`` or ``'db.table::column'``
  (table an identifier, column anything without ``::``) is a column reference
  (``exp.Column`` with ``meta['quoted_form']``); other strings stay strings.
- ``('a')`` and ``('a',)`` at the top of an argument are one-element tuples
  (so ``options=('a')`` is a list of one option); they render as ``('a',)``.
  ``(t.a + 1)`` (not a literal) stays a parenthesised expression.
- ``?`` parameters become ``:p0``, ``:p1``, ... in text order (inside
  ingredient arguments too); named ``:x`` stay; a named ``:p<k>`` next to
  ``?`` parameters is refused, as are SQLite's numbered ``?NNN``.
- ``JOIN {{LLMJoin(left_on='t1::a', right_on='t2::b')}}`` becomes
  ``JOIN t2 ON <call(t1.a, t2.b)>`` with ``meta['join_form']`` and
  ``meta['join_keys']`` (how the two sides were written) and renders back in
  its original form; only join ingredients may follow ``JOIN`` directly.
- A query that is only one ingredient call (blanks, comments and a final
  ``;`` aside), e.g. ``{{LLMQA('Who won?')}}``, means ``SELECT <call>``.
- One trailing comma in an argument list is allowed (``f(a, b,)``); ``f(a,,)``
  and ``f(,)`` are "empty argument" errors. Comments may precede ``key=``.
- A string argument that contains ``::`` and whose part before the first
  ``::`` is empty or one identifier-like word is a column-reference attempt:
  if it is not a valid ``'table::column'`` (``'city::'``, ``'::col'``,
  ``'a::b::c'``) it is a ParseError (code ``column_ref``). Other strings with
  ``::`` (``'What is 10::20?'``) stay strings; ``'a:' || ':b'`` passes any text.
- Limits, checked before parsing with a caret at the spot: ``max_chars``
  (default 100,000 characters, ``None``: none; the session option
  ``max_query_chars``) and parentheses nested more than ``MAX_NESTING`` (32)
  deep. Parsing itself is linear in the text size.
- Every ParseError has a ``code``: ``syntax``, ``empty``, ``statements``,
  ``too_large``, ``too_deep``, ``column_ref`` or ``type`` (a non-string query:
  :class:`blendsql.errors.QueryTypeError`, also a ``TypeError``).
- Refused with a ParseError: a bare expression as a query (``{{QA()}} = 1``),
  empty / comment-only text, two string literals in a row (``'a' 'b'``,
  which SQLite reads as an alias and sqlglot as a concatenation), an
  ingredient used as a table (``FROM {{...}}``), more than one statement, and
  text sqlglot can only keep as an unparsed command.
- Every error is a :class:`blendsql.errors.ParseError` whose line/column
  point into the original text, nested arguments included.
"""

from blendsql.grammar.nodes import BlendSQLDialect, IngredientCall, to_blendsql
from blendsql.grammar.parser import parse, parse_expression

__all__ = ["BlendSQLDialect", "IngredientCall", "parse", "parse_expression", "to_blendsql"]
