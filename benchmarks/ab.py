"""A/B measurement on a shared machine: interleave the sides, compare pair by pair.

Each repetition runs every side once (A B, then B A, ...), so drift in the
machine's load, and what one run leaves behind for the next, hit both sides
alike; ratios are taken within each repetition and then summarised (median,
min-max). CPU time is the benchmark
process's own and its waited-for children's (``getrusage``), plus the CPU its
sandboxes used (from their cgroups), never the machine's.

Run as a script, it compares this tree's source with a commit's, in separate
processes, A B B A ...::

    python benchmarks/ab.py --before 09d6be5 --reps 5 -- \
        python benchmarks/bench_scheduler.py --ab --tasks 20000

The command runs once per side and repetition with ``PYTHONPATH`` set to
that side's ``src`` (a commit's is taken with ``git archive``; the working
tree is never touched; ``--after REV`` measures a commit instead of the
working tree) and prints ``ab NAME VALUE`` lines; the table gives
each figure's median per side and new / before pair by pair.
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from megaflow.environment.abstract import Runtime

T = TypeVar("T")
S = TypeVar("S")


def cpu_s() -> float:
    """User + system CPU seconds of this process and its terminated, waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


def sandbox_cpu_s(runtime: Runtime) -> float:
    """CPU seconds used so far by the sandboxes this process started, from the
    cgroup that holds them (it keeps the usage of removed sandboxes). Bubblewrap
    joins that cgroup after it forks, so its own few milliseconds there are
    also in the waited-for children's time. 0 without cgroups, and for a runtime
    that is not the local one (the dummy runs nothing)."""
    layout = getattr(runtime, "layout", None)
    process = getattr(runtime, "process", None)
    if layout is None or process is None:
        return 0.0
    try:
        if layout.version == 1:
            path = layout.base("cpuacct") / process / "cpuacct.usage"
            return int(path.read_text().split()[0]) / 1e9
        stat = (layout.base("cpu") / process / "cpu.stat").read_text()
    except (OSError, KeyError, ValueError, IndexError):
        return 0.0
    for line in stat.splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1]) / 1e6
    return 0.0


def interleave(
    reps: int, sides: Sequence[Callable[[], T]], alternate: bool = True, warmup: int = 0
) -> list[list[T]]:
    """Run ``sides`` in turn ``reps`` times; one list of results per side.

    The one place the benchmarks' A/B rules live. ``alternate`` (the default)
    reverses the order every other repetition (A B, B A, A B...): what a run
    leaves behind (1,024 sandboxes' namespaces and cgroups are torn down by
    kernel threads after the last one exits; a warm cache; a collector's debt)
    falls on whichever side comes next, and in a fixed order that is always the
    same side. ``warmup`` runs every side that many times first, untimed and
    in the same alternating order (carried on into the timed repetitions), so
    no side is measured cold while another is warm."""
    return interleave_reps(reps, [_ignore_rep(s) for s in sides], alternate, warmup)


def _ignore_rep(side: Callable[[], T]) -> Callable[[int], T]:
    return lambda _rep: side()


def interleave_reps(
    reps: int, sides: Sequence[Callable[[int], T]], alternate: bool = True, warmup: int = 0
) -> list[list[T]]:
    """:func:`interleave` for sides that take the repetition's index (to draw that
    repetition's seed, say); warm-up runs get negative indices (-1, -2, ...)."""
    for k in range(warmup):
        for _i, side in _order(sides, k, alternate):
            side(-1 - k)
    out: list[list[T]] = [[] for _ in sides]
    for rep in range(reps):  # the alternation carries on from the warm-up's
        for i, side in _order(sides, warmup + rep, alternate):
            out[i].append(side(rep))
    return out


async def interleave_async(
    reps: int, sides: Sequence[Callable[[], Awaitable[T]]], alternate: bool = True, warmup: int = 0
) -> list[list[T]]:
    """:func:`interleave` for sides that are coroutines (a side that drives a
    runtime bound to the running event loop), awaited one at a time."""
    for k in range(warmup):
        for _i, side in _order(sides, k, alternate):
            await side()
    out: list[list[T]] = [[] for _ in sides]
    for rep in range(reps):
        for i, side in _order(sides, warmup + rep, alternate):
            out[i].append(await side())
    return out


def order_text(n_sides: int, alternate: bool = True) -> str:
    """How the sides were ordered, for a table's notes."""
    names = "ABCDEFGH"[:n_sides]
    if not alternate or n_sides < 2:
        return " ".join(names) + ", every repetition"
    return f"{' '.join(names)}, then {' '.join(reversed(names))}, alternating"


def _order(sides: Sequence[S], rep: int, alternate: bool) -> list[tuple[int, S]]:
    order = list(enumerate(sides))
    if alternate and rep % 2:
        order.reverse()
    return order


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


def _source_at(rev: str, repo: Path, into: Path) -> Path:
    """The ``src`` folder of commit ``rev``, extracted under ``into``."""
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev, "src"],
        check=True, capture_output=True,
    )  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as tf:
        tf.extractall(into, filter="data")
    return into / "src"


def _figures(cmd: list[str], src: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    got: dict[str, float] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ab":
            got[parts[1]] = float(parts[2])
    if not got:
        raise SystemExit(f"{' '.join(cmd)} printed no 'ab NAME VALUE' line")
    return got


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description="This tree's source against a commit's, interleaved.")
    ap.add_argument("--before", required=True, help="The commit to compare with.")
    ap.add_argument("--after", help="A commit to measure instead of this working tree.")
    ap.add_argument("--reps", type=int, default=5, help="Repetitions (pairs).")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command to run.")
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("give the command after --")
    repo = Path(__file__).resolve().parent.parent
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        before_src = _source_at(args.before, repo, Path(tmp) / "before")
        after_src = _source_at(args.after, repo, Path(tmp) / "after") if args.after else None
        new_src = after_src or repo / "src"
        sides = [lambda: _figures(cmd, before_src), lambda: _figures(cmd, new_src)]
        before, new = interleave(args.reps, sides, alternate=True)
    print(f"{' '.join(cmd)}: new ({args.after or 'this tree'}) against {args.before}, "
          f"{args.reps} pairs; "
          f"load (1 min) {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    print("\n| figure | before | new | new / before, pair by pair |\n|---|---|---|---|")
    for name in before[0]:
        b, n = [r[name] for r in before], [r[name] for r in new]
        print(f"| {name} | {spread(b, _num)} | {spread(n, _num)} | {spread(ratios(n, b))} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
