"""The training loop through engines in other processes: sync against async wall time.

Each run is ``megaflow train``'s loop (``TrainLoop``) on the settings-fix
family with a small random policy (the quickstart's tokenizer and builder),
its rollout model two ``megaflow serve model`` engines the run starts itself
(``model.launch``), new weights by ``disk``. The same work both ways: the same
steps, prompts per step and samples, the same agent and generation length,
every step updating (``step_without_signal``: the random policy earns no
reward). ``sync`` rolls a step out after the previous update; ``async`` keeps
the next ``lookahead`` steps' rollouts running while a step trains
(``max_staleness`` 1: with lookahead 1 no sample is older than that).
Rollouts dominate: the trainer's step on this model takes a fraction of a
second, an episode seconds.

The scheduler runs ``(1 + lookahead) x prompts x samples`` tasks at once in
both modes (``--concurrency`` overrides): with only one step's worth, the
async loop's lookahead round could start a task only as one of the trained
round ended, and the lookahead would overlap only that round's tail.

Timed: the loop's steps (``TrainLoop._train``) less its held-out round (the
one at the last step, the same in both), so not the engines' start, the
trainer's start or the stores. One untimed run of each first (warm-up: page
cache, imports), then ``--reps`` timed runs of each, the order reversed every
other repetition. Each timed run records its timeline (:mod:`loop_timeline`:
every task, model call, collect, trainer step and weight push, and the CPU of
the loop, its sandboxes and each engine), and the results file gives the
phases, the bound they allow and a chart per mode (:mod:`timeline_report`).

    .venv/bin/python benchmarks/bench_remote_loop.py --reps 2 --allow-dirty
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import spread
from loop_timeline import CpuSampler, Recorder
from report import add_rule_args, begin, read_loadavg, report
from timeline_report import load, markdown

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks" / "settings-fix"
SYSTEM = "Read the file, fix the setting with one edit call, then call submit."


def policy(where: Path) -> Path:
    from megaflow.datasets.loader import load_instances
    from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
    from megaflow.train.warm_start import load_conversations

    texts = [render(c) for c in load_conversations(TASKS / "demonstrations.jsonl")]
    texts += [i.problem_statement for i in load_instances(TASKS / "train.jsonl")]
    return build_policy(where, texts, PolicyConfig(hidden=32, layers=1, intermediate=64))


def concurrency(args: argparse.Namespace) -> int:
    """Tasks at once: ``--concurrency``, else room for every round async keeps in flight
    (the step trained and ``lookahead`` more), so the lookahead is not starved."""
    step = args.prompts * args.samples
    return int(args.concurrency or (1 + args.lookahead) * step)


def config(tmp: Path, model: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    train: dict[str, Any] = {
        "policy": str(model), "mode": mode,
        "held_out": {"path": str(TASKS / "heldout.jsonl"), "limit": 1},
        "prompts_per_step": args.prompts, "steps": args.steps, "eval_every": 0,
        "eval_before": False, "lr": 1e-3, "checkpoint_every": 0, "out_dir": str(tmp / "out"),
        "step_without_signal": True, "max_staleness": 1,
        "weight_sync": {"type": "disk", "root": str(tmp / "w"), "keep": 1},
    }  # fmt: skip
    if mode == "async":
        train["lookahead"] = args.lookahead
    return {
        "name": f"bench-{mode}",
        "samples": args.samples,
        "deadline_s": 600,
        "tasks": {"type": "swebench", "path": str(TASKS / "train.jsonl")},
        "agent": {
            "type": "builtin", "max_steps": 2, "max_format_errors": 2, "temperature": 1.0,
            "completion_tokens": args.tokens, "system_prompt": SYSTEM,
        },
        "model": {
            "type": "openai", "model": "default", "weight_sync": "megaflow",
            "launch": {"replicas": 2, "max_new_tokens": args.tokens},
        },
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "scheduler": {"max_concurrency": concurrency(args)},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
        "train": train,
    }  # fmt: skip


async def one_run(
    tmp: Path, model: Path, mode: str, args: argparse.Namespace, dump: Path | None = None
) -> float:
    """Seconds of the loop's steps, less its held-out round; with ``dump``, the run's
    timeline (:mod:`loop_timeline`) is written there as JSON."""
    from megaflow.app.training.loop import TrainLoop
    from megaflow.config import parse_config

    loop = TrainLoop(parse_config(config(tmp, model, mode, args)), run_id=f"b-{mode}",
                     printer=lambda _: None)  # fmt: skip
    spent = {"train": 0.0, "eval": 0.0}
    window: list[float] = []
    train, evaluate = loop._train, loop._evaluate

    async def timed_train(*a: Any) -> None:
        t0, w0 = time.perf_counter(), time.time()
        await train(*a)
        spent["train"] += time.perf_counter() - t0
        window.extend([w0, time.time()])

    async def timed_eval(*a: Any) -> None:
        t0 = time.perf_counter()
        await evaluate(*a)
        spent["eval"] += time.perf_counter() - t0

    loop._train = timed_train  # type: ignore[method-assign, assignment]
    loop._evaluate = timed_eval  # type: ignore[method-assign, assignment]
    recorder = Recorder()
    cpu = CpuSampler(tmp / "out" / f"b-{mode}" / "engines" / "engines.json")
    if dump is not None:
        cpu.start()
    try:
        with recorder.recording() if dump is not None else contextlib.nullcontext(recorder):
            curve = await loop.run()
    finally:
        cpu.stop()
    assert [p.weights_version for p in curve.steps] == list(range(1, args.steps + 1))
    if dump is not None:
        dump.write_text(json.dumps({
            "mode": mode, "window": window, "engines": cpu.engines,
            "spans": [dataclasses.asdict(s) for s in recorder.spans],
            "cpu": cpu.samples, "steps": [p.seconds for p in curve.steps],
        }))  # fmt: skip
    return spent["train"] - spent["eval"]


GPU = """

