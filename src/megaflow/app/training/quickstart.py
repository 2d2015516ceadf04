"""The train quickstart's policy, prepared once: ``python -m megaflow.app.training.quickstart``.

Builds the settings-fix policy (:func:`megaflow.train.quickstart_model.build_policy`:
a tokenizer trained on the family's texts, a small causal LM with random
weights) and warm-starts it on the family's demonstrations, a sloppy
teacher's answers (``tasks/settings-fix/build/teacher.py``;
:func:`megaflow.train.warm_start.warm_start`), into the directory
``examples/train-quickstart.yaml`` names. ``make run`` calls it when that
directory does not exist yet.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from megaflow.datasets.loader import load_instances
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.warm_start import WarmStartConfig, load_conversations, warm_start

SFT_STEPS = 1000
"""Warm-start steps: the copy of names and values from the issue forms late."""


def prepare(out: Path, tasks: Path, *, sft_steps: int, seed: int = 0) -> Path:
    """Build and warm-start the policy in a temporary folder, then move it to ``out``,
    so an interrupted build leaves no half-made model behind."""
    convs = load_conversations(tasks / "demonstrations.jsonl")
    train = load_instances(tasks / "train.jsonl")
    texts = [render(c) for c in convs] + [i.problem_statement for i in train]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".policy-", dir=out.parent) as tmp:
        built = build_policy(Path(tmp) / "policy", texts, PolicyConfig(seed=seed))
        losses = warm_start(built, convs, WarmStartConfig(steps=sft_steps, seed=seed))
        if losses:
            print(f"warm start: {len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}")
        shutil.move(str(built), out)
    return out


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
