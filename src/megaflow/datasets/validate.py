"""Checking a task set: gold patches must resolve, empty patches must not.

Each check runs in its own fresh sandbox, many at once, so a task set of
hundreds of instances validates in minutes. An instance misbehaves when its
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
from megaflow.datasets.grading import GradeReport, apply_patch, grade
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import environment_spec, prepare_sandbox
from megaflow.environment.abstract import EnvironmentSpec, Runtime

Check = Literal["gold", "empty"]


async def grade_patch(
    runtime: Runtime,
    instance: SWEInstance,
    patch: str,
    base_spec: EnvironmentSpec | None = None,
) -> GradeReport:
    """Grade ``patch`` on a fresh sandbox of ``instance`` (destroyed afterwards)."""
    t0 = time.monotonic()
    spec = environment_spec(instance, base_spec)
    async with await runtime.create(spec, owner=f"grade:{instance.instance_id}") as sandbox:
        await prepare_sandbox(sandbox, instance)
        if patch.strip():
            why = await apply_patch(sandbox, patch)
            if why is not None:
                report = await grade(sandbox, instance)
                report.patch_applied, report.resolved, report.reward = False, False, 0.0
                report.error = f"the patch did not apply: {why}"
                return report
        report = await grade(sandbox, instance)
    report.duration_s = time.monotonic() - t0
    return report


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

    async def one(inst: SWEInstance, check: Check) -> CheckResult:
        async with gate:
            try:
                patch = inst.patch if check == "gold" else ""
                report = await grade_patch(runtime, inst, patch, base_spec)
                result = CheckResult(inst.instance_id, check, report)
            except (MegaFlowError, OSError) as e:
                result = CheckResult(inst.instance_id, check, None, f"{type(e).__name__}: {e}")
        if on_result is not None:
            on_result(result)
        return result

    jobs = [one(inst, check) for inst in instances for check in checks]
    results = await asyncio.gather(*jobs)
    return ValidationReport(list(results), time.monotonic() - t0)
