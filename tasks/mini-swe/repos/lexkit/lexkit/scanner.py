from lexkit.escapes import unescape
from lexkit.tokens import Token, TokenType

SYMBOLS = set("=+-*/(),;")


class LexError(ValueError):
    pass


def _scan_string(src, start):
    """Return (raw body, index after closing quote) for a literal at start."""
    end = src.find('"', start + 1)
    if end == -1:
        raise LexError(f"unterminated string at {start}")
    return src[start + 1 : end], end + 1


def tokenize(src):
    out, i = [], 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c == '"':
            body, nxt = _scan_string(src, i)
            out.append(Token(TokenType.STRING, unescape(body), i))
            i = nxt
        elif c.isdigit():
            j = i
            while j < len(src) and src[j].isdigit():
                j += 1
            out.append(Token(TokenType.NUMBER, src[i:j], i))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                j += 1
            out.append(Token(TokenType.WORD, src[i:j], i))
            i = j
        elif c in SYMBOLS:
            out.append(Token(TokenType.SYMBOL, c, i))
            i += 1
        else:
            raise LexError(f"unexpected {c!r} at {i}")
    return out
