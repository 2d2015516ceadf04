"""A train run over several task sets (``train.sets``): its tasks, plan and figures.

:func:`load_sets` reads every set (SWE-bench-style instances, a Harbor set,
or a JSONL file of ``{id, payload}`` rows) into tasks keyed
``<set>.<task id>``; :func:`with_set_grading` makes the run's grader the
``sets`` grader, so each task is graded by its set's ``grading`` (the run's
own when the set names none), a held-out set's tasks too (:func:`load_set`
loads those for :mod:`megaflow.app.training.splits`). A
:class:`MixedPlan` stands where the single-set
:class:`~megaflow.app.training.plan.PromptPlan` does: ``batch(step)`` draws a
step's tasks through :class:`~megaflow.app.training.sampler.SetSampler`,
:meth:`MixedPlan.submit` queues ``samples`` of each (one GRPO group per
task, never across tasks), and :meth:`MixedPlan.figures` gives each set's
reward mean and pass rate for the step line and the curve.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megaflow.app.assembly import source_roots
from megaflow.app.training.rollouts import Batch, Rollouts
from megaflow.app.training.sampler import SetSampler
from megaflow.config.models import RunConfig, SwebenchTasksConfig
from megaflow.config.paths import resolve_path
from megaflow.core.errors import ConfigError, InvalidInput
from megaflow.core.tasks import TaskSpec, TaskType, Timeouts, group_id, sample_id
from megaflow.datasets.harbor import load_rows
from megaflow.datasets.loader import load_instances
from megaflow.grading.config import LeafGraderConfig, ScriptGraderConfig, SetsGraderConfig
from megaflow.grading.sets import SET_KEY
from megaflow.train.task_sets import CurriculumConfig, SetSourceConfig, held_out_grader_key


@dataclass(frozen=True)
class SetTask:
    set: str
    id: str
    payload: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.set}.{self.id}"


def _jsonl(path: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tid, payload = str(row["id"]), row["payload"]
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInput(f"line {n} is not {{id, payload}}: {e}") from None
        if not isinstance(payload, dict):
            raise InvalidInput(f"line {n}: payload is not an object")
        rows.append((tid, payload))
    return rows


def _rows(cfg: RunConfig, s: SetSourceConfig, path: Path, config_dir: Path | None) -> list[Any]:
    if s.type == "harbor":
        return load_rows(path)
    if s.type == "jsonl":
        return _jsonl(path)
    src = cfg.tasks
    roots = src.source_roots if isinstance(src, SwebenchTasksConfig) else []
    mb = src.max_source_mb if isinstance(src, SwebenchTasksConfig) else 64
    instances = load_instances(
        path, source_roots=source_roots(roots, config_dir), max_source_bytes=mb * 1024 * 1024
    )
    return [(i.instance_id, i.to_payload()) for i in instances]


def load_set(
    cfg: RunConfig, s: SetSourceConfig, where: str, config_dir: Path | None
) -> list[SetTask]:
    """One set's tasks (a train set's, or a held-out set's), checked: it loads and holds
    a task, no id twice, and a grader that can grade them; errors name ``where``'s
    ``path`` or ``grading`` (``where`` is the set's config field)."""
    run_grading = cfg.grading.default if isinstance(cfg.grading, SetsGraderConfig) else cfg.grading
    path = resolve_path(s.path, config_dir)
    try:
        rows = _rows(cfg, s, path, config_dir)
    except (OSError, InvalidInput, ValueError) as e:
        raise ConfigError(f"{where}.path: {path}: {e}", [(f"{where}.path", str(e))]) from None
    rows = rows[: s.limit]
    ids = [tid for tid, _ in rows]
    if not rows or len(set(ids)) != len(ids):
        why = "holds no task" if not rows else "holds a task id twice"
        raise ConfigError(f"{where}.path: {path} {why}", [(f"{where}.path", why)])
    ungraded = s.type == "jsonl" and s.grading is None and run_grading.type == "swebench"
    if ungraded and any("instance_id" not in p for _, p in rows):
        why = "its tasks are not SWE-bench instances: the run's swebench grading ignores them"
        raise ConfigError(f"{where}.grading is needed: {why}", [(f"{where}.grading", why)])
    return [SetTask(s.name, tid, dict(p)) for tid, p in rows]


def load_sets(cfg: RunConfig, config_dir: Path | None) -> dict[str, list[SetTask]]:
    """Every train set's tasks, each checked by :func:`load_set`."""
    assert cfg.train is not None
    assert cfg.train.sets is not None
    return {
        s.name: load_set(cfg, s, f"train.sets[{n}]", config_dir)
        for n, s in enumerate(cfg.train.sets)
    }


def with_set_grading(cfg: RunConfig) -> RunConfig:
    """The run graded by the ``sets`` grader when it has train sets or held-out sets:
    each set's own grader (a Harbor set's is ``script`` unless it names one, as for a
    Harbor run), the run's for the rest; a held-out set's under
    :func:`~megaflow.train.task_sets.held_out_grader_key`. ``cfg`` itself otherwise."""
    tc = cfg.train
    assert tc is not None
    held = [h.source() for h in tc.held_out_sets()]
    if tc.sets is None and not held:
        return cfg
    given = cfg.grading
    default = given.default if isinstance(given, SetsGraderConfig) else given
    sets = dict(given.sets) if isinstance(given, SetsGraderConfig) else {}

    def own(s: SetSourceConfig) -> LeafGraderConfig:
        return s.grading or (ScriptGraderConfig() if s.type == "harbor" else default)

    for s in tc.sets or []:
        sets.setdefault(s.name, own(s))
    for h in held:
        sets.setdefault(held_out_grader_key(h.name), own(h))
    grading = SetsGraderConfig(sets=sets, default=default)
    return cfg.model_copy(update={"grading": grading})


@dataclass
class SetFigures:
    samples: int
    """Graded samples of the set in the step."""
    reward_mean: float | None
    pass_rate: float | None
    """Share of the graded samples with reward 1."""


@dataclass
class StepSets:
    """Each set's figures in one step, and whether the curriculum's skip was lifted."""

    sets: dict[str, SetFigures]
    lifted: bool = False

    def figures(self) -> dict[str, dict[str, float | int | None]]:
        """As the curve records them (``StepPoint.sets``)."""
        return {n: dict(vars(f)) for n, f in self.sets.items()}

    def line(self) -> str:
        """The step line's per-set part: ``  sets swe 0.250 pass 0.25 n 4  qa ...``."""
        parts = [
            f"{n} -" if f.samples == 0 or f.reward_mean is None or f.pass_rate is None
            else f"{n} {f.reward_mean:.3f} pass {f.pass_rate:.2f} n {f.samples}"
            for n, f in self.sets.items()
        ]  # fmt: skip
        note = "  (curriculum: every task was skipped, all drawn)" if self.lifted else ""
        return "  sets " + "  ".join(parts) + note


def mixed_plan(cfg: RunConfig, config_dir: Path | None) -> MixedPlan:
    """The plan of a run with ``train.sets``, its sets loaded and checked."""
    tc = cfg.train
    assert tc is not None
    assert tc.sets is not None
    return MixedPlan(
        load_sets(cfg, config_dir), {s.name: s.weight for s in tc.sets},
        tc.prompts_per_step, tc.steps, tc.seed, tc.curriculum,
    )  # fmt: skip


class MixedPlan:
    """Which tasks each step of a mixed run trains on, drawn once each, in order."""

    def __init__(
        self,
        sets: dict[str, list[SetTask]],
        weights: dict[str, float],
        prompts_per_step: int,
        steps: int,
        seed: int = 0,
        curriculum: CurriculumConfig | None = None,
    ) -> None:
        self.tasks = {t.key: t for ts in sets.values() for t in ts}
        self.sampler = SetSampler(
            {name: [t.key for t in ts] for name, ts in sets.items()},
            weights, prompts_per_step, seed, curriculum,
        )  # fmt: skip
        self.prompts_per_step, self.steps, self.seed = prompts_per_step, steps, seed
        self.curriculum = curriculum
        self._batches: dict[int, list[str]] = {}
        self._set_of: dict[str, tuple[str, str]] = {}
        """Group id -> (set, task key), for the figures."""

    def batch(self, step: int) -> list[str]:
        """The task keys of ``step`` (1-based), drawing every step before it first."""
        if not 1 <= step <= self.steps:
            raise ValueError(f"step {step} is outside 1..{self.steps}")
        for s in range(len(self._batches) + 1, step + 1):
            self._batches[s] = self.sampler.draw(s)
        return self._batches[step]

    def state(self) -> dict[str, Any]:
        """The draws so far and the sampler's state, as JSON, for a checkpoint."""
        return {"batches": self._batches, "sampler": self.sampler.state()}

    def load(self, state: dict[str, Any]) -> None:
        """Take back :meth:`state` on resume: the steps drawn stay as they were
        drawn, and the next draws see the pass rates counted before."""
        self._batches = {int(s): list(keys) for s, keys in state["batches"].items()}
        if set(self._batches) != set(range(1, len(self._batches) + 1)):
            raise ValueError("the saved plan's steps are not 1..n")
        self.sampler.load(state["sampler"])

    def sequence(self) -> list[str]:
        """What names the plan for a resume: every prompt in order; with a curriculum
        (whose draws depend on the rewards) the sets, weights and settings."""
        if self.curriculum is None:
            return [k for s in range(1, self.steps + 1) for k in self.batch(s)]
        head = f"curriculum {self.curriculum.model_dump_json()} seed {self.seed}"
        weights = [f"{n} {w!r}" for n, w in sorted(self.sampler.weights.items())]
        return [head, *weights, *sorted(self.tasks)]

    async def submit(
        self, rollouts: Rollouts, name: str, step: int, samples: int, cfg: RunConfig
    ) -> list[str]:
        """Queue round ``name``: ``samples`` train tasks of each of the step's tasks."""
        run = rollouts.job.run_id
        specs = []
        for key in self.batch(step):
            task = self.tasks[key]
            for n in range(samples):
                spec = TaskSpec(
                    id=sample_id(run, f"{name}.{key}", n), run_id=run, type=TaskType.TRAIN,
                    sample=n, payload={**task.payload, SET_KEY: task.set},
                    priority=cfg.priority, max_attempts=cfg.max_attempts,
                    timeouts=Timeouts(deadline_s=cfg.deadline_s),
                )  # fmt: skip
                specs.append(spec)
                self._set_of[group_id(spec)] = (task.set, key)
        return await rollouts.submit_specs(name, specs)

    def observe(self, batch: Batch, step: int) -> StepSets:
        """Count the batch's graded rewards for the curriculum; each set's figures."""
        rewards: dict[str, list[float]] = {n: [] for n in self.sampler.sets}
        for group in batch.groups:
            if not group:
                continue
            set_name, key = self._set_of.pop(group[0].group_id, ("", ""))
            if not set_name:
                continue
            graded = [s.reward for s in group if not s.masked and not math.isnan(s.reward)]
            self.sampler.observe(key, graded)
            rewards[set_name] += graded
        figures = {
            n: SetFigures(
                samples=len(r),
                reward_mean=sum(r) / len(r) if r else None,
                pass_rate=sum(1 for x in r if x >= 1.0) / len(r) if r else None,
            )
            for n, r in rewards.items()
        }
        return StepSets(figures, lifted=step in self.sampler.lifted)
