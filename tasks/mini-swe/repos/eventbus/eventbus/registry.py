class Registry:
    """Handlers per event name, in subscription order."""

    def __init__(self):
        self._handlers = {}

    def add(self, name, handler):
        self._handlers.setdefault(name, []).append(handler)

    def remove(self, name, handler):
        handlers = self._handlers.get(name, [])
        if handler in handlers:
            handlers.remove(handler)

    def handlers(self, name):
        return self._handlers.get(name, [])

    def count(self, name):
        return len(self._handlers.get(name, []))
