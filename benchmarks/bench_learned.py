"""The learned scheduling policy: training time, decision latency, and JCT against the
heuristics on trace families it was trained on and on families it never saw.

Trains on ``TRAIN_FAMILIES`` (or evaluates ``--checkpoint``), then runs fifo,
priority, fair and learned on the same traces of every family, with seeds the
training never draws from (10,001 and up): once as the families are (runs of a
type differ in length, ``run_sigma``) and once with every run of a type alike
(``run_sigma`` 0, where nothing a scheduler sees tells a task's length beyond
its type). Two hand-written rules over the learned policy's own candidates
are listed for reference, not as baselines: least predicted work first, and
highest response ratio (waited over predicted run time) first. Two more
references know what the learned policy cannot, and bound it:

- least expected work: each task's exact expected work (CPU x its type's mean
  length x its run's factor, :meth:`Family.expected_durations`), first. With
  class means known, least expected work first is the non-preemptive order
  that minimises average JCT on one server (the c-mu rule); no estimate from
  feedback can know more of a task before it runs;
- clairvoyant least work: every task's exact run time, which no scheduler
  has, least work first.

The peer of
the decision latency is the priority policy, measured in the same run on the
same queue.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler import decision_p99
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.config import LearnedPolicyConfig
from megaflow.scheduler.learned_net import FEATURES, read_checkpoint, save_checkpoint
from megaflow.scheduler.policies import PriorityPolicy
from megaflow.sim.engine import Simulator
from megaflow.sim.families import EVAL_FAMILIES, FAMILIES, TRAIN_FAMILIES, TRAIN_SEEDS
from megaflow.sim.gym_env import Episode, simulator
from megaflow.sim.learn import TrainOptions, train
from megaflow.sim.report import SimReport
from megaflow.sim.studies import simulate
from report import LOAD_AT_START, report

if TYPE_CHECKING:
    from megaflow.scheduler.learned_net import Array

HEURISTICS = ("fifo", "priority", "fair")
EVAL_SEEDS = (TRAIN_SEEDS + 1, TRAIN_SEEDS + 2, TRAIN_SEEDS + 3)


def _mean(reports: list[SimReport], attr: str) -> float:
    return statistics.fmean(getattr(r, attr) for r in reports)


def _rule(column: str, sign: float) -> Callable[[Array, Array], int]:
    """Pick the row with the highest ``sign * column``, best fit before spread on ties."""
    col, spread = FEATURES.index(column), FEATURES.index("spread")
    return lambda rows, state: int((sign * rows[:, col] - 1e-3 * rows[:, spread]).argmax())


REFERENCES = {
    "(ref) least work": _rule("predicted_work", -1.0),
    "(ref) response ratio": _rule("waited_vs_predicted", 1.0),
}
EXPECTED, CLAIRVOYANT = "(ref) least expected work", "(ref) clairvoyant least work"


class KnownWorkFirst(PriorityPolicy):
    """Least given work first (by task id), no aging: the references that know more."""

    def __init__(self, work: dict[str, float], **options: Any) -> None:
        super().__init__(aging_per_s=0.0, **options)
        self.work = work

    def base_priority(self, spec: TaskSpec) -> float:
        return -self.work[spec.id]


def known_work(ep: Episode, durations: list[float]) -> SimReport:
    """``ep`` with each row's work taken as CPU x ``durations[row]`` (the simulator's
    task ids are ``t<row>``)."""
    work = {f"t{i}": t.cpu * d for i, (t, d) in enumerate(zip(ep.trace, durations, strict=True))}
    sim = Simulator(ep.config, ep.instances, ep.trace, options=ep.options,
                    policy=lambda: KnownWorkFirst(work))  # fmt: skip
    return asyncio.run(sim.run())


def per_placement(rounds: list[tuple[int, int]]) -> str:
    """Median and P99 CPU time per task placed, a round's time shared by its placements
    (a round that placed nothing counts as one)."""
    each = sorted(cpu / max(1, n) / 1000 for cpu, n in rounds for _ in range(max(1, n)))
    return f"{statistics.median(each):,.0f} / {each[int(0.99 * len(each))]:,.0f} us"


def placed(rounds: list[tuple[int, int]]) -> str:
    n = sorted(k for _, k in rounds)
    return f"{statistics.fmean(n):.2f} / {n[int(0.99 * len(n))]}"


def family_rows(
    checkpoint: str, tasks: int | None, seeds: tuple[int, ...], *, alike: bool = False
) -> tuple[list[list[str]], list[tuple[str, float, float]]]:
    """Table rows, and for each unseen family (policy, avg, P99) over the best heuristic's,
    for learned and the two references that know more."""
    rows, unseen = [], []
    for name in (*TRAIN_FAMILIES, *EVAL_FAMILIES):
        fam = FAMILIES[name]
        if alike:
            fam = dataclasses.replace(fam, run_sigma=(0.0, 0.0))
        names = (*HEURISTICS, "learned", *REFERENCES, EXPECTED, CLAIRVOYANT)
        got: dict[str, list[SimReport]] = {p: [] for p in names}
        for seed in seeds:
            ep = fam.episode(seed, tasks)
            for p in (*HEURISTICS, "learned"):
                got[p].append(simulate(p, ep.instances, ep.trace, checkpoint=checkpoint))
            for ref, rule in REFERENCES.items():
                got[ref].append(asyncio.run(simulator(ep, rule).run()))
            got[EXPECTED].append(known_work(ep, fam.expected_durations(seed, ep.trace)))
            got[CLAIRVOYANT].append(known_work(ep, [t.duration_s for t in ep.trace]))
        best = min(HEURISTICS, key=lambda p: _mean(got[p], "avg_jct_s"))
        b_avg, b_p99 = _mean(got[best], "avg_jct_s"), _mean(got[best], "p99_jct_s")
        seen = "trained on" if name in TRAIN_FAMILIES else "unseen"
        for p, reps in got.items():
            avg, p99 = _mean(reps, "avg_jct_s"), _mean(reps, "p99_jct_s")
            vs = ""
            if p not in HEURISTICS:
                vs = f"{avg / b_avg - 1:+.1%} avg, {p99 / b_p99 - 1:+.1%} P99 vs {best}"
            if p in ("learned", EXPECTED, CLAIRVOYANT) and name in EVAL_FAMILIES:
                unseen.append((p, avg / b_avg - 1, p99 / b_p99 - 1))
            rows.append([
                f"{name} ({seen})" if p == "fifo" else "", p, f"{avg:,.0f}", f"{p99:,.0f}",
                f"{_mean(reps, 'utilisation'):.1%}", vs,
            ])  # fmt: skip
    return rows, unseen


def _table(rows: list[list[str]]) -> str:
    head = "| family | policy | JCT avg s | JCT P99 s | util | vs best heuristic |"
    return "\n".join(
        [head, "|---|---|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows)]
    )


def _verdict(unseen: list[tuple[str, float, float]]) -> str:
    def line(who: str, policy: str) -> str:
        got = [(a, p) for name, a, p in unseen if name == policy]
        avg = statistics.fmean(a for a, _ in got)
        met = sum(1 for a, p in got if a <= -0.2 and p <= 0.0)
        each = ", ".join(f"{a:+.1%} / {p:+.1%}" for a, p in got)
        return (
            f"{who} against the best heuristic on the {len(got)} unseen families: "
            f"{avg:+.1%} average JCT on average (average / P99 by family: {each}); "
            f"target (-20% or better, P99 no worse) met on {met} of {len(got)}."
        )

    return "\n\n".join([
        line("Learned", "learned"), line("Least expected work (exact run means)", EXPECTED),
        line("Clairvoyant least work", CLAIRVOYANT),
    ])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="Small runs, for a smoke test.")
    ap.add_argument("--checkpoint", help="Evaluate this checkpoint instead of training one.")
    ap.add_argument("--iterations", type=int, help="Training iterations (default 150).")
    ap.add_argument("--tasks", type=int, help="Tasks per trace (default: each family's own).")
    args = ap.parse_args()
    quick = args.quick
    tasks = args.tasks or (300 if quick else None)
    if args.checkpoint:
        ckpt_path = args.checkpoint
        meta = read_checkpoint(ckpt_path).meta
    else:
        fams = [FAMILIES[n] for n in TRAIN_FAMILIES]

        def episodes(rng: random.Random) -> Episode:
            return rng.choice(fams).episode(rng.randrange(TRAIN_SEEDS), 200 if quick else 1000)

        iters = args.iterations or (3 if quick else 150)
        opts = TrainOptions(iterations=iters, rollouts=3, seed=0, horizon=5.0, tail=2.0)
        ckpt, _ = train(episodes, opts, meta={"families": list(TRAIN_FAMILIES)})
        ckpt_path = str(Path(tempfile.mkdtemp()) / "learned.safetensors")
        save_checkpoint(ckpt, ckpt_path)
        meta = ckpt.meta
    samples = 500 if quick else 5_000
    learned_cfg = LearnedPolicyConfig(checkpoint=ckpt_path)
    t0 = time.perf_counter()
    l_rounds: list[tuple[int, int]] = []
    p_rounds: list[tuple[int, int]] = []
    l_med, l_p99, l_cpu = decision_p99(samples=samples, policy=learned_cfg, rounds=l_rounds)
    p_med, p_p99, p_cpu = decision_p99(samples=samples, rounds=p_rounds)
    latency = time.perf_counter() - t0
    rows = [
        ["training", f"{meta.get('train_seconds', 0):,.0f} s wall, "
         f"{meta.get('iterations', 0)} iterations, {meta.get('decisions', 0):,} decisions",
         f"on {', '.join(meta.get('families', []))}"],
        ["decision, 10,000 queued over 1,000 instances: learned (median / P99 wall / "
         "P99 CPU)", f"{l_med:,.0f} / {l_p99:,.0f} / {l_cpu:,.0f} us", "P99 <= 1,000 us"],
        ["  peer: priority, same queue", f"{p_med:,.0f} / {p_p99:,.0f} / {p_cpu:,.0f} us", ""],
        ["  per task placed, CPU (median / P99): learned; priority",
         f"{per_placement(l_rounds)}; {per_placement(p_rounds)}", "P99 <= 1,000 us"],
        ["  tasks placed per round (mean / P99): learned; priority",
         f"{placed(l_rounds)}; {placed(p_rounds)}", ""],
    ]  # fmt: skip
    seeds = EVAL_SEEDS[:1] if quick else EVAL_SEEDS
    fam_rows, unseen = family_rows(ckpt_path, tasks, seeds)
    alike_rows, unseen_alike = family_rows(ckpt_path, tasks, seeds, alike=True)
    sigma = {n: FAMILIES[n].run_sigma for n in (*TRAIN_FAMILIES, *EVAL_FAMILIES)}
    about = "\n".join(
        f"- `{n}`: {FAMILIES[n].about}; run_sigma {sigma[n][0]:g}-{sigma[n][1]:g}"
        for n in (*TRAIN_FAMILIES, *EVAL_FAMILIES)
    )
    notes = (
        f"Decision latency: {samples:,} planning rounds, each after one running task ends and "
        f"one task arrives ({latency:.0f} s for both policies); a round places every task "
        "that fits (one network pass each for learned); wall P99 includes time waiting "
        "for a core on a loaded machine, the CPU-time P99 does not. JCT figures are in "
        "simulated time and do not depend on the machine's load. Families: mean of "
        f"{len(seeds)} traces each (seeds from 10,001, never drawn in training), every "
        "policy on the same trace; 'best heuristic' is the one of fifo, priority, fair with "
        "the lowest average JCT on that family. Target on unseen families: 20% lower "
        "average JCT than the best heuristic, P99 no worse."
    )
    extra = (
        "### JCT by trace family (runs of a type differ: each family's run_sigma)\n\n"
        f"{_table(fam_rows)}\n\n{_verdict(unseen)}\n\n"
        "### The same families with every run of a type alike (run_sigma 0)\n\n"
        f"{_table(alike_rows)}\n\n{_verdict(unseen_alike)}\n\nFamilies:\n\n{about}"
    )
    report("learned", "Learned scheduling policy", ["figure", "measured", "target"], rows,
           notes, load_before=LOAD_AT_START, extra_md=extra)  # fmt: skip


if __name__ == "__main__":
    main()
