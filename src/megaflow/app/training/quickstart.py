"""The train quickstart's policy, prepared once: ``python -m megaflow.app.training.quickstart``.

Builds a task family's policy (:func:`megaflow.train.quickstart_model.build_policy`:
a tokenizer trained on the family's texts, a small causal LM with random
weights) and warm-starts it on the family's demonstrations, a sloppy
teacher's answers (``tasks/<family>/build/teacher.py``;
:func:`megaflow.train.warm_start.warm_start`), into the directory
``examples/train-quickstart.yaml`` names. ``make run`` calls it when that
directory does not exist yet.

``--tasks`` picks the family (``tasks/settings-kinds`` by default, the
quickstart's; also ``tasks/settings-fix``, for
``examples/train-quickstart-fix.yaml``). A
family may carry a ``policy.json`` beside its splits: :class:`PolicyConfig`
fields it needs (settings-kinds: ``split_underscores``, ``underscore_leads``,
8 ``heads``), and a ``warm_start.json``: :class:`WarmStartPlan`, how its
warm start trains and the share of held-out tasks the warm policy must copy
(:mod:`megaflow.app.training.copy_check`). After the warm start the build
says how much of the issue the policy copies; below the family's
``min_copy`` it fails (:class:`~megaflow.core.errors.WarmStartFailed`, exit
1) and leaves no policy behind, since RL on a policy that does not copy sees
reward 0 on every sample and has nothing to learn from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from megaflow.app.training.copy_check import CopyScore, copy_score, gold_conversation
from megaflow.core.errors import InvalidInput, WarmStartFailed
from megaflow.datasets.loader import load_instances
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.warm_start import WarmStartConfig, load_conversations, warm_start

REPORT_S = 10.0
"""Longest time between two warm-start progress lines."""

SFT_STEPS = 1000
"""Warm-start steps: the copy of names and values from the issue forms late."""


class WarmStartPlan(BaseModel):
    """A family's warm start beyond its step count and seed (its ``warm_start.json``)."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(3e-3, gt=0, description="Peak AdamW learning rate.")
    warmup: int = Field(10, ge=0, description="Steps of linear learning-rate warmup.")
    batch_size: int = Field(16, ge=1, description="Demonstrations per step.")
    min_copy: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Share of held-out tasks the warm policy must copy whole (path, name, "
        "values; copy_check); below it the build fails. None: the share is only reported.",
    )
    extra_steps: int = Field(
        0,
        ge=0,
        description="Steps the warm start may add after --sft-steps while the policy copies "
        "less than min_copy (checked every check_every steps): copying forms suddenly, "
        "at a step that differs from seed to seed.",
    )
    check_every: int = Field(100, ge=1, description="Steps between two copy checks.")


def warm_start_plan(tasks: Path) -> WarmStartPlan:
    """The family's :class:`WarmStartPlan`: its ``warm_start.json``, else the defaults.
    Raises InvalidInput naming the file and field of a bad one."""
    f = tasks / "warm_start.json"
    if not f.is_file():
        return WarmStartPlan()
    try:
        return WarmStartPlan.model_validate_json(f.read_text())
    except ValueError as exc:
        raise InvalidInput(f"{f}: {exc}") from exc


def policy_config(tasks: Path, seed: int) -> PolicyConfig:
    """The family's :class:`PolicyConfig`: its ``policy.json`` if it has one, and ``seed``."""
    f = tasks / "policy.json"
    fields = json.loads(f.read_text()) if f.is_file() else {}
    return PolicyConfig.model_validate({**fields, "seed": seed})


def _print(line: str) -> None:
    print(line, flush=True)  # a progress line shows at once, also through a pipe


def check_copy(policy: Path, tasks: Path, system: str) -> CopyScore | None:
    """How much of the issue the policy in ``policy`` copies on the family's held-out
    tasks (:func:`~megaflow.app.training.copy_check.copy_score`); None for a family
    without a held-out split. Evaluation only: nothing of the split trains."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    held = tasks / "heldout.jsonl"
    if not held.is_file():
        return None
    convs = [gold_conversation(system, i) for i in load_instances(held)]
    tok = AutoTokenizer.from_pretrained(policy, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(policy, local_files_only=True)
    return copy_score(model, tok, convs)


def copy_line(score: CopyScore, min_copy: float | None) -> str:
    """The build's report of :func:`check_copy`."""
    bar = f", at least {min_copy:.2f} needed" if min_copy is not None else ""
    return (
        f"copies the issue whole in {score.copied}/{score.tasks} held-out tasks "
        f"({score.share:.2f}{bar}; {score.right}/{score.tokens} copied tokens right)"
    )


