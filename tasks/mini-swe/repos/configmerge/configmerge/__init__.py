from configmerge.defaults import Defaults
from configmerge.merge import deep_merge
from configmerge.paths import get_path

__all__ = ["Defaults", "deep_merge", "get_path"]
