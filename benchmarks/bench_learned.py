"""The learned scheduling policy: training time, decision latency, and JCT against the
heuristics on trace families it was trained on and on families it never saw.

Trains on ``TRAIN_FAMILIES`` (or evaluates ``--checkpoint``), then runs fifo,
priority, fair and learned on the same traces of every family, with seeds the
training never draws from (10,001 and up). The peer of the decision latency
is the priority policy, measured in the same run on the same queue.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler import decision_p99
from megaflow.scheduler.config import LearnedPolicyConfig
from megaflow.scheduler.learned_net import read_checkpoint, save_checkpoint
from megaflow.sim.families import EVAL_FAMILIES, FAMILIES, TRAIN_FAMILIES, TRAIN_SEEDS
from megaflow.sim.gym_env import Episode
from megaflow.sim.learn import TrainOptions, train
from megaflow.sim.report import SimReport
from megaflow.sim.studies import simulate
from report import LOAD_AT_START, report

HEURISTICS = ("fifo", "priority", "fair")
EVAL_SEEDS = (TRAIN_SEEDS + 1, TRAIN_SEEDS + 2)


def _mean(reports: list[SimReport], attr: str) -> float:
    return statistics.fmean(getattr(r, attr) for r in reports)


def family_rows(checkpoint: str, tasks: int | None, seeds: tuple[int, ...]) -> list[list[str]]:
    rows = []
    for name in (*TRAIN_FAMILIES, *EVAL_FAMILIES):
        fam = FAMILIES[name]
        got: dict[str, list[SimReport]] = {p: [] for p in (*HEURISTICS, "learned")}
        for seed in seeds:
            ep = fam.episode(seed, tasks)
            for p in got:
                got[p].append(simulate(p, ep.instances, ep.trace, checkpoint=checkpoint))
        best = min(HEURISTICS, key=lambda p: _mean(got[p], "avg_jct_s"))
        seen = "trained on" if name in TRAIN_FAMILIES else "unseen"
        for p, reps in got.items():
            avg, p99 = _mean(reps, "avg_jct_s"), _mean(reps, "p99_jct_s")
            vs = ""
            if p == "learned":
                b_avg, b_p99 = _mean(got[best], "avg_jct_s"), _mean(got[best], "p99_jct_s")
                vs = f"{avg / b_avg - 1:+.1%} avg, {p99 / b_p99 - 1:+.1%} P99 vs {best}"
            rows.append([
                f"{name} ({seen})" if p == "fifo" else "", p, f"{avg:,.0f}", f"{p99:,.0f}",
                f"{_mean(reps, 'utilisation'):.1%}", vs,
            ])  # fmt: skip
    return rows


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
        ckpt, _ = train(episodes, TrainOptions(iterations=iters, rollouts=3, seed=0),
                        meta={"families": list(TRAIN_FAMILIES)})  # fmt: skip
        ckpt_path = str(Path(tempfile.mkdtemp()) / "learned.safetensors")
        save_checkpoint(ckpt, ckpt_path)
        meta = ckpt.meta
    samples = 500 if quick else 5_000
    learned_cfg = LearnedPolicyConfig(checkpoint=ckpt_path)
    t0 = time.perf_counter()
    l_med, l_p99, l_cpu = decision_p99(samples=samples, policy=learned_cfg)
    p_med, p_p99, p_cpu = decision_p99(samples=samples)
    latency = time.perf_counter() - t0
    rows = [
        ["training", f"{meta.get('train_seconds', 0):,.0f} s wall, "
         f"{meta.get('iterations', 0)} iterations, {meta.get('decisions', 0):,} decisions",
         f"on {', '.join(meta.get('families', []))}"],
        ["decision, 10,000 queued over 1,000 instances: learned (median / P99 wall / "
         "P99 CPU)", f"{l_med:,.0f} / {l_p99:,.0f} / {l_cpu:,.0f} us", "P99 <= 1,000 us"],
        ["  peer: priority, same queue", f"{p_med:,.0f} / {p_p99:,.0f} / {p_cpu:,.0f} us", ""],
    ]  # fmt: skip
    fam_rows = family_rows(ckpt_path, tasks, EVAL_SEEDS[:1] if quick else EVAL_SEEDS)
    head = "| family | policy | JCT avg s | JCT P99 s | util | learned vs best heuristic |"
    table = [head, "|---|---|---|---|---|---|", *("| " + " | ".join(r) + " |" for r in fam_rows)]
    about = "\n".join(f"- `{n}`: {FAMILIES[n].about}" for n in (*TRAIN_FAMILIES, *EVAL_FAMILIES))
    notes = (
        f"Decision latency: {samples:,} decisions, each after one running task ends and one "
        f"task arrives ({latency:.0f} s for both policies); wall P99 includes time waiting "
        "for a core on a loaded machine, the CPU-time P99 does not. Families: mean of "
        f"{len(EVAL_SEEDS[:1] if quick else EVAL_SEEDS)} traces each (seeds from 10,001, never "
        "drawn in training), every policy on the same trace; 'best heuristic' is the one of "
        "fifo, priority, fair with the lowest average JCT on that family. Target on unseen "
        "families: 20% lower average JCT than the best heuristic, P99 no worse."
    )
    extra = "### JCT by trace family\n\n" + "\n".join(table) + "\n\nFamilies:\n\n" + about
    report("learned", "Learned scheduling policy", ["figure", "measured", "target"], rows,
           notes, load_before=LOAD_AT_START, extra_md=extra)  # fmt: skip


if __name__ == "__main__":
    main()
