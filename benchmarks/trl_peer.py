"""bench_train's peer: TRL's ``GRPOTrainer`` against MegaFlow's trainer, same work.

Both sides start from the same warm-started quickstart policy
(:mod:`peer_policy`), take the same settings-fix train prompts in the same order (the
builtin agent's conversation: system prompt and problem statement, rendered
by the policy's chat template), the same number of GRPO updates of the same
size (prompts x group), the same learning rate, sampling temperature and
completion length, and the same reward: the study's in-process
re-implementation of the verifier (``study_reward``) on the decoded
completion. Each step samples its completions with Hugging Face ``generate``
in the process, batched, then updates:

* **TRL**: ``GRPOTrainer`` (one process on CPU, ``loss_type='dapo'``, no KL,
  one iteration per generation), timed from its step callbacks; its own
  generation and scoring (``_generate_and_score_completions``) is timed
  apart, and the rest of the step is its update.
* **MegaFlow**: the study's batched sampler (the same ``generate`` call) and
  :class:`megaflow.train.worker.RankWorker`'s step (token-level loss, no KL),
  against the logprobs the sampler kept from ``generate``'s own logits.

The figures compared, side by side: the update's throughput (completion
tokens of the step per second of update wall time, and per CPU-second of
this process) and the whole step's (sampling, reward and update). Each
repetition has its own seed (prompt order, sampling, the trainer's), the
same for both sides within it; the sides alternate (TRL MegaFlow, MegaFlow
TRL, ...) after one untimed warm-up run of one update each, so neither is
measured cold.
MegaFlow's real loop samples through sandboxes and the model gateway, not
like this; ``bench_train`` measures that loop separately.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ab import cpu_s, interleave_reps, order_text, ratios, spread
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.train.config import TrainerConfig
from megaflow.train.samples import TrainingSample
from peer_policy import cached_policy, heldout_reward, policy_reward, shown
from study_train_quickstart import ROOT, SYSTEM, TASKS, Sampler, study_reward

QUICKSTART = ROOT / "examples" / "train-quickstart-fix.yaml"


@dataclass(frozen=True)
class PeerSettings:
    """One GRPO run's shape; :func:`quickstart_settings` reads it from the quickstart."""

    steps: int = 4
    prompts: int = 8  # groups per update (train.prompts_per_step)
    group: int = 4  # samples per prompt (samples)
    lr: float = 5e-4
    temperature: float = 1.0
    max_new: int = 96  # agent.completion_tokens
    seed: int = 0


def quickstart_settings(steps: int, config: Path = QUICKSTART) -> PeerSettings:
    """``steps`` updates shaped as the train quickstart's config shapes its own."""
    import yaml

    from megaflow.agent.config import BuiltinAgentConfig
    from megaflow.config import parse_config

    cfg = parse_config(yaml.safe_load(config.read_text()))
    agent = cfg.agent
    if (
        not isinstance(agent, BuiltinAgentConfig) or agent.system_prompt != SYSTEM
        or cfg.train is None or agent.completion_tokens is None
    ):  # fmt: skip
        raise ValueError(f"{config}: not the quickstart the study's prompts and verifier are for")
    return PeerSettings(
        steps=steps, prompts=cfg.train.prompts_per_step, group=cfg.samples, lr=cfg.train.lr,
        temperature=cfg.train.temperature, max_new=agent.completion_tokens,
    )  # fmt: skip


@dataclass
class Side:
    """What one run of one side measured, step by step."""

    name: str
    update_s: list[float] = field(default_factory=list)
    update_cpu_s: list[float] = field(default_factory=list)
    gen_s: list[float] = field(default_factory=list)
    gen_cpu_s: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # completion tokens of the step
    reward: list[float] = field(default_factory=list)  # mean train reward of the step
    heldout: float = 0.0  # greedy held-out reward after the last update

    def tok_s(self) -> float:
        """Median over the steps of completion tokens per second of update."""
        return statistics.median(t / u for t, u in zip(self.tokens, self.update_s, strict=True))

    def tok_cpu_s(self) -> float:
        """Median over the steps of completion tokens per CPU-second of update."""
        pairs = zip(self.tokens, self.update_cpu_s, strict=True)
        return statistics.median(t / c for t, c in pairs if c > 0)

    def step_s(self) -> float:
        """Median wall time of a whole step: sampling, reward and update."""
        return statistics.median(g + u for g, u in zip(self.gen_s, self.update_s, strict=True))


def prompt_plan(settings: PeerSettings) -> list[SWEInstance]:
    """The train instances of every update, in order (``prompts`` per step)."""
    import random

    train = load_instances(TASKS / "train.jsonl")
    rng = random.Random(settings.seed)
    out: list[SWEInstance] = []
    for _ in range(settings.steps):
        out += rng.sample(train, settings.prompts)
    return out


