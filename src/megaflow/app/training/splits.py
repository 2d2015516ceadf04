"""The train and held-out splits of a training run, loaded before anything starts.

Each split is a SWE-bench-style task set: ``path`` (as the run's
``tasks.path``: relative to the working directory, else to the config's
folder) or, when it names none, the run's own ``tasks``; then ``instances``,
``exclude`` and ``limit`` select from it. The two splits must not share an
instance: a held-out reward measured on trained prompts says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from megaflow.app.assembly import source_roots
from megaflow.config.models import RunConfig, SwebenchTasksConfig
from megaflow.config.paths import resolve_path
from megaflow.core.errors import ConfigError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.train.loop_config import SplitConfig


@dataclass(frozen=True)
class Splits:
    train: list[SWEInstance]
    held_out: list[SWEInstance]

    @property
    def by_id(self) -> dict[str, SWEInstance]:
        return {i.instance_id: i for i in self.train}


def _load(
    cfg: RunConfig, split: SplitConfig, where: str, config_dir: Path | None
) -> list[SWEInstance]:
    src = cfg.tasks
    if not isinstance(src, SwebenchTasksConfig):
        raise ConfigError(
            "megaflow train needs SWE-bench-style tasks (tasks.type: swebench)",
            [("tasks.type", "must be swebench for a training run")],
        )
    path = resolve_path(split.path or src.path, config_dir)
    instances = load_instances(
        path,
        source_roots=source_roots(src.source_roots, config_dir),
        max_source_bytes=src.max_source_mb * 1024 * 1024,
    )
    if split.path is None and src.instances is not None:
        instances = [i for i in instances if i.instance_id in set(src.instances)]
    if split.instances is not None:
        known = {i.instance_id for i in instances}
        unknown = sorted(set(split.instances) - known)
        if unknown:
            raise ConfigError(
                f"{where}.instances names unknown instance(s): {', '.join(unknown)}",
                [(f"{where}.instances", f"unknown: {', '.join(unknown)}")],
            )
        instances = [i for i in instances if i.instance_id in set(split.instances)]
    instances = [i for i in instances if i.instance_id not in set(split.exclude)]
    if split.limit is not None:
        instances = instances[: split.limit]
    if not instances:
        raise ConfigError(f"{where} selects no task from {path}", [(where, "no task")])
    return instances


def load_splits(cfg: RunConfig, config_dir: Path | None) -> Splits:
    """Both splits, checked: a GRPO group needs two samples, and no prompt is in both."""
    tc = cfg.train
    if tc is None:
        raise ConfigError("the config has no train: section", [("train", "missing")])
    if cfg.samples < 2:
        raise ConfigError(
            f"samples is {cfg.samples}: a GRPO group needs at least 2 samples of a prompt",
            [("samples", "at least 2 for train")],
        )
    agent_t = getattr(cfg.agent, "temperature", None)
    temperature = agent_t if agent_t is not None else getattr(cfg.model, "temperature", None)
    if temperature is None:
        raise ConfigError(
            f"agent.temperature is not set and model.type {cfg.model.type!r} has no temperature "
            f"of its own, so the sampler's distribution is the server's default; set "
            f"agent.temperature to train.temperature ({tc.temperature:g})",
            [("agent.temperature", "required with this model for a training run")],
        )
    if abs(temperature - tc.temperature) > 1e-9:
        where = "agent" if agent_t is not None else "model"
        raise ConfigError(
            f"{where}.temperature ({temperature:g}) differs from train.temperature "
            f"({tc.temperature:g}): the trainer's ratio must see the sampler's distribution",
            [("train.temperature", f"must equal {where}.temperature")],
        )
    train = _load(cfg, tc.train_split, "train.train_split", config_dir)
    held = _load(cfg, tc.held_out, "train.held_out", config_dir)
    both = sorted({i.instance_id for i in train} & {i.instance_id for i in held})
    if both:
        raise ConfigError(
            f"train.held_out shares {len(both)} instance(s) with the train split "
            f"({', '.join(both[:5])}); exclude them from one of the two",
            [("train.held_out", "overlaps the train split")],
        )
    return Splits(train, held)