On GPUs (engines on their own, the trainer on others) the phases change weight:
generation leaves the CPU and becomes most of a rollout (hundreds to thousands of
tokens a turn on a real model), the trainer's step takes seconds to minutes, and a
weight sync what its anchors say (checkpoint-engine 0.18 s for 0.6B, verl 2.2 s for
8B). With rollouts R and train + push T of comparable length, full overlap approaches
(R + T) / max(R, T), 2x at R = T; with rollouts bound by latency and slots for every
round in flight, 1 + lookahead rounds run side by side (the pipeline bound above). The
sandboxes and graders still need CPU: a node's cores must cover 1 + lookahead rounds
of them, or they are the bound, as on this machine."""


def _number(path: Path) -> int:
    return int(path.stem.split("-")[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=4, help="prompts per step")
    ap.add_argument("--samples", type=int, default=4, help="samples per prompt")
    ap.add_argument("--tokens", type=int, default=48, help="completion tokens per turn")
    ap.add_argument("--lookahead", type=int, default=1)
    ap.add_argument(
        "--concurrency",
        type=int,
        default=0,
        help="scheduler.max_concurrency; 0: (1 + lookahead) x prompts x samples",
    )
    ap.add_argument(
        "--timeline", type=Path, default=None,
        help="keep each timed run's timeline (loop_timeline) here as <n>-<mode>.json",
    )  # fmt: skip
    add_rule_args(ap)
    args = ap.parse_args()
    begin(args)
    load_before = read_loadavg()
    times: dict[str, list[float]] = {"sync": [], "async": []}
    with tempfile.TemporaryDirectory(prefix="mf-bench-remote-") as tmp:
        model = policy(Path(tmp) / "policy")
        timelines = args.timeline or Path(tmp) / "timelines"
        n = 0

        def run(mode: str, timed: bool = True) -> float:
            nonlocal n
            n += 1
            dump = None
            if timed:
                timelines.mkdir(parents=True, exist_ok=True)
                dump = timelines / f"{n}-{mode}.json"
            seconds = asyncio.run(one_run(Path(tmp) / f"run-{n}", model, mode, args, dump))
            print(f"{mode}: {seconds:.1f} s", flush=True)
            return seconds

        for mode in ("sync", "async"):
            run(mode, timed=False)  # warm-up, untimed
        for rep in range(args.reps):
            for mode in ("sync", "async") if rep % 2 == 0 else ("async", "sync"):
                times[mode].append(run(mode))
        phases = markdown([load(p) for p in sorted(timelines.glob("*.json"), key=_number)])
    sync_mid, async_mid = statistics.median(times["sync"]), statistics.median(times["async"])
    samples = args.steps * args.prompts * args.samples
    rows = [
        [mode, str(samples), spread(ts, "{:.1f}".format), f"{samples / statistics.median(ts):.2f}"]
        for mode, ts in times.items()
    ]
    rows.append(["async speed-up", "", f"{sync_mid / async_mid:.2f}x", ""])
    notes = " ".join([
        f"{args.steps} steps x {args.prompts} prompts x {args.samples} samples (the same in",
        "both modes), 2 engines (megaflow serve model, each its own process, started by the",
        "run: model.launch), disk weight sync, a 2-turn agent of up to",
        f"{args.tokens} tokens a turn, the small random quickstart-family policy (every step",
        "updates). Seconds: the loop's steps less its final held-out round, median (min-max)",
        f"of {args.reps} runs per mode after one untimed run of each, the order reversed every",
        f"other repetition. async: lookahead {args.lookahead}, max_staleness 1 (no sample is",
        "older than that). scheduler.max_concurrency",
        f"{concurrency(args)} in both modes ((1 + lookahead) x a step's tasks, so the async",
        "loop can run its lookahead round beside the one being trained; sync never has more",
        "than one round). The issue's goal: async at least 2x sync when rollouts dominate.",
        "Even with rollouts bound by latency alone and slots for every round, a round can",
        "start only once the update it may lag by max_staleness is out, so rounds run",
        f"{1 + args.lookahead} at a time and {args.steps} steps take",
        f"{math.ceil(args.steps / (1 + args.lookahead))} rounds' time: at most",
        f"{args.steps / math.ceil(args.steps / (1 + args.lookahead)):.2f}x.",
        "Where the time goes, from each timed run's timeline (loop_timeline.py,",
        "timeline_report.py): rollouts = the loop waiting for its steps' groups; train =",
        "Trainer.step; push = state dict, checkpoint written, both engines loaded; overlap",
        "bound = (rollouts + train + push) / max(rollouts, train + push), the most a full",
        "overlap of the steps' phases saves; tasks and calls during train+push = in flight",
        "while the trainer and the push ran (per step; 0 in sync by construction); engine",
        "busy = share of the window with a call of the loop in flight to an engine; thin =",
        "share of the window with fewer tasks in flight than cores, or the trainer or a push",
        "running: what a deeper pipeline could fill on a machine of its own, at most",
        "1 / (1 - thin) of sync's time; run CPU",
        "s = CPU seconds of the loop's process, its sandboxes (their cgroups) and both",
        "engines; CPU floor = run CPU s over the machine's cores, the least wall time any",
        "schedule of this work takes here; run cores and machine cores = average cores the",
        "run and everything on the machine used over the window. On a shared machine a mode",
        "with more tasks in flight takes a bigger share of contended cores from the other",
        "work (run cores); a speed-up beyond the bounds measures that share, not overlap.",
    ])  # fmt: skip
    report(
        "remote_loop",
        "The loop through engines in other processes: sync against async wall time",
        ["mode", "samples", "seconds", "samples/s"],
        rows,
        notes,
        load_before=load_before,
        args=args,
        reps=args.reps,
        extra_md=phases + GPU,
    )


if __name__ == "__main__":
    main()