def conversation(inst: SWEInstance) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": inst.problem_statement},
    ]


def run_megaflow(policy: Path, plan: Sequence[SWEInstance], s: PeerSettings) -> Side:
    from transformers import AutoTokenizer

    from megaflow.train.worker import RankWorker

    # TRL steps the optimizer on every batch, signal or not: so does MegaFlow here
    config = TrainerConfig(
        lr=s.lr, temperature=s.temperature, seed=s.seed, micro_batch=32, step_without_signal=True
    )
    worker = RankWorker(policy, config)
    tok = AutoTokenizer.from_pretrained(policy)
    sampler = Sampler(worker.model, tok, s.max_new)
    side = Side("MegaFlow")
    import torch

    torch.manual_seed(s.seed)  # this repetition's sampling draws
    for step in range(s.steps):
        c0, t0 = cpu_s(), time.perf_counter()
        insts = plan[step * s.prompts : (step + 1) * s.prompts]
        prompts = [sampler.prompt_ids(i) for i in insts for _ in range(s.group)]
        outs = sampler.generate_scored(prompts, s.temperature)
        groups: list[list[TrainingSample]] = []
        rewards: list[float] = []
        for k, inst in enumerate(insts):
            group = []
            for j in range(s.group):
                p, (c, logprobs) = prompts[k * s.group + j], outs[k * s.group + j]
                rewards.append(study_reward(inst, sampler.text(c)))
                group.append(
                    TrainingSample(
                        sample_id=f"{step}/{inst.instance_id}/{j}", group_id=f"{step}/{k}",
                        run_id="bench", prompt_ids=p, completion_ids=c,
                        logprobs=logprobs, loss_mask=[1] * len(c),
                        reward=rewards[-1],
                    )
                )  # fmt: skip
            groups.append(group)
        side.gen_s.append(time.perf_counter() - t0)
        side.gen_cpu_s.append(cpu_s() - c0)
        c0, t0 = cpu_s(), time.perf_counter()
        stats = worker.step(groups)
        side.update_s.append(time.perf_counter() - t0)
        side.update_cpu_s.append(cpu_s() - c0)
        side.tokens.append(stats.tokens)
        side.reward.append(sum(rewards) / len(rewards))
    side.heldout = heldout_reward(worker.model, tok, s.max_new)
    return side


def run_trl(policy: Path, plan: Sequence[SWEInstance], s: PeerSettings, work: Path) -> Side:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer  # type: ignore[attr-defined]

    from datasets import Dataset  # type: ignore[import-untyped]

    side = Side("TRL")
    by_id = {i.instance_id: i for i in plan}
    marks: dict[str, float] = {}
    tok = AutoTokenizer.from_pretrained(policy)
    expected = Sampler(None, tok, s.max_new)

    def reward(prompts: list[Any], completions: list[Any], **kw: Any) -> list[float]:
        out = [
            study_reward(by_id[iid], c[0]["content"])
            for iid, c in zip(kw["instance_id"], completions, strict=True)
        ]
        side.reward.append(sum(out) / len(out))
        return out

    class Timed(GRPOTrainer):
        def _generate_and_score_completions(self, inputs: Any) -> Any:
            c0, t0 = cpu_s(), time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            side.gen_s.append(time.perf_counter() - t0)
            side.gen_cpu_s.append(cpu_s() - c0)
            side.tokens.append(int(out["completion_mask"].sum()))
            for x, ids in zip(inputs, out["prompt_ids"].tolist(), strict=True):
                mask_ids = [t for t in ids if t != tok.pad_token_id]
                if mask_ids != expected.prompt_ids(by_id[x["instance_id"]]):
                    raise RuntimeError(f"TRL's prompt ids for {x['instance_id']} differ")
            return out

    class Clock(TrainerCallback):
        def on_step_begin(self, *a: Any, **kw: Any) -> None:
            marks["t"], marks["c"] = time.perf_counter(), cpu_s()

        def on_step_end(self, *a: Any, **kw: Any) -> None:
            wall, cpu = time.perf_counter() - marks["t"], cpu_s() - marks["c"]
            side.update_s.append(wall - side.gen_s[-1])
            side.update_cpu_s.append(cpu - side.gen_cpu_s[-1])

    args = GRPOConfig(
        output_dir=str(work), max_steps=s.steps, per_device_train_batch_size=s.prompts * s.group,
        num_generations=s.group, max_completion_length=s.max_new, temperature=s.temperature,
        learning_rate=s.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, optim="adamw_torch", beta=0.0, loss_type="dapo",
        scale_rewards="group", num_iterations=1, shuffle_dataset=False, logging_steps=1,
        report_to="none", save_strategy="no", use_cpu=True, seed=s.seed, disable_tqdm=True,
    )  # fmt: skip
    data = Dataset.from_list(
        [{"prompt": conversation(i), "instance_id": i.instance_id} for i in plan]
    )
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32)
    trainer = Timed(
        model=model, reward_funcs=cast(Any, reward), args=args, train_dataset=data,
        processing_class=tok, callbacks=[Clock()],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)  # its log line per step; the table has the figures
    trainer.train()
    side.heldout = heldout_reward(trainer.model, tok, s.max_new)
    return side


