import re

from tmplfilters.expr import lookup, split_expression
from tmplfilters.filters import FILTERS

_TAG = re.compile(r"\{\{(.*?)\}\}")


class TemplateError(Exception):
    pass


def _apply(value, names):
    for name in reversed(names):
        try:
            fn = FILTERS[name]
        except KeyError:
            raise TemplateError(f"unknown filter {name!r}") from None
        value = fn(value)
    return value


def render(template, context):
    def sub(m):
        var, names = split_expression(m.group(1))
        try:
            value = lookup(context, var)
        except KeyError:
            raise TemplateError(f"undefined variable {var!r}") from None
        return _apply(str(value), names)

    return _TAG.sub(sub, template)
