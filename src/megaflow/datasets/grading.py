"""Grading with SWE-bench semantics, in a fresh sandbox that only sees the patch.

The candidate patch (:mod:`megaflow.datasets.candidate`) is graded in a
sandbox of its own, prepared from the task's source, in SWE-bench's order:
the base commit is checked out, the patch applied, every file the test patch
touches put back to the base commit (or deleted when it did not exist), the
test patch applied, and the tests run. Nothing the agent did except its
patch reaches the grader, so the reward is a function of the stored patch:
grading the same patch again gives the same reward.

Results of the ``pytest`` format come from MegaFlow's reporter, never from
what the tests print (:mod:`megaflow.datasets.pytest_channel`): a run whose
records are not whole, disagree with its exit status, or timed out does not
resolve, and a patch that reached into the runner is ``tampered`` (reward
0). The instance is resolved when every FAIL_TO_PASS test passes and every
PASS_TO_PASS test still passes (or is skipped, as SWE-bench counts it).
The reward is 1 or 0, or the share of passing tests when the instance asks
for ``megaflow_reward: fraction``.
Strict grading (:mod:`megaflow.datasets.strict`) also refuses patches that
touch test infrastructure, and counts only PASSED as passing.
"""

from __future__ import annotations

import hashlib
import shlex
import time

from pydantic import BaseModel, ConfigDict, Field

from megaflow.core.errors import NotFound, SandboxFileError
from megaflow.datasets.django_report import django_statuses_for
from megaflow.datasets.harness import harness_verdict
from megaflow.datasets.instance import SWEInstance
from megaflow.datasets.patches import apply_patch, patch_files
from megaflow.datasets.prepare import GIT_ENV, WORKDIR
from megaflow.datasets.pytest_channel import (
    BaseConfig,
    ChannelRun,
    find_base_config,
    run_reported,
    untrusted_files,
)
from megaflow.datasets.pytest_report import TestStatus, passed, statuses_for
from megaflow.datasets.strict import infra_changes, settings_files
from megaflow.environment.abstract import Sandbox

OUTPUT_TAIL = 20_000
# The test run starts from a clean environment: no user site-packages.
TEST_ENV = {**GIT_ENV, "PYTHONNOUSERSITE": "1"}


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
    strict: bool = Field(False, description="Graded under the strict rule.")
    patch_applied: bool = Field(True, description="The candidate patch applied.")
    test_patch_applied: bool = False
    fail_to_pass: TestOutcome = Field(default_factory=TestOutcome)
    pass_to_pass: TestOutcome = Field(default_factory=TestOutcome)
    statuses: dict[str, str] = Field(
        default_factory=dict, description="Status of each expected test as pytest reported it."
    )
    model_patch: str = Field("", description="The graded patch (the agent's changes).")
    patch_sha256: str = Field("", description="SHA-256 of the graded patch's exact bytes.")
    test_infra_changes: list[str] = Field(
        default_factory=list, description="Files of the patch that count as test infrastructure."
    )
    tampered: bool = Field(
        False, description="The patched code reached into the test runner or its results."
    )
    tamper_reasons: list[str] = Field(default_factory=list)
    test_exit_code: int | None = None
    test_output: str = Field("", description="The tail of the test run's output.")
    error: str | None = None
    duration_s: float = 0.0
    parser: str = Field(
        "megaflow", description="Whose parser and rule read the tests: megaflow or swebench."
    )


def runner_command(instance: SWEInstance) -> str:
    """The shell command of a log-read format: ``pytest_log`` gets ``-rA`` and
    the test files; a Django runner's command is run as the instance gives it.
    (The ``pytest`` format starts its runner itself: ``pytest_channel``.)"""
    if instance.megaflow_test_format == "django":
        return instance.megaflow_test_cmd
    return f"{instance.megaflow_test_cmd} -rA -p no:cacheprovider " + " ".join(
        shlex.quote(f) for f in instance.test_files()
    )


def read_statuses(
    instance: SWEInstance, stdout: str, stderr: str = ""
) -> dict[str, TestStatus | None]:
    """The status of each expected test in the test run's output, read in the
    instance's ``megaflow_test_format``: pytest's summary is on stdout, a unittest
    runner (Django's) reports on stderr."""
    tests = [*instance.FAIL_TO_PASS, *instance.PASS_TO_PASS]
    if instance.megaflow_test_format == "django":
        return django_statuses_for(stdout + "\n" + stderr, tests)
    return statuses_for(stdout, tests)


