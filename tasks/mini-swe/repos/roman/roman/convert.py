from roman.table import PAIRS, SYMBOLS
from roman.validate import is_valid


def to_roman(n):
    if not 0 < n < 4000:
        raise ValueError("out of range (1..3999)")
    out = []
    for value, sym in PAIRS:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def from_roman(text):
    text = text.upper()
    if not is_valid(text):
        raise ValueError(f"not a roman numeral: {text!r}")
    total = 0
    prev = 0
    for ch in text:
        value = SYMBOLS[ch]
        if prev and value > prev and total == prev:
            total = value - prev
        else:
            total += value
        prev = value
    return total
