"""Turning a run config's task source into the scheduler's task specs."""

from __future__ import annotations

from pathlib import Path

from megaflow.config.models import InlineTasksConfig, RunConfig, SwebenchTasksConfig
from megaflow.core.errors import ConfigError
from megaflow.core.tasks import TaskSpec, Timeouts
from megaflow.datasets.loader import load_instances
from megaflow.datasets.task_specs import to_task_specs


def _resolve(path: str, config_dir: Path | None) -> Path:
    p = Path(path)
    if p.is_absolute() or p.exists() or config_dir is None:
        return p
    beside = config_dir / p
    return beside if beside.exists() else p


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
    if isinstance(src, SwebenchTasksConfig):
        instances = load_instances(
            _resolve(src.path, config_dir),
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
    assert isinstance(src, InlineTasksConfig)
    return [
        TaskSpec(
            id=f"{run_id}/{t.id}/{n}",
            run_id=run_id,
            type=cfg.task_type,
            sample=n,
            payload=dict(t.payload),
            **{**common, "priority": cfg.priority + t.priority},
        )
        for t in src.tasks
        for n in range(cfg.samples)
    ]
