from dataclasses import dataclass
from enum import Enum


class TokenType(Enum):
    WORD = "word"
    NUMBER = "number"
    STRING = "string"
    SYMBOL = "symbol"


@dataclass(frozen=True)
class Token:
    type: TokenType
    value: str
    pos: int
