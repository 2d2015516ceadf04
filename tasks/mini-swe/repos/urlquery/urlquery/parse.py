from urlquery.percent import unquote


def parse_query(query):
    """Parse 'a=1&b=2&a=3' into {'a': ['1', '3'], 'b': ['2']}."""
    out = {}
    for part in query.lstrip("?").split("&"):
        if not part:
            continue
        pieces = part.split("=")
        key = unquote(pieces[0])
        value = unquote(pieces[1]) if len(pieces) > 1 else ""
        out.setdefault(key, []).append(value)
    return out
