"""blendsql.nl: plain language in, BlendSQL out (parser, explanations, conversations)."""

from blendsql.nl.conversation import Conversation, Turn
from blendsql.nl.explain import explain
from blendsql.nl.parser import Parser

__all__ = ["Conversation", "Parser", "Turn", "explain"]
