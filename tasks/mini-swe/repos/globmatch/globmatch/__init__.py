from globmatch.filter import filter_paths
from globmatch.match import match
from globmatch.translate import to_regex

__all__ = ["filter_paths", "match", "to_regex"]
