"""The ``swebench`` grader: today's SWE-bench grading behind the grader seam.

Nothing of the grading itself lives here; this adapter calls the modules of
:mod:`megaflow.datasets` in the order the attempt always has: the repository
prepared at its base commit in the agent's sandbox (``prepare``); the agent's
processes killed and its patch taken by sha with a git that borrows only its
objects (``take``, :func:`~megaflow.datasets.candidate.extract_patch`); the
patch graded in a fresh sandbox prepared from the task's source, through
MegaFlow's reporter (``grade``, :func:`~megaflow.datasets.grading.grade_prepared`).
The instance's calibration (its base commit graded once,
:mod:`megaflow.datasets.calibration`) starts beside the agent when the
attempt is opened and is awaited only by ``grade``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from megaflow.core.tasks import TaskSpec
from megaflow.core.trajectory import Trajectory
from megaflow.datasets.calibration import Calibration, calibrate
from megaflow.datasets.candidate import extract_patch
from megaflow.datasets.config import GradingConfig
from megaflow.datasets.grading import failed_report, grade_prepared
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.datasets.task_specs import instance_of
from megaflow.environment.abstract import EnvironmentSpec, Sandbox
from megaflow.grading.abstract import FreshSandbox, Report, Taken


class CalibrationCache(Protocol):
    """Calibrations shared by an instance's samples (``app.calibrations.Calibrations``)."""

    async def get(
        self,
        instance: SWEInstance,
        spec: EnvironmentSpec,
        make: Callable[[], Awaitable[Calibration]],
    ) -> Calibration: ...


class SwebenchGrader:
    def __init__(self, cfg: GradingConfig, calibrations: CalibrationCache | None = None) -> None:
        self.cfg = cfg
        self.calibrations = calibrations

    def grades(self, task: TaskSpec) -> bool:
        return "instance_id" in task.payload

    def sandbox_spec(self, task: TaskSpec, base: EnvironmentSpec) -> EnvironmentSpec:
        return environment_spec(instance_of(task), base)

    def attempt(
        self, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox
    ) -> SwebenchAttempt:
        return SwebenchAttempt(self, task, spec, fresh)


class SwebenchAttempt:
    def __init__(
        self, grader: SwebenchGrader, task: TaskSpec, spec: EnvironmentSpec, fresh: FreshSandbox
    ) -> None:
        self.cfg = grader.cfg
        self.task = task
        self.instance = instance_of(task)
        self.fresh = fresh
        self.strict = self.cfg.strict_for(task.type)
        self.spec = spec
        self.cache = grader.calibrations if self.cfg.calibrate else None
        self._calibration: asyncio.Future[Calibration] | None = None
        self.times: dict[str, float] = {}

    async def __aenter__(self) -> SwebenchAttempt:
        """Start the instance's calibration, beside the agent."""
        if self.cache is not None:
            made = self.cache.get(self.instance, self.spec, self._calibrate)
            self._calibration = asyncio.ensure_future(made)
        return self

    async def __aexit__(self, *exc: object) -> None:
        future = self._calibration
        if future is None:
            return
        if not future.done():
            future.cancel()
        elif not future.cancelled():
            future.exception()  # seen: a failure is the waiter's to report

    async def _calibrate(self) -> Calibration:
        async with self.fresh() as sandbox:
            await prepare_sandbox(sandbox, self.instance)
            return await calibrate(sandbox, self.instance)

    async def prepare(self, sandbox: Sandbox) -> None:
        await prepare_sandbox(sandbox, self.instance)

    async def take(self, sandbox: Sandbox, trajectory: Trajectory) -> Taken:
        max_bytes = self.cfg.max_patch_kb * 1024
        candidate = await extract_patch(sandbox, self.instance.base_commit, max_bytes)
        return Taken(candidate.patch, "patch.diff", candidate.error)

    async def grade(self, taken: Taken) -> Report:
        if taken.error is not None:
            return failed_report(self.instance, taken.error, taken.data, self.strict)
        allowed = (await self._calibration).allowed if self._calibration else frozenset[str]()
        t0 = time.perf_counter()
        async with self.fresh() as sandbox:
            self.times["grade_sandbox_start_s"] = time.perf_counter() - t0
            await prepare_sandbox(sandbox, self.instance)
            self.times["grade_prepare_s"] = (
                time.perf_counter() - t0 - self.times["grade_sandbox_start_s"]
            )
            return await grade_prepared(
                sandbox, self.instance, taken.data, self.strict, allowed,
                harness=self.cfg.parser == "swebench",
            )  # fmt: skip
