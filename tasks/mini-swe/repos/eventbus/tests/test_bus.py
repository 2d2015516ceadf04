from eventbus import EventBus, once


def test_emit_in_order():
    bus, seen = EventBus(), []
    bus.subscribe("e", lambda x: seen.append(("a", x)))
    bus.subscribe("e", lambda x: seen.append(("b", x)))
    assert bus.emit("e", 1) == 2
    assert seen == [("a", 1), ("b", 1)]


def test_failing_handler_does_not_stop_others():
    bus, seen = EventBus(), []

    def boom(x):
        raise RuntimeError("boom")

    bus.subscribe("e", boom)
    bus.subscribe("e", seen.append)
    bus.emit("e", 5)
    assert seen == [5]
    assert len(bus.errors) == 1


def test_once_alone():
    bus, seen = EventBus(), []
    once(bus, "e", seen.append)
    bus.emit("e", 1)
    bus.emit("e", 2)
    assert seen == [1]


def test_unsubscribe():
    bus, seen = EventBus(), []
    bus.subscribe("e", seen.append)
    bus.unsubscribe("e", seen.append)
    assert bus.emit("e", 1) == 0
