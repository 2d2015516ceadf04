"""The executor's calibrations: one per instance and environment, kept in the artifact store.

Every sample of an instance waits for the same calibration
(:mod:`megaflow.datasets.calibration`), started beside the first agent's
episode. A calibration that passed is stored under ``calibrations/<key>``,
where the key hashes everything its verdict depends on (the instance's
repository, base commit, test patch, tests and runner, the sandbox spec and
the reporter's code), so a later run over the same task set, a resumed run
or another process of a cluster reads it instead of grading the base again.
A failed one is not kept: the next attempt checks again (the environment
may have been fixed).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable

from megaflow.core.errors import ChecksumMismatch, NotFound, StorageError
from megaflow.datasets.calibration import Calibration
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.pytest_channel import reporter_source
from megaflow.environment.abstract import EnvironmentSpec
from megaflow.storage.abstract import ArtifactStore

_FIELDS = (
    "instance_id", "base_commit", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
    "megaflow_source", "megaflow_test_format", "megaflow_test_cmd", "megaflow_test_timeout_s",
)  # fmt: skip


def calibration_key(instance: SWEInstance, spec: EnvironmentSpec) -> str:
    """The artifact key of a calibration: a hash of what its verdict depends on."""
    payload = instance.model_dump(mode="json", include=set(_FIELDS))
    blob = json.dumps([payload, spec.key(), hashlib.sha256(reporter_source()).hexdigest()],
                      sort_keys=True)  # fmt: skip
    return f"calibrations/{hashlib.sha256(blob.encode()).hexdigest()[:32]}.json"


class Calibrations:
    """Calibrations by instance and spec: in memory, then in the artifact store."""

    def __init__(self, artifacts: ArtifactStore) -> None:
        self.artifacts = artifacts
        self._jobs: dict[str, asyncio.Future[Calibration]] = {}

    async def get(
        self,
        instance: SWEInstance,
        spec: EnvironmentSpec,
        make: Callable[[], Awaitable[Calibration]],
    ) -> Calibration:
        """The instance's calibration; ``make`` grades the base when none is known."""
        key = calibration_key(instance, spec)
        job = self._jobs.get(key)
        if job is None:
            job = asyncio.ensure_future(self._load_or_make(key, make))
            self._jobs[key] = job
            job.add_done_callback(lambda done: self._settled(key, done))
        try:
            return await asyncio.shield(job)
        except Exception:
            if self._jobs.get(key) is job:
                del self._jobs[key]
            raise

    def _settled(self, key: str, job: asyncio.Future[Calibration]) -> None:
        """A calibration that failed or was cancelled is forgotten (the next caller
        grades the base again), and its error is taken here: every caller may have
        stopped waiting (the job was stopped mid-grading), and an error no one took
        would be printed with a traceback when the task is collected."""
        failed = job.cancelled() or job.exception() is not None
        if failed and self._jobs.get(key) is job:
            del self._jobs[key]

    async def _load_or_make(
        self, key: str, make: Callable[[], Awaitable[Calibration]]
    ) -> Calibration:
        try:
            stored = json.loads(await self.artifacts.get(key))
            return Calibration(stored["instance_id"], frozenset(stored["allowed"]), 0.0)
        except (NotFound, ChecksumMismatch, ValueError, KeyError, TypeError):
            pass  # none kept, or unreadable: grade the base
        made = await make()
        record = {"instance_id": made.instance_id, "allowed": sorted(made.allowed),
                  "duration_s": made.duration_s}  # fmt: skip
        try:
            await self.artifacts.put(key, json.dumps(record).encode())
        except StorageError:
            pass  # a cache: the next run grades the base again
        return made
