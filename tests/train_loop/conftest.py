"""A small policy for the settings-fix family and a training config around it.

The policy is the quickstart's tokenizer and model builder at a tiny size
(random weights unless a test warm-starts it), built once per session; every
run gets its own stores, sandboxes and output folder under ``tmp_path``.
The warm-started policy of the learning tests is built once for all of them
and kept in pytest's cache (``warm_policy``).
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from megaflow.app.training.quickstart import cached
from megaflow.datasets.loader import load_instances
from megaflow.train.quickstart_model import PolicyConfig, build_policy, render
from megaflow.train.warm_start import load_conversations

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "tasks" / "settings-fix"
SYSTEM = "Read the file, fix the setting with one edit call, then call submit."
WARM_STEPS = 600
"""Warm-start steps of the learning tests' policy: fewer than the quickstart's 1,000,
enough for the direction, and most of those tests' time when the cache is cold."""


def conversations() -> list[list[dict[str, Any]]]:
    return load_conversations(TASKS / "demonstrations.jsonl")


@pytest.fixture(scope="session")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weights policy: its episodes are token-exact, its rewards 0."""
    texts = [render(c) for c in conversations()]
    texts += [i.problem_statement for i in load_instances(TASKS / "train.jsonl")]
    out = tmp_path_factory.mktemp("policy")
    return build_policy(out, texts, PolicyConfig(hidden=32, layers=1, intermediate=64))


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Held by one process at a time: xdist workers share the cache folder."""
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def warm_policy(request: pytest.FixtureRequest) -> Path:
    """The quickstart's own warm policy (``WARM_STEPS``), kept in pytest's cache by a
    hash of what it depends on (``quickstart.cached``): the first test that needs it
    builds it (minutes) while a test of another worker waits for it rather than
    building it again; later runs take it as long as the family, the builder and the
    warm start are unchanged."""
    cache = request.config.cache
    assert cache is not None, "the test needs pytest's cache provider (no -p no:cacheprovider)"
    folder = cache.mkdir("megaflow-quickstart-policy")
    with _exclusive(folder / ".lock"):
        return cached(folder, TASKS, sft_steps=WARM_STEPS)


def train_config(tmp: Path, model: Path, **train: Any) -> dict[str, Any]:
    """A run of settings-fix through real sandboxes; ``train`` overrides the loop's fields."""
    return {
        "name": "tl",
        "samples": 2,
        "deadline_s": 120,
        "tasks": {"type": "swebench", "path": str(TASKS / "train.jsonl")},
        "agent": {
            "type": "builtin", "max_steps": 2, "max_format_errors": 2,
            "completion_tokens": 24, "system_prompt": SYSTEM,
        },
        "model": {"type": "transformers", "model": str(model), "temperature": 1.0},
        "environment": {"runtime": {"type": "local", "root": str(tmp / "sb")}},
        "scheduler": {"max_concurrency": 8},
        "storage": {
            "metadata": {"type": "sqlite", "path": str(tmp / "m.db")},
            "artifacts": {"type": "local", "root": str(tmp / "art")},
        },
        "train": {
            "held_out": {"path": str(TASKS / "heldout.jsonl"), "limit": 2},
            "prompts_per_step": 2, "steps": 3, "eval_every": 0, "lr": 1e-3,
            "checkpoint_every": 1, "out_dir": str(tmp / "out"),
            # the random policy scores 0 everywhere, so no step has signal; these tests
            # exercise versions and weight pushes, so every step updates anyway
            "step_without_signal": True, **train,
        },
    }  # fmt: skip


def write_config(tmp: Path, cfg: dict[str, Any]) -> Path:
    path = tmp / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path
