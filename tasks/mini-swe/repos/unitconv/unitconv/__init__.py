from unitconv.convert import convert
from unitconv.registry import Unit, units_of

__all__ = ["Unit", "convert", "units_of"]
