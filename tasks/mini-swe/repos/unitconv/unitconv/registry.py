from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """A unit: value_in_base = (value + offset) * factor."""

    symbol: str
    dimension: str
    factor: float
    offset: float = 0.0


UNITS = {
    u.symbol: u
    for u in [
        Unit("m", "length", 1.0),
        Unit("km", "length", 1000.0),
        Unit("ft", "length", 0.3048),
        Unit("g", "mass", 1.0),
        Unit("kg", "mass", 1000.0),
        Unit("lb", "mass", 453.59237),
        Unit("K", "temperature", 1.0),
        Unit("C", "temperature", 1.0, 273.15),
        Unit("F", "temperature", 5 / 9, 459.67),
    ]
}


def lookup(symbol):
    try:
        return UNITS[symbol]
    except KeyError:
        raise ValueError(f"unknown unit {symbol!r}") from None


def units_of(dimension):
    return sorted(u.symbol for u in UNITS.values() if u.dimension == dimension)
