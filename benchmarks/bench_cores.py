"""Scaling with cores: one benchmark's side pinned to 1 core, then to 2.

Runs a command that prints ``ab NAME VALUE`` lines (by default the rollout's
MegaFlow side, ``bench_rollout.py --ab --episodes N``: N concurrent episodes
of 5 sandboxed steps through scheduler, pool, agent and scripted model) under
``taskset -c 0`` and ``taskset -c 0,1``, in separate processes, the order
alternating (1 2, 2 1, ...) after one untimed run of each. The table gives
each figure per core count and the speed-up from 1 to 2 cores of the wall
time (``wall-s``), pair by pair, and that speed-up per core (1.00: linear).

``python benchmarks/bench_cores.py --quick`` (32 episodes), or a command of
your own after ``--``: ``python benchmarks/bench_cores.py -- python
benchmarks/bench_scheduler.py --ab``. ``taskset`` pins the process and its
children (sandboxes included); ``os.cpu_count()`` inside still says the
machine's count, so a side that sizes itself by it sizes itself alike on both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import interleave, order_text, ratios, spread
from report import LOAD_AT_START, add_rule_args, begin, report

HERE = Path(__file__).resolve().parent
CORE_SETS = ("0", "0,1")


def figures(cmd: list[str], cpus: str) -> dict[str, float]:
    """The ``ab`` lines of ``cmd`` run under ``taskset -c cpus``."""
    done = subprocess.run(
        ["taskset", "-c", cpus, *cmd], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"taskset -c {cpus} {' '.join(cmd)} failed: {done.stderr[-500:]}")
    got = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ab":
            got[parts[1]] = float(parts[2])
    if "wall-s" not in got:
        raise SystemExit(f"{' '.join(cmd)} printed no 'ab wall-s VALUE' line")
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=256, help="the rollout's episodes")
    ap.add_argument("--quick", action="store_true", help="32 episodes")
    ap.add_argument("--reps", type=int, default=3, help="alternated repetitions (>= 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each side")
    ap.add_argument("command", nargs="*", help="after --: a command printing ab lines")
    add_rule_args(ap)
    args = ap.parse_args()
    begin(args)
    if shutil.which("taskset") is None:
        raise SystemExit("taskset is not installed (util-linux)")
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("this machine has one core: nothing to scale to")
    args.reps = max(3, args.reps)
    n = 32 if args.quick else args.episodes
    rollout = [sys.executable, str(HERE / "bench_rollout.py"), "--ab", "--episodes", str(n)]
    cmd = args.command or rollout
    sides = [lambda cpus=cpus: figures(cmd, cpus) for cpus in CORE_SETS]
    one, two = interleave(args.reps, sides, warmup=args.warmup)
    names = sorted(set(one[0]) & set(two[0]))
    rows = [[name, spread([r[name] for r in one]), spread([r[name] for r in two])]
            for name in names]  # fmt: skip
    speedup = ratios([r["wall-s"] for r in one], [r["wall-s"] for r in two])
    rows.append(["speed-up 1 -> 2 cores (wall-s)", "-", spread(speedup, "{:.2f}x".format)])
    rows.append(["  per core (1.00: linear)", "-", spread([s / 2 for s in speedup])])
    what = "the rollout's MegaFlow side" if not args.command else "the command"
    notes = (
        f"{what} (`{' '.join(Path(c).name if '/' in c else c for c in cmd)}`) under "
        f"`taskset -c 0` (1 core) and `taskset -c 0,1` (2 cores), each run a process of its "
        f"own, {order_text(2)}, after {args.warmup} untimed run(s) of each; median (min-max) of "
        f"{args.reps} repetitions; the speed-up is taken within each repetition. "
        "Other work on the machine runs on the same cores, so only a quiet machine's table "
        "measures scaling."
    )
    report("cores", "Scaling with cores: 1 core against 2 (taskset)",
           ["figure", "1 core", "2 cores"], rows, notes, args=args, reps=args.reps,
           load_before=LOAD_AT_START,
           self_loading=f"{n:,} concurrent sandboxed episodes in each run")  # fmt: skip


if __name__ == "__main__":
    main()
