"""Drift over a long run: the rollout's ideal, ten times in a row on one host.

Issue 32 asks that a long benchmark show no drift: removed memory cgroups
that the kernel keeps ("dying") used to pile up and slow the machine by up to
40% within half an hour. This study runs the rollout benchmark's ideal (N
episodes of 5 sandboxed ``exec`` steps, one at a time, each on a fresh local
runtime: :func:`bench_rollout.ideal_per_episode`) ``--reps`` times back to
back, and after each repetition reads the kernel's count of memory cgroups
(``/proc/cgroups``, dying ones included until freed) and the machine's
available memory. The table gives each repetition's CPU and wall time per
episode and the last against the first.

``python benchmarks/study_drift.py`` (10 x 1,024 episodes, about 5 minutes
here); ``--quick`` for 3 x 64. It is a study, not part of ``make bench``: its
table goes to ``benchmarks/studies/drift.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rollout import ideal_per_episode, tuned
from report import LOAD_AT_START, STUDIES, add_rule_args, begin, report
from sandbox_probes import meminfo


def memory_cgroups() -> int:
    """The memory controller's cgroup count (``num_cgroups`` in ``/proc/cgroups``)."""
    for line in Path("/proc/cgroups").read_text().splitlines():
        fields = line.split()
        if fields and fields[0] == "memory":
            return int(fields[2])
    return -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 x 64 episodes")
    add_rule_args(ap)
    args = ap.parse_args()
    begin(args)
    n, reps = (64, 3) if args.quick else (args.episodes, args.reps)
    if reps < 2:
        ap.error("--reps: at least 2, to compare the last with the first")
    rows = []
    cpu_ms, wall_ms = [], []
    groups0, avail0 = memory_cgroups(), meminfo()["MemAvailable"]
    with tempfile.TemporaryDirectory(prefix="mf-study-drift-") as tmp:
        for rep in range(reps):
            cpu, wall, _ = tuned(ideal_per_episode(Path(tmp) / f"r{rep}", n))
            cpu_ms.append(cpu * 1e3)
            wall_ms.append(wall * 1e3)
            avail = meminfo()["MemAvailable"]
            rows.append([
                str(rep + 1), f"{cpu * 1e3:.1f} ms", f"{wall * 1e3:.1f} ms",
                f"{memory_cgroups() - groups0:+,}", f"{(avail0 - avail) / 2**20:+,.0f} MiB",
            ])  # fmt: skip
            print(f"repetition {rep + 1}/{reps}: {rows[-1][1]} CPU, {rows[-1][2]} wall an episode",
                  flush=True)  # fmt: skip
    rows.append([
        "last / first", f"{cpu_ms[-1] / cpu_ms[0]:.3f}x", f"{wall_ms[-1] / wall_ms[0]:.3f}x",
        "-", "-",
    ])  # fmt: skip
    notes = (
        f"{reps} repetitions of the rollout's ideal back to back: {n:,} episodes of 5 sandboxed "
        "exec steps one at a time, each repetition on a fresh local runtime after one untimed "
        "episode (bench_rollout.ideal_per_episode); CPU is the process's and its sandboxes'. "
        "Memory cgroups: the kernel's count after the repetition against before the first "
        "(a removed group the kernel still holds counts until it is freed); memory: the fall of "
        "MemAvailable since before the first. Goal (issue 32): no drift from the first "
        "repetition to the last."
    )
    report("drift", "Drift over a long run: the rollout's ideal, repeated",
           ["repetition", "CPU per episode", "wall per episode", "memory cgroups",
            "memory taken"], rows, notes, args=args, reps=reps, load_before=LOAD_AT_START,
           self_loading="sandboxes started one at a time", folder=STUDIES)  # fmt: skip


if __name__ == "__main__":
    main()
