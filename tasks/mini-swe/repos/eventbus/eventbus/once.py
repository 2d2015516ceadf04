def once(bus, name, handler):
    """Subscribe ``handler`` so that it runs for the next event only."""

    def wrapper(*args):
        bus.unsubscribe(name, wrapper)
        return handler(*args)

    bus.subscribe(name, wrapper)
    return wrapper
