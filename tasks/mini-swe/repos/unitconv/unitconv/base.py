def to_base(value, unit):
    return value * unit.factor + unit.offset


def from_base(value, unit):
    return (value - unit.offset) / unit.factor
