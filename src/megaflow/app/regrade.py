"""Grading a stored run again, without inference: what changed.

:func:`regrade` reads a run's finished samples from its stores and grades
what each attempt's grader took (the stored ``patch.diff``, ``state.tar`` or
``answer.txt``) again, with the run's own grader or another ``grading``
config, in fresh sandboxes of the run's runtime; the agent does not run. The
stored calibrations are reused (the artifact store holds them). The same
rule applies as in the run: an agent's own failure stays 0 whatever its
grade, a tampered report is 0. Masked samples (no graded result) and samples
with nothing stored to grade are reported as skipped, with why.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
from collections.abc import AsyncIterator
from dataclasses import dataclass

from megaflow.app.assembly import base_spec
from megaflow.app.calibrations import Calibrations
from megaflow.config.models import RunConfig
from megaflow.core.errors import NotFound
from megaflow.core.states import TaskState
from megaflow.core.tasks import ErrorKind, TaskRecord, TaskResult
from megaflow.environment.abstract import EnvironmentSpec, Runtime, Sandbox
from megaflow.environment.factory import make_runtime
from megaflow.grading.abstract import Grader, Taken
from megaflow.grading.config import GraderConfig
from megaflow.grading.reward import reward_of
from megaflow.storage.abstract import ArtifactStore, MetadataStore

TAKEN = ("patch", "state", "answer")
"""Result artifact names of what a grader takes, as the attempt stores them."""


@dataclass(frozen=True)
class Regraded:
    task_id: str
    before: float | None
    after: float | None
    skipped: str | None = None
    error: str | None = None

    @property
    def changed(self) -> bool:
        return self.skipped is None and self.before != self.after


def _fresh(
    runtime: Runtime, spec: EnvironmentSpec, owner: str
) -> contextlib.AbstractAsyncContextManager[Sandbox]:
    @contextlib.asynccontextmanager
    async def fresh() -> AsyncIterator[Sandbox]:
        sandbox = await runtime.create(spec, owner=owner)
        try:
            yield sandbox
        finally:
            await asyncio.shield(sandbox.destroy())

    return fresh()


async def _one(
    rec: TaskRecord,
    res: TaskResult | None,
    grader: Grader,
    base: EnvironmentSpec,
    runtime: Runtime,
    artifacts: ArtifactStore,
) -> Regraded:
    if rec.state is not TaskState.SUCCEEDED or res is None:
        return Regraded(rec.id, None, None, skipped=f"masked: ended {rec.state.value}")
    key = next((res.artifacts[k] for k in TAKEN if k in res.artifacts), None)
    if key is None or "grade" not in res.artifacts:
        return Regraded(rec.id, res.reward, None, skipped="nothing was graded")
    if not grader.grades(rec.spec):
        return Regraded(rec.id, res.reward, None, skipped="the grader cannot grade this task")
    try:
        data = await artifacts.get(key)
    except NotFound:
        return Regraded(rec.id, res.reward, None, skipped=f"{key} is not in the artifact store")
    spec = grader.sandbox_spec(rec.spec, base)
    attempt = grader.attempt(rec.spec, spec, lambda: _fresh(runtime, spec, rec.id))
    async with attempt:
        report = await attempt.grade(Taken(data, posixpath.basename(key)))
    after = 0.0 if res.error_kind is ErrorKind.AGENT else reward_of(report)
    return Regraded(rec.id, res.reward, after, error=report.error)


async def regrade(
    metadata: MetadataStore,
    artifacts: ArtifactStore,
    run_id: str,
    grading: GraderConfig | None = None,
    concurrency: int = 4,
) -> list[Regraded]:
    """Each sample of ``run_id`` graded again (with ``grading``, else the run's own)."""
    run = await metadata.get_run(run_id)
    cfg = RunConfig.model_validate(run.config)
    grader = (grading or cfg.grading).build(Calibrations(artifacts))
    base = base_spec(cfg)
    results = {r.task_id: r for r in await metadata.list_results(run_id)}
    records = await metadata.list_tasks(run_id)
    runtime = make_runtime(cfg.environment.runtime)
    await runtime.start()
    gate = asyncio.Semaphore(concurrency)

    async def one(rec: TaskRecord) -> Regraded:
        async with gate:
            return await _one(rec, results.get(rec.id), grader, base, runtime, artifacts)

    try:
        return list(await asyncio.gather(*(one(r) for r in records)))
    finally:
        await runtime.stop()