def _copies_enough(
    policy: Path,
    tasks: Path,
    system: str,
    plan: WarmStartPlan,
    sft_steps: int,
    say: Callable[[str], None] | None,
) -> Callable[[Any, int], bool]:
    """The warm start's ``done``: from step ``sft_steps`` on, whether the model copies
    at least the plan's ``min_copy`` of the held-out tasks (each check said)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy, local_files_only=True)
    convs = [gold_conversation(system, i) for i in load_instances(tasks / "heldout.jsonl")]
    bar = plan.min_copy or 0.0

    def done(model: Any, step: int) -> bool:
        if step < sft_steps:
            return False
        score = copy_score(model, tok, convs)
        if say is not None:
            verdict = "done" if score.share >= bar else "going on"
            say(f"warm start: step {step}, {copy_line(score, bar)}: {verdict}")
        return score.share >= bar

    return done


def prepare(
    out: Path,
    tasks: Path,
    *,
    sft_steps: int,
    seed: int = 0,
    say: Callable[[str], None] | None = _print,
) -> Path:
    """Build and warm-start the policy in a temporary folder, check how much it copies,
    then move it to ``out``, so an interrupted or failed build leaves no half-made
    model behind. ``say`` gets a line before each phase, a progress line after the
    first step and then at most every :data:`REPORT_S` seconds, so a loaded machine is
    never silent for long, and the copy check's line (None: silent, and the check runs
    only for a family with a ``min_copy``). Raises WarmStartFailed when the policy
    copies less than the family's ``min_copy``."""
    plan = warm_start_plan(tasks)
    convs = load_conversations(tasks / "demonstrations.jsonl")
    train = load_instances(tasks / "train.jsonl")
    texts = [render(c) for c in convs] + [i.problem_statement for i in train]
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    last = [-REPORT_S]

    def progress(step: int, steps: int, loss: float) -> None:
        now = time.monotonic() - t0
        if say is not None and (step == 1 or step == steps or now - last[0] >= REPORT_S):
            last[0] = now
            say(f"warm start: step {step}/{steps}, loss {loss:.3f}, {now:.0f} s")

    if say is not None:
        say(f"warm start: building the tokenizer and policy from {len(texts)} texts")
    with tempfile.TemporaryDirectory(prefix=".policy-", dir=out.parent) as tmp:
        built = build_policy(Path(tmp) / "policy", texts, policy_config(tasks, seed))
        system = str(convs[0][0]["content"])
        extra = plan.extra_steps if plan.min_copy is not None else 0
        if say is not None:
            more = f", then up to {extra} more until it copies" if extra else ""
            say(f"warm start: {sft_steps} steps on {len(convs)} demonstrations{more}")
        config = WarmStartConfig(
            steps=sft_steps + extra, seed=seed, report_every=1, check_every=plan.check_every,
            **plan.model_dump(include={"lr", "warmup", "batch_size"}),
        )  # fmt: skip
        done = _copies_enough(built, tasks, system, plan, sft_steps, say) if extra else None
        losses = warm_start(built, convs, config, progress, done)
        if losses and say is not None:
            say(f"warm start: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
        if say is not None or plan.min_copy is not None:
            score = check_copy(built, tasks, system)
            if score is not None and say is not None:
                say(f"warm start: {copy_line(score, plan.min_copy)}")
            if score is not None and plan.min_copy is not None and score.share < plan.min_copy:
                raise WarmStartFailed(
                    f"{tasks.name}, seed {seed}, {len(losses)} steps: the warm policy copies "
                    f"the issue whole in {score.copied}/{score.tasks} held-out tasks, below "
                    f"the family's min_copy {plan.min_copy:.2f} ({tasks / 'warm_start.json'}); "
                    "RL would see reward 0 on almost every sample. No policy was written; "
                    "build again with more --sft-steps or another --seed."
                )
        shutil.move(str(built), out)
    return out


def policy_key(tasks: Path, *, sft_steps: int, seed: int) -> str:
    """What a prepared policy depends on: the demonstrations, the train split's issues
    (the tokenizer's corpus), the builder's and the warm start's code, steps, seed and
    the family's policy settings and warm-start plan."""
    from megaflow.train import quickstart_model
    from megaflow.train import warm_start as warm_start_module

    h = hashlib.sha256(f"{sft_steps}|{policy_config(tasks, seed).model_dump_json()}".encode())
    if (tasks / "warm_start.json").is_file():
        h.update(warm_start_plan(tasks).model_dump_json().encode())
    for f in (tasks / "demonstrations.jsonl", tasks / "train.jsonl"):
        h.update(f.read_bytes())
    for mod in (quickstart_model, warm_start_module):
        h.update(Path(mod.__file__ or "").read_bytes())
    return h.hexdigest()[:16]


def cached(
    cache: Path,
    tasks: Path,
    *,
    sft_steps: int,
    seed: int = 0,
    say: Callable[[str], None] | None = None,
) -> Path:
    """The policy :func:`prepare` makes from these inputs, kept under ``cache`` by
    :func:`policy_key`: built when no earlier call left it, else reused."""
    out = cache / f"{tasks.name}-{policy_key(tasks, sft_steps=sft_steps, seed=seed)}"
    if (out / "config.json").is_file():
        return out
    return prepare(out, tasks, sft_steps=sft_steps, seed=seed, say=say)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("out", type=Path, help="Where the policy goes (a new directory).")
    ap.add_argument("--tasks", type=Path, default=Path("tasks/settings-kinds"))
    ap.add_argument("--sft-steps", type=int, default=SFT_STEPS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.out.exists():
        ap.error(f"{args.out} exists; remove it to build the policy again")
    if args.sft_steps < 0:
        ap.error(f"--sft-steps must be 0 or more, not {args.sft_steps}")
    try:
        policy = prepare(args.out, args.tasks, sft_steps=args.sft_steps, seed=args.seed)
    except InvalidInput as exc:
        ap.error(str(exc))
    except WarmStartFailed as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"policy: {policy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
