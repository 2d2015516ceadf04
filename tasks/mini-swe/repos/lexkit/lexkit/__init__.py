from lexkit.scanner import LexError, tokenize
from lexkit.tokens import Token, TokenType

__all__ = ["LexError", "Token", "TokenType", "tokenize"]