def _passes(status: TestStatus | None, strict: bool, maintained: bool = False) -> bool:
    """Strict: only PASSED. Lenient, as SWE-bench: PASSED or XFAIL, and for a
    PASS_TO_PASS test (``maintained``) also SKIPPED, which is not a regression."""
    if strict:
        return status is TestStatus.PASSED
    return passed(status) or (maintained and status is TestStatus.SKIPPED)


def score(
    instance: SWEInstance, statuses: dict[str, TestStatus | None], strict: bool = False
) -> GradeReport:
    """Apply SWE-bench's rule (or the strict one) to the statuses of the expected tests."""
    f2p, p2p = TestOutcome(), TestOutcome()
    for outcome, tests, kept in (
        (f2p, instance.FAIL_TO_PASS, False),
        (p2p, instance.PASS_TO_PASS, True),
    ):
        for t in tests:
            ok = _passes(statuses.get(t), strict, kept)
            (outcome.passed if ok else outcome.failed).append(t)
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
        strict=strict,
        test_patch_applied=True,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        statuses={t: (s.value if s else "MISSING") for t, s in statuses.items()},
    )


def failed_report(
    instance: SWEInstance, error: str, patch: bytes = b"", strict: bool = False, t0: float = 0.0
) -> GradeReport:
    """An unresolved report: grading stopped at ``error``."""
    return GradeReport(
        instance_id=instance.instance_id,
        resolved=False,
        reward=0.0,
        strict=strict,
        error=error,
        fail_to_pass=TestOutcome(failed=list(instance.FAIL_TO_PASS)),
        pass_to_pass=TestOutcome(failed=list(instance.PASS_TO_PASS)),
        model_patch=patch.decode(errors="replace"),
        patch_sha256=hashlib.sha256(patch).hexdigest(),
        duration_s=time.monotonic() - t0 if t0 else 0.0,
    )


async def grade_prepared(
    sandbox: Sandbox,
    instance: SWEInstance,
    patch: bytes | str,
    strict: bool = False,
    allowed: frozenset[str] = frozenset(),
    harness: bool = True,
) -> GradeReport:
    """Grade ``patch`` in ``sandbox``, freshly prepared at the base commit
    (:func:`~megaflow.datasets.prepare.prepare_sandbox`) with nothing else run in it.

    ``allowed``: tamper findings the instance's own tests raise at the base
    commit (:mod:`megaflow.datasets.calibration`), which are not the patch's.
    ``harness``: read a log the ``swebench`` harness has a parser for with it
    (:mod:`megaflow.datasets.harness`; never under ``strict``)."""
    t0 = time.monotonic()
    raw = patch.encode() if isinstance(patch, str) else patch
    text = raw.decode(errors="replace")
    config = await find_base_config(sandbox, instance) if _reported(instance) else None
    settings = settings_files(text) if strict else []
    before = await _read_settings(sandbox, settings)
    if raw.strip():
        why = await apply_patch(sandbox, raw)
        if why is not None:
            report = failed_report(instance, f"the patch did not apply: {why}", raw, strict, t0)
            report.patch_applied = False
            return report
    after = await _read_settings(sandbox, settings)
    if strict and (infra := infra_changes(text, instance, before, after)):
        refusal = f"strict grading: the patch changes test infrastructure ({', '.join(infra[:10])})"
        report = failed_report(instance, refusal, raw, strict, t0)
        report.test_infra_changes = infra
        return report
    why = await apply_test_patch(sandbox, instance)
    if why is not None:
        return failed_report(instance, f"the test patch did not apply: {why}", raw, strict, t0)
    untrusted = untrusted_files(patch_files(text), patch_files(instance.test_patch))
    run = await run_tests(sandbox, instance, untrusted, config)
    report = judge(instance, run, strict, allowed, harness=harness and not strict)
    report.model_patch = text
    report.patch_sha256 = hashlib.sha256(raw).hexdigest()
    report.duration_s = time.monotonic() - t0
    return report


async def _read_settings(sandbox: Sandbox, paths: list[str]) -> dict[str, bytes | None]:
    """Settings files as the sandbox holds them (``None``: there is none); one
    that cannot be read as a file reads as bytes no parser takes (refused)."""
    out: dict[str, bytes | None] = {}
    for path in paths:
        try:
            out[path] = await sandbox.read_file(path)
        except NotFound:
            out[path] = None
        except SandboxFileError:
            out[path] = b"\0[unreadable"
    return out


