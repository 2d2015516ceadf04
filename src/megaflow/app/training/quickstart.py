"""The train quickstart's policy, prepared once: ``python -m megaflow.app.training.quickstart``.

Builds the settings-fix policy (:func:`megaflow.train.quickstart_model.build_policy`:
a tokenizer trained on the family's texts, a small causal LM with random
weights) and warm-starts it on the family's demonstrations, a sloppy
teacher's answers (``tasks/settings-fix/build/teacher.py``;
:func:`megaflow.train.warm_start.warm_start`), into the directory
``examples/train-quickstart.yaml`` names. ``make run`` calls it when that
directory does not exist yet.

``--tasks`` picks the family (``tasks/settings-fix`` by default; also
``tasks/settings-kinds``, for ``examples/train-quickstart-kinds.yaml``). A
family may carry a ``policy.json`` beside its splits: :class:`PolicyConfig`
fields it needs (settings-kinds: ``split_underscores``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from megaflow.datasets.loader import load_instances
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.warm_start import WarmStartConfig, load_conversations, warm_start

REPORT_S = 10.0
"""Longest time between two warm-start progress lines."""

SFT_STEPS = 1000
"""Warm-start steps: the copy of names and values from the issue forms late."""


def policy_config(tasks: Path, seed: int) -> PolicyConfig:
    """The family's :class:`PolicyConfig`: its ``policy.json`` if it has one, and ``seed``."""
    f = tasks / "policy.json"
    fields = json.loads(f.read_text()) if f.is_file() else {}
    return PolicyConfig.model_validate({**fields, "seed": seed})


def _print(line: str) -> None:
    print(line, flush=True)  # a progress line shows at once, also through a pipe


def prepare(
    out: Path,
    tasks: Path,
    *,
    sft_steps: int,
    seed: int = 0,
    say: Callable[[str], None] | None = _print,
) -> Path:
    """Build and warm-start the policy in a temporary folder, then move it to ``out``,
    so an interrupted build leaves no half-made model behind. ``say`` gets a line
    before each phase and a progress line after the first step and then at most every
    :data:`REPORT_S` seconds, so a loaded machine is never silent for long (None:
    silent)."""
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
        if say is not None:
            say(f"warm start: {sft_steps} steps on {len(convs)} demonstrations")
        config = WarmStartConfig(steps=sft_steps, seed=seed, report_every=1)
        losses = warm_start(built, convs, config, progress)
        if losses and say is not None:
            say(f"warm start: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
        shutil.move(str(built), out)
    return out


def policy_key(tasks: Path, *, sft_steps: int, seed: int) -> str:
    """What a prepared policy depends on: the demonstrations, the train split's issues
    (the tokenizer's corpus), the builder's and the warm start's code, steps, seed and
    the family's policy settings."""
    from megaflow.train import quickstart_model
    from megaflow.train import warm_start as warm_start_module

    h = hashlib.sha256(f"{sft_steps}|{policy_config(tasks, seed).model_dump_json()}".encode())
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


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("out", type=Path, help="Where the policy goes (a new directory).")
    ap.add_argument("--tasks", type=Path, default=Path("tasks/settings-fix"))
    ap.add_argument("--sft-steps", type=int, default=SFT_STEPS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.out.exists():
        ap.error(f"{args.out} exists; remove it to build the policy again")
    print(f"policy: {prepare(args.out, args.tasks, sft_steps=args.sft_steps, seed=args.seed)}")


if __name__ == "__main__":
    main()
