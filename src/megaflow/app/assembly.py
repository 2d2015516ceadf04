"""Assembling a run from its config, once for the embedded job and the cluster.

A config makes one run, or two with a negative control: :func:`run_ids`
names them, :func:`run_specs` records them, :func:`task_specs` loads their
tasks (one per task and sample), :func:`arm_for` builds what runs each
(agent, model client, grading) and :func:`base_spec` the sandbox every task
starts from. :func:`parse_task` reads a task's payload once into a
:class:`Task`, which the attempt and the summary use; :func:`task_type` is the type a
sample runs as, which its attempt records and the results show.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from megaflow.agent.abstract import Agent
from megaflow.agent.config import BuiltinAgentConfig
from megaflow.agent.factory import make_agent
from megaflow.agent.routing import TaskRouter, TypeSource, identify_task_type
from megaflow.config.models import (
    HarborTasksConfig,
    InlineTask,
    InlineTasksConfig,
    RunConfig,
    SwebenchTasksConfig,
)
from megaflow.config.paths import resolve_path
from megaflow.core.errors import ConfigError
from megaflow.core.tasks import RunSpec, TaskSpec, TaskType, Timeouts, sample_id
from megaflow.datasets.harbor import load_rows
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.loader import load_instances
from megaflow.datasets.task_specs import instance_of, to_task_specs
from megaflow.environment.abstract import EnvironmentSpec, SandboxResources
from megaflow.grading.config import GraderConfig, SwebenchGraderConfig
from megaflow.model.abstract import ModelClient
from megaflow.model.config import TransformersModelConfig
from megaflow.model.factory import make_model_client

CONTROL_SUFFIX = "-control"
_SANDBOX_MARGIN_S = 600.0  # a sandbox outlives its task's deadline by this much


@dataclass
class Arm:
    """What runs the tasks of one run: its agent, its model client, how it is graded,
    and its router (the sample's type and what its trajectory keeps)."""

    agent: Agent
    model: ModelClient
    grading: GraderConfig = field(default_factory=SwebenchGraderConfig)
    router: TaskRouter = field(default_factory=TaskRouter)


@dataclass(frozen=True)
class Task:
    """A task with its payload read: the SWE-bench instance it carries, if any."""

    spec: TaskSpec
    instance: SWEInstance | None


def parse_task(spec: TaskSpec) -> Task:
    return Task(spec, instance_of(spec) if "instance_id" in spec.payload else None)


def is_graded(spec: TaskSpec) -> bool:
    """Whether the task is graded without a run's config: it carries a SWE-bench
    instance or a Harbor verifier (the run's grader has the last word in an attempt)."""
    return "instance_id" in spec.payload or "megaflow_harbor" in spec.payload


def task_type(spec: TaskSpec) -> tuple[TaskType, TypeSource]:
    """The type a task of ``megaflow run`` runs as (no trainer is attached: a train
    run names its type), as its attempt records it in the trajectory."""
    return identify_task_type(spec, graded=is_graded(spec))


def new_run_id(name: str) -> str:
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def run_ids(cfg: RunConfig, run_id: str) -> list[str]:
    """The run, and its control arm when the config has one."""
    return [run_id] + ([run_id + CONTROL_SUFFIX] if cfg.control is not None else [])


def is_control(run: RunSpec) -> bool:
    return run.labels.get("arm") == "control"


def run_specs(cfg: RunConfig, run_id: str) -> list[RunSpec]:
    """What is recorded of each run of the job ``run_id``: the config, the arm, the job."""
    config = cfg.model_dump(mode="json")
    return [
        RunSpec(
            id=rid,
            name=cfg.name,
            config=config,
            labels={"arm": "control" if rid.endswith(CONTROL_SUFFIX) else "main", "job": run_id},
        )
        for rid in run_ids(cfg, run_id)
    ]


def arm_for(cfg: RunConfig, control: bool = False) -> Arm:
    """The main arm, or the control arm (its own model, and agent if it names one)."""
    router = TaskRouter(samples=cfg.samples)
    if control and cfg.control is not None:
        agent = make_agent(cfg.control.agent or cfg.agent)
        return Arm(agent, make_model_client(cfg.control.model), cfg.grading, router)
    return Arm(make_agent(cfg.agent), make_model_client(cfg.model), cfg.grading, router)


def base_spec(cfg: RunConfig) -> EnvironmentSpec:
    env = cfg.environment
    return EnvironmentSpec(
        image=env.image,
        network=env.network,
        resources=SandboxResources(cpus=env.cpus, memory_mb=env.memory_mb, pids=env.pids),
        ttl_s=cfg.deadline_s + _SANDBOX_MARGIN_S,
    )


def sampling_temperature(cfg: RunConfig) -> float | None:
    """The temperature the run samples at: the agent's if it sets one, else the
    model backend's; ``None`` when neither says (the backend decides)."""
    if isinstance(cfg.agent, BuiltinAgentConfig) and cfg.agent.temperature is not None:
        return cfg.agent.temperature
    if isinstance(cfg.model, TransformersModelConfig):
        return cfg.model.temperature
    return None


def submit_warnings(cfg: RunConfig) -> list[str]:
    """What is likely wrong with a run that is still valid: a train run whose
    ``samples`` per task would all be the same episode (greedy or unset temperature)."""
    out = []
    temp = sampling_temperature(cfg)
    if cfg.task_type is TaskType.TRAIN and cfg.samples > 1 and not temp:
        said = "unset" if temp is None else "0"
        out.append(
            f"train run with samples: {cfg.samples} at temperature {said}: the "
            f"{cfg.samples} samples of each group are likely identical, so their GRPO "
            "advantages are all 0; set agent.temperature (or the model's) above 0"
        )
    return out


def source_roots(roots: list[str], config_dir: Path | None) -> list[Path]:
    """The config's ``source_roots``, relative ones taken against the config's folder."""
    out = []
    for r in roots:
        p = Path(r).expanduser()
        out.append(p if p.is_absolute() or config_dir is None else config_dir / p)
    return out


def task_specs(cfg: RunConfig, run_id: str, config_dir: Path | None = None) -> list[TaskSpec]:
    """Every task (and sample) of a run, ready to submit."""
    common = {
        "priority": cfg.priority,
        "max_attempts": cfg.max_attempts,
        "timeouts": Timeouts(deadline_s=cfg.deadline_s),
    }
    src = cfg.tasks
    if src is None:
        raise ConfigError(
            "the config has no tasks to run (its train.sets serve megaflow train only)",
            [("tasks", "required to run the config")],
        )
    if isinstance(src, SwebenchTasksConfig):
        instances = load_instances(
            resolve_path(src.path, config_dir),
            source_roots=source_roots(src.source_roots, config_dir),
            max_source_bytes=src.max_source_mb * 1024 * 1024,
        )
        if src.instances is not None:
            wanted = set(src.instances)
            unknown = wanted - {i.instance_id for i in instances}
            if unknown:
                raise ConfigError(
                    f"tasks.instances names unknown instance(s): {', '.join(sorted(unknown))}",
                    [("tasks.instances", f"unknown: {', '.join(sorted(unknown))}")],
                )
            instances = [i for i in instances if i.instance_id in wanted]
        if src.limit is not None:
            instances = instances[: src.limit]
        return to_task_specs(instances, run_id, cfg.samples, cfg.task_type, **common)
    if isinstance(src, HarborTasksConfig):
        rows = load_rows(resolve_path(src.path, config_dir))[: src.limit]
        src = InlineTasksConfig(tasks=[InlineTask(id=i, payload=p) for i, p in rows])
    assert isinstance(src, InlineTasksConfig)
    return [
        TaskSpec(
            id=sample_id(run_id, t.id, n),
            run_id=run_id,
            type=cfg.task_type,
            sample=n,
            payload=dict(t.payload),
            **{**common, "priority": cfg.priority + t.priority},
        )
        for t in src.tasks
        for n in range(cfg.samples)
    ]


def runs_of(
    cfg: RunConfig, config_dir: Path | None, run_id: str | None = None
) -> list[tuple[RunSpec, list[TaskSpec]]]:
    """Each run of the job (the main one, and the negative control when configured)
    with its tasks, ready to submit."""
    job = run_id or new_run_id(cfg.name)
    return [(run, task_specs(cfg, run.id, config_dir)) for run in run_specs(cfg, job)]
