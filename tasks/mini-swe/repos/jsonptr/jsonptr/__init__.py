from jsonptr.pointer import PointerError, join, resolve, split
from jsonptr.tokens import escape, unescape

__all__ = ["PointerError", "escape", "join", "resolve", "split", "unescape"]