@dataclass
class PeerResult:
    trl: list[Side]
    megaflow: list[Side]
    before: float  # the start policy's held-out reward
    policy: str  # where the policy came from
    seeds: list[int] = field(default_factory=list)
    order: str = ""


def measure(
    seeds: Sequence[int], policy: Path | None, sft_steps: int, work: Path, s: PeerSettings
) -> PeerResult:
    """One run of each side per seed, the order alternating (TRL first, then
    MegaFlow first, ...), after one untimed one-update run of each, from
    ``policy`` (None: the cached policy for ``sft_steps`` warm-start steps, built
    first if missing, from ``s.seed``). One torch thread throughout: on a shared
    2-core machine two threads run far slower."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if policy is None:
            policy, built = cached_policy(sft_steps, s.seed)
            source = (
                f"built {'by this run' if built else 'by an earlier run'} with {sft_steps} "
                f"warm-start steps, kept in {shown(policy)}"
            )
        else:
            source = shown(policy)
        before = policy_reward(policy, s.max_new)
        start = policy

        def settings(rep: int) -> PeerSettings:
            if rep < 0:  # the warm-up: one update, a seed no repetition uses
                return replace(s, steps=1, seed=10_000 - rep)
            return replace(s, seed=seeds[rep])

        def trl(rep: int) -> Side:
            run = settings(rep)
            return run_trl(start, prompt_plan(run), run, work / f"trl-{rep}")

        def megaflow(rep: int) -> Side:
            run = settings(rep)
            return run_megaflow(start, prompt_plan(run), run)

        got_trl, got_mf = interleave_reps(len(seeds), [trl, megaflow], warmup=1)
    finally:
        torch.set_num_threads(threads)
    return PeerResult(got_trl, got_mf, before, source, list(seeds), order_text(2))


def peer_rows(res: PeerResult, s: PeerSettings) -> list[list[str]]:
    """The table's rows: A is MegaFlow, B is TRL, ratios taken run by run."""
    trl, mf, before = res.trl, res.megaflow, res.before
    shape = f"{s.steps} updates x {s.prompts} prompts x {s.group} samples"

    def row(label: str, get: Callable[[Side], float], fmt: str, ratio: bool = True) -> list[str]:
        a, b = [get(x) for x in mf], [get(x) for x in trl]
        r = spread(ratios(a, b), "{:.2f}x".format) if ratio else "-"
        return [label, spread(a, fmt.format), spread(b, fmt.format), r]

    def curve(sides: Sequence[Side]) -> str:
        first = statistics.mean(x.reward[0] for x in sides)
        last = statistics.mean(x.reward[-1] for x in sides)
        every = statistics.mean(r for x in sides for r in x.reward)
        return f"{first:.2f} -> {last:.2f} (all: {every:.2f})"

    return [
        row(f"peer, {shape}: update tokens/s (wall); A MegaFlow, B TRL", Side.tok_s, "{:.0f}"),
        row("peer: update tokens per CPU-second", Side.tok_cpu_s, "{:.0f}"),
        row("peer: completion tokens per update", lambda x: statistics.median(x.tokens), "{:.0f}"),
        row(
            "peer: sampling + reward per step (HF generate)",
            lambda x: statistics.median(x.gen_s),
            "{:.2f} s",
        ),
        row("peer: whole step (sampling, reward, update)", Side.step_s, "{:.2f} s"),
        [
            "peer: speed MegaFlow / TRL (> 1: MegaFlow faster), A update only, B whole step",
            spread(ratios([x.tok_s() for x in mf], [x.tok_s() for x in trl]), "{:.2f}x".format),
            spread(ratios([x.step_s() for x in trl], [x.step_s() for x in mf]), "{:.2f}x".format),
            "-",
        ],
        ["peer: train reward, first -> last update (mean over runs)", curve(mf), curve(trl), "-"],
        row(
            f"peer: held-out reward after the updates (greedy; {before:.2f} before)",
            lambda x: x.heldout,
            "{:.2f}",
            ratio=False,
        ),
    ]
