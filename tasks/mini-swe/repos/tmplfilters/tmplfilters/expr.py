def split_expression(expr):
    """'name | f | g' -> ('name', ['f', 'g'])."""
    parts = [p.strip() for p in expr.split("|")]
    if not parts[0]:
        raise ValueError(f"empty variable in {expr!r}")
    return parts[0], [p for p in parts[1:] if p]


def lookup(context, dotted):
    value = context
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(dotted)
    return value
