"""The garbage collector set for a long run in this process.

::

    job.plan()                      # config and task set loaded
    with tuned_gc():
        asyncio.run(drive(job))

The control plane's hot path makes no reference cycles of its own, yet with
CPython's default thresholds (700, 10, 10) the collector took about a third
of the CPU of a no-op task (benchmarks/RESULTS.md): a young collection every
700 net allocations, and full collections that walk every object alive, the
loaded task set and the interpreter's modules included. For the run's
duration, :func:`tuned_gc` freezes what is alive on entry (``gc.freeze``: it
is never scanned again; reference counting still frees it) and raises the
young generation's threshold, so short-lived objects die by reference count
before any collection sees them; cycles are still collected, a few thousand
allocations later. On exit the previous thresholds come back and the frozen
objects are scanned again.

Only the entry points of a run call it (``megaflow run``, ``megaflow serve``),
never library code a user imports: the collector is the process's, not ours.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 10_000
"""Net allocations between young collections during a run (CPython's default: 700)."""


@contextmanager
def tuned_gc(young: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Freeze what is alive now and raise the young threshold to ``young`` until exit."""
    before = gc.get_threshold()
    gc.collect()  # what is garbage already is not frozen with the rest
    gc.freeze()
    gc.set_threshold(max(young, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
