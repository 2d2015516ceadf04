from semver.pick import latest
from semver.version import Version

__all__ = ["Version", "latest"]
