"""The learned scheduling policy against fifo, priority and fair, by split: decision
latency, and average / P99 JCT, longest wait and fragmentation on every trace family.

Families are split three ways (``megaflow.sim.families``): the training families
(held-out traces), the validation families (used while developing the policy and
its wait bound) and the test families, evaluated once at the end and reported as
they come out. Ten traces per family (seeds ``VALIDATION_SEEDS`` or ``TEST_SEEDS``),
every policy on the same traces; figures are the mean over the traces with the
standard deviation across them. 'Best heuristic' is the one of fifo, priority and
fair with the lowest mean average JCT on the family; a policy is flagged where its
mean P99 JCT or mean longest wait is more than 5% above that heuristic's.

References (none is a lower bound, and none is a policy a scheduler could run):

- learned, no wait bound: the same network without the bound, to show what the
  bound costs and prevents;
- expected-work order: each task's exact expected length (its type's mean times its
  run's factor) known in advance, least expected work first, non-preemptive;
- clairvoyant shortest-first: every task's exact length known, least work first,
  non-preemptive;
- preemptive SRPT, pooled: exact lengths, free preemption and resume, the fleet as
  one machine (``megaflow.sim.srpt``).

Decision latency: ``bench_scheduler.decision_p99`` (10,000 queued over 1,000
instances), per planning round, the priority policy measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler import decision_p99
from megaflow.core.tasks import TaskSpec
from megaflow.scheduler.config import LearnedPolicyConfig
from megaflow.scheduler.learned import LearnedPolicy
from megaflow.scheduler.learned_net import read_checkpoint
from megaflow.scheduler.policies import PriorityPolicy
from megaflow.sim.engine import Simulator
from megaflow.sim.families import (
    FAMILIES,
    TEST_FAMILIES,
    TEST_SEEDS,
    TRAIN_FAMILIES,
    VALIDATION_FAMILIES,
    VALIDATION_SEEDS,
)
from megaflow.sim.gym_env import Episode
from megaflow.sim.report import SimReport
from megaflow.sim.srpt import srpt_pooled
from megaflow.sim.studies import simulate
from report import LOAD_AT_START, report, results_dir

HEURISTICS = ("fifo", "priority", "fair")
UNBOUNDED = "(ref) learned, no wait bound"
EXPECTED = "(ref) expected-work order"
CLAIRVOYANT = "(ref) clairvoyant shortest-first"
SRPT = "(ref) preemptive SRPT, pooled"
POLICIES = (*HEURISTICS, "learned", UNBOUNDED, EXPECTED, CLAIRVOYANT, SRPT)
SHIPPED = Path(__file__).resolve().parents[1] / "examples/policies/learned.safetensors"
METRICS = (("avg_jct_s", "{:,.0f}"), ("p99_jct_s", "{:,.0f}"), ("max_wait_s", "{:,.0f}"),
           ("fragmentation", "{:.1%}"))  # fmt: skip


class KnownWorkFirst(PriorityPolicy):
    """Least given work first (by task id), no aging by default: the references that
    know more."""

    def __init__(self, work: dict[str, float], aging_per_s: float = 0.0, **options: Any) -> None:
        super().__init__(aging_per_s=aging_per_s, **options)
        self.work = work

    def base_priority(self, spec: TaskSpec) -> float:
        return -self.work[spec.id]


def known_work(ep: Episode, durations: list[float]) -> SimReport:
    """``ep`` with each row's work taken as CPU x ``durations[row]`` (task ids ``t<row>``)."""
    work = {f"t{i}": t.cpu * d for i, (t, d) in enumerate(zip(ep.trace, durations, strict=True))}
    sim = Simulator(ep.config, ep.instances, ep.trace, options=ep.options,
                    policy=lambda: KnownWorkFirst(work))  # fmt: skip
    return asyncio.run(sim.run())


