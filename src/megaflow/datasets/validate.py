"""Checking a task set: gold patches must resolve, empty patches must not.

Each instance gets its own sandbox, many at once, in which the checks run
one after the other from a clean base commit, so a task set of hundreds of
instances validates in minutes. An instance misbehaves when its
gold patch does not resolve it (a broken gold patch, a flaky or wrong test
list, a repository that does not build) or when the untouched repository
already passes (the FAIL_TO_PASS tests do not test the bug).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from megaflow.core.errors import MegaFlowError
from megaflow.datasets.grading import GradeReport, grade_prepared
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import (
    clean_command,
    environment_spec,
    prepare_sandbox,
    run_checked,
)
from megaflow.environment.abstract import EnvironmentSpec, Runtime

Check = Literal["gold", "empty"]


async def grade_patch(
    runtime: Runtime,
    instance: SWEInstance,
    patch: str | bytes,
    base_spec: EnvironmentSpec | None = None,
    strict: bool = False,
) -> GradeReport:
    """Grade ``patch`` on a fresh sandbox of ``instance`` (destroyed afterwards).

    This is how any untrusted patch is graded: its tests may run code, so no
    two untrusted patches share a sandbox."""
    spec = environment_spec(instance, base_spec)
    async with await runtime.create(spec, owner=f"grade:{instance.instance_id}") as sandbox:
        await prepare_sandbox(sandbox, instance)
        return await grade_prepared(sandbox, instance, patch, strict)


async def grade_patches(
    runtime: Runtime,
    instance: SWEInstance,
    patches: Sequence[str],
    base_spec: EnvironmentSpec | None = None,
) -> list[GradeReport]:
    """Grade several trusted patches of one instance (a task set's gold and empty
    patches) in one sandbox, one after the other; between two, the work tree
    goes back to the base commit (``git reset --hard`` and ``git clean -fdx``).
    Untrusted patches get a sandbox each: :func:`grade_patch`."""
    spec = environment_spec(instance, base_spec)
    reports: list[GradeReport] = []
    async with await runtime.create(spec, owner=f"grade:{instance.instance_id}") as sandbox:
        await prepare_sandbox(sandbox, instance)
        for n, patch in enumerate(patches):
            t0 = time.monotonic()
            if n:
                await run_checked(
                    sandbox,
                    f"git reset -q --hard {instance.base_commit} && {clean_command(instance)}",
                    "resetting the work tree",
                )
            report = await grade_prepared(sandbox, instance, patch)
            report.duration_s = time.monotonic() - t0
            reports.append(report)
    return reports


@dataclass
class CheckResult:
    instance_id: str
    check: Check
    report: GradeReport | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Gold must resolve; empty must not; an infrastructure error is never ok."""
        if self.report is None:
            return False
        return self.report.resolved == (self.check == "gold")

    def reason(self) -> str:
        if self.report is None:
            return f"{self.check}: error: {self.error}"
        if self.check == "gold":
            r = self.report
            failing = r.fail_to_pass.failed + r.pass_to_pass.failed
            why = r.error or f"failing tests: {', '.join(failing[:5])}"
            return f"gold patch does not resolve ({why})"
        return "the unpatched repository already resolves (FAIL_TO_PASS tests pass without a fix)"


@dataclass
class ValidationReport:
    results: list[CheckResult] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def misbehaving(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]

    @property
    def ok(self) -> bool:
        return bool(self.results) and not self.misbehaving


async def validate_instances(
    runtime: Runtime,
    instances: Sequence[SWEInstance],
    concurrency: int = 4,
    checks: Sequence[Check] = ("gold", "empty"),
    base_spec: EnvironmentSpec | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> ValidationReport:
    """Run every check on every instance, ``concurrency`` sandboxes at a time."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    gate = asyncio.Semaphore(concurrency)
    t0 = time.monotonic()

    async def one(inst: SWEInstance) -> list[CheckResult]:
        patches = [inst.patch if check == "gold" else "" for check in checks]
        async with gate:
            try:
                reports = await grade_patches(runtime, inst, patches, base_spec)
                results = [
                    CheckResult(inst.instance_id, c, r)
                    for c, r in zip(checks, reports, strict=True)
                ]
            except (MegaFlowError, OSError) as e:
                why = f"{type(e).__name__}: {e}"
                results = [CheckResult(inst.instance_id, c, None, why) for c in checks]
        if on_result is not None:
            for result in results:
                on_result(result)
        return results

    per_instance = await asyncio.gather(*(one(inst) for inst in instances))
    results = [r for rs in per_instance for r in rs]
    return ValidationReport(results, time.monotonic() - t0)
