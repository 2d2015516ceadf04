"""The RL loop's costs: trainer throughput, weight sync, and async against sync.

* **Trainer tokens/s per core**: GRPO steps of the real trainer
  (:func:`megaflow.train.launch.start`, one rank) on the quickstart's policy
  size (a settings-fix tokenizer and a random-weights model of the
  quickstart's shape), groups of samples of a fixed length; trained tokens
  per second of wall time, and per CPU-second of this process.
* **Weight sync**: the trainer's ``state_dict_for_inference()`` and the
  in-place ``ModelControl.update_weights`` into a ``transformers`` backend
  serving the same model, each timed.
* **Async vs sync**: the real loop (``TrainLoop``: sandboxes, builtin agent,
  grading, trainer) for the same steps, prompts and samples, ``mode: sync``
  against ``mode: async`` (lookahead 1), interleaved; once as the machine is,
  and once sandbox-bound: every sandbox handed out waits ``--sandbox-sleep``
  seconds first (a stand-in for a slow sandbox start or a long episode), so
  rollouts wait on sandboxes, not on the CPU.

* **The peer, TRL's GRPOTrainer** (:mod:`trl_peer`): the quickstart's
  warm-started policy (built once and kept, :mod:`peer_policy`, or
  ``--policy``), the same settings-fix prompts,
  number and size of updates and in-process reward on both sides, TRL and
  MegaFlow's ``RankWorker`` in turn, alternating, after one warm-up update
  each, one seed per repetition (``--seeds``); update tokens/s and whole
  step times side by side, and the reward reached, MegaFlow / TRL per run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.train_loop.conftest import TASKS, train_config

from ab import cpu_s, interleave, order_text, ratios, spread
from megaflow.app.training.loop import TrainLoop
from megaflow.app.training.quickstart import SFT_STEPS
from megaflow.config import parse_config
from megaflow.environment.pool import SandboxPool
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client
from megaflow.train.config import TrainerConfig
from megaflow.train.quickstart_model import PolicyConfig, build_policy
from megaflow.train.samples import TrainingSample
from report import add_rule_args, begin, report
from trl_peer import measure, peer_rows, quickstart_settings


def synthetic_groups(
    vocab: int, groups: int, size: int, prompt: int, completion: int, seed: int
) -> list[list[TrainingSample]]:
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        out.append([
            TrainingSample(
                sample_id=f"g{g}/{n}", group_id=f"g{g}", run_id="bench",
                prompt_ids=[rng.randrange(8, vocab) for _ in range(prompt)],
                completion_ids=[rng.randrange(8, vocab) for _ in range(completion)],
                logprobs=[-rng.random() * 3 for _ in range(completion)],
                loss_mask=[1] * completion, reward=float(rng.random() < 0.5),
                weights_version=0,
            )
            for n in range(size)
        ])  # fmt: skip
    return out


def trainer_figures(model_dir: Path, steps: int) -> dict[str, Any]:
    import torch

    from megaflow.train.launch import start

    trainer = start(model_dir, TrainerConfig(lr=1e-4, micro_batch=32))
    assert trainer is not None
    vocab = cast(Any, trainer._worker).model.config.vocab_size
    try:
        trainer.step(synthetic_groups(vocab, 8, 4, 200, 64, seed=-1))  # warm-up
        tokens, wall, cpu = [], [], []
        for i in range(steps):
            groups = synthetic_groups(vocab, 8, 4, 200, 64, seed=i)
            c0, t0 = cpu_s(), time.perf_counter()
            stats = trainer.step(groups)
            wall.append(time.perf_counter() - t0)
            cpu.append(cpu_s() - c0)
            tokens.append(stats.tokens)
        t0 = time.perf_counter()
        weights = trainer.state_dict_for_inference()
        gather_s = time.perf_counter() - t0
        version = trainer.weights_version
    finally:
        trainer.close()
    swap = asyncio.run(swap_times(model_dir, weights, version, 5))
    params = sum(int(v.numel()) for v in weights.values())
    return {
        "tok_s": [t / w for t, w in zip(tokens, wall, strict=True)],
        "tok_cpu_s": [t / c for t, c in zip(tokens, cpu, strict=True) if c > 0],
        "threads": torch.get_num_threads(),
        "gather_s": gather_s,
        "swap_s": swap,
        "params": params,
    }


async def swap_times(model_dir: Path, weights: Any, version: int, n: int) -> list[float]:
    client = make_model_client(TransformersModelConfig(model=str(model_dir)))
    out = []
    async with client:
        for i in range(n):
            t0 = time.perf_counter()
            await client.control.update_weights(weights, version + i)
            out.append(time.perf_counter() - t0)
    return out


def loop_wall(tmp: Path, policy: Path, mode: str, steps: int, sleep_s: float) -> float:
    run = tmp / f"{mode}-{time.monotonic_ns()}"
    extra = {"lookahead": 1} if mode == "async" else {}
    raw = train_config(
        run, policy, mode=mode, steps=steps, checkpoint_every=0, max_staleness=1, **extra
    )
    raw["train"]["held_out"]["limit"] = 1
    loop = TrainLoop(parse_config(raw), run_id=f"bench-{mode}", printer=lambda _: None)
    real_acquire = SandboxPool.acquire

    async def slow_acquire(self: SandboxPool, *a: Any, **kw: Any) -> Any:
        await asyncio.sleep(sleep_s)
        return await real_acquire(self, *a, **kw)

    SandboxPool.acquire = slow_acquire  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        asyncio.run(loop.run())
        return time.perf_counter() - t0
    finally:
        SandboxPool.acquire = real_acquire  # type: ignore[method-assign]


def trl_version() -> str:
    from importlib.metadata import version

    return version("trl")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sandbox-sleep", type=float, default=2.0)
    ap.add_argument(
        "--policy",
        type=Path,
        help="A warm-started policy for the TRL peer (e.g. .megaflow/models/settings-fix); "
        "default: one built here once and kept under .megaflow/bench.",
    )
    ap.add_argument(
        "--sft-steps",
        type=int,
        default=SFT_STEPS,
        help="Warm-start steps when the peer's policy is built here (--quick: 20).",
    )
    ap.add_argument(
        "--seeds", default=None,
        help="Comma-separated seeds of the TRL peer's repetitions (default 0..reps-1).",
    )  # fmt: skip
    add_rule_args(ap)
    args = ap.parse_args()
    begin(args)
    if args.policy is not None and not (args.policy / "config.json").is_file():
        ap.error(f"--policy {args.policy}: no config.json there; give a model directory")
    reps = 2 if args.quick else max(3, args.reps)
    try:
        seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else list(range(reps))
    except ValueError:
        ap.error(f"--seeds: {args.seeds!r} is not a comma-separated list of integers")
    if not seeds:
        ap.error("--seeds: give one seed at least")
    steps = 2 if args.quick else 4
    peer = quickstart_settings(steps)
    load0 = os.getloadavg()[0]
    from megaflow.datasets.loader import load_instances

    with tempfile.TemporaryDirectory(prefix="mf-bench-train-") as tmp:
        root = Path(tmp)
        texts = [i.problem_statement for i in load_instances(TASKS / "train.jsonl")]
        quick_policy = build_policy(root / "policy", texts, PolicyConfig())
        tiny = build_policy(
            root / "tiny", texts, PolicyConfig(hidden=32, layers=1, intermediate=64)
        )
        tf = trainer_figures(quick_policy, 2 if args.quick else 5)
        sft = 20 if args.quick else args.sft_steps
        res = measure(seeds, args.policy, sft, root / "peer", peer)
        walls: dict[str, list[list[float]]] = {}
        for label, sleep_s in (("this machine", 0.0), ("sandbox-bound", args.sandbox_sleep)):
            walls[label] = interleave(reps, [
                functools.partial(loop_wall, root, tiny, "sync", steps, sleep_s),
                functools.partial(loop_wall, root, tiny, "async", steps, sleep_s),
            ])  # fmt: skip
    ms = "{:.0f} ms".format
    rows = [
        ["trainer tokens/s (wall)", spread(tf["tok_s"], "{:.0f}".format), "-", "-"],
        [
            f"trainer tokens per CPU-second ({tf['threads']} torch threads)",
            spread(tf["tok_cpu_s"], "{:.0f}".format), "-", "-",
        ],
        ["weight sync: state_dict_for_inference", ms(tf["gather_s"] * 1000), "-", "-"],
        ["weight sync: update_weights in place", spread([s * 1000 for s in tf["swap_s"]], ms),
         "-", "-"],
    ]  # fmt: skip
    for label, (sync, asyn) in walls.items():
        rows.append([
            f"{steps} steps x 2 prompts x 2 samples, {label}: A sync, B async",
            spread(sync, "{:.1f} s".format), spread(asyn, "{:.1f} s".format),
            spread(ratios(sync, asyn), "{:.2f}x".format),
        ])  # fmt: skip
    rows += peer_rows(res, peer)
    notes = (
        f"Trainer: the quickstart policy's shape ({tf['params'] / 1e6:.2f} M parameters, random "
        "weights), 8 groups x 4 samples of 200 prompt + 64 generated tokens per step, one rank "
        "on CPU. Weight sync moves the full state dict in process (no network, no GPU). "
        "Async vs sync: the real loop with a 0.1 M-parameter policy (its episodes end at "
        "format errors, so rollouts are short), one held-out instance, no checkpoints; "
        f"sandbox-bound adds {args.sandbox_sleep:g} s before every sandbox is handed out. "
        f"Ratio: sync wall time / async wall time, per repetition ({order_text(2)}). "
        f"Peer: A is MegaFlow's RankWorker, B TRL {trl_version()}'s GRPOTrainer, in this "
        f"process on CPU with one torch thread, {len(res.seeds)} run(s) of each, seeds "
        f"{', '.join(map(str, res.seeds))} (prompt order, sampling and trainer; the same for "
        f"both sides within a run), in turn ({res.order}) after one untimed one-update run "
        "of each, each from the "
        f"same warm-started policy ({res.policy}), on the same settings-fix train prompts in the "
        f"same order, {peer.prompts} prompts x {peer.group} samples per update, lr {peer.lr:g}, "
        f"temperature {peer.temperature:g}, at most {peer.max_new} completion tokens, no KL, "
        "token-level loss (TRL 'dapo'), one update per batch, the reward the study's "
        "in-process verifier (not pytest in a sandbox). Both sample with HF generate in the "
        "process, batched; MegaFlow keeps the logprob of each drawn token from generate's own "
        "logits (as its transformers backend does: no second forward), TRL reuses the "
        "update's own (one iteration per batch); both updates score completion positions "
        "only (MegaFlow through logits_to_keep, TRL through its fused LM head). Update "
        "tokens/s: completion tokens of a step per second of its update "
        "(TRL: its step minus its generation and scoring), median over the steps; ratios "
        "MegaFlow / TRL run by run. What differs: TRL's advantages divide by the sample "
        "standard deviation (+1e-4), MegaFlow's by the population one (+1e-6); TRL also "
        "computes the entropy in its loss pass. Sampling draws differ between the sides, so "
        "their batches (and rewards) are alike in distribution, not identical. MegaFlow's "
        "real loop samples through sandboxes, the gateway and the builtin agent (the async "
        "vs sync rows), not in process as here."
    )
    report(
        "train",
        "RL loop: trainer throughput, weight sync, async vs sync, TRL GRPOTrainer peer",
        ["figure", "A", "B", "A / B"],
        rows,
        notes,
        load_before=load0,
        args=args,
        seeds=seeds,
        reps=reps,
    )


if __name__ == "__main__":
    main()