def run_family(
    name: str, seeds: tuple[int, ...], checkpoint: str, cap: int
) -> dict[str, list[SimReport]]:
    fam = FAMILIES[name]
    net = read_checkpoint(checkpoint)
    got: dict[str, list[SimReport]] = {p: [] for p in POLICIES}
    for seed in seeds:
        ep = fam.episode(seed, min(fam.tasks, cap))
        for p in (*HEURISTICS, "learned"):
            got[p].append(simulate(p, ep.instances, ep.trace, checkpoint=checkpoint))
        free = Simulator(ep.config, ep.instances, ep.trace,
                         policy=lambda: LearnedPolicy(net, wait_bound=None))  # fmt: skip
        got[UNBOUNDED].append(asyncio.run(free.run()))
        got[EXPECTED].append(known_work(ep, fam.expected_durations(seed, ep.trace)))
        got[CLAIRVOYANT].append(known_work(ep, [t.duration_s for t in ep.trace]))
        got[SRPT].append(srpt_pooled(ep.instances, ep.trace))
    return got


def _mean(reps: list[SimReport], attr: str) -> float:
    return statistics.fmean(getattr(r, attr) for r in reps)


def _rel(x: float, base: float) -> float:
    """``x`` over ``base``, minus 1 (0 when both are 0, infinite over a 0 base)."""
    if base > 0:
        return x / base - 1
    return 0.0 if x <= 0 else math.inf


def _cell(reps: list[SimReport], attr: str, fmt: str) -> str:
    xs = [getattr(r, attr) for r in reps]
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{fmt.format(statistics.fmean(xs))} ± {fmt.format(sd)}"


Verdict = tuple[str, str, float, float, float]
"""(family, policy, avg, P99, longest wait), each relative to the best heuristic's."""


def family_rows(
    name: str, label: str, got: dict[str, list[SimReport]]
) -> tuple[list[list[str]], list[Verdict]]:
    best = min(HEURISTICS, key=lambda p: _mean(got[p], "avg_jct_s"))
    b = {a: _mean(got[best], a) for a in ("avg_jct_s", "p99_jct_s", "max_wait_s")}
    rows, verdicts = [], []
    cv = _mean(got["fifo"], "exec_cv")
    for p, reps in got.items():
        d = [_rel(_mean(reps, a), b[a]) for a in ("avg_jct_s", "p99_jct_s", "max_wait_s")]
        vs = "best heuristic" if p == best else ""
        if p not in HEURISTICS or p != best:
            worse = d[1] > 0.05 or d[2] > 0.05
            vs = f"{d[0]:+.1%} / {d[1]:+.1%} / {d[2]:+.1%}" + (" **WORSE TAIL**" if worse else "")
        if p != best:
            verdicts.append((name, p, d[0], d[1], d[2]))
        first = f"{name} ({label}; exec CV {cv:.0%})" if p == POLICIES[0] else ""
        rows.append([first, p, *(_cell(reps, a, f) for a, f in METRICS), vs])
    return rows, verdicts


def _table(rows: list[list[str]]) -> str:
    head = ("| family | policy | JCT avg s | JCT P99 s | longest wait s | fragmentation | "
            "vs best heuristic: avg / P99 / longest wait |")  # fmt: skip
    return "\n".join([head, "|---|---|---|---|---|---|---|",
                      *("| " + " | ".join(r) + " |" for r in rows)])  # fmt: skip


def summary(split: str, verdicts: list[Verdict]) -> str:
    lines = []
    for who in ("learned", UNBOUNDED, EXPECTED, CLAIRVOYANT, SRPT):
        got = [v for v in verdicts if v[1] == who]
        if not got:
            continue
        safe = [v for v in got if v[3] <= 0.05 and v[4] <= 0.05]
        met = [v for v in safe if v[2] <= -0.2]
        each = ", ".join(f"{v[0]} {v[2]:+.1%} / {v[3]:+.1%} / {v[4]:+.1%}" for v in got)
        avg = statistics.fmean(v[2] for v in got)
        lines.append(
            f"- {who} on the {split} families: average JCT {avg:+.1%} "
            f"on average; P99 and longest wait within 5% of the best heuristic's on "
            f"{len(safe)} of {len(got)}; that and average JCT 20% lower on {len(met)} of "
            f"{len(got)} (avg / P99 / longest wait by family: {each})."
        )  # fmt: skip
    return "\n".join(lines)


