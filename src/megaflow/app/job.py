"""One job: the services of a run, built from its config and run in one process.

::

    async with Job(cfg) as job:
        runs = await job.submit()          # the run, and its control arm if any
        await job.wait()

More tasks can be queued to a running job with :meth:`Job.submit_tasks` (a
training loop's batch per step; :func:`megaflow.app.groups.finished_groups`
yields their groups as they finish). :attr:`Job.warnings` are what
:meth:`Job.submit` logged about a run that is valid but likely wrong (a
train run sampling at temperature 0). A job owns every resource it starts
(stores, runtime, sandbox pool, model clients, scheduler) and releases them
in reverse order on every path.
``Job.resume(run_id)`` rebuilds the same services from the config stored
with the run and finishes it after a crash. A job holds its run's driver
lease in the metadata store from ``start()`` to ``stop()``
(:mod:`megaflow.storage.lease`): a second job on a live run is refused
before anything runs, and a job that lost the lease stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from megaflow.app.assembly import (
    Arm,
    arm_for,
    base_spec,
    is_control,
    new_run_id,
    run_ids,
    run_specs,
    submit_warnings,
    task_specs,
)
from megaflow.app.attempt import AgentExecutor, sandbox_spec
from megaflow.app.disk_floor import DiskFloor, storage_folders
from megaflow.app.ray_fleet.executor import NodeExecutor
from megaflow.app.ray_fleet.fleet import RayFleet
from megaflow.config.loader import parse_config
from megaflow.config.models import RunConfig
from megaflow.core.errors import InvalidInput, MegaFlowError, StoreUnavailable
from megaflow.core.lifecycle import Lifecycle
from megaflow.core.states import TaskState
from megaflow.core.tasks import RunSpec, TaskSpec
from megaflow.environment.abstract import Runtime
from megaflow.environment.factory import make_runtime
from megaflow.environment.pool import SandboxPool
from megaflow.model.client import InProcessModelClient
from megaflow.monitoring.environment import EnvironmentMetrics
from megaflow.monitoring.model import ModelFleetCollector
from megaflow.monitoring.run import JobMetrics
from megaflow.monitoring.scheduler import SchedulerMetrics
from megaflow.scheduler.abstract import TaskExecutor
from megaflow.scheduler.fleet_config import RayFleetConfig
from megaflow.scheduler.service import Scheduler
from megaflow.storage.abstract import MetadataStore
from megaflow.storage.factory import Stores
from megaflow.storage.lease import DriverLease

log = logging.getLogger(__name__)


class Job(Lifecycle):
    def __init__(
        self,
        cfg: RunConfig,
        *,
        run_id: str | None = None,
        config_dir: Path | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.cfg = cfg
        self.run_id = run_id or new_run_id(cfg.name)
        self.config_dir = config_dir
        self.registry = registry or CollectorRegistry()
        self.stores = Stores.from_config(cfg.storage)
        self.runtime: Runtime | None = None
        self.pool: SandboxPool | None = None
        self.arms: dict[str, Arm] = {}
        self.scheduler: Scheduler | None = None
        self.fleet: RayFleet | None = None
        """The Ray fleet the job places tasks on, with ``fleet: {type: ray}``."""
        self.started_at = 0.0
        self._started: list[Any] = []
        self._planned: dict[str, list[TaskSpec]] | None = None
        self.lease: DriverLease | None = None
        """The run's driver lease, held from ``start()`` to ``stop()``: one driver per run."""
        self.warnings: list[str] = submit_warnings(cfg)

    @property
    def run_ids(self) -> list[str]:
        return run_ids(self.cfg, self.run_id)

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        cfg = self.cfg
        self.started_at = time.monotonic()
        try:
            await self.stores.start()
            self._started.append(self.stores)
            # before anything runs: a second driver of a live run is refused here
            self.lease = DriverLease(
                self.stores.metadata, self.run_id, cfg.storage.outage.lease_ttl_s
            )
            await self.lease.start()
            self._started.append(self.lease)
            self.stores.fence_writes(self.lease.fence)
            env_metrics = EnvironmentMetrics(self.registry)
            fleet: RayFleet | None = None
            if isinstance(cfg.fleet, RayFleetConfig):
                fleet = RayFleet(cfg.fleet, cfg.environment.runtime, self.stores.events)
                await fleet.start()
                self._started.append(fleet)
            else:
                self.runtime = make_runtime(cfg.environment.runtime, metrics=env_metrics)
                await self.runtime.start()
                self._started.append(self.runtime)
                self.pool = SandboxPool(
                    self.runtime, cfg.environment.mode, cfg.environment.pool, env_metrics
                )
                await self.pool.start()
                self._started.append(self.pool)
            for run in run_specs(cfg, self.run_id):
                self.arms[run.id] = arm_for(cfg, control=is_control(run))
            for arm in self.arms.values():
                await arm.model.start()
                self._started.append(arm.model)
            routers = [a.model.service.router for a in self.arms.values()
                       if isinstance(a.model, InProcessModelClient)]  # fmt: skip
            if routers:  # each replica's rotation, version and probes on /metrics
                self.registry.register(
                    ModelFleetCollector(lambda: [h for r in routers for h in r.health()])
                )
            job_metrics = JobMetrics(self.registry)

            disk = DiskFloor(state_folders(cfg), cfg.storage.outage.min_free_mb)
            await disk.start()
            self._started.append(disk)

            def attempts(pool: SandboxPool) -> AgentExecutor:
                return AgentExecutor(
                    pool, self.arms, self.stores.artifacts, base_spec(cfg), job_metrics,
                    disk=disk, park_on_outage=True,
                )  # fmt: skip

            executor: TaskExecutor
            if fleet is None:
                assert self.pool is not None
                executor = attempts(self.pool)
            else:  # each attempt on the node agent of the node it is placed on
                executor = NodeExecutor(
                    fleet.target, fleet.token, attempts, cfg.environment, env_metrics,
                    unreachable=fleet.check,
                )  # fmt: skip
                fleet.on_lost(executor.forget)
            self.scheduler = Scheduler(
                cfg.scheduler, self.stores, executor, metrics=SchedulerMetrics(self.registry),
                instances=None if fleet is None else [], fleet=fleet,
            )  # fmt: skip
            await self.scheduler.start()
            self._started.append(self.scheduler)
            if fleet is not None:
                self.fleet = fleet
                await fleet.join(load=self._load)
        except BaseException:
            await self.stop()
            raise

    def _load(self) -> tuple[int, int]:
        """(queued, running) tasks of the scheduler, for the fleet's scale decision."""
        core = self.sched.core
        return core.depth, sum(r.running for r in core.regions.values())

    async def stop(self) -> None:
        """Release everything started, newest first; keep going past errors.

        After a store gave up (:meth:`wait` raised it), the parts' failures to
        write to it on the way out are that same outage: logged, not raised again."""
        first: BaseException | None = None
        while self._started:
            part = self._started.pop()
            try:
                await part.stop()
            except Exception as exc:
                first = first or exc
        if isinstance(first, StoreUnavailable) and self.stores.faults.dead is not None:
            log.warning("stopping with %s unavailable: %s", first.store, first)
            return
        if first is not None:
            raise first

    @property
    def sched(self) -> Scheduler:
        if self.scheduler is None:
            raise RuntimeError("the job is not started")
        return self.scheduler

    # -- work ---------------------------------------------------------------------
    def plan(self) -> dict[str, list[TaskSpec]]:
        """Load and validate every task of the job, touching nothing. A bad task
        set fails here, before any store or sandbox is started."""
        if self._planned is None:
            self._planned = {
                rid: task_specs(self.cfg, rid, self.config_dir) for rid in self.run_ids
            }
        return self._planned

    async def submit(self) -> list[RunSpec]:
        """Record and queue the run (and its control arm)."""
        planned = self.plan()
        for warning in self.warnings:
            log.warning("run %s: %s", self.run_id, warning)
        runs = run_specs(self.cfg, self.run_id)
        await self._prefetch([t for run in runs for t in planned[run.id]])
        for run in runs:
            await self.sched.submit(run, planned[run.id])
        return runs

    async def _prefetch(self, tasks: list[TaskSpec]) -> None:
        """Tell the pool the sandboxes the queued tasks need, in order: the container
        runtime loads their per-task images ahead (``images.prefetch``)."""
        if self.pool is not None and self.cfg.environment.runtime.type == "container":
            base = base_spec(self.cfg)
            await self.pool.prefetch([sandbox_spec(t, base) for t in tasks])

    async def submit_tasks(self, tasks: list[TaskSpec]) -> None:
        """Queue more tasks to the job's runs (each task names its run: the main one
        or its control), e.g. a training step's batch. Their ids must be new."""
        runs = {r.id: r for r in run_specs(self.cfg, self.run_id)}
        by_run: dict[str, list[TaskSpec]] = {}
        for t in tasks:
            if t.run_id not in runs:
                raise InvalidInput(
                    f"task {t.id} names run {t.run_id}, which is not one of this job's "
                    f"runs ({', '.join(runs)})"
                )
            by_run.setdefault(t.run_id, []).append(t)
        await self._prefetch(tasks)
        for rid, batch in by_run.items():
            await self.sched.submit(runs[rid], batch)

    async def resume(self) -> None:
        for rid in self.run_ids:
            await self.sched.resume(rid)

    async def wait(self) -> dict[str, dict[TaskState, int]]:
        """Counts by state of each run, once all its tasks are terminal.

        A store that stays away past ``storage.outage.deadline_s`` ends the wait
        with one :class:`StoreUnavailable` naming it and how to finish the run;
        the tasks in flight stay in flight in the store for ``--resume``."""
        waiting = asyncio.ensure_future(self._wait_runs())
        outage = asyncio.ensure_future(self.stores.faults.wait())
        assert self.lease is not None, "the job is not started"
        lost = asyncio.ensure_future(self.lease.lost())
        try:
            await asyncio.wait({waiting, outage, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (waiting, outage, lost):
                if not fut.done():
                    fut.cancel()
                    with contextlib.suppress(asyncio.CancelledError, MegaFlowError):
                        await fut
        finished = waiting.done() and not waiting.cancelled() and waiting.exception() is None
        if waiting.done() and not finished:
            taken = await self.lease.confirm()  # failed because another driver took over?
            if taken is not None:
                raise taken
        if not finished and outage.done() and not outage.cancelled():
            raise self._stopped_by(outage.result())
        if not finished and lost.done() and not lost.cancelled():
            raise lost.result()
        return waiting.result()

    async def _wait_runs(self) -> dict[str, dict[TaskState, int]]:
        return {rid: await self.sched.wait(rid) for rid in self.run_ids}

    def _stopped_by(self, err: StoreUnavailable) -> StoreUnavailable:
        return StoreUnavailable(
            f"the run stopped: {err}. Tasks recorded as finished are kept and those in "
            f"flight run again: once the store is back, finish the run with "
            f"`megaflow run --resume {self.run_id}`",
            err.store,
        )

    async def cancel(self) -> None:
        for rid in self.run_ids:
            await self.sched.cancel(rid)


def state_folders(cfg: RunConfig) -> list[Path]:
    """The local folders the run writes its state to: the stores' (the SQLite
    database's, the local artifact root) and the local sandbox root."""
    folders = storage_folders(cfg.storage)
    root = getattr(cfg.environment.runtime, "root", None)
    if cfg.environment.runtime.type == "local" and root:
        folders.append(Path(root))
    return folders


async def stored_config(metadata: MetadataStore, run_id: str) -> RunConfig:
    """The config a run was submitted with (for ``--resume``)."""
    run = await metadata.get_run(run_id)
    return parse_config(run.config, f"run {run_id}")
