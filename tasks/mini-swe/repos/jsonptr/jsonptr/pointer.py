from jsonptr.tokens import escape, unescape


class PointerError(LookupError):
    pass


def split(pointer):
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PointerError(f"pointer must start with '/': {pointer!r}")
    return [unescape(t) for t in pointer[1:].split("/")]


def join(tokens):
    return "".join("/" + escape(str(t)) for t in tokens)


def resolve(doc, pointer):
    node = doc
    for token in split(pointer):
        if isinstance(node, list):
            if not token.isdigit() or int(token) >= len(node):
                raise PointerError(f"bad index {token!r} in {pointer!r}")
            node = node[int(token)]
        elif isinstance(node, dict):
            if token not in node:
                raise PointerError(f"no key {token!r} in {pointer!r}")
            node = node[token]
        else:
            raise PointerError(f"cannot descend into {type(node).__name__} at {token!r}")
    return node
