"""Evaluation helpers: answer metrics and benchmark bookkeeping."""

from blendsql.eval.metrics import denotation_match, exact_match, f1, normalize_text, to_number

__all__ = ["denotation_match", "exact_match", "f1", "normalize_text", "to_number"]