def _reported(instance: SWEInstance) -> bool:
    return instance.megaflow_test_format == "pytest"


async def run_tests(
    sandbox: Sandbox, instance: SWEInstance, untrusted: list[str], config: BaseConfig | None
) -> ChannelRun:
    """Run the instance's tests in its format: through the reporter (``pytest``,
    with the base ``config`` found before any patch) or read from its log."""
    if _reported(instance):
        return await run_reported(sandbox, instance, untrusted, config)
    return await _run_logged(sandbox, instance)


async def apply_test_patch(sandbox: Sandbox, instance: SWEInstance) -> str | None:
    """Put every file the test patch touches back to the base commit (or remove
    it), then apply the test patch; None, or why it did not apply."""
    base = shlex.quote(instance.base_commit)
    touched = patch_files(instance.test_patch)
    if touched:
        restore = " ; ".join(
            f"(git checkout -q {base} -- {f} 2>/dev/null || rm -rf -- {f})"
            for f in map(shlex.quote, touched)
        )
        await sandbox.exec(["sh", "-c", restore], timeout=60, env=GIT_ENV, cwd=WORKDIR)
    return await apply_patch(sandbox, instance.test_patch.encode())


async def _run_logged(sandbox: Sandbox, instance: SWEInstance) -> ChannelRun:
    """A log-read format: statuses parsed from what the run printed."""
    res = await sandbox.exec(
        ["sh", "-c", runner_command(instance)],
        timeout=instance.megaflow_test_timeout_s,
        env=TEST_ENV,
        cwd=WORKDIR,
    )
    run = ChannelRun(read_statuses(instance, res.stdout, res.stderr), [], [], res.exit_code)
    run.timed_out, run.started = res.timed_out, True
    run.output = (res.stdout + res.stderr)[-OUTPUT_TAIL:]
    run.log = res.stdout + "\n" + res.stderr
    if res.timed_out:
        run.problems.append(
            f"the tests ran past {instance.megaflow_test_timeout_s:g} s and were killed"
        )
    return run


def harness_score(instance: SWEInstance, log: str) -> GradeReport | None:
    """The report the ``swebench`` harness gives ``log`` (its parser, its rule), or
    None when it has no parser for the instance."""
    verdict = harness_verdict(instance, log)
    if verdict is None:
        return None
    statuses, passing, _failing, resolved = verdict
    f2p, p2p = TestOutcome(), TestOutcome()
    for outcome, tests in ((f2p, instance.FAIL_TO_PASS), (p2p, instance.PASS_TO_PASS)):
        for t in tests:
            (outcome.passed if t in passing else outcome.failed).append(t)
    total = len(instance.FAIL_TO_PASS) + len(instance.PASS_TO_PASS)
    if instance.megaflow_reward == "fraction":
        reward = (len(f2p.passed) + len(p2p.passed)) / total
    else:
        reward = 1.0 if resolved else 0.0
    return GradeReport(
        instance_id=instance.instance_id, resolved=resolved, reward=reward,
        test_patch_applied=True, fail_to_pass=f2p, pass_to_pass=p2p, parser="swebench",
        statuses={t: (s.value if s else "MISSING") for t, s in statuses.items()},
    )  # fmt: skip


def judge(
    instance: SWEInstance,
    run: ChannelRun,
    strict: bool,
    allowed: frozenset[str] = frozenset(),
    harness: bool = False,
) -> GradeReport:
    """The report of a test run: the rule applied to its statuses (the harness's
    parser and rule with ``harness``, when it knows the instance), then nothing
    resolves that the run cannot vouch for, and a tampered run earns 0."""
    official = harness_score(instance, run.log) if harness and run.log else None
    report = official or score(instance, run.statuses, strict)
    tampers = [t for t in run.tampers if t not in allowed]
    if run.problems or tampers:
        report.resolved, report.reward = False, 0.0
        report.error = "; ".join([*run.problems, *(f"tampered: {t}" for t in tampers)])
    report.tampered = bool(tampers)
    report.tamper_reasons = tampers
    report.test_exit_code = run.exit_code
    report.test_output = run.output
    return report


__all__ = ["BaseConfig", "GradeReport", "TestOutcome", "grade_prepared", "judge", "score"]
