from urlquery.build import build_query
from urlquery.parse import parse_query
from urlquery.url import with_params

__all__ = ["build_query", "parse_query", "with_params"]
