"""The collector during a run: frozen heap and a raised young threshold, cycles still
collected, everything as before afterwards, also on error."""

from __future__ import annotations

import gc
import weakref

import pytest

from megaflow.app.gc_tuning import tuned_gc


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_settings_hold_inside_and_come_back_after() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with tuned_gc(young=12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
        assert gc.get_freeze_count() > frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settings_come_back_when_the_run_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="boom"), tuned_gc():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_during_the_run_is_still_collected_automatically() -> None:
    assert gc.isenabled()
    with tuned_gc(young=2_000):
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # reference counting alone cannot free a cycle
        keep = [Node() for _ in range(10_000)]  # allocations past the young threshold
        assert gone() is None
        del keep
