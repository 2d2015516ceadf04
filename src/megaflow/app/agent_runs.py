"""The app's task path for a cluster: what ``executor: app`` runs in the Agent service,
built from each run's stored config (``megaflow submit`` turns a run config into
runs with :func:`megaflow.app.assembly.runs_of`).

:class:`ClusterAgentExecutor` runs each attempt exactly as the embedded job
does (the app's :class:`AgentExecutor`: sandbox, agent loop, grading,
artifacts), with two differences: sandboxes come from the cluster's
Environment service (a :class:`GrpcRuntime`), and each run's agent and model
are built from the config stored with the run, on its first task. A
:class:`DiskFloor` over the service's local store folders holds new attempts
while one is short of space, as the embedded job does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from megaflow.app.assembly import Arm, arm_for, base_spec, is_control
from megaflow.app.attempt import AgentExecutor
from megaflow.app.disk_floor import DiskFloor, storage_folders
from megaflow.config.loader import parse_config
from megaflow.core.tasks import TaskResult
from megaflow.environment.abstract import Runtime
from megaflow.environment.pool import SandboxPool
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

    def __init__(
        self, stores: Stores, runtime: Runtime, metrics: JobMetrics | None = None,
        disk: DiskFloor | None = None,
    ) -> None:  # fmt: skip
        self.stores = stores
        self.runtime = runtime
        self.metrics = metrics
        self.disk = disk
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
        storage = cfg.scheduler.storage
        disk = DiskFloor(storage_folders(storage), storage.outage.min_free_mb)
        return cls(Stores.from_config(storage), runtime, metrics, disk)

    async def start(self) -> None:
        await self.stores.start()
        await self.runtime.start()
        if self.disk is not None:
            await self.disk.start()

    async def stop(self) -> None:
        for parts in self._runs.values():
            await parts.pool.stop()
            await parts.arm.model.stop()
        self._runs.clear()
        if self.disk is not None:
            await self.disk.stop()
        await self.runtime.stop()
        await self.stores.stop()

    async def _parts(self, run_id: str) -> _RunParts:
        async with self._lock:
            if run_id in self._runs:
                return self._runs[run_id]
            run = await self.stores.metadata.get_run(run_id)
            cfg = parse_config(run.config, f"run {run_id}")
            arm = arm_for(cfg, control=is_control(run))
            await arm.model.start()
            pool = SandboxPool(self.runtime, cfg.environment.mode, cfg.environment.pool)
            await pool.start()
            executor = AgentExecutor(
                pool, {run_id: arm}, self.stores.artifacts, base_spec(cfg), self.metrics,
                disk=self.disk,
            )  # fmt: skip
            self._runs[run_id] = _RunParts(executor, pool, arm)
            return self._runs[run_id]

    async def run(self, ctx: TaskContext) -> TaskResult:
        parts = await self._parts(ctx.spec.run_id)
        return await parts.executor.run(ctx)
