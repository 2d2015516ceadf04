"""Grading with SWE-bench semantics, inside the sandbox the agent worked in.

After the agent stops: the agent's changes are recorded as a patch; the files
the test patch touches are put back to the base commit (so an agent cannot
pass by editing the tests); the test patch is applied; the test files run.
The instance is resolved when every FAIL_TO_PASS test passes and every
PASS_TO_PASS test still passes. The reward is 1 or 0, or the share of
passing tests when the instance asks for ``megaflow_reward: fraction``.
"""

from __future__ import annotations

import re
import shlex
import time

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import SandboxError
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.prepare import BASE_TAG, GIT_ENV, WORKDIR, run_checked
from megaflow.datasets.sources import one_file_tar
from megaflow.datasets.test_log import TestStatus, passed, statuses_for
from megaflow.environment.abstract import Sandbox

PATCH_FILE = ".megaflow-eval.patch"
OUTPUT_TAIL = 20_000
_DIFF_HEAD = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


class TestOutcome(BaseModel):
    __test__ = False
    model_config = ConfigDict(extra="forbid")

    passed: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)


class GradeReport(BaseModel):
    """The structured outcome of grading one instance."""

    model_config = ConfigDict(extra="forbid")

    instance_id: str
    resolved: bool
    reward: float = Field(ge=0, le=1)
    patch_applied: bool = Field(True, description="The candidate patch applied (grade_patch).")
    test_patch_applied: bool = False
    fail_to_pass: TestOutcome = Field(default_factory=TestOutcome)
    pass_to_pass: TestOutcome = Field(default_factory=TestOutcome)
    statuses: dict[str, str] = Field(
        default_factory=dict, description="Status of each expected test as pytest reported it."
    )
    model_patch: str = Field("", description="The agent's changes against the base commit.")
    test_exit_code: int | None = None
    test_output: str = Field("", description="The tail of the test run's output.")
    error: str | None = None
    duration_s: float = 0.0


def patch_files(patch: str) -> list[str]:
    """Every path a unified git diff touches (old and new names)."""
    files: dict[str, None] = {}
    for a, b in _DIFF_HEAD.findall(patch):
        files.setdefault(a, None)
        files.setdefault(b, None)
    return list(files)


async def put_file(sandbox: Sandbox, name: str, data: str) -> None:
    await sandbox.upload(one_file_tar(name, data.encode()), WORKDIR)


async def apply_patch(sandbox: Sandbox, patch: str) -> str | None:
    """Apply a patch in the workspace; return None, or why it did not apply."""
    await put_file(sandbox, PATCH_FILE, patch)
    script = (
        f"git apply --whitespace=nowarn {PATCH_FILE} || "
        f"git apply --whitespace=nowarn --3way {PATCH_FILE}; rc=$?; rm -f {PATCH_FILE}; exit $rc"
    )
    res = await sandbox.exec(["sh", "-c", script], timeout=120, env=GIT_ENV, cwd=WORKDIR)
    return None if res.ok else (res.stderr or res.stdout).strip()[-2000:] or "git apply failed"


async def model_patch(sandbox: Sandbox) -> str:
    """The workspace's changes against the base commit, new files included."""
    # Bytecode caches are never part of a patch, even without a .gitignore.
    script = (
        "git add -A -- . ':(exclude)*.pyc' ':(exclude)**/__pycache__' >/dev/null && "
        f"git diff --cached --binary {BASE_TAG}"
    )
    return await run_checked(sandbox, script, "recording the agent's patch")


def score(instance: SWEInstance, statuses: dict[str, TestStatus | None]) -> GradeReport:
    """Apply SWE-bench's rule to the statuses of the expected tests."""
    f2p, p2p = TestOutcome(), TestOutcome()
    for outcome, tests in ((f2p, instance.FAIL_TO_PASS), (p2p, instance.PASS_TO_PASS)):
        for t in tests:
            (outcome.passed if passed(statuses.get(t)) else outcome.failed).append(t)
    resolved = not f2p.failed and not p2p.failed
    total = len(instance.FAIL_TO_PASS) + len(instance.PASS_TO_PASS)
    if instance.megaflow_reward == "fraction":
        reward = (len(f2p.passed) + len(p2p.passed)) / total
    else:
        reward = 1.0 if resolved else 0.0
    return GradeReport(
        instance_id=instance.instance_id,
        resolved=resolved,
        reward=reward,
        test_patch_applied=True,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        statuses={t: (s.value if s else "MISSING") for t, s in statuses.items()},
    )


async def grade(sandbox: Sandbox, instance: SWEInstance) -> GradeReport:
    """Grade the workspace of a prepared sandbox after the agent stopped."""
    t0 = time.monotonic()
    try:
        patch = await model_patch(sandbox)
    except SandboxError as e:
        return _failed(instance, f"cannot read the workspace: {e}", t0)
    touched = patch_files(instance.test_patch)
    if touched:
        restore = " ; ".join(
            f"(git checkout -q {BASE_TAG} -- {f} 2>/dev/null || rm -rf {f})"
            for f in map(shlex.quote, touched)
        )
        await sandbox.exec(["sh", "-c", restore], timeout=60, env=GIT_ENV, cwd=WORKDIR)
    why = await apply_patch(sandbox, instance.test_patch)
    if why is not None:
        report = _failed(instance, f"the test patch did not apply: {why}", t0)
        report.model_patch = patch
        return report
    cmd = f"{instance.megaflow_test_cmd} -rA -p no:cacheprovider " + " ".join(
        shlex.quote(f) for f in instance.test_files()
    )
    res = await sandbox.exec(
        ["sh", "-c", cmd], timeout=instance.megaflow_test_timeout_s, env=GIT_ENV, cwd=WORKDIR
    )
    statuses = statuses_for(res.stdout, [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS])
    report = score(instance, statuses)
    report.model_patch = patch
    report.test_exit_code = res.exit_code
    report.test_output = (res.stdout + res.stderr)[-OUTPUT_TAIL:]
    if res.timed_out:
        report.error = f"the tests ran past {instance.megaflow_test_timeout_s:g} s and were killed"
    report.duration_s = time.monotonic() - t0
    return report


def _failed(instance: SWEInstance, error: str, t0: float) -> GradeReport:
    return GradeReport(
        instance_id=instance.instance_id,
        resolved=False,
        reward=0.0,
        error=error,
        fail_to_pass=TestOutcome(failed=list(instance.FAIL_TO_PASS)),
        pass_to_pass=TestOutcome(failed=list(instance.PASS_TO_PASS)),
        duration_s=time.monotonic() - t0,
    )
