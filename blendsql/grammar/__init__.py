"""blendsql.grammar: BlendSQL text -> one sqlglot AST with ingredient-call nodes."""

from blendsql.grammar.nodes import BlendSQLDialect, IngredientCall, to_blendsql
from blendsql.grammar.parser import parse, parse_expression

__all__ = ["BlendSQLDialect", "IngredientCall", "parse", "parse_expression", "to_blendsql"]
