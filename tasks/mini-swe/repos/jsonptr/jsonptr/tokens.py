def escape(token):
    return token.replace("~", "~0").replace("/", "~1")


def unescape(token):
    return token.replace("~0", "~").replace("~1", "/")
