"""The app's task path for a cluster: what ``executor: app`` runs in the Agent service,
and how ``megaflow submit`` turns a run config into runs.

:class:`ClusterAgentExecutor` runs each attempt exactly as the embedded job
does (the app's :class:`AgentExecutor`: sandbox, agent loop, grading,
artifacts), with two differences: sandboxes come from the cluster's
Environment service (a :class:`GrpcRuntime`), and each run's agent and model
are built from the config stored with the run, on its first task.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from megaflow.agent.factory import make_agent
from megaflow.app.assembly import task_specs
from megaflow.app.attempt import AgentExecutor, Arm
from megaflow.app.job import CONTROL_SUFFIX, base_spec, new_run_id
from megaflow.config.loader import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.tasks import RunSpec, TaskResult, TaskSpec
from megaflow.environment.abstract import Runtime
from megaflow.environment.pool import SandboxPool
from megaflow.model.factory import make_model_client
from megaflow.monitoring.run import JobMetrics
from megaflow.rpc.config import ClusterConfig
from megaflow.rpc.environment_client import GrpcRuntime
from megaflow.scheduler.abstract import TaskContext, TaskExecutor
from megaflow.storage.factory import Stores


@dataclass
class _RunParts:
    executor: AgentExecutor
    pool: SandboxPool
    arm: Arm


class ClusterAgentExecutor(TaskExecutor):
    """Runs attempts of any submitted run; parts of a run are built on its first task."""

    def __init__(self, stores: Stores, runtime: Runtime, metrics: JobMetrics | None = None) -> None:
        self.stores = stores
        self.runtime = runtime
        self.metrics = metrics
        self._runs: dict[str, _RunParts] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def from_cluster(
        cls, cfg: ClusterConfig, token: str, registry: CollectorRegistry | None = None
    ) -> ClusterAgentExecutor:
        """Stores of the cluster's scheduler, sandboxes of its environment service."""
        runtime = GrpcRuntime(
            cfg.environment.target, token, cfg.tls, cfg.max_message_bytes,
            keepalive_s=cfg.keepalive_s,
        )  # fmt: skip
        metrics = JobMetrics(registry) if registry is not None else None
        return cls(Stores.from_config(cfg.scheduler.storage), runtime, metrics)

    async def start(self) -> None:
        await self.stores.start()
        await self.runtime.start()

    async def stop(self) -> None:
        for parts in self._runs.values():
            await parts.pool.stop()
            await parts.arm.model.stop()
        self._runs.clear()
        await self.runtime.stop()
        await self.stores.stop()

    async def _parts(self, run_id: str) -> _RunParts:
        async with self._lock:
            if run_id in self._runs:
                return self._runs[run_id]
            run = await self.stores.metadata.get_run(run_id)
            cfg = parse_config(run.config, f"run {run_id}")
            control = run.labels.get("arm") == "control" and cfg.control is not None
            if control and cfg.control is not None:
                agent = make_agent(cfg.control.agent or cfg.agent)
                arm = Arm(agent, make_model_client(cfg.control.model), cfg.grading)
            else:
                arm = Arm(make_agent(cfg.agent), make_model_client(cfg.model), cfg.grading)
            await arm.model.start()
            pool = SandboxPool(self.runtime, cfg.environment.mode, cfg.environment.pool)
            await pool.start()
            executor = AgentExecutor(
                pool, {run_id: arm}, self.stores.artifacts, base_spec(cfg), self.metrics
            )
            self._runs[run_id] = _RunParts(executor, pool, arm)
            return self._runs[run_id]

    async def run(self, ctx: TaskContext) -> TaskResult:
        parts = await self._parts(ctx.spec.run_id)
        return await parts.executor.run(ctx)


def runs_of(cfg: RunConfig, config_dir: Path) -> list[tuple[RunSpec, list[TaskSpec]]]:
    """The runs a config submits, as the embedded job does: the main one, and the
    negative control when configured."""
    run_id = new_run_id(cfg.name)
    ids = [run_id] + ([run_id + CONTROL_SUFFIX] if cfg.control is not None else [])
    config = cfg.model_dump(mode="json")
    out = []
    for rid in ids:
        arm = "control" if rid.endswith(CONTROL_SUFFIX) else "main"
        run = RunSpec(id=rid, name=cfg.name, config=config, labels={"arm": arm, "job": run_id})
        out.append((run, task_specs(cfg, rid, config_dir)))
    return out
