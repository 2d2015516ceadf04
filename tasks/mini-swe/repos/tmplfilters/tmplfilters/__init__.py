from tmplfilters.filters import FILTERS
from tmplfilters.render import TemplateError, render

__all__ = ["FILTERS", "TemplateError", "render"]
