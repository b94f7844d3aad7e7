"""blendsql.grammar: BlendSQL text -> one sqlglot AST with ingredient-call nodes."""

from blendsql.grammar.nodes import BlendSQLDialect, IngredientCall, to_blendsql
from blendsql.grammar.parser import parse

__all__ = ["BlendSQLDialect", "IngredientCall", "parse", "to_blendsql"]
