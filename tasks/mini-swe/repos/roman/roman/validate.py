import re

_CANONICAL = re.compile(r"^M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")


def is_valid(text):
    return bool(text) and bool(_CANONICAL.match(text))
