from iniconf.parser import parse


class Config:
    def __init__(self, text=""):
        self.data = parse(text)

    def get(self, section, key, default=None):
        return self.data[section].get(key, default)

    def getint(self, section, key, default=0):
        value = self.get(section, key)
        return default if value is None else int(value)

    def getbool(self, section, key, default=False):
        value = self.get(section, key)
        if value is None:
            return default
        return value.lower() in ("1", "yes", "true", "on")

    def sections(self):
        return list(self.data)
