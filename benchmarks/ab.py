"""A/B measurement on a shared machine: interleave the sides, compare pair by pair.

Each repetition runs every side once, in the same order (A B A B ...), so drift
in the machine's load hits both sides alike; ratios are taken within each
repetition and then summarised (median, min-max). CPU time is the benchmark
process's own and its waited-for children's (``getrusage``), plus the CPU its
sandboxes used (from their cgroups), never the machine's.
"""

from __future__ import annotations

import resource
import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from megaflow.environment.local import LocalRuntime

T = TypeVar("T")


def cpu_s() -> float:
    """User + system CPU seconds of this process and its terminated, waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def sandbox_cpu_s(runtime: LocalRuntime) -> float:
    """CPU seconds used so far by the sandboxes this process started, from the
    cgroup that holds them (it keeps the usage of removed sandboxes). Bubblewrap
    joins that cgroup after it forks, so its own few milliseconds there are
    also in the waited-for children's time. 0 without cgroups."""
    layout = runtime.layout
    if layout is None:
        return 0.0
    try:
        if layout.version == 1:
            path = layout.base("cpuacct") / runtime.process / "cpuacct.usage"
            return int(path.read_text().split()[0]) / 1e9
        stat = (layout.base("cpu") / runtime.process / "cpu.stat").read_text()
    except (OSError, KeyError, ValueError, IndexError):
        return 0.0
    for line in stat.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return 0.0


def interleave(reps: int, sides: Sequence[Callable[[], T]]) -> list[list[T]]:
    """Run ``sides`` in turn ``reps`` times; one list of results per side."""
    out: list[list[T]] = [[] for _ in sides]
    for _ in range(reps):
        for i, side in enumerate(sides):
            out[i].append(side())
    return out


def ratios(num: Sequence[float], den: Sequence[float]) -> list[float]:
    """``num[i] / den[i]`` for each repetition."""
    return [a / b for a, b in zip(num, den, strict=True) if b]


def spread(values: Sequence[float], fmt: Callable[[float], str] = "{:.2f}".format) -> str:
    """``median (min-max)``, or the value alone for one repetition."""
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt(med)
    return f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})"
