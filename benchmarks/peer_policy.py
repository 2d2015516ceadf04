"""bench_train's TRL peer: the policy both sides start from, and its held-out reward.

The quickstart's policy is built with
:func:`megaflow.train.quickstart_model.build_policy` and warm-started with
:func:`megaflow.train.warm_start.warm_start` on the settings-fix
demonstrations, as the quickstart does. That takes minutes, so :func:`cached_policy` keeps
the result under ``.megaflow/bench``, named by a hash of everything it
depends on (the splits, the builder's and the warm start's code, the steps
and seed): a later run reuses it only when nothing of that changed.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from megaflow.datasets.loader import load_instances
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.warm_start import WarmStartConfig, load_conversations, warm_start
from study_train_quickstart import SYSTEM, TASKS, Sampler, evaluate

CACHE = Path(__file__).resolve().parents[1] / ".megaflow" / "bench"
"""Where the peer keeps the policies it built, one per :func:`policy_key`."""
DEMONSTRATIONS = TASKS / "demonstrations.jsonl"
"""The warm start's conversations, as the quickstart uses them."""


def prepare_policy(out: Path, sft_steps: int, seed: int = 0) -> tuple[Path, list[float]]:
    """The quickstart's policy, built and warm-started into ``out``; the warm start's losses."""
    convs = load_conversations(DEMONSTRATIONS)
    train = load_instances(TASKS / "train.jsonl")
    texts = [render(c) for c in convs] + [i.problem_statement for i in train]
    model_dir = build_policy(out, texts, PolicyConfig(seed=seed))
    return model_dir, warm_start(model_dir, convs, WarmStartConfig(steps=sft_steps, seed=seed))


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it is inside it."""
    try:
        return str(path.resolve().relative_to(CACHE.parents[1]))
    except ValueError:
        return str(path)


def policy_key(sft_steps: int, seed: int) -> str:
    """What the built policy depends on: the demo and train splits, the builder's and
    the warm start's code (their defaults), the system prompt, steps and seed."""
    from megaflow.train import quickstart_model
    from megaflow.train import warm_start as warm_start_module

    h = hashlib.sha256(f"{SYSTEM}|{sft_steps}|{seed}".encode())
    for f in (DEMONSTRATIONS, TASKS / "train.jsonl"):
        h.update(f.read_bytes())
    for mod in (quickstart_model, warm_start_module):
        h.update(Path(mod.__file__ or "").read_bytes())
    return h.hexdigest()[:16]


def cached_policy(sft_steps: int, seed: int = 0, cache: Path = CACHE) -> tuple[Path, bool]:
    """The warm-started policy for these inputs under ``cache``, built (in a temporary
    folder, then renamed) when no earlier run left it; and whether this call built it."""
    out = cache / f"train-peer-policy-{policy_key(sft_steps, seed)}"
    if (out / "config.json").is_file():
        return out, False
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".policy-", dir=cache) as tmp:
        built, _ = prepare_policy(Path(tmp) / "policy", sft_steps, seed)
        built.rename(out)
    return out, True


def heldout_reward(model: Any, tok: Any, max_new: int) -> float:
    """Mean greedy reward over the held-out split (the study's evaluation)."""
    model.eval()
    return evaluate(Sampler(model, tok, max_new), load_instances(TASKS / "heldout.jsonl"), 0.0)[0]


def policy_reward(policy: Path, max_new: int) -> float:
    """The held-out reward of the policy as it starts, before either side trains it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(policy)
    return heldout_reward(model, AutoTokenizer.from_pretrained(policy), max_new)
