from eventbus.registry import Registry


class EventBus:
    def __init__(self):
        self.registry = Registry()
        self.errors = []

    def subscribe(self, name, handler):
        self.registry.add(name, handler)
        return handler

    def unsubscribe(self, name, handler):
        self.registry.remove(name, handler)

    def emit(self, name, *args):
        delivered = 0
        for handler in self.registry.handlers(name):
            try:
                handler(*args)
            except Exception as exc:  # a failing handler must not stop the others
                self.errors.append((name, handler, exc))
            delivered += 1
        return delivered
