"""What the wait bound does on ``memory-skew``: per validation trace, the learned policy
as configured by default (backfilling on held instances, tasks past their deadline oldest
first), with the earliest deadline first instead (the order before), and with held
instances taking no new work, against fifo.

Per trace: average / P99 JCT and longest wait; holds (instances held, summed over the
planning rounds that held any), the share of them for tasks whose deadline had not
passed (held because of the backlog limit), instance-seconds held over the fleet's
instance-seconds until the last task ended, placements backfilled on held instances,
and the kinds of the five longest-waiting tasks; then each variant's means over the
traces against fifo's. Simulated time: the machine's load does not change the figures.

    .venv/bin/python benchmarks/study_memory_skew_bound.py --seeds 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from megaflow.scheduler.learned import LearnedPolicy
from megaflow.scheduler.learned_net import read_checkpoint
from megaflow.sim.engine import Simulator
from megaflow.sim.families import VALIDATION_SEEDS, family
from megaflow.sim.studies import simulate

SHIPPED = Path(__file__).resolve().parents[1] / "examples/policies/learned.safetensors"


VARIANTS: dict[str, dict[str, Any]] = {
    "learned, held instances empty": {"backfill": False},
    "learned, earliest deadline first": {"wait_order": "deadline"},
    "learned": {},
}
"""Each variant's keyword arguments to :class:`LearnedPolicy` (the rest default)."""


def _policy(net: Any, options: dict[str, Any], made: list[LearnedPolicy]) -> LearnedPolicy:
    made.append(LearnedPolicy(net, **options))
    return made[-1]


def _summary(means: dict[str, list[tuple[float, float, float]]]) -> None:
    """Each variant's mean average / P99 JCT and longest wait, and against fifo's."""
    fifo = [statistics.fmean(x[k] for x in means["fifo"]) for k in range(3)]
    print(
        "\n| policy | JCT avg s | JCT P99 s | longest wait s | vs fifo: avg / P99 / longest wait |"
    )
    print("|---|---|---|---|---|")
    for name, rows in means.items():
        m = [statistics.fmean(x[k] for x in rows) for k in range(3)]
        vs = " / ".join(f"{m[k] / fifo[k] - 1:+.1%}" for k in range(3))
        print(f"| {name} | {m[0]:,.0f} | {m[1]:,.0f} | {m[2]:,.0f} | "
              f"{'' if name == 'fifo' else vs} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", default="memory-skew")
    ap.add_argument("--seeds", type=int, default=3, help="Validation traces (from 10,001).")
    ap.add_argument("--tasks", type=int, default=4000, help="At most this many tasks a trace.")
    args = ap.parse_args()
    fam = family(args.family)
    net = read_checkpoint(SHIPPED)
    print(
        "| seed | policy | JCT avg s | JCT P99 s | longest wait s | holds, summed over "
        "rounds | before the deadline | held instance-s | backfilled | 5 longest waits |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")  # fmt: skip
    means: dict[str, list[tuple[float, float, float]]] = {"fifo": []}
    means.update({name: [] for name in VARIANTS})
    for seed in VALIDATION_SEEDS[: args.seeds]:
        ep = fam.episode(seed, min(fam.tasks, args.tasks))
        fifo = simulate("fifo", ep.instances, ep.trace)
        print(f"| {seed} | fifo | {fifo.avg_jct_s:,.0f} | {fifo.p99_jct_s:,.0f} | "
              f"{fifo.max_wait_s:,.0f} | | | | | |")  # fmt: skip
        means["fifo"].append((fifo.avg_jct_s, fifo.p99_jct_s, fifo.max_wait_s))
        for name, options in VARIANTS.items():
            made: list[LearnedPolicy] = []
            sim = Simulator(
                ep.config, ep.instances, ep.trace, policy=partial(_policy, net, options, made)
            )
            rep = asyncio.run(sim.run())
            means[name].append((rep.avg_jct_s, rep.p99_jct_s, rep.max_wait_s))
            (pol,) = made
            forcing = pol.forcing
            waits = sim.waits()
            top = sorted(range(len(waits)), key=lambda i: -waits[i])[:5]
            kinds = Counter(f"{ep.trace[i].type} {ep.trace[i].memory_mb // 1024} GB" for i in top)
            fleet_s = len(ep.instances) * rep.makespan_s
            early = forcing.holds_early / forcing.holds if forcing.holds else 0.0
            print(
                f"| {seed} | {name} | {rep.avg_jct_s:,.0f} | {rep.p99_jct_s:,.0f} | "
                f"{rep.max_wait_s:,.0f} | {forcing.holds:,} | {early:.0%} | "
                f"{forcing.held_s:,.0f} ({forcing.held_s / fleet_s:.0%}) | "
                f"{forcing.backfilled:,} | "
                + ", ".join(f"{n}x {k}" for k, n in kinds.most_common())
                + " |"
            )
    _summary(means)


if __name__ == "__main__":
    main()
