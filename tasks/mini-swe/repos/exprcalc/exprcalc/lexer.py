from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    kind: str  # "num", "op", "lparen", "rparen", "end"
    text: str


OPS = "+-*/^"


def tokenize(src):
    tokens = []
    i = 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c.isdigit() or c == ".":
            j = i
            while j < len(src) and (src[j].isdigit() or src[j] == "."):
                j += 1
            tokens.append(Token("num", src[i:j]))
            i = j
        elif c in OPS:
            tokens.append(Token("op", c))
            i += 1
        elif c == "(":
            tokens.append(Token("lparen", c))
            i += 1
        elif c == ")":
            tokens.append(Token("rparen", c))
            i += 1
        else:
            raise SyntaxError(f"unexpected character {c!r} at {i}")
    tokens.append(Token("end", ""))
    return tokens
