from configmerge.merge import deep_merge

DEFAULTS = {
    "db": {"host": "db.internal", "port": 5432, "pool": 5},
    "log": {"level": "info", "handlers": {"console": {"enabled": True}}},
}


class Defaults:
    def __init__(self, values=None):
        self.values = values if values is not None else {
            "db": dict(DEFAULTS["db"]),
            "log": {"level": "info", "handlers": {"console": {"enabled": True}}},
        }

    def profile(self, overrides):
        return deep_merge(self.values, overrides)
