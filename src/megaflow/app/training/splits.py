"""The train and held-out splits of a training run, loaded before anything starts.

The train split is a SWE-bench-style task set: ``path`` (as the run's
``tasks.path``: relative to the working directory, else to the config's
folder) or, when it names none, the run's own ``tasks``; then ``instances``,
``exclude`` and ``limit`` select from it. A run with ``train.sets`` has no
train split (its sets are its prompts), and may have no ``tasks`` either;
then a held-out split of instances must name its ``path``. The held-out split is such a split
too, or one or several task sets of any kind a ``train.sets`` entry takes
(:func:`megaflow.app.training.mixed.load_set`), whose tasks carry their
set's grader key so the ``sets`` grader grades each by its set's grader.
The held-out tasks must not be tasks trained on (the train split's, or with
``train.sets`` every set's): a held-out reward measured on trained prompts
says nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from megaflow.app.assembly import source_roots
from megaflow.app.training.mixed import load_set, load_sets
from megaflow.config.models import RunConfig, SwebenchTasksConfig
from megaflow.config.paths import resolve_path
from megaflow.core.errors import ConfigError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.datasets.sources import DEFAULT_MAX_SOURCE_MB
from megaflow.grading.sets import SET_KEY
from megaflow.train.loop_config import HeldOutConfig, SplitConfig
from megaflow.train.task_sets import held_out_grader_key

T = TypeVar("T")


@dataclass(frozen=True)
class HeldOutTask:
    """One held-out task: its id, its payload, and the held-out set it belongs to
    (None for a split of SWE-bench-style instances, graded by the run's grading)."""

    id: str
    payload: dict[str, Any]
    set: str | None = None

    @property
    def key(self) -> str:
        """Names the task in a round's sample ids and per-prompt figures: the
        instance id, or ``<set>.<id>`` for a set's task."""
        return self.id if self.set is None else f"{self.set}.{self.id}"

    def graded_payload(self) -> dict[str, Any]:
        """The payload as queued: a set's task names its set's grader."""
        if self.set is None:
            return dict(self.payload)
        return {**self.payload, SET_KEY: held_out_grader_key(self.set)}


@dataclass(frozen=True)
class Splits:
    train: list[SWEInstance]
    held_out: list[HeldOutTask]

    @property
    def by_id(self) -> dict[str, SWEInstance]:
        return {i.instance_id: i for i in self.train}


def _load(
    cfg: RunConfig, split: SplitConfig, where: str, config_dir: Path | None
) -> list[SWEInstance]:
    src = cfg.tasks
    if split.path is None and src is None:
        why = "the run has no tasks to take the split from: name its file"
        raise ConfigError(f"{where}.path is needed: {why}", [(f"{where}.path", why)])
    if split.path is None and not isinstance(src, SwebenchTasksConfig):
        raise ConfigError(
            f"{where} is taken from the run's tasks, which are not SWE-bench-style "
            "(tasks.type: swebench); name its file",
            [(f"{where}.path", "needed: tasks.type is not swebench")],
        )
    swe = src if isinstance(src, SwebenchTasksConfig) else None
    path = resolve_path(split.path or (swe.path if swe else ""), config_dir)
    instances = load_instances(
        path,
        source_roots=source_roots(swe.source_roots if swe else [], config_dir),
        max_source_bytes=(swe.max_source_mb if swe else DEFAULT_MAX_SOURCE_MB) * 1024 * 1024,
    )
    if split.path is None and swe is not None and swe.instances is not None:
        instances = [i for i in instances if i.instance_id in set(swe.instances)]
    return _select(instances, lambda i: i.instance_id, split, where, path)


def _select(
    tasks: list[T], id_of: Callable[[T], str], split: SplitConfig, where: str, path: Path
) -> list[T]:
    """``split``'s ``instances``, less its ``exclude``, its first ``limit``; at least one."""
    if split.instances is not None:
        unknown = sorted(set(split.instances) - {id_of(t) for t in tasks})
        if unknown:
            raise ConfigError(
                f"{where}.instances names unknown instance(s): {', '.join(unknown)}",
                [(f"{where}.instances", f"unknown: {', '.join(unknown)}")],
            )
        tasks = [t for t in tasks if id_of(t) in set(split.instances)]
    tasks = [t for t in tasks if id_of(t) not in set(split.exclude)]
    if split.limit is not None:
        tasks = tasks[: split.limit]
    if not tasks:
        raise ConfigError(f"{where} selects no task from {path}", [(where, "no task")])
    return tasks


def _held_set(
    cfg: RunConfig, held: HeldOutConfig, where: str, config_dir: Path | None
) -> list[HeldOutTask]:
    """A held-out task set's tasks, loaded as a train set's, then selected."""
    whole = held.source().model_copy(update={"limit": None})
    tasks = load_set(cfg, whole, where, config_dir)
    path = resolve_path(whole.path, config_dir)
    return [
        HeldOutTask(t.id, t.payload, t.set)
        for t in _select(tasks, lambda t: t.id, held, where, path)
    ]


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
    # with train.sets the sets are the prompts (mixed.py), and the run may have no tasks
    train = _load(cfg, tc.train_split, "train.train_split", config_dir) if tc.sets is None else []
    sets = tc.held_out_sets()
    if not sets:  # a split of instances, graded by the run's grading
        assert not isinstance(tc.held_out, list)
        held_instances = _load(cfg, tc.held_out, "train.held_out", config_dir)
        instances = [HeldOutTask(i.instance_id, i.to_payload()) for i in held_instances]
        groups = [("train.held_out", instances)]
    else:
        fields = [tc.held_out_field(n) for n in range(len(sets))]
        groups = [(f, _held_set(cfg, h, f, config_dir)) for f, h in zip(fields, sets, strict=True)]
    if tc.sets is None:
        trained, what = [(i.instance_id, i.to_payload()) for i in train], "the train split"
    else:
        tasks = [t for ts in load_sets(cfg, config_dir).values() for t in ts]
        trained, what = [(t.id, t.payload) for t in tasks], "train.sets"
    for where, held in groups:
        both = _shared(trained, held)
        if both:
            raise ConfigError(
                f"{where} shares {len(both)} task(s) with {what} "
                f"({', '.join(both[:5])}); exclude them from one of the two",
                [(where, f"overlaps {what}")],
            )
    return Splits(train, [t for _, held in groups for t in held])


def _shared(trained: Iterable[tuple[str, dict[str, Any]]], held: list[HeldOutTask]) -> list[str]:
    """The held-out tasks that are trained on: the same SWE-bench instance (by its
    ``instance_id``), or the same payload whatever its id or set."""
    ids, payloads = set(), set()
    for _, payload in trained:
        if "instance_id" in payload:
            ids.add(str(payload["instance_id"]))
        payloads.add(json.dumps(payload, sort_keys=True, default=str))
    return sorted(
        t.key
        for t in held
        if ("instance_id" in t.payload and str(t.payload["instance_id"]) in ids)
        or json.dumps(t.payload, sort_keys=True, default=str) in payloads
    )
