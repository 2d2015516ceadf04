from roman.convert import from_roman, to_roman
from roman.validate import is_valid

__all__ = ["from_roman", "is_valid", "to_roman"]