def split_section(
    title: str, families: tuple[str, ...], results: dict[str, dict[str, list[SimReport]]],
    label: str,
) -> str:  # fmt: skip
    rows: list[list[str]] = []
    verdicts: list[Verdict] = []
    for name in families:
        r, v = family_rows(name, label, results[name])
        rows += r
        verdicts += v
    return f"### {title}\n\n{_table(rows)}\n\n{summary(label, verdicts)}"


def _job(job: tuple[str, tuple[int, ...], str, int]) -> tuple[str, dict[str, list[SimReport]]]:
    name, seeds, checkpoint, cap = job
    t0 = time.perf_counter()
    got = run_family(name, seeds, checkpoint, cap)
    print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return name, got


SECTION = "## Learned scheduling policy"
RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"


def publish(table: Path, results_md: Path = RESULTS_MD) -> None:
    """Put ``table`` (this benchmark's output) in place of the learned section of
    ``results_md``, leaving every other section as it is (``megaflow bench`` rewrites
    the whole file from one run; this benchmark runs apart from it, by hand)."""
    body = table.read_text().strip()
    start = body.find(SECTION)
    if start < 0:
        raise SystemExit(f"error: {table} has no '{SECTION}' section; run the benchmark first")
    lead = ("Written by `python benchmarks/bench_learned.py --publish` from "
            f"`benchmarks/results/{table.name}`, not part of a `megaflow bench` run.")  # fmt: skip
    body = body[start:].replace("\n", f"\n\n{lead}\n", 1)
    text = results_md.read_text()
    at = text.find(SECTION)
    if at < 0:
        results_md.write_text(text.rstrip() + "\n\n" + body + "\n")
        return
    end = text.find("\n## ", at + len(SECTION))
    rest = "" if end < 0 else text[end:]
    results_md.write_text(text[:at] + body + "\n" + rest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--publish",
        action="store_true",
        help="Also put the table in place of "
        "the learned section of benchmarks/RESULTS.md (alone with --no-run).",
    )
    ap.add_argument(
        "--no-run",
        action="store_true",
        help="With --publish: publish the table written before, without running.",
    )
    ap.add_argument("--checkpoint", default=str(SHIPPED), help="The policy to evaluate.")
    ap.add_argument("--split", choices=("all", "validation", "test"), default="all",
                    help="all: training and validation families, then the test ones, to "
                    "learned.md; one split alone goes to learned-<split>.md.")  # fmt: skip
    ap.add_argument("--families", default="",
                    help="Comma-separated: only these families of the split(s) (a subset "
                    "while developing; the table then leaves the others out).")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=10, help="Traces per family (10).")
    ap.add_argument("--tasks", type=int, default=4000, help="At most this many tasks a trace.")
    ap.add_argument("--samples", type=int, default=5000, help="Planning rounds timed.")
    ap.add_argument("--jobs", type=int, default=2, help="Processes simulating families.")
    args = ap.parse_args()
    table = results_dir() / ("learned.md" if args.split == "all" else f"learned-{args.split}.md")
    if args.no_run:
        publish(table)
        return
    ckpt = args.checkpoint
    meta = read_checkpoint(ckpt).meta
    learned_cfg = LearnedPolicyConfig(checkpoint=ckpt)
    t0 = time.perf_counter()
    l_rounds: list[tuple[int, int]] = []
    l_med, l_p99, l_cpu = decision_p99(samples=args.samples, policy=learned_cfg, rounds=l_rounds)
    p_med, p_p99, p_cpu = decision_p99(samples=args.samples)
    latency = time.perf_counter() - t0
    placed = sorted(n for _, n in l_rounds)
    rows = [
        ["checkpoint", f"{Path(ckpt).name}: {meta.get('iterations', 0)} iterations, "
         f"{meta.get('decisions', 0):,} decisions on {', '.join(meta.get('families', []))}", ""],
        ["planning round, 10,000 queued over 1,000 instances: learned (median / P99 wall / "
         "P99 CPU)", f"{l_med:,.0f} / {l_p99:,.0f} / {l_cpu:,.0f} us", "P99 < 1,000 us"],
        ["  peer: priority, same queue (median / P99 wall / P99 CPU)",
         f"{p_med:,.0f} / {p_p99:,.0f} / {p_cpu:,.0f} us", ""],
        ["  tasks placed per round by learned (mean / P99)",
         f"{statistics.fmean(placed):.2f} / {placed[int(0.99 * len(placed))]}", ""],
    ]  # fmt: skip
    seeds_v = VALIDATION_SEEDS[: args.seeds]
    seeds_t = TEST_SEEDS[: args.seeds]
    splits: list[tuple[str, tuple[str, ...], tuple[int, ...], str]] = []
    if args.split in ("all", "validation"):
        splits += [("Training families (held-out traces)", TRAIN_FAMILIES, seeds_v, "training"),
                   ("Validation families", VALIDATION_FAMILIES, seeds_v, "validation")]  # fmt: skip
    if args.split in ("all", "test"):
        splits.append(("Test families (evaluated once, at the end)", TEST_FAMILIES, seeds_t,
                       "test"))  # fmt: skip
    if args.families:
        only = set(args.families.split(","))
        if only - set(FAMILIES):
            ap.error(f"--families: unknown {', '.join(sorted(only - set(FAMILIES)))}")
        splits = [(t, tuple(n for n in names if n in only), seeds, label)
                  for t, names, seeds, label in splits]  # fmt: skip
        splits = [s for s in splits if s[1]]
    jobs = [(n, seeds, ckpt, args.tasks) for _, names, seeds, _ in splits for n in names]
    t1 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(pool.map(_job, jobs))
    sims = time.perf_counter() - t1
    sections = [split_section(t, names, results, label) for t, names, _, label in splits]
    about = "\n".join(
        f"- `{n}`: {FAMILIES[n].about}; {FAMILIES[n].instances} instances, "
        f"{min(FAMILIES[n].tasks, args.tasks):,} tasks a trace"
        for _, names, _, _ in splits
        for n in names
    )
    notes = (
        f"Decision latency: {args.samples:,} planning rounds per policy ({latency:.0f} s), each "
        "after one running task ends and one task arrives; a round places every task that "
        "fits; the wall P99 includes time waiting for a core on a loaded machine, the CPU "
        "P99 does not. JCT, waits and fragmentation are simulated time and do not depend on "
        f"the machine's load ({sims:.0f} s wall for the simulations, {args.jobs} processes). "
        f"Each cell: mean ± standard deviation over {args.seeds} traces. "
        "Fragmentation: free room no waiting task fits, as a share of the fleet, in its "
        "bottleneck resource, sampled after placement every 16 planning rounds that leave "
        "tasks waiting. exec CV: the coefficient of variation of execution time within a "
        "(type, run); the simulator runs a task for its traced length wherever it is placed, "
        "so it is the trace's spread, the same for every policy. The wait bound is the "
        "configured default (wait_bound 1.0, wait_floor_s 60, wait_backlog 1.0, wait_backfill "
        "true)."
    )
    extra = "\n\n".join([*sections, f"Families:\n\n{about}"])
    name = "learned" if args.split == "all" else f"learned-{args.split}"
    report(name, "Learned scheduling policy", ["figure", "measured", "target"], rows,
           notes, load_before=LOAD_AT_START, extra_md=extra)  # fmt: skip
    if args.publish:
        publish(table)


if __name__ == "__main__":
    main()
